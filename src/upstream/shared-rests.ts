// Rests shared through Redis (TRACEGATE_REDIS_URL): a target skipped for a 429's retry-after, a pooled key
// resting after a 429 or set aside after a 401/403 are published on one channel, and every thread of every
// instance that subscribes applies them. Publishing never waits on the call's path, and a Redis that is
// away costs nothing but the sharing: each thread keeps its own rests as without Redis. A message names a
// target by its base URL and a key by its id (key-pool.ts), never by the key.
import type { Redis } from 'ioredis'
import { bestEffortRedis } from './redis-connection.js'
import { applyTargetRest, setTargetRestListener } from './fallover.js'
import { applyKeyRest, setKeyRestListener } from './key-pool.js'

export const CHANNEL = 'tracegate:upstream-rests'

/** One rest as published: a target's cool-down, a key's rest, or a key set aside. */
export interface RestMessage {
  readonly kind: 'target' | 'key' | 'key_aside'
  readonly provider: string
  /** The target's base URL, or the key's id. */
  readonly id: string
  /** Epoch ms the rest ends (0 for a key set aside). */
  readonly until: number
  readonly status?: number
}

function isRest (v: unknown): v is RestMessage {
  const m = v as RestMessage | null
  return typeof m === 'object' && m !== null && (m.kind === 'target' || m.kind === 'key' || m.kind === 'key_aside') &&
    typeof m.provider === 'string' && typeof m.id === 'string' && typeof m.until === 'number'
}

export class SharedRests {
  readonly #pub: Redis
  readonly #sub: Redis
  /** This thread's own messages, not applied again when they come back. */
  readonly #origin = Math.random().toString(36).slice(2)

  constructor (url: string) {
    this.#pub = bestEffortRedis(url)
    // A subscriber connection re-subscribes by itself after a reconnect.
    this.#sub = bestEffortRedis(url, true)
    this.#sub.subscribe(CHANNEL).catch(() => {})
    this.#sub.on('message', (_channel: string, text: string) => { this.#received(text) })
    setTargetRestListener((provider, id, until) => { this.#publish({ kind: 'target', provider, id, until }) })
    setKeyRestListener((provider, id, until, status) => { this.#publish({ kind: until === 0 ? 'key_aside' : 'key', provider, id, until, status }) })
  }

  #publish (m: RestMessage): void {
    if (this.#pub.status !== 'ready') return
    this.#pub.publish(CHANNEL, JSON.stringify({ ...m, origin: this.#origin })).catch(() => {})
  }

  #received (text: string): void {
    let v: unknown
    try { v = JSON.parse(text) } catch { return }
    if (!isRest(v) || (v as { origin?: unknown }).origin === this.#origin) return
    if (v.kind === 'target') applyTargetRest(v.provider, v.id, v.until)
    else applyKeyRest(v.provider, v.id, v.until, v.status ?? 0)
  }

  async close (): Promise<void> {
    setTargetRestListener(null)
    setKeyRestListener(null)
    this.#pub.disconnect()
    this.#sub.disconnect()
  }
}
