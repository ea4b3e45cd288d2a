// A call's attempts over a provider's ordered targets (TRACEGATE_<NAME>_BASE_URL as a list). An attempt
// that fails before anything was committed to the client (the provider could not be reached, timed out
// before its headers, or answered 5xx, 429, or 401/403 to the server-side key) gives way to the next
// target, within the retry budget: attempts, a deadline for starting one, and exponential backoff with
// full jitter before a target is tried again. Once an attempt's answer is passed on, the call stays
// with it; a stream's status is held until its first event while another attempt could still take it.
// A target that answered 429 with retry-after is skipped for that long by every call.
import { performance } from 'node:perf_hooks'
import type { Dispatcher } from 'undici'
import type { AttemptRecord, Exchange } from '../proxy/exchange.js'
import { describeCause } from './client.js'
import type { KeyPool } from './key-pool.js'
import { Passthrough } from './passthrough.js'

type Controller = Dispatcher.DispatchController
type Headers = Record<string, string | string[] | undefined>

export interface RetryPolicy {
  /** Attempts a call may make in all, over every target; null: one per target, plus one per further pooled key. */
  readonly attempts: number | null
  /** No new attempt starts this long after the first one started. */
  readonly deadlineMs: number
  /** The first wait before a target is tried again; it doubles with each further try of that target. */
  readonly backoffMs: number
}

/** The most of a failed attempt's error body read (and dropped) to keep its connection; past it, the connection is cut. */
const DROP_LIMIT = 64 * 1024
/** The longest backoff wait, whatever the doubling reaches. */
const MAX_BACKOFF_MS = 10_000
/** A retry-after longer than this is held to it: a target is never skipped for hours on one answer. */
const MAX_COOL_MS = 300_000

export interface Target {
  readonly origin: string
  /** The base URL's path prefix ('' for none), before the dialect's path. */
  readonly basePath: string
  /** The base URL as metrics and logs name it (never holds credentials: the configuration refuses them). */
  readonly label: string
  /** The model asked of this target (a routes file's step); null: the model the call names. */
  readonly model: string | null
}


/** answered: its answer went to the client; fell_over: another target took over; failed: the last, unanswered. */
export type AttemptResult = 'answered' | 'fell_over' | 'failed'

/** How attempts are counted: each attempt, and each call answered by a target other than the first. */
export interface AttemptMetrics {
  attempt (provider: string, target: string, result: AttemptResult): void
}

type RestListener = (provider: string, target: string, until: number) => void
let restListener: RestListener | null = null

/** Who hears of each cool-down this thread starts (shared-rests.ts publishes them); null: nobody. */
export function setTargetRestListener (l: RestListener | null): void {
  restListener = l
}

/** The ordered targets of one provider, with their 429 cool-downs, shared by every call of the thread. */
export class Targets {
  readonly provider: string
  readonly list: readonly Target[]
  readonly #coolUntil: Float64Array

  /** `models`: the model asked of each target (a route's steps); absent: the call's own for all. */
  constructor (provider: string, baseUrls: readonly string[], models: readonly string[] | null = null) {
    this.provider = provider
    this.list = baseUrls.map((raw, i) => {
      const url = new URL(raw)
      return { origin: url.origin, basePath: url.pathname === '/' ? '' : url.pathname.replace(/\/+$/, ''), label: raw, model: models?.[i] ?? null }
    })
    this.#coolUntil = new Float64Array(this.list.length)
  }

