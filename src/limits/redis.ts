// The limiter's shared counters on Redis (TRACEGATE_REDIS_URL): one pipeline per sync, never a wait on the
// hot path, one script call per counter that also restores a counter Redis lost (COUNT_SCRIPT). Commands
// fail at once when not connected (no offline queue) and after a bounded time when Redis stops answering;
// the client reconnects in the background. The URL's password never reaches a log or an error.
import { Redis } from 'ioredis'
import { redisUrlProblem } from '../domain/redis-url.js'
import type { SharedCounters, SyncBatch, SyncResult } from './shared.js'

/** Every key tracegate writes starts with this; the rest is ids and window starts, never a tracegate key. */
export const KEY_PREFIX = 'tracegate:limits:'

export interface RedisCountersOptions {
  /** A sync not answered within this is given up (default 500 ms). */
  readonly commandTimeoutMs?: number
  /** A connection attempt not settled within this fails (default 1000 ms). */
  readonly connectTimeoutMs?: number
  /** Longest pause between reconnection attempts (default 1000 ms). */
  readonly maxReconnectDelayMs?: number
}

const NOT_WRITABLE = "Stream isn't writeable"

/**
 * One counter's sync, atomic in Redis: a counter below the floor the instance sends (the total it last
 * knew, so it was flushed, evicted, or lost in a restart or failover) is first raised to it, then the add
 * is applied and the expiry set. Answers {total, 1 when it was raised}. A counter only grows within its
 * window, so a total below what an instance already read can only mean Redis lost it.
 */
const COUNT_SCRIPT = `
local v = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local add = tonumber(ARGV[1])
local floor = tonumber(ARGV[2])
local raised = 0
if v < floor then
  v = floor
  raised = 1
end
if add > 0 or raised == 1 then
  v = v + add
  redis.call('SET', KEYS[1], v)
  redis.call('PEXPIREAT', KEYS[1], ARGV[3])
end
return {v, raised}
`

interface CountPipeline {
  tracegateCount (key: string, add: number, floor: number, expireAtMs: number): unknown
}

export class RedisCounters implements SharedCounters {
  readonly #client: Redis
  readonly #secrets: string[]
  #settled = false
  #generation = 0
  #lastError: string | null = null

  constructor (url: string, options: RedisCountersOptions = {}) {
    const problem = redisUrlProblem(url)
    if (problem !== null) throw new TypeError(`The Redis URL ${problem}`)
    const parsed = new URL(url)
    this.#secrets = [url, parsed.password, safeDecode(parsed.password)].filter((s) => s.length > 0)
    const maxDelay = options.maxReconnectDelayMs ?? 1000
    this.#client = new Redis(url, {
      lazyConnect: true,
      // A command sent while disconnected fails at once instead of waiting for a connection.
      enableOfflineQueue: false,
      commandTimeout: options.commandTimeoutMs ?? 500,
      connectTimeout: options.connectTimeoutMs ?? 1000,
      // On a lost connection, commands awaiting replies fail now rather than after retries, and are never
      // re-sent by the client on reconnect: only the limiter knows whether resending would count twice.
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      retryStrategy: (attempt) => Math.min(attempt * 100, maxDelay),
    })
    this.#client.defineCommand('tracegateCount', { numberOfKeys: 1, lua: COUNT_SCRIPT })
    this.#client.on('ready', () => { this.#settled = true; this.#generation++; this.#lastError = null })
    // The listener also keeps ioredis from printing unhandled errors itself.
    this.#client.on('error', (e: Error) => { this.#settled = true; this.#lastError = this.#redact(e.message) })
    this.#client.on('close', () => { this.#settled = true })
    this.#client.connect().catch(() => { /* reported through the 'error' event and `state` */ })
  }

  get state (): 'connecting' | 'ready' | 'down' {
    if (this.#client.status === 'ready') return 'ready'
    return this.#settled ? 'down' : 'connecting'
  }

  get generation (): number {
    return this.#generation
  }

  get lastError (): string | null {
    return this.#lastError
  }

  async sync (batch: SyncBatch): Promise<SyncResult> {
    if (this.#client.status !== 'ready') return { ok: false, sent: false, reason: this.#lastError ?? 'not connected' }
    const n = batch.names.length
    if (n === 0) return { ok: true, totals: [] }
    const pipeline = this.#client.pipeline() as ReturnType<Redis['pipeline']> & CountPipeline
    // One script call per counter: raised to its floor if Redis lost it, the add, the expiry; its answer is
    // the total and whether it had to be raised.
    for (let i = 0; i < n; i++) {
      pipeline.tracegateCount(KEY_PREFIX + batch.names[i]!, batch.adds[i]!, batch.floors[i]!, batch.expireAtMs[i]!)
    }
    let replies: Array<[Error | null, unknown]> | null
    try {
      replies = await pipeline.exec()
    } catch (e) {
      return { ok: false, sent: true, reason: this.#redact(e instanceof Error ? e.message : String(e)) }
    }
    if (replies === null) return { ok: false, sent: true, reason: 'no answer' }
    for (const [err] of replies) {
      if (err !== null) return { ok: false, sent: !err.message.startsWith(NOT_WRITABLE), reason: this.#redact(err.message) }
    }
    const totals = new Array<number>(n)
    let restored = 0
    for (let i = 0; i < n; i++) {
      const [total, raised] = replies[i]![1] as [number, number]
      totals[i] = Number.isFinite(total) ? total : 0
      restored += raised
    }
    return { ok: true, totals, restored }
  }

  async close (): Promise<void> {
    if (this.#client.status === 'ready') {
      // QUIT lets the last sync's replies arrive; bounded by the command timeout.
      await this.#client.quit().catch(() => { this.#client.disconnect() })
    } else {
      this.#client.disconnect()
    }
  }

  #redact (text: string): string {
    let out = text
    for (const s of this.#secrets) out = out.split(s).join('[redacted]')
    return out
  }
}

function safeDecode (s: string): string {
  try {
    return decodeURIComponent(s)
  } catch {
    return s
  }
}
