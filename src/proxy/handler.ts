// The proxy pipeline for one dialect's route, in the proxy contract's check order, one named step each.
import { newRequestId } from '../ids.js'
import type { Agent } from 'undici'
import type { KeyCache } from '../auth/cache.js'
import { authenticate, type KeyVerdict } from '../auth/authenticate.js'
import type { Config } from '../config.js'
import { bodyTooLarge, TracegateError } from '../errors.js'
import type { Dialect, NativeRoute, RouteCall } from '../providers/index.js'
import { readBody } from '../server/body.js'
import { MALFORMED, requestLength } from '../server/head.js'
import { nativeShape, sendError, startError, TRACEGATE_SHAPE } from '../server/respond.js'
import { notFound } from '../server/routes.js'
import type { HttpRequest, HttpResponse } from '../server/uws.js'
import { answerFromCache, Passthrough } from '../upstream/passthrough.js'
import { CacheFill, ResponseCache, type CacheMetrics, type CachedAnswer } from './response-cache.js'
import { keyPoolFor, type KeyPool, type Warn } from '../upstream/key-pool.js'
import { Attempts, targetsFor, type AttemptMetrics, type RetryPolicy, type Target, type Targets } from '../upstream/fallover.js'
import { Exchange, type FinishListener } from './exchange.js'
import type { DetectionOutcome, Detector } from '../detection/pool.js'
import type { Verdict } from '../detection/types.js'
import { atThreshold, blockedSummary } from '../detection/policy.js'
import type { Admission } from '../limits/limiter.js'
import { modelAllowed, type Refusal } from '../limits/rules.js'
import { fallbacksAllowed, type ModelRoutes, type RoutePair } from '../domain/model-routes.js'
import { estimateOf } from '../limits/reserve.js'
import { injectSpan, startSpan } from '../otel/propagation.js'
import { ResponseCapture } from './capture.js'
import { maskToolCredentials } from './tool-credentials.js'
import { planRefusal } from './plan-rule.js'
import { cacheTtlHeader, callLabels, checkHeaderKey, confidentialHeader, contractProviderKey, readCallerHeaders, readNativeKeys, type CallerHeaders, type NativeKeys } from './caller.js'
import { cutMembers, Kind, scanTopLevel, stringValue, type Member } from './scan.js'
import { checkSchema, HEADER_VALUE, readNativeBody, readServiceFields, type CheckedRequest, type PathFacts } from './validate.js'
import type { KeyInfo } from '../domain/key-info.js'
import type { AccountDetection } from '../domain/detection-policy.js'

export interface ProxyDeps {
  readonly config: Config
  readonly keys: KeyCache
  readonly upstream: Agent
  /** Called once per exchange when it begins, and once when it ends whatever the outcome. */
  readonly onStart: () => void
  readonly onFinish: FinishListener
  /** Null when detection is off. */
  readonly detection: Detector | null
  /** Bytes of a response the trace keeps; null: tracing is off and nothing is captured. */
  readonly captureLimit: number | null
  /** The per-key and per-account limits (src/limits); null or absent: none are enforced. */
  readonly limiter?: Admission | null
  /** True when spans are exported over OTLP: each call gets a span id and passes a traceparent on. */
  readonly spans?: boolean
  /** Logs what the proxy path logs once (a pooled provider key set aside); absent: not logged. */
  readonly warn?: Warn
  /** Counts the attempts over a provider's targets (the metrics); null or absent: not counted. */
  readonly attempts?: AttemptMetrics | null
  /** The exact response cache (x-tracegate-cache-ttl); null or absent: off. */
  readonly cache?: ResponseCache | null
  /** Counts the cache's hits and misses; null or absent: not counted. */
  readonly cacheMetrics?: CacheMetrics | null
  /** True once shutdown began: new requests get 503. */
  isClosing (): boolean
}

/** The model named in the body, for traces of calls rejected before the schema check passed. */
function modelOf (body: Buffer, members: readonly Member[], dialect: Dialect): string | null {
  let model: string | null = null
  for (const m of members) if (m.name === 'model' && m.kind === Kind.String) model = stringValue(body, m)
  return model !== null && (dialect.validModel === undefined || dialect.validModel(model)) ? model : null
}

