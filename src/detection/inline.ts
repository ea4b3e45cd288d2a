// A small body judged in the calling thread (a front thread, or the main thread serving alone) by the same
// detector the workers run: a round trip to a worker costs the sender about what judging a chat turn costs
// it, and costs the worker more again (its wake-up and the copies both ways). It is done while the thread
// has time to spare: its event loop was busy at most BUSY_ABOVE of the time since it last looked
// (BUSY_WINDOW_MS or more before; the judging itself counts), or it was busier but the machine had no core
// to spare (SPARE_CORES) for a worker to judge on, where the round trip only adds work; and a token bucket
// (refilled at `share` of the wall clock, at most BURST_MS ahead) still holds time. Otherwise, and for any
// body the detector fails on, the check goes to the workers, batched per turn: a saturated thread keeps its
// time for proxying while the workers judge on idle cores, and a flood of small bodies from one account
// meets the pool's fair queue like any other.
import { cpus, type CpuInfo } from 'node:os'
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
/**
 * A busy thread hands its checks to the workers only when the machine's cores were idle at least this much
 * (in cores, summed) over the same window: with less, a worker would judge on a core something else needs,
 * and the round trip's own work (the copies, two wake-ups) is all that changes (bench/RESULTS.md).
 */
export const SPARE_CORES = 0.5

/**
 * Idle cores of the machine since the last reading: the idle time os.cpus() reports, summed over its
 * cores, over the wall time between the readings, so time a core spent waiting for its host (steal) or
 * in softirq counts as busy. Where no CPU is listed or the clock did not move, the answer is Infinity:
 * unknown counts as spare. In a container the figure is the host's cores, not the container's quota.
 */
export function machineIdleCores (read: () => readonly CpuInfo[] = cpus, clock: () => number = () => performance.now()): () => number {
  const idleMs = (): number => {
    let idle = 0
    const all = read()
    if (all.length === 0) return Number.NaN
    for (const { times } of all) idle += times.idle
    return idle
  }
  let lastIdle = idleMs()
  let lastAt = clock()
  return () => {
    const idle = idleMs(), at = clock()
    const cores = (idle - lastIdle) / (at - lastAt)
    lastIdle = idle
    lastAt = at
    return Number.isFinite(cores) && cores >= 0 ? cores : Infinity
  }
}

type DetectBody = (provider: ProviderName, json: string, allow: readonly string[] | null) => Verdict

export class InlineJudge {
  readonly #maxBytes: number
  readonly #share: number
  readonly #onInline: (() => void) | null
  readonly #idleCores: () => number
  #detect: DetectBody | null = null
  #loading: Promise<void> | null = null
  /** Milliseconds of inline judging the thread may still spend. */
  #budget = BURST_MS
  #at = performance.now()
  /**
   * The event loop's utilisation at the start of the current window (null until the first check, so the
   * thread's start is not taken for load), and whether checks go to the workers: the last whole window
   * was busy, and the machine had a core to spare.
   */
  #elu: EventLoopUtilization | null = null
  #windowAt = 0
  #toWorkers = false

  /** `idleCores` tells the machine's idle cores since it was last asked (tests pass their own). */
  constructor (maxBytes: number, share = INLINE_SHARE, onInline: (() => void) | null = null, idleCores: () => number = machineIdleCores()) {
    this.#maxBytes = maxBytes
    this.#share = share
    this.#onInline = onInline
    this.#idleCores = idleCores
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
      // The machine is read every window, so its idle time is that of the same window.
      const idle = this.#idleCores()
      if (this.#elu !== null) this.#toWorkers = performance.eventLoopUtilization(elu, this.#elu).utilization > BUSY_ABOVE && idle >= SPARE_CORES
      this.#elu = elu
      this.#windowAt = now
    }
    this.#budget = Math.min(BURST_MS, this.#budget + (now - this.#at) * this.#share)
    this.#at = now
    if (this.#toWorkers || this.#budget <= 0) return null
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