  cooling (i: number, now: number): boolean {
    return (this.#coolUntil[i] as number) > now
  }

  coolDown (i: number, ms: number, now: number): void {
    const until = now + Math.min(ms, MAX_COOL_MS)
    this.coolUntil(i, until)
    restListener?.(this.provider, this.list[i]!.label, until)
  }

  /** Target `i` rests until `until` (epoch ms), or longer if it already does. */
  coolUntil (i: number, until: number): void {
    this.#coolUntil[i] = Math.max(this.#coolUntil[i] as number, Math.min(until, Date.now() + MAX_COOL_MS))
  }
}

const registry = new Map<string, Targets>()

/** A cool-down another thread or instance started: every list of the provider naming the target takes it. */
export function applyTargetRest (provider: string, target: string, until: number): void {
  for (const t of registry.values()) {
    if (t.provider !== provider) continue
    t.list.forEach((x, i) => { if (x.label === target) t.coolUntil(i, until) })
  }
}

/**
 * The thread's Targets for a provider's list (one per list, so every route of the provider shares its
 * cool-downs), or for a model route's steps (`models`, one per step).
 */
export function targetsFor (provider: string, baseUrls: readonly string[], models: readonly string[] | null = null): Targets {
  const id = provider + '\n' + baseUrls.join('\n') + (models === null ? '' : '\n\n' + models.join('\n'))
  let t = registry.get(id)
  if (t === undefined) {
    t = new Targets(provider, baseUrls, models)
    registry.set(id, t)
  }
  return t
}

export interface AttemptRequest {
  readonly method: Dispatcher.HttpMethod
  /** The path after the target's base path, with its query. */
  readonly path: string
  readonly headers: Record<string, string>
  readonly body: Buffer | null
  /** The provider key is the server-side one: a 401 or 403 then moves to the next target. */
  readonly serverKey: boolean
  /** The server-side keys when they are a pool (the call uses the server-side key); each attempt takes one. */
  readonly pool: KeyPool | null
  /** The model the call names, and its path and body asking another model instead (a route's step); null: no route. */
  readonly model?: string | null
  readonly forModel?: ((model: string) => { readonly path: string; readonly body: Buffer | null }) | null
}

/** A retry-after header as milliseconds (seconds, or an HTTP date), or null. */
export function retryAfterMs (value: string | string[] | undefined, now: number): number | null {
  const v = Array.isArray(value) ? value[0] : value
  if (v === undefined || v === '') return null
  if (/^\d+(\.\d+)?$/.test(v.trim())) return Math.round(Number(v) * 1000)
  const at = Date.parse(v)
  return Number.isNaN(at) ? null : Math.max(0, at - now)
}

/**
 * One call's attempts. The call's Passthrough sees only the attempt whose answer is passed on; an
 * attempt that gives way is ignored from then on (its error body read and dropped, or cut past DROP_LIMIT).
 */
export class Attempts {
  readonly #x: Exchange
  readonly #targets: Targets
  readonly #policy: RetryPolicy
  readonly #request: AttemptRequest
  readonly #upstream: Dispatcher
  readonly #metrics: AttemptMetrics | null
  readonly #pass: Passthrough
  /** Tries per target so far, for the backoff of the next one. */
  readonly #tries: Uint16Array
  readonly #attemptsMax: number
  /** The pooled keys this call tried, a bit per key. */
  #triedKeys = 0
  #made = 0
  #firstAt = 0
  #next = 0
  #committed = false

  constructor (x: Exchange, targets: Targets, policy: RetryPolicy, request: AttemptRequest, upstream: Dispatcher, metrics: AttemptMetrics | null) {
    this.#x = x
    this.#targets = targets
    this.#policy = policy
    this.#request = request
    this.#upstream = upstream
    this.#metrics = metrics
    this.#pass = new Passthrough(x)
    this.#tries = new Uint16Array(targets.list.length)
    this.#attemptsMax = policy.attempts ?? targets.list.length + (request.pool === null ? 0 : request.pool.keys.length - 1)
  }

  start (): void {
    this.#firstAt = Date.now()
    this.#attempt(this.#pick(this.#firstAt) ?? 0)
  }

  /**
   * The next target to try: the first in order after the last one tried that is not cooling down, wrapping
   * round to the start; null when every one is.
   */
  #pick (now: number): number | null {
    const n = this.#targets.list.length
    for (let k = 0; k < n; k++) {
      const i = (this.#next + k) % n
      if (!this.#targets.cooling(i, now)) return i
    }
    return null
  }

  /** Whether another attempt may start now: the budget holds one, and a target is not cooling down. */
  #another (now: number): number | null {
    if (this.#made >= this.#attemptsMax || now - this.#firstAt >= this.#policy.deadlineMs || this.#x.aborted) return null
    return this.#pick(now)
  }

  #attempt (i: number): void {
    const target = this.#targets.list[i]!
    this.#made++
    this.#tries[i] = (this.#tries[i] as number) + 1
    this.#next = (i + 1) % this.#targets.list.length
    const r = this.#request
    let headers = r.headers
    let key = -1
    let path = r.path
    let body = r.body
    if (target.model !== null && target.model !== r.model && r.forModel != null) ({ path, body } = r.forModel(target.model))
    if (r.pool !== null) {
      key = r.pool.pick(Date.now(), this.#triedKeys)
      if (key < 31) this.#triedKeys |= 1 << key
      headers = { ...headers, ...this.#x.dialect.authHeaders(r.pool.keys[key]!) }
    }
    this.#upstream.dispatch({
      origin: target.origin,
      path: target.basePath + path,
      method: r.method,
      headers,
      body,
    }, new Attempt(this, i, key, performance.now()))
  }