/** The 503 of a body over TRACEGATE_DETECTION_MAX_BYTES: larger than detection judges, not late. */
const TOO_LARGE_MESSAGE = 'The request is larger than safety detection judges (TRACEGATE_DETECTION_MAX_BYTES); it was not forwarded.'

/** The 413 of a body over TRACEGATE_MAX_BODY_BYTES, naming it. */
function serverLimit (limit: number): TracegateError {
  return bodyTooLarge(limit, 'this server\'s', 'TRACEGATE_MAX_BODY_BYTES')
}

/**
 * 413 decided from content-length, before reading: the connection stays open and uWS reads and drops
 * the announced body (until its idle timer closes the connection, 10-14 s after the answer), so a
 * client still sending reads the answer instead of a reset.
 */
function tooLarge (x: Exchange, limit: number): void {
  x.status = sendError(x.res, serverLimit(limit), x.requestId, false, [], x.shape)
  x.errorCode = 'body_too_large'
  x.finish('rejected')
}

/** 413 for a body that passed the limit while streaming in: answered at once, the rest dropped (body.ts). */
function tooLargeMidBody (x: Exchange, limit: number): void {
  x.status = startError(x.res, serverLimit(limit), x.requestId, [], x.shape)
  x.errorCode = 'body_too_large'
  x.finish('rejected')
}

/** A head whose body length is ambiguous (head.ts): 400 and the connection closed, nothing read. */
function malformed (x: Exchange): void {
  x.status = sendError(x.res, 'malformed_request', x.requestId, true, [], x.shape)
  x.errorCode = 'malformed_request'
  x.finish('rejected')
}

/** A call the limits refused: 403 (model), 413 (the key's body limit) or 429 with when to retry. */
function refuse (x: Exchange, r: Refusal): void {
  const extra: Record<string, unknown> | undefined = r.period === null ? undefined : { period: r.period, limit_usd: r.limitUsd }
  const err = new TracegateError(r.code, { message: r.message, param: r.param, ...(extra === undefined ? {} : { extra }) })
  const headers: Array<[string, string]> = []
  for (const name in r.headers) headers.push([name, r.headers[name]!])
  x.fail(err, r.code === 'rate_limited' || r.code === 'budget_exceeded' ? 'limited' : 'rejected', headers)
}

/** What the checks learnt that the upstream request needs. */
interface Outbound {
  readonly path: string
  readonly headers: Record<string, string>
  /** The body with the service fields cut out: what the provider, detection and the trace see. */
  readonly body: Buffer
  /** The provider key is the server-side one (a 401 or 403 to it moves to the next target). */
  readonly serverKey: boolean
  /** The steps of the routes file's route for the call's model; null: the provider's own targets. */
  readonly route: Targets | null
}

/** What the head said, read while the uWS request is valid and carried to the later steps. */
interface Head {
  /** The route as the trace's endpoint column names it. */
  readonly endpoint: string
  readonly caller: CallerHeaders
  /** The keys a native route found in headers (null on the contract route: they are in the body). */
  readonly keys: NativeKeys | null
  /** A native route's path facts (gamma: model and stream) and the query passed on (less the key). */
  readonly path: PathFacts | null
  readonly query: string
  /** What the native path asks for (null on the contract route). */
  readonly call: RouteCall | null
}

/** The request once read: its top-level members, the tracegate key, and the members to cut (contract route). */
interface Received {
  readonly head: Head
  readonly members: readonly Member[]
  readonly apiKey: string
  readonly cut: ReadonlySet<number> | null
  /** Two keys that contradict each other: the 422 answered at the schema step. */
  readonly conflict: TracegateError | null
}

/**
 * One route, as the steps of the proxy contract: the head and the body (`handle`), the service fields and the
 * key (`#received`), the plan, the schema and the provider key (`#authorised`), the response cache
 * (`#admitted`), detection (`#judge`), and the upstream call (`#send`). The contract route (`/api/<name>_service/chat_completion`)
 * takes the keys from the body (or the x-tracegate-* key headers) and cuts them out; a native route
 * (the provider's own path) takes them from the headers its SDK sends, refuses a service field in the
 * body, and forwards the body as it came. The raw body, which may hold keys, is passed from step to step
 * and never kept on the exchange; the exchange only holds the forwarded body.
 */
