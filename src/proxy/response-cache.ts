// The exact response cache, opt in per call (x-tracegate-cache-ttl): a provider's 2xx answer kept under a
// hash of the account, the route, the provider's targets, the client's passed-on headers and the forwarded
// body bytes, and answered again byte for byte (a stream as the events it was) while its TTL lasts.
// Bounded in bytes per proxy thread (an LRU). With Redis configured, entries are also written there and
// read from there on a local miss, so every thread and instance shares them; a Redis that is away or slow
// is a miss, never an error. Confidential calls are never cached or answered from here (handler.ts).
import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'
import { bestEffortRedis } from '../upstream/redis-connection.js'
import { LRUCache } from 'lru-cache'
import type { Verdict } from '../detection/types.js'

/** A provider's answer as the client got it. */
export interface CachedAnswer {
  readonly status: number
  /** Response headers as name/value pairs, as the dialect mapped them (passthrough.ts). */
  readonly headers: readonly string[]
  readonly body: Buffer
  /**
   * The detector's verdict on the call's bytes, under the allow phrases it was given with: a hit of this
   * thread is judged with it instead of asking the detection workers again. Kept only in this thread's
   * LRU, never in Redis (another instance may run another detector).
   */
  readonly judged?: Judged
}

export interface Judged {
  /** The allow phrases (JSON) the verdict was given under. */
  readonly allow: string
  readonly verdict: Verdict
}

export interface CacheOptions {
  /** Bytes of answers this thread keeps; 0: the cache is off. */
  readonly maxBytes: number
  /** A larger answer is passed on and not kept. */
  readonly maxEntryBytes: number
  /** The longest TTL a call may ask for, in seconds. */
  readonly maxTtlS: number
  readonly redisUrl: string | null
}

/** What the cache is asked for: the parts of a call its answer depends on. */
export interface CacheKeyParts {
  readonly accountId: string
  /** The dialect's name and the path sent upstream (gamma's model and method are in it). */
  readonly provider: string
  readonly path: string
  /** The provider's targets, in order: another list may answer otherwise. */
  readonly targets: readonly string[]
  /** The client's headers passed on to the provider (a version or beta header changes the answer). */
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly body: Buffer
}

/** Counts what the cache did for the calls that asked it. */
export interface CacheMetrics {
  cacheLookup (provider: string, result: 'hit' | 'miss'): void
}

export const CACHE_TTL_HEADER = 'x-tracegate-cache-ttl'
const REDIS_PREFIX = 'tracegate:cache:'
/** A Redis read slower than this is a miss: the call goes to the provider instead of waiting. */
const REDIS_READ_MS = 50
/** What an entry costs beyond its body: its key, headers and the LRU's own bookkeeping. */
const ENTRY_OVERHEAD = 256

export class ResponseCache {
  readonly maxEntryBytes: number
  readonly maxTtlS: number
  readonly #lru: LRUCache<string, CachedAnswer>
  readonly #redis: Redis | null

