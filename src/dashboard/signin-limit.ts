// Slows down password guessing, per email and per client address: within a 15-minute window the 4th
// and later failures are answered after an exponential delay (capped at 5 s), and after 10 failures a
// sign-in is refused with 429 until the window lets go of the oldest. An attempt counts as a failure
// from the moment it starts (a success takes it back), so a burst of parallel guesses cannot slip past
// the count while their password checks run.
import { LRUCache } from 'lru-cache'

export const WINDOW_MS = 15 * 60 * 1000
export const FREE_FAILURES = 3
export const MAX_FAILURES = 10
const BASE_DELAY_MS = 250
const MAX_DELAY_MS = 5_000

export interface Attempt {
  readonly keys: readonly string[]
  readonly at: number
}

export type Admission = { ok: true; attempt: Attempt } | { ok: false; retryAfterMs: number }

/** The delay before answering the n-th failure in the window. */
export function failureDelay (n: number): number {
  return n <= FREE_FAILURES ? 0 : Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** (n - FREE_FAILURES - 1))
}

export class SigninLimiter {
  readonly #failures = new LRUCache<string, number[]>({ max: 100_000, ttl: WINDOW_MS })

  #recent (key: string, now: number): number[] {
    const list = (this.#failures.get(key) ?? []).filter((t) => t > now - WINDOW_MS)
    return list
  }

  begin (email: string, address: string, now = Date.now()): Admission {
    const keys = [`email:${email}`, `addr:${address}`]
    let retryAfterMs = 0
    const lists = keys.map((k) => this.#recent(k, now))
    for (const list of lists) {
      if (list.length >= MAX_FAILURES) {
        retryAfterMs = Math.max(retryAfterMs, list[list.length - MAX_FAILURES]! + WINDOW_MS - now)
      }
    }
    if (retryAfterMs > 0) return { ok: false, retryAfterMs }
    keys.forEach((k, i) => { this.#failures.set(k, [...lists[i]!, now]) })
    return { ok: true, attempt: { keys, at: now } }
  }

  /** The password was right: the email starts afresh; the address only loses this attempt. */
  succeeded (a: Attempt): void {
    const [emailKey, addrKey] = a.keys
    if (emailKey !== undefined) this.#failures.delete(emailKey)
    if (addrKey === undefined) return
    const list = this.#failures.get(addrKey)
    const i = list?.lastIndexOf(a.at) ?? -1
    if (list !== undefined && i >= 0) list.splice(i, 1)
  }

  /** The attempt failed: how long to wait before answering. */
  failed (a: Attempt, now = Date.now()): number {
    let n = 0
    for (const k of a.keys) n = Math.max(n, this.#recent(k, now).length)
    return failureDelay(n)
  }
}