  /** Lists attempt `i` (pooled key `key`) on the call's trace. */
  #record (i: number, key: number, status: number, startedAt: number, cause: string): void {
    const pool = this.#request.pool
    const ms = Math.round((performance.now() - startedAt) * 100) / 100
    const target = this.#targets.list[i]!
    const record = { target: target.label, key_id: key >= 0 && pool !== null ? pool.ids[key]! : '', status, ms, cause }
    ;(this.#x.attempts ??= []).push(target.model === null ? record : { ...record, model: target.model })
  }

  /**
   * The attempt on target `i` with pooled key `key` (-1: not pooled) failed (status 0: no answer); true
   * when another one takes over. A pooled key refused or limited gives way to another key on the same
   * target, at once; anything else to the next target.
   */
  gaveWay (i: number, key: number, status: number, cause: string, headers: Headers | null, startedAt: number): boolean {
    if (this.#committed) return false
    const now = Date.now()
    const targets = this.#targets
    const pool = key >= 0 ? this.#request.pool : null
    let keyLevel = false
    if (status === 429) {
      const ms = headers === null ? null : retryAfterMs(headers['retry-after'], now)
      if (pool !== null) { pool.limited(key, ms, now); keyLevel = true } else if (ms !== null && ms > 0) targets.coolDown(i, ms, now)
    } else if ((status === 401 || status === 403) && pool !== null) {
      pool.refused(key, status)
      keyLevel = true
    }
    const sameTarget = keyLevel && pool !== null && pool.untried(now, this.#triedKeys) && !targets.cooling(i, now)
    const next = sameTarget && this.#made < this.#attemptsMax && now - this.#firstAt < this.#policy.deadlineMs && !this.#x.aborted ? i : this.#another(now)
    if (next === null) return false
    this.#record(i, key, status, startedAt, cause)
    this.#metrics?.attempt(this.#x.dialect.name, targets.list[i]!.label, 'fell_over')
    // A target tried before waits out its backoff (full jitter); a fresh one is tried at once.
    const tried = next === i && sameTarget ? 0 : this.#tries[next] as number
    const wait = tried === 0 ? 0 : Math.random() * Math.min(MAX_BACKOFF_MS, this.#policy.backoffMs * 2 ** (tried - 1))
    const wall = Math.min(wait, Math.max(0, this.#firstAt + this.#policy.deadlineMs - now))
    if (wall <= 0) this.#attempt(next)
    else setTimeout(() => { this.#resume(next) }, wall)
    return true
  }

  #resume (i: number): void {
    const x = this.#x
    if (x.aborted) { x.finish('client_aborted'); return }
    this.#attempt(i)
  }

  /** Attempt `i`'s answer is the call's: from now on the Passthrough has it. */
  commit (i: number, key: number, status: number, startedAt: number): Passthrough {
    this.#committed = true
    // The trace names (and prices) the model that answered: a route's step may have asked another.
    const model = this.#targets.list[i]!.model
    if (model !== null) this.#x.model = model
    this.#record(i, key, status, startedAt, '')
    this.#metrics?.attempt(this.#x.dialect.name, this.#targets.list[i]!.label, 'answered')
    return this.#pass
  }

  /** The last attempt failed before any answer: the call fails with it. */
  failed (i: number, key: number, startedAt: number, cause: string): Passthrough {
    this.#record(i, key, 0, startedAt, cause)
    if (!this.#x.aborted) this.#metrics?.attempt(this.#x.dialect.name, this.#targets.list[i]!.label, 'failed')
    return this.#pass
  }

  get passthrough (): Passthrough {
    return this.#pass
  }

  get x (): Exchange {
    return this.#x
  }

  /** Whether another attempt could still take the call (a held stream may then give way). */
  canMove (): boolean {
    return !this.#committed && this.#another(Date.now()) !== null
  }

  /** Whether `status` from an attempt gives way to another target. */
  movesOn (status: number): boolean {
    return status === 429 || status >= 500 || ((status === 401 || status === 403) && this.#request.serverKey)
  }
}

/** One attempt's undici handler: passes its answer on once committed, or gives way. */
class Attempt implements Dispatcher.DispatchHandler {
  readonly #owner: Attempts
  readonly #target: number
  readonly #key: number
  readonly #startedAt: number
  /** Gave way to another attempt: nothing it still hears reaches the call. */
  #dropped = false
  #droppedBytes = 0
  #pass: Passthrough | null = null
  /** A stream's status and headers, held until its first event while another attempt could take over. */
  #held: { status: number, headers: Headers } | null = null

  constructor (owner: Attempts, target: number, key: number, startedAt: number) {
    this.#owner = owner
    this.#target = target
    this.#key = key
    this.#startedAt = startedAt
  }

  onRequestStart (controller: Controller, context: unknown): void {
    this.#owner.passthrough.onRequestStart(controller)
    void context
  }

  onResponseStart (controller: Controller, statusCode: number, headers: Headers, statusMessage?: string): void {
    if (this.#dropped) return
    if (this.#owner.movesOn(statusCode) && this.#owner.gaveWay(this.#target, this.#key, statusCode, `status ${statusCode}`, headers, this.#startedAt)) {
      // Its error body is read and dropped, so the connection goes back to the pool (a new one would cost
      // a connect on every fall-over); one past DROP_LIMIT bytes is cut.
      this.#dropped = true
      return
    }
    const type = headers['content-type']
    const stream = (typeof type === 'string' && type.startsWith('text/event-stream')) || this.#owner.x.streaming
    if (stream && statusCode < 300 && this.#owner.canMove()) {
      this.#held = { status: statusCode, headers }
      return
    }
    this.#commit(controller, statusCode, headers)
    void statusMessage
  }

  #commit (controller: Controller, status: number, headers: Headers): Passthrough {
    this.#held = null
    const pass = this.#owner.commit(this.#target, this.#key, status, this.#startedAt)
    this.#pass = pass
    pass.onResponseStart(controller, status, headers)
    return pass
  }

  onResponseData (controller: Controller, chunk: Buffer): void {
    if (this.#held !== null) this.#commit(controller, this.#held.status, this.#held.headers)
    if (this.#pass !== null) { this.#pass.onResponseData(controller, chunk); return }
    this.#droppedBytes += chunk.length
    if (this.#dropped && this.#droppedBytes > DROP_LIMIT && !controller.aborted) controller.abort(new Error('fell over to the next target'))
  }

  onResponseEnd (controller: Controller, trailers: Headers): void {
    if (this.#held !== null) this.#commit(controller, this.#held.status, this.#held.headers)
    if (this.#pass !== null) this.#pass.onResponseEnd()
    void controller; void trailers
  }

  onResponseError (controller: Controller, err: Error): void {
    if (this.#dropped) return
    // Before any answer: the provider could not be reached or did not answer in time.
    const held = this.#held
    if (held !== null) {
      // A stream cut before its first event: nothing reached the client, so another attempt may take it.
      const cut = `stream cut before its first event: ${describeCause(err)}`
      if (!this.#owner.x.aborted && this.#owner.gaveWay(this.#target, this.#key, held.status, cut, null, this.#startedAt)) {
        this.#dropped = true
        return
      }
      this.#commit(controller, held.status, held.headers).onResponseError(controller, err)
      return
    }
    const cause = describeCause(err)
    if (this.#pass === null && !this.#owner.x.aborted && this.#owner.gaveWay(this.#target, this.#key, 0, cause, null, this.#startedAt)) {
      this.#dropped = true
      return
    }
    ;(this.#pass ?? this.#owner.failed(this.#target, this.#key, this.#startedAt, cause)).onResponseError(controller, err)
  }
}