  constructor (o: CacheOptions) {
    this.maxEntryBytes = o.maxEntryBytes
    this.maxTtlS = o.maxTtlS
    this.#lru = new LRUCache<string, CachedAnswer>({
      // The body's bound is CacheFill's (maxEntryBytes); an entry also counts its headers and overhead.
      maxSize: o.maxBytes,
      sizeCalculation: sizeOf,
      // Every entry is set with its own TTL; this only makes lru-cache track them.
      ttl: o.maxTtlS * 1000,
    })
    if (o.redisUrl === null) {
      this.#redis = null
      return
    }
    this.#redis = bestEffortRedis(o.redisUrl)
  }

  /** The hash an answer is kept under: no part of the call can be read back from it. */
  static key (p: CacheKeyParts): string {
    const h = createHash('sha256')
    const field = (s: string): void => { h.update(String(Buffer.byteLength(s))); h.update(':'); h.update(s) }
    field(p.accountId)
    field(p.provider)
    field(p.path)
    h.update(String(p.targets.length))
    for (const t of p.targets) field(t)
    h.update(String(p.headers.length))
    for (const [name, value] of p.headers) { field(name); field(value) }
    h.update(String(p.body.length))
    h.update(':')
    h.update(p.body)
    return h.digest('base64url')
  }

  /** The answer kept under `key`: from this thread's LRU at once, else from Redis (null when none). */
  get (key: string): CachedAnswer | null | Promise<CachedAnswer | null> {
    const local = this.#lru.get(key)
    if (local !== undefined) return local
    const redis = this.#redis
    if (redis === null || redis.status !== 'ready') return null
    return new Promise((resolve) => {
      const timer = setTimeout(() => { resolve(null) }, REDIS_READ_MS)
      Promise.all([redis.getBuffer(REDIS_PREFIX + key), redis.pttl(REDIS_PREFIX + key)]).then(([bytes, ttlMs]) => {
        clearTimeout(timer)
        const answer = bytes === null ? null : decode(bytes)
        // Kept here too for what is left of its TTL: the next call on this thread does not ask Redis.
        if (answer !== null && ttlMs > 0) this.#lru.set(key, answer, { ttl: ttlMs })
        resolve(answer)
      }, () => { clearTimeout(timer); resolve(null) })
    })
  }

  /** Keeps `answer` for `ttlS` seconds, here and in Redis (without waiting for it). */
  set (key: string, answer: CachedAnswer, ttlS: number): void {
    this.#lru.set(key, answer, { ttl: ttlS * 1000 })
    const redis = this.#redis
    if (redis !== null && redis.status === 'ready') redis.set(REDIS_PREFIX + key, encode(answer), 'EX', ttlS).catch(() => {})
  }

  /** Answers and bytes this thread keeps. */
  get stats (): { entries: number; bytes: number } {
    return { entries: this.#lru.size, bytes: this.#lru.calculatedSize }
  }

  close (): void {
    this.#lru.clear()
    this.#redis?.disconnect()
  }
}

function sizeOf (a: CachedAnswer): number {
  let n = a.body.length + ENTRY_OVERHEAD
  for (const h of a.headers) n += h.length
  return n
}

/** An answer as Redis keeps it: its status and headers as one JSON line, then the body. */
function encode (a: CachedAnswer): Buffer {
  return Buffer.concat([Buffer.from(JSON.stringify({ status: a.status, headers: a.headers }) + '\n'), a.body])
}

function decode (bytes: Buffer): CachedAnswer | null {
  const nl = bytes.indexOf(10)
  if (nl < 0) return null
  try {
    const head = JSON.parse(bytes.toString('utf8', 0, nl)) as { status?: unknown; headers?: unknown }
    if (typeof head.status !== 'number' || !Array.isArray(head.headers) || !head.headers.every((h) => typeof h === 'string')) return null
    return { status: head.status, headers: head.headers as string[], body: bytes.subarray(nl + 1) }
  } catch {
    return null
  }
}

/**
 * One call's answer on its way to the client, kept for the cache once it ended whole: a 2xx no larger
 * than the cache's entry bound. Holds references to the chunks (the trace's capture does too; no copy).
 */
export class CacheFill {
  readonly #cache: ResponseCache
  readonly #key: string
  readonly #ttlS: number
  #status = 0
  #headers: readonly string[] = []
  #chunks: Buffer[] = []
  #bytes = 0
  #kept = true
  /** Set once the call passed detection: kept with the answer. */
  judged: Judged | null = null

  constructor (cache: ResponseCache, key: string, ttlS: number) {
    this.#cache = cache
    this.#key = key
    this.#ttlS = ttlS
  }

  /** The provider's status and the headers passed to the client. */
  start (status: number, headers: readonly string[]): void {
    this.#status = status
    this.#headers = headers
    if (status < 200 || status >= 300) this.#drop()
  }

  add (chunk: Buffer): void {
    if (!this.#kept) return
    this.#bytes += chunk.length
    if (this.#bytes > this.#cache.maxEntryBytes) this.#drop()
    else this.#chunks.push(chunk)
  }

  /** The call ended; `whole`: its answer reached the client in full. */
  end (whole: boolean): void {
    if (whole && this.#kept && this.#status !== 0) {
      const answer = { status: this.#status, headers: this.#headers, body: Buffer.concat(this.#chunks, this.#bytes) }
      this.#cache.set(this.#key, this.judged === null ? answer : { ...answer, judged: this.judged }, this.#ttlS)
    }
    this.#drop()
  }

  #drop (): void {
    this.#kept = false
    this.#chunks = []
  }
}
