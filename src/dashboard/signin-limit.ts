// Slows down password guessing, per email and per client address: within a 15-minute window the 4th
// and later failures are answered after an exponential delay (capped at 5 s), and after 10 failures a
// sign-in is refused with 429 until the window lets go of the oldest. An attempt counts as a failure
// from the moment it starts (a success takes it back), so a burst of parallel guesses cannot slip past
// the count while their password checks run. Addresses are counted per client as addressKey says.
import { isIPv6 } from 'node:net'
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

/** The eight 16-bit groups of a valid IPv6 address, compressed (`::`, a dotted IPv4 tail) or not. */
function ipv6Groups (address: string): number[] {
  let text = address
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (v4 !== null) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number]
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head = '', tail] = text.split('::')
  const front = head === '' ? [] : head.split(':')
  const back = tail === undefined || tail === '' ? [] : tail.split(':')
  const groups = tail === undefined ? front : [...front, ...new Array<string>(8 - front.length - back.length).fill('0'), ...back]
  return groups.map((g) => parseInt(g, 16))
}

/**
 * What the per-address limit counts as one client. An IPv4 client seen through a dual-stack socket
 * (uWS writes it as 0000:…:ffff:7f00:0001) or named as ::ffff:a.b.c.d is that IPv4 address; any other
 * IPv6 address counts with its whole /64, the smallest block a network hands out, so a client cannot
 * escape the limit by rotating through its own block. Anything else counts as written.
 */
export function addressKey (address: string): string {
  const a = address.trim().toLowerCase().replace(/%.*$/, '')
  if (!isIPv6(a)) return a
  const g = ipv6Groups(a)
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) {
    return [g[6]! >> 8, g[6]! & 255, g[7]! >> 8, g[7]! & 255].join('.')
  }
  return `${g.slice(0, 4).map((x) => x.toString(16)).join(':')}::/64`
}

export class SigninLimiter {
  readonly #failures = new LRUCache<string, number[]>({ max: 100_000, ttl: WINDOW_MS })

  #recent (key: string, now: number): number[] {
    const list = (this.#failures.get(key) ?? []).filter((t) => t > now - WINDOW_MS)
    return list
  }

  begin (email: string, address: string, now = Date.now()): Admission {
    const keys = [`email:${email}`, `addr:${addressKey(address)}`]
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
