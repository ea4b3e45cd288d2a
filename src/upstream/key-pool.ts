// A pool of server-side provider keys (TRACEGATE_<NAME>_API_KEY as a comma-separated list). Calls take
// its keys in turn, the least recently rate-limited first; a key answered 429 rests for its retry-after, a
// key answered 401 or 403 is set aside (logged once) until tracegate restarts. Each thread keeps its own
// pool state. Keys are named by their id (a hash prefix), never by their value.
import { createHash } from 'node:crypto'

/** A 429 without a usable retry-after rests the key this long. */
const DEFAULT_REST_MS = 1_000
/** A key limited longer ago than this is as good as one never limited: they take turns again. */
const RECENT_MS = 60_000
/** The longest rest one 429 gives a key. */
const MAX_REST_MS = 300_000

export type Warn = (msg: string, fields: Record<string, unknown>) => void

type KeyRestListener = (provider: string, keyId: string, until: number, status: number) => void
let restListener: KeyRestListener | null = null

/** Who hears of each rest (until > 0) and set-aside (until 0) this thread decides (shared-rests.ts); null: nobody. */
export function setKeyRestListener (l: KeyRestListener | null): void {
  restListener = l
}

/** A key's id in logs and metrics: `pk_` and 12 hex digits of its SHA-256, enough to tell keys apart, never to recover one. */
export function keyId (key: string): string {
  return 'pk_' + createHash('sha256').update(key).digest('hex').slice(0, 12)
}

export class KeyPool {
  readonly keys: readonly string[]
  readonly ids: readonly string[]
  readonly #provider: string
  readonly #warn: Warn
  readonly #restUntil: Float64Array
  readonly #limitedAt: Float64Array
  readonly #aside: Uint8Array
  #next = 0

  constructor (provider: string, keys: readonly string[], warn: Warn) {
    this.#provider = provider
    this.keys = keys
    this.ids = keys.map(keyId)
    this.#warn = warn
    this.#restUntil = new Float64Array(keys.length)
    this.#limitedAt = new Float64Array(keys.length)
    this.#aside = new Uint8Array(keys.length)
  }

  #usable (i: number, now: number): boolean {
    return this.#aside[i] === 0 && (this.#restUntil[i] as number) <= now
  }

  /**
   * The key for an attempt: among the usable keys the call has not tried (`tried`, a bit per key), the one
   * limited longest ago (a key not limited within RECENT_MS counts as never), ties in turn; then any usable
   * key; then, when every key rests or is set aside, the one whose rest ends first (the provider's answer
   * then reaches the client).
   */
  pick (now: number, tried: number): number {
    const n = this.keys.length
    const since = (i: number): number => { const at = this.#limitedAt[i] as number; return now - at > RECENT_MS ? 0 : at }
    let best = -1
    for (let pass = 0; pass < 2 && best < 0; pass++) {
      for (let k = 0; k < n; k++) {
        const i = (this.#next + k) % n
        if (!this.#usable(i, now) || (pass === 0 && i < 31 && (tried & (1 << i)) !== 0)) continue
        if (best < 0 || since(i) < since(best)) best = i
      }
    }
    if (best < 0) {
      best = 0
      for (let i = 1; i < n; i++) {
        if (this.#aside[best] !== 0 || (this.#aside[i] === 0 && (this.#restUntil[i] as number) < (this.#restUntil[best] as number))) best = i
      }
    }
    this.#next = (best + 1) % n
    return best
  }

  /** Whether a usable key remains that the call has not tried. */
  untried (now: number, tried: number): boolean {
    for (let i = 0; i < this.keys.length; i++) if (this.#usable(i, now) && (i >= 31 || (tried & (1 << i)) === 0)) return true
    return false
  }

  /** Key `i` was answered 429: it rests for `ms` (the retry-after), or a second. */
  limited (i: number, ms: number | null, now: number): void {
    this.#limitedAt[i] = now
    const rest = Math.min(MAX_REST_MS, ms !== null && ms > 0 ? ms : DEFAULT_REST_MS)
    this.restUntil(i, now + rest)
    restListener?.(this.#provider, this.ids[i]!, now + rest, 429)
  }

  /** Key `i` rests until `until` (epoch ms), or longer if it already does. */
  restUntil (i: number, until: number): void {
    this.#limitedAt[i] = Math.max(this.#limitedAt[i] as number, Math.min(until, Date.now()))
    this.#restUntil[i] = Math.max(this.#restUntil[i] as number, Math.min(until, Date.now() + MAX_REST_MS))
  }

  /** Key `i` was set aside elsewhere (another thread or instance, which logged it). */
  setAside (i: number): void {
    this.#aside[i] = 1
  }

  get provider (): string {
    return this.#provider
  }

  /** Key `i` was answered 401 or 403: set aside, logged once. */
  refused (i: number, status: number): void {
    if (this.#aside[i] !== 0) return
    this.#aside[i] = 1
    restListener?.(this.#provider, this.ids[i]!, 0, status)
    this.#warn('provider key set aside', { provider: this.#provider, key_id: this.ids[i], status, until: 'restart', usable_keys: this.keys.length - this.#aside.reduce((a, b) => a + b, 0) })
  }
}

const registry = new Map<string, KeyPool>()

/** A rest (until > 0) or set-aside (until 0) of a key another thread or instance decided, by the key's id. */
export function applyKeyRest (provider: string, keyId: string, until: number, status: number): void {
  for (const p of registry.values()) {
    if (p.provider !== provider) continue
    const i = p.ids.indexOf(keyId)
    if (i < 0) continue
    if (until === 0 && (status === 401 || status === 403)) p.setAside(i)
    else if (until > 0) p.restUntil(i, until)
  }
}

/** The thread's pool for a provider's keys; null for fewer than two keys (one key is used as before). */
export function keyPoolFor (provider: string, keys: readonly string[], warn: Warn): KeyPool | null {
  if (keys.length < 2) return null
  const id = provider + '\n' + keys.map(keyId).join('\n')
  let p = registry.get(id)
  if (p === undefined) {
    p = new KeyPool(provider, keys, warn)
    registry.set(id, p)
  }
  return p
}
