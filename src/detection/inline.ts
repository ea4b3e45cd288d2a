// A small body judged in the calling thread (a front thread, or the main thread serving alone) by the same
// detector the workers run: a round trip to a worker costs the sender more CPU than judging a chat turn
// whose history the segment cache has seen. A budget bounds how much of the thread's time this may take
// (a token bucket refilled at `share` of the wall clock, at most BURST_MS ahead): once it is spent, checks
// go to the workers, batched per turn, so a busy thread keeps its time for proxying and a flood of small
// bodies from one account meets the pool's fair queue like any other.
import { performance } from 'node:perf_hooks'
import type { ProviderName } from '../providers/index.js'
import type { DetectionOutcome } from './pool.js'
import type { Verdict } from './types.js'

/** The share of a thread's time inline checks may take by default. */
export const INLINE_SHARE = 0.25
/**
 * How far ahead the budget may fill while the thread judges nothing: a burst of calls in one turn stalls
 * the thread's other calls by at most this, plus the one check that spends it (under 1 ms for a warm 8 KiB body).
 */
const BURST_MS = 2

type DetectBody = (provider: ProviderName, json: string, allow: readonly string[] | null) => Verdict

const ERROR: DetectionOutcome = Object.freeze({ ok: false, failure: 'error' })

export class InlineJudge {
  readonly #maxBytes: number
  readonly #share: number
  readonly #onInline: (() => void) | null
  #detect: DetectBody | null = null
  #loading: Promise<void> | null = null
  /** Milliseconds of inline judging the thread may still spend. */
  #budget = BURST_MS
  #at = performance.now()
  /** Why the last inline check failed, for the pool's fault log. */
  lastError = ''

  constructor (maxBytes: number, share = INLINE_SHARE, onInline: (() => void) | null = null) {
    this.#maxBytes = maxBytes
    this.#share = share
    this.#onInline = onInline
  }

  /** Loads the detector the workers run (its code, weights and warm-up) into this thread; checks go to workers until then. */
  load (): Promise<void> {
    this.#loading ??= import('../../workers/detect.js').then((m: { detectBody: DetectBody }) => { this.#detect = m.detectBody })
    return this.#loading
  }

  /** The outcome, or null when the body goes to the workers (too large, not loaded yet, or no budget left). */
  judge (provider: ProviderName, body: Buffer, allow: readonly string[] | null): DetectionOutcome | null {
    if (body.length > this.#maxBytes) return null
    const detect = this.#detect
    if (detect === null) {
      this.load().catch((err: unknown) => { this.lastError = err instanceof Error ? err.message : String(err) })
      return null
    }
    const now = performance.now()
    this.#budget = Math.min(BURST_MS, this.#budget + (now - this.#at) * this.#share)
    this.#at = now
    if (this.#budget <= 0) return null
    let outcome: DetectionOutcome
    try {
      outcome = { ok: true, verdict: detect(provider, body.toString('utf8'), allow) }
    } catch (err) {
      // The detector failed on this body: a worker would fail the same way, so the failure mode applies.
      this.lastError = err instanceof Error ? err.message : String(err)
      outcome = ERROR
    }
    this.#budget -= performance.now() - now
    this.#onInline?.()
    return outcome
  }
}