class ProxyRoute {
  readonly #dialect: Dialect
  readonly #deps: ProxyDeps
  readonly #native: boolean
  /** How a path on this route resolves to a call; null on the contract route. */
  readonly #resolve: ((path: string, params: readonly string[]) => RouteCall | null) | null
  /** Whether the route's method carries a body (GET and DELETE do not). */
  readonly #hasBody: boolean
  readonly #method: string
  /** How many parameters (`:name` segments) the route's pattern has. */
  readonly #paramCount: number
  readonly #limit: number
  readonly #serverKey: string | null
  /** The provider's first target, where a call making one attempt goes directly. */
  readonly #first: Target
  /** The provider's ordered targets; null when it has one and a call makes one attempt (dispatched directly). */
  readonly #targets: Targets | null
  readonly #retry: RetryPolicy
  /** The server-side keys when there are two or more. */
  readonly #pool: KeyPool | null
  /** The targets' base URLs, in order: part of the response cache's key. */
  readonly #targetUrls: readonly string[]
  /** The routes file and this provider's model routes; null when it has none. */
  readonly #routes: ModelRoutes<string> | null
  readonly #routePairs: ReadonlyMap<string, readonly RoutePair[]> | null

  constructor (dialect: Dialect, deps: ProxyDeps, native: boolean, route: NativeRoute | null) {
    this.#dialect = dialect
    this.#deps = deps
    this.#native = native
    this.#resolve = !native ? null : route !== null ? route.resolve : dialect.native.resolve ?? mainCall(dialect)
    this.#method = route === null ? 'POST' : route.method === 'del' ? 'DELETE' : route.method.toUpperCase()
    this.#hasBody = this.#method === 'POST'
    this.#paramCount = ((route?.pattern ?? (native ? dialect.native.route : '')).match(/\/:/g) ?? []).length
    this.#limit = deps.config.maxBodyBytes
    const provider = deps.config.providers[dialect.name]
    this.#serverKey = provider.apiKeys[0] ?? null
    const up = deps.config.upstream
    this.#retry = { attempts: up.attempts, deadlineMs: up.retryDeadlineMs, backoffMs: up.backoffMs }
    this.#pool = keyPoolFor(dialect.name, provider.apiKeys, deps.warn ?? (() => {}))
    const targets = targetsFor(dialect.name, provider.baseUrls)
    this.#targetUrls = provider.baseUrls
    const pairs = deps.config.routes?.routes[dialect.name]
    this.#routes = pairs === undefined || pairs.size === 0 ? null : deps.config.routes
    this.#routePairs = this.#routes === null ? null : pairs!
    this.#first = targets.list[0]!
    const direct = (up.attempts ?? 1) <= 1 && targets.list.length === 1 && this.#pool === null
    this.#targets = direct ? null : targets
  }

