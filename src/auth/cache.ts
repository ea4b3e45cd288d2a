// Key lookups for the front thread: an LRU of positive and negative answers with a short TTL in front
// of the store worker. Concurrent misses for the same key share one store call. Revoking a key, or changing
// a key's or an account's limits, through this process drops it at once; other processes see it when the
// TTL runs out.
//
// A key in use is refreshed ahead of time: once half its TTL has passed, the next request still uses
// the cached answer but starts a lookup in the background. A busy key therefore never expires into a
// miss that would hold every request behind one store round trip (a latency spike every TTL that
// showed in the fixed-rate benchmark), and a change is still seen within the TTL.
import { LRUCache } from 'lru-cache'
import type { KeyInfo } from '../domain/key-info.js'

const MISSING = Symbol('missing')
type Entry = KeyInfo | typeof MISSING

export type KeyLookup = (hash: string) => Promise<KeyInfo | null>

export class KeyCache {
  readonly #lru: LRUCache<string, Entry>
  readonly #inflight = new Map<string, Promise<KeyInfo | null>>()
  readonly #lookup: KeyLookup
  readonly #enabled: boolean
  readonly #refreshBelowMs: number
  /** Lookups answered from the cache, and those that had to ask the store (read by /metrics). */
  hits = 0
  misses = 0

  constructor (lookup: KeyLookup, options: { ttlMs: number; max: number }) {
    this.#lookup = lookup
    this.#enabled = options.ttlMs > 0
    this.#refreshBelowMs = options.ttlMs / 2
    this.#lru = new LRUCache<string, Entry>({ max: options.max, ttl: Math.max(options.ttlMs, 1), ttlAutopurge: false })
  }

  /** The cached answer, or undefined when the store must be asked (see `fetch`). */
  peek (hash: string): KeyInfo | null | undefined {
    if (!this.#enabled) { this.misses++; return undefined }
    const e = this.#lru.get(hash)
    if (e === undefined) { this.misses++; return undefined }
    this.hits++
    if (this.#lru.getRemainingTTL(hash) < this.#refreshBelowMs && !this.#inflight.has(hash)) {
      this.fetch(hash).catch(() => { /* the entry stays until its TTL; the next miss asks again */ })
    }
    return e === MISSING ? null : e
  }

  fetch (hash: string): Promise<KeyInfo | null> {
    let p = this.#inflight.get(hash)
    if (p !== undefined) return p
    p = this.#lookup(hash).then((info) => {
      if (this.#inflight.get(hash) === p && this.#enabled) this.#lru.set(hash, info ?? MISSING)
      return info
    }).finally(() => {
      if (this.#inflight.get(hash) === p) this.#inflight.delete(hash)
    })
    this.#inflight.set(hash, p)
    return p
  }

  invalidate (hash: string): void {
    this.#lru.delete(hash)
    // A lookup already in flight may carry the old state: let it answer its callers but not be cached.
    this.#inflight.delete(hash)
  }

  /** Drops every cached key of the account (its limits changed). Rare, so a walk over the cache. */
  invalidateAccount (accountId: string): void {
    const drop: string[] = []
    for (const [hash, e] of this.#lru.entries()) if (e !== MISSING && e.accountId === accountId) drop.push(hash)
    for (const hash of drop) this.#lru.delete(hash)
    // A lookup in flight names its account only when it answers: none of those answers is cached.
    this.#inflight.clear()
  }
}
