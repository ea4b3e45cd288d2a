// Waiting in tests: a pause, a bound on one promise, and the one poll every test uses to wait for
// something another thread or process does (a trace stored, a live message, a counter reached).
import { performance } from 'node:perf_hooks'

export function sleep (ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** `p`, or a rejection naming `what` when it takes longer than `ms`. */
export function withTimeout<T> (p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { reject(new Error(`${what}: no answer within ${ms} ms`)) }, ms)
    p.then((v) => { clearTimeout(timer); resolve(v) }, (e: unknown) => { clearTimeout(timer); reject(e) })
  })
}

export interface UntilOptions {
  /** Give up once this many ms have passed (checked after each probe). */
  readonly ms?: number
  /** Give up after this many probes. */
  readonly tries?: number
  /** The pause between probes (default 10 ms). */
  readonly everyMs?: number
  /** What is waited for, for the error (a function when it depends on the last probe). */
  readonly what?: string | (() => string)
}

type Found<T> = Exclude<T, undefined | null | false>

/**
 * Calls `probe` until it answers something other than undefined, null or false, and resolves with that;
 * throws when `ms` or `tries` runs out first. For tests only: the code under test never polls.
 */
export async function until<T> (probe: () => T | Promise<T>, o: UntilOptions): Promise<Found<T>> {
  const deadline = o.ms === undefined ? Infinity : performance.now() + o.ms
  for (let tried = 1; ; tried++) {
    const found = await probe()
    if (found !== undefined && found !== null && found !== false) return found as Found<T>
    if ((o.tries !== undefined && tried >= o.tries) || performance.now() > deadline) {
      const what = typeof o.what === 'function' ? o.what() : o.what ?? 'condition'
      throw new Error(`${what}: not reached within ${o.ms === undefined ? `${tried} tries` : `${o.ms} ms`}`)
    }
    await sleep(o.everyMs ?? 10)
  }
}