  /**
   * What the head says, read while `req` is valid: the caller's x-tracegate-* headers and, on a native
   * route, the keys, the path's facts and the query to pass on. Null when a native path names a method
   * tracegate does not serve (answered 404 here).
   */
  #readHead (res: HttpResponse, req: HttpRequest): Head | null {
    const caller = readCallerHeaders(req)
    const dialect = this.#dialect
    if (this.#resolve === null) return { endpoint: dialect.route, caller, keys: null, path: null, query: '', call: null }
    const native = dialect.native
    const segments: string[] = []
    for (let i = 0; i < this.#paramCount; i++) segments.push(req.getParameter(i) ?? '')
    const call = this.#resolve(req.getUrl(), segments)
    // A method on a model path that tracegate does not serve.
    if (call === null) { notFound(res, nativeShape(dialect)); return null }
    const path: PathFacts = { model: call.model, stream: call.stream }
    const endpoint = call.endpoint
    const rawQuery = req.getQuery() ?? ''
    const params = rawQuery === '' ? null : new URLSearchParams(rawQuery)
    const keys = readNativeKeys(dialect, req, params)
    if (params !== null && native.keyQuery !== null) params.delete(native.keyQuery)
    const query = params === null || params.size === 0 ? '' : '?' + params.toString()
    return { endpoint, caller, keys, path, query, call }
  }

  /** Steps 1 and 2: the head's framing and size, then the body. */
  readonly handle = (res: HttpResponse, req: HttpRequest): void => {
    const dialect = this.#dialect
    const head = this.#readHead(res, req)
    if (head === null) return
    const x = new Exchange(res, dialect, head.endpoint, this.#native ? nativeShape(dialect) : TRACEGATE_SHAPE, newRequestId(), this.#deps.onFinish)
    if (head.call !== null) x.kind = head.call.kind
    this.#deps.onStart()
    // The client's trace context, read only when spans are exported (the provider then gets ours).
    if (this.#deps.spans === true) x.span = startSpan(req.getHeader('traceparent'), req.getHeader('tracestate'))
    res.onAborted(() => { x.clientAborted() })
    if (this.#deps.isClosing()) {
      x.fail(new TracegateError('service_unavailable'))
      return
    }
    const contentLength = requestLength(req)
    // getHeader reads a value byte for byte (latin1), where forEach's UTF-8 decoding silently drops
    // bytes that are not UTF-8: a non-ASCII value must be seen as such to be refused (#authorised).
    for (const name of dialect.forwardHeaders) {
      const value = req.getHeader(name)
      if (value !== '') x.forwardHeaders.push([name, value])
    }
    if (contentLength === MALFORMED) {
      malformed(x)
      return
    }
    // GET and DELETE carry no body: the key is all there is to check.
    if (!this.#hasBody) {
      try {
        this.#received(x, NO_BODY, head)
      } catch (err) {
        x.fail(err)
      }
      return
    }
    // Over the limit, decided before reading when content-length says so.
    if (contentLength > this.#limit) {
      tooLarge(x, this.#limit)
      return
    }
    readBody(res, contentLength, this.#limit, (r) => {
      if (x.aborted) return
      if (!r.ok) {
        tooLargeMidBody(x, this.#limit)
        return
      }
      try {
        this.#received(x, r.body, head)
      } catch (err) {
        x.fail(err)
      }
    }, x)
  }

  /** Steps 2 to 4: valid JSON, the service fields, the tracegate key (synchronous when it is cached). */
  #received (x: Exchange, raw: Buffer, head: Head): void {
    let got: Received
    if (head.keys === null) {
      const sf = readServiceFields(raw, this.#dialect, head.caller.tracegateKey)
      got = { head, members: sf.members, apiKey: sf.apiKey, cut: sf.cut, conflict: sf.conflict }
    } else {
      // A cancel may come without a body (a GET has none); any other body is still the provider's JSON.
      const members = raw.length === 0 && (!this.#hasBody || head.call?.bodyless === true) ? [] : readNativeBody(raw)
      if (head.keys.tracegateKey === null) throw new TracegateError('missing_tracegate_key')
      got = { head, members, apiKey: head.keys.tracegateKey, cut: null, conflict: head.keys.conflict }
    }
    const next = x.kind === 'relay' ? this.#relayed : this.#authorised
    const verdict = authenticate(this.#deps.keys, got.apiKey, 'proxy')
    if (verdict instanceof Promise) {
      verdict.then((v) => { next.call(this, x, raw, got, v) }).catch((err: unknown) => { x.fail(err) })
    } else {
      next.call(this, x, raw, got, verdict)
    }
  }

  /**
   * A relayed call (token counting, reading or cancelling a stored response): the key, its plan and the
   * provider key, then forwarded as it came. It generates nothing, so it is neither limited, judged
   * nor traced; its metrics count it under its route.
   */
  #relayed (x: Exchange, raw: Buffer, got: Received, verdict: KeyVerdict): void {
    if (x.aborted) return
    if (verdict instanceof TracegateError) {
      x.fail(verdict)
      return
    }
    const { head } = got
    x.accountId = verdict.accountId
    x.keyId = verdict.keyId
    let out: Outbound
    try {
      const unplanned = planRefusal(verdict)
      if (unplanned !== null) throw unplanned
      if (got.conflict !== null) throw got.conflict
      // A model the path names (Gemini's countTokens) is checked as a generation's is.
      const model = head.call?.model ?? null
      if (model !== null && this.#dialect.validModel !== undefined && !this.#dialect.validModel(model)) {
        throw new TracegateError('invalid_field', { param: 'model', message: 'The model in the path is not a valid model name.' })
      }
      const ownKey = head.call?.ownKey === true
      const providerKey = this.#providerKey(null, head, verdict.serverSideKeys && !ownKey, ownKey ? OWN_KEY_NEEDED : undefined)
      out = { path: (head.call?.upstream ?? '') + head.query, headers: this.#headers(x, providerKey, raw.length > 0), body: raw, serverKey: providerKey === this.#serverKey, route: null }
    } catch (err) {
      x.fail(err)
      return
    }
    // One request against the key's and account's requests per minute (and the key's body size): a
    // relayed call spends no tokens, so tpm and budgets do not refuse it.
    const limiter = this.#deps.limiter
    if (limiter != null) {
      const call = { keyId: verdict.keyId, accountId: verdict.accountId, key: verdict.limits, account: verdict.accountLimits, relay: true }
      const refusal = limiter.admit(call, null, raw.length)
      if (refusal instanceof Promise) {
        refusal.then((r) => { if (r !== null) refuse(x, r); else if (!x.aborted) this.#send(x, out) }).catch((err: unknown) => { x.fail(err) })
        return
      }
      if (refusal !== null) {
        refuse(x, refusal)
        return
      }
    }
    this.#send(x, out)
  }

  /** Steps 5 to 7: the plan, the schema, the labels, the provider key and headers; then detection or the call. */
  #authorised (x: Exchange, raw: Buffer, got: Received, verdict: KeyVerdict): void {
    if (x.aborted) return
    // A refused key is counted, not traced: the exchange has no account.
    if (verdict instanceof TracegateError) {
      x.fail(verdict)
      return
    }
    // Authenticated: the exchange is traced whatever follows, with the body that has no keys in it.
    const dialect = this.#dialect
    const { head } = got
    const body = got.cut === null ? raw : cutMembers(raw, got.members, got.cut)
    // The trace keeps the body without the credentials a native body may carry for a tool server.
    x.forwarded = got.cut === null && head.keys !== null ? maskToolCredentials(raw, got.members) ?? body : body
    x.forwardedBytes = body.length
    x.accountId = verdict.accountId
    x.keyId = verdict.keyId
    x.maskPii = verdict.detection.piiAtRest === 'mask'
    let out: Outbound
    let checked: CheckedRequest
    try {
      const unplanned = planRefusal(verdict)
      if (unplanned !== null) throw unplanned
      checked = checkSchema(raw, got.members, dialect, head.path, head.call?.params ?? null)
      // Known from here on, also for the trace of a call refused below (a confidential one stays so).
      x.model = checked.model
      x.streaming = checked.stream
      x.confidential = checked.isConfidential || confidentialHeader(head.caller.confidential)
      x.labels = callLabels(head.caller)
      const cache = this.#deps.cache
      if (cache != null) x.cacheTtlS = cacheTtlHeader(head.caller.cacheTtl, cache.maxTtlS)
      if (got.conflict !== null) throw got.conflict
      // A body naming stored data (a previous response, a context cache) may not use the server-side key.
      const names = head.call === null ? dialect.ownKeyWith : head.call.ownKeyWith
      const stored = names !== undefined && got.members.some((m) => m.kind !== Kind.Null && names.includes(m.name))
      const providerKey = this.#providerKey(checked.providerKey, head, verdict.serverSideKeys && !stored, stored ? OWN_KEY_STORED : undefined)
      const upstream = head.call?.upstream ?? null
      const facts = head.keys === null ? checked : { ...checked, query: head.query }
      out = { path: upstream === null ? dialect.target(facts).path : upstream + head.query, headers: this.#headers(x, providerKey), body, serverKey: providerKey === this.#serverKey, route: this.#routeFor(x.model, verdict) }
    } catch (err) {
      // The trace of a call refused before the schema passed still names the model, when it is readable.
      x.model ??= head.path?.model ?? modelOf(raw, got.members, dialect)
      x.fail(err)
      return
    }
    // The limits of the key and its account: the last check before detection and the provider.
    const limiter = this.#deps.limiter
    if (limiter != null) {
      const estimate = estimateOf(dialect, raw, got.members, verdict.limits, verdict.accountLimits, x.kind)
      // A front thread that judges the call on the request board says there what it holds (limits/front.ts).
      const held = estimate === undefined ? undefined : { tok: 0, micro: 0, epoch: 0 }
      const call = { keyId: verdict.keyId, accountId: verdict.accountId, key: verdict.limits, account: verdict.accountLimits, callId: x.requestId, provider: dialect.name, model: x.model, estimate, held }
      const refusal = limiter.admit(call, x.model, raw.length)
      if (refusal instanceof Promise) {
        // A front thread asks the main thread's counts (limits/front.ts).
        refusal.then((r) => { if (r !== null) refuse(x, r); else if (!x.aborted) this.#admitted(x, out, verdict) }).catch((err: unknown) => { x.fail(err) })
        return
      }
      if (refusal !== null) {
        refuse(x, refusal)
        return
      }
      if (held !== undefined) { x.heldTokens = held.tok; x.heldMicro = held.micro; x.heldEpoch = held.epoch }
    }
    this.#admitted(x, out, verdict)
  }

  /**
   * Past the limits: the response cache when the call asked it, then detection, then the call. A hit is
   * judged as the call would be (the detector's verdict on the same bytes, kept with the answer on this
   * thread, under the account's current policy) and answered from the cache if it passes.
   */
  #admitted (x: Exchange, out: Outbound, verdict: KeyInfo): void {
    if (this.#deps.captureLimit !== null) x.capture = new ResponseCapture(this.#deps.captureLimit, x.streaming)
    // An embeddings call gives a model no instructions: nothing to judge.
    const detection = this.#deps.detection === null || x.confidential || x.kind === 'embed' ? null : this.#deps.detection
    // The account's policy decides from here on; the trace records it, `off` included.
    if (detection !== null) x.detectionPolicy = verdict.detection
    const policy = detection === null || verdict.detection.policy === 'off' ? null : verdict.detection
    const cache = this.#deps.cache
    if (cache == null || x.cacheTtlS === 0 || x.confidential || x.accountId === null || !this.#hasBody) {
      this.#judge(x, detection, policy, out, null, () => { this.#send(x, out) })
      return
    }
    const headers = x.forwardHeaders.filter(([name]) => !NOT_IN_CACHE_KEY.has(name))
    // A routed call's steps depend on its key's allowed models: a key never gets an answer from a model it may not call.
    const targets = out.route === null ? this.#targetUrls : out.route.list.map((t) => `${t.label} ${t.model ?? ''}`)
    const key = ResponseCache.key({ accountId: x.accountId, provider: this.#dialect.name, path: out.path, targets, headers, body: out.body })
    const found = cache.get(key)
    if (found instanceof Promise) {
      found.then((a) => { if (!x.aborted && !x.finished) this.#looked(x, detection, policy, out, cache, key, a) }).catch((err: unknown) => { x.fail(err) })
      return
    }
    this.#looked(x, detection, policy, out, cache, key, found)
  }

  #looked (x: Exchange, detection: Detector | null, policy: AccountDetection | null, out: Outbound, cache: ResponseCache, key: string, answer: CachedAnswer | null): void {
    this.#deps.cacheMetrics?.cacheLookup(this.#dialect.name, answer === null ? 'miss' : 'hit')
    if (answer !== null) {
      const judged = policy !== null && answer.judged?.allow === allowKey(policy) ? answer.judged.verdict : null
      this.#judge(x, detection, policy, out, judged, () => { answerFromCache(x, answer) })
      return
    }
    x.cache = 'miss'
    x.cacheFill = new CacheFill(cache, key, x.cacheTtlS)
    this.#judge(x, detection, policy, out, null, () => { this.#send(x, out) })
  }

  /**
   * Step 8: detection on every non-confidential request of an account whose policy is not `off`, before
   * anything is sent (`policy` null: not judged). `known`: the detector's verdict on these bytes already.
   */
  #judge (x: Exchange, detection: Detector | null, policy: AccountDetection | null, out: Outbound, known: Verdict | null, next: () => void): void {
    if (detection === null || policy === null) {
      next()
      return
    }
    if (known !== null) {
      // Judged without the workers: no time spent on it.
      this.#judged(x, { ok: true, verdict: { ...known, ms: 0 } }, policy, next)
      return
    }
    detection.check(this.#dialect.name, out.body, policy.allowPhrases.length === 0 ? null : policy.allowPhrases, x.accountId ?? '')
      .then((outcome) => { this.#judged(x, outcome, policy, next) })
      .catch((err: unknown) => { x.fail(err) })
  }

  /** The caller's own provider key (body field, or the header its SDK sent), else the server-side key where the plan allows. */
  #providerKey (bodyKey: string | null, head: Head, serverSideKeys: boolean, message?: string): string {
    const keys = head.keys
    const own = keys === null
      ? contractProviderKey(bodyKey, head.caller.providerKey, this.#dialect.keyField)
      : keys.providerKey === null ? null : checkHeaderKey(keys.providerKey, keys.providerKeyFrom)
    const key = own ?? (serverSideKeys ? this.#serverKey : null)
    if (key === null) throw new TracegateError('missing_provider_key', { param: keys === null ? this.#dialect.keyField : 'x-tracegate-provider-key', ...(message === undefined ? {} : { message }) })
    return key
  }

  /** The upstream headers: the client's passed-on ones (printable ASCII only), defaults, the provider key. */
  #headers (x: Exchange, providerKey: string, json = true): Record<string, string> {
    const dialect = this.#dialect
    const headers: Record<string, string> = json ? { 'content-type': 'application/json' } : {}
    for (const [name, value] of x.forwardHeaders) {
      if (!HEADER_VALUE.test(value)) throw new TracegateError('invalid_field', { param: name, message: `The ${name} header must be printable ASCII.` })
      headers[name] = value
    }
    for (const name in dialect.defaultHeaders) headers[name] ??= dialect.defaultHeaders[name]!
    Object.assign(headers, dialect.authHeaders(providerKey))
    if (x.span !== null) injectSpan(x.span, headers)
    return headers
  }

  /**
   * `block` refuses an injection at the account's threshold; `monitor` records the verdict and forwards,
   * also when detection could not judge (a verdict that cannot refuse is not worth a refusal).
   */
  #judged (x: Exchange, outcome: DetectionOutcome, policy: AccountDetection, next: () => void): void {
    if (x.finished || x.aborted) return
    if (outcome.ok) {
      const v = atThreshold(policy, outcome.verdict)
      x.verdict = v
      // A miss's answer is kept with the verdict, for the hits of this thread.
      if (x.cacheFill !== null) x.cacheFill.judged = { allow: allowKey(policy), verdict: outcome.verdict }
      if (v.blocked && policy.policy === 'block') {
        const refusal = new TracegateError('prompt_injection_detected', { extra: { detection: blockedSummary(v) } })
        // The trace's response is the 403 body the client gets (the shape is pure: the same bytes fail sends).
        x.capture?.add(Buffer.from(x.shape(refusal, x.requestId).body), performance.now() - x.startedAt)
        x.fail(refusal, 'blocked')
        return
      }
    } else {
      x.detectionFailure = outcome.failure
      if (policy.policy === 'block' && this.#deps.config.detection.failureMode === 'closed') {
        const message = outcome.failure === 'too_large' ? TOO_LARGE_MESSAGE : undefined
        x.fail(new TracegateError('detection_unavailable', { ...(message === undefined ? {} : { message }), extra: { detection: { failure: outcome.failure } } }))
        return
      }
    }
    next()
  }

  /**
   * The steps of the model's route in the routes file: all of them, or only those asking the same model
   * when the account is denied fallbacks; in both, only models the key and account allow. Null: the
   * model has no route (or no step is left), and the call goes to the provider's own targets.
   */
  #routeFor (model: string | null, key: KeyInfo): Targets | null {
    // Gemini names a model with or without its `models/` prefix; a route may be written either way.
    const bare = (m: string): string => this.#dialect.bareModel?.(m) ?? m
    const pairs = model === null ? undefined : this.#routePairs?.get(model) ?? this.#routePairs?.get(bare(model))
    if (pairs === undefined || model === null) return null
    const anyModel = fallbacksAllowed(this.#routes!, key.accountId)
    const steps = pairs.filter((p) => bare(p.model) === bare(model) || (anyModel && modelAllowed(key.limits, key.accountLimits, p.model)))
    if (steps.length === 0) return null
    return targetsFor(this.#dialect.name, steps.map((p) => p.baseUrl), steps.map((p) => p.model))
  }

  /** The call's path and body asking `model` instead of the one it names: in the path (gamma) or the body's `model`. */
  #withModel (out: Outbound): (model: string) => { path: string; body: Buffer | null } {
    const body = this.#hasBody ? out.body : null
    const pathAsking = this.#dialect.pathAsking
    if (pathAsking !== undefined) return (model) => ({ path: pathAsking(out.path, model), body })
    return (model) => {
      const m = body === null ? undefined : scanTopLevel(body)?.find((member) => member.name === 'model' && member.kind === Kind.String)
      if (body === null || m === undefined) return { path: out.path, body }
      return { path: out.path, body: Buffer.concat([body.subarray(0, m.valueStart), Buffer.from(JSON.stringify(model)), body.subarray(m.end)]) }
    }
  }

  /** Steps 9 and 10: the provider's answer streams back through Passthrough. */
  #send (x: Exchange, out: Outbound): void {
    x.upstreamStartAt = performance.now()
    const targets = out.route ?? this.#targets
    if (targets !== null) {
      const request = {
        method: this.#method as 'POST', path: out.path, headers: out.headers, body: this.#hasBody ? out.body : null, serverKey: out.serverKey, pool: out.serverKey ? this.#pool : null,
        ...(out.route === null ? {} : { model: x.model, forModel: this.#withModel(out) }),
      }
      new Attempts(x, targets, this.#retry, request, this.#deps.upstream, this.#deps.attempts ?? null).start()
      return
    }
    this.#deps.upstream.dispatch({
      origin: this.#first.origin,
      path: this.#first.basePath + out.path,
      method: this.#method as 'POST',
      headers: out.headers,
      body: this.#hasBody ? out.body : null,
    }, new Passthrough(x))
  }
}

/** A main native route without a resolver of its own: a generation at `route`, whose model and streaming the body names. */
function mainCall (dialect: Dialect): () => RouteCall {
  const call: RouteCall = { kind: 'generate', endpoint: dialect.native.route, upstream: null, model: null, stream: null, params: null }
  return () => call
}

const NO_BODY = Buffer.alloc(0)

/** The allow phrases a verdict was given under (they change it), as the cache keeps it beside the verdict. */
function allowKey (policy: AccountDetection): string {
  return JSON.stringify(policy.allowPhrases)
}

/** A passed-on header that names the attempt, not the request (the OpenAI SDK sends a new one each call). */
const NOT_IN_CACHE_KEY: ReadonlySet<string> = new Set(['idempotency-key'])

const OWN_KEY_STORED = 'A call that names stored data (previous_response_id, conversation, cachedContent) needs your own provider key (x-tracegate-provider-key), never the server-side key, which other accounts share.'
const OWN_KEY_NEEDED = 'A stored response is read, cancelled or deleted with your own provider key (x-tracegate-provider-key), never the server-side key, which other accounts share.'

/**
 * The contract route of a dialect (keys in the body), or a native route (keys in the SDK's headers):
 * its main route when `route` is null, else one of its other routes.
 */
export function proxyRoute (dialect: Dialect, deps: ProxyDeps, native = false, route: NativeRoute | null = null): (res: HttpResponse, req: HttpRequest) => void {
  return new ProxyRoute(dialect, deps, native, route).handle
}
