// A small body judged in the calling thread (a front thread, or the main thread serving alone) by the same
// detector the workers run: a round trip to a worker costs the sender about what judging a chat turn costs
// it, and costs the worker more again (its wake-up and the copies both ways). It is done only while the
// thread has time to spare: its event loop was busy at most BUSY_ABOVE of the time since it last looked
// (BUSY_WINDOW_MS or more before; the judging itself counts), and a token bucket (refilled at `share` of the
// wall clock, at most BURST_MS ahead) still holds time. Otherwise, and for any body the detector fails on,
// the check goes to the workers, batched per turn: a saturated thread keeps its time for proxying while the
// workers judge, and a flood of small bodies from one account meets the pool's fair queue like any other.
import { performance, type EventLoopUtilization } from 'node:perf_hooks'
import type { ProviderName } from '../providers/index.js'
import type { Verdict } from './types.js'

/** The share of a thread's time inline checks may take by default. */
export const INLINE_SHARE = 0.25
/**
 * How far ahead the budget may fill while the thread judges nothing: a burst of calls in one turn stalls
 * the thread's other calls by at most this, plus the one check that spends it.
 */
const BURST_MS = 2
/** The thread's event loop is judged busy or not over windows of at least this length. */
const BUSY_WINDOW_MS = 100
/**
 * Above this event-loop utilisation the thread has no time to spare for judging: below it a check in the
 * thread spares the worker's share of a round trip, and only a thread near saturation gains from the
 * workers' cores (bench/RESULTS.md).
 */
const BUSY_ABOVE = 0.85

type DetectBody = (provider: ProviderName, json: string, allow: readonly string[] | null) => Verdict

export class InlineJudge {
  readonly #maxBytes: number
  readonly #share: number
  readonly #onInline: (() => void) | null
  #detect: DetectBody | null = null
  #loading: Promise<void> | null = null
  /** Milliseconds of inline judging the thread may still spend. */
  #budget = BURST_MS
  #at = performance.now()
  /**
   * The event loop's utilisation at the start of the current window (null until the first check, so the
   * thread's start is not taken for load), and whether the last whole window was busy.
   */
  #elu: EventLoopUtilization | null = null
  #windowAt = 0
  #busy = false

  constructor (maxBytes: number, share = INLINE_SHARE, onInline: (() => void) | null = null) {
    this.#maxBytes = maxBytes
    this.#share = share
    this.#onInline = onInline
  }

  /**
   * Loads the detector the workers run (its code, weights and warm-up) into this thread; checks go to the
   * workers until then, and for good if it cannot load (the next check tries again).
   */
  load (): Promise<void> {
    this.#loading ??= import('../../workers/detect.js').then((m: { detectBody: DetectBody }) => { this.#detect = m.detectBody }, (err: unknown) => {
      this.#loading = null
      throw err
    })
    return this.#loading
  }

  /** The verdict, or null when the body goes to the workers (too large, not loaded, no time to spare, or the detector failed on it). */
  judge (provider: ProviderName, body: Buffer, allow: readonly string[] | null): Verdict | null {
    if (body.length > this.#maxBytes) return null
    const detect = this.#detect
    if (detect === null) {
      this.load().catch(() => { /* the workers judge meanwhile */ })
      return null
    }
    const now = performance.now()
    if (this.#elu === null || now - this.#windowAt >= BUSY_WINDOW_MS) {
      const elu = performance.eventLoopUtilization()
      if (this.#elu !== null) this.#busy = performance.eventLoopUtilization(elu, this.#elu).utilization > BUSY_ABOVE
      this.#elu = elu
      this.#windowAt = now
    }
    this.#budget = Math.min(BURST_MS, this.#budget + (now - this.#at) * this.#share)
    this.#at = now
    if (this.#busy || this.#budget <= 0) return null
    let verdict: Verdict
    try {
      verdict = detect(provider, body.toString('utf8'), allow)
    } catch {
      // A worker judges it again, and the pool's fault log tells what failed there.
      return null
    } finally {
      this.#budget -= performance.now() - now
    }
    this.#onInline?.()
    return verdict
  }
}
