// The proxy pipeline for one dialect's route, in the check order of DESIGN §2, one named step each.
import { newRequestId } from '../ids.js'
import type { Agent } from 'undici'
import type { KeyCache } from '../auth/cache.js'
import { authenticate, type KeyVerdict } from '../auth/authenticate.js'
import type { Config } from '../config.js'
import { ERRORS, TracegateError } from '../errors.js'
import type { Dialect } from '../providers/index.js'
import { readBody } from '../server/body.js'
import { MALFORMED, requestLength } from '../server/head.js'
import { sendError, startError } from '../server/respond.js'
import type { HttpRequest, HttpResponse } from '../server/uws.js'
import { Passthrough } from '../upstream/passthrough.js'
import { Exchange, type FinishListener } from './exchange.js'
import type { DetectionOutcome, DetectionPool } from '../detection/pool.js'
import type { Verdict } from '../detection/types.js'
import { ResponseCapture } from './capture.js'
import { cutMembers, Kind, stringValue } from './scan.js'
import { checkSchema, HEADER_VALUE, readServiceFields, type CheckedRequest, type ServiceFields } from './validate.js'

export interface ProxyDeps {
  readonly config: Config
  readonly keys: KeyCache
  readonly upstream: Agent
  /** Called once per exchange when it begins, and once when it ends whatever the outcome. */
  readonly onStart: () => void
  readonly onFinish: FinishListener
  /** Null when detection is off. */
  readonly detection: DetectionPool | null
  /** Bytes of a response the trace keeps; null: tracing is off and nothing is captured. */
  readonly captureLimit: number | null
  /** True once shutdown began: new requests get 503. */
  isClosing (): boolean
}

/** The model named in the body, for traces of calls rejected before the schema check passed. */
function modelOf (body: Buffer, sf: ServiceFields, dialect: Dialect): string | null {
  let model: string | null = null
  for (const m of sf.members) if (m.name === 'model' && m.kind === Kind.String) model = stringValue(body, m)
  return model !== null && (dialect.validModel === undefined || dialect.validModel(model)) ? model : null
}

/** What a 403 tells the client: the categories and scores that blocked it, never the matched text. */
function blockedSummary (v: Verdict): Record<string, unknown> {
  return {
    score: Math.round(v.score * 1000) / 1000,
    categories: v.categories,
    findings: v.issues
      .filter((i) => i.category === 'prompt_injection' || i.category === 'jailbreak')
      .map((i) => ({ category: i.category, kind: i.kind, severity: i.severity, message: i.message })),
  }
}

/**
 * 413 decided from content-length, before reading: the connection stays open and uWS reads and drops
 * the announced body (until its idle timer closes the connection, 10-14 s after the answer), so a
 * client still sending reads the answer instead of a reset.
 */
function tooLarge (x: Exchange): void {
  refused(x, 'body_too_large')
  sendError(x.res, 'body_too_large', x.requestId)
  x.finish('rejected')
}

/** 413 for a body that passed the limit while streaming in: answered at once, the rest dropped (body.ts). */
function tooLargeMidBody (x: Exchange): void {
  refused(x, 'body_too_large')
  startError(x.res, 'body_too_large', x.requestId)
  x.finish('rejected')
}

/** A head whose body length is ambiguous (head.ts): 400 and the connection closed, nothing read. */
function malformed (x: Exchange): void {
  refused(x, 'malformed_request')
  sendError(x.res, 'malformed_request', x.requestId, true)
  x.finish('rejected')
}

function refused (x: Exchange, code: 'body_too_large' | 'malformed_request'): void {
  x.status = ERRORS[code].status
  x.errorCode = code
}

/** What the checks learnt that the upstream request needs. */
interface Outbound {
  readonly path: string
  readonly headers: Record<string, string>
  /** The body with the service fields cut out: what the provider, detection and the trace see. */
  readonly body: Buffer
}

/**
 * One dialect's route, as the steps of DESIGN §2: the head and the body (`handle`), the service fields
 * and the key (`#received`), the plan, the schema and the provider key (`#authorised`), detection
 * (`#detect`), and the upstream call (`#dispatch`). The raw body, which holds keys, is passed from step
 * to step and never kept on the exchange; the exchange only ever holds the forwarded body.
 */
class ProxyRoute {
  readonly #dialect: Dialect
  readonly #deps: ProxyDeps
  readonly #limit: number
  readonly #serverKey: string | null
  readonly #origin: string
  readonly #basePath: string

  constructor (dialect: Dialect, deps: ProxyDeps) {
    this.#dialect = dialect
    this.#deps = deps
    this.#limit = deps.config.maxBodyBytes
    this.#serverKey = deps.config.providers[dialect.name].apiKey
    const baseUrl = new URL(deps.config.providers[dialect.name].baseUrl)
    this.#origin = baseUrl.origin
    this.#basePath = baseUrl.pathname === '/' ? '' : baseUrl.pathname
  }

  /** Steps 1 and 2: the head's framing and size, then the body. */
  readonly handle = (res: HttpResponse, req: HttpRequest): void => {
    const dialect = this.#dialect
    const x = new Exchange(res, dialect, dialect.route, newRequestId(), this.#deps.onFinish)
    this.#deps.onStart()
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
    // Over the limit, decided before reading when content-length says so.
    if (contentLength > this.#limit) {
      tooLarge(x)
      return
    }
    readBody(res, contentLength, this.#limit, (r) => {
      if (x.aborted) return
      if (!r.ok) {
        tooLargeMidBody(x)
        return
      }
      try {
        this.#received(x, r.body)
      } catch (err) {
        x.fail(err)
      }
    }, x)
  }

  /** Steps 2 to 4: valid JSON, the service fields, the tracegate key (synchronous when it is cached). */
  #received (x: Exchange, raw: Buffer): void {
    const sf = readServiceFields(raw, this.#dialect)
    const verdict = authenticate(this.#deps.keys, sf.apiKey, 'proxy')
    if (verdict instanceof Promise) {
      verdict.then((v) => { this.#authorised(x, raw, sf, v) }).catch((err: unknown) => { x.fail(err) })
    } else {
      this.#authorised(x, raw, sf, verdict)
    }
  }

  /** Steps 5 to 7: the plan, the schema, the provider key and headers; then detection or the call. */
  #authorised (x: Exchange, raw: Buffer, sf: ServiceFields, verdict: KeyVerdict): void {
    if (x.aborted) return
    // A refused key is counted, not traced: the exchange has no account.
    if (verdict instanceof TracegateError) {
      x.fail(verdict)
      return
    }
    // Authenticated: the exchange is traced whatever follows, with the body that has no keys in it.
    const dialect = this.#dialect
    const body = cutMembers(raw, sf.members, sf.cut)
    x.forwarded = body
    x.accountId = verdict.accountId
    x.keyId = verdict.keyId
    let out: Outbound
    let checked: CheckedRequest
    try {
      if (verdict.plan !== 'pro' && verdict.plan !== 'enterprise') throw new TracegateError('plan_required')
      checked = checkSchema(raw, sf.members, dialect)
      // Known from here on, also for the trace of a call refused below (a confidential one stays so).
      x.model = checked.model
      x.streaming = checked.stream
      x.confidential = checked.isConfidential
      const providerKey = checked.providerKey ?? (verdict.serverSideKeys ? this.#serverKey : null)
      if (providerKey === null) throw new TracegateError('missing_provider_key', { param: dialect.keyField })
      out = { path: dialect.target(checked).path, headers: this.#headers(x, providerKey), body }
    } catch (err) {
      // The trace of a call refused before the schema passed still names the model, when it is readable.
      x.model ??= modelOf(raw, sf, dialect)
      x.fail(err)
      return
    }
    if (this.#deps.captureLimit !== null) x.capture = new ResponseCapture(this.#deps.captureLimit, checked.stream)
    if (this.#deps.detection === null || checked.isConfidential) this.#dispatch(x, out)
    else this.#detect(x, this.#deps.detection, out)
  }

  /** The upstream headers: the client's passed-on ones (printable ASCII only), defaults, the provider key. */
  #headers (x: Exchange, providerKey: string): Record<string, string> {
    const dialect = this.#dialect
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    for (const [name, value] of x.forwardHeaders) {
      if (!HEADER_VALUE.test(value)) throw new TracegateError('invalid_field', { param: name, message: `The ${name} header must be printable ASCII.` })
      headers[name] = value
    }
    for (const name in dialect.defaultHeaders) headers[name] ??= dialect.defaultHeaders[name]!
    Object.assign(headers, dialect.authHeaders(providerKey))
    return headers
  }

  /** Step 8: detection on every non-confidential request, before anything is sent. */
  #detect (x: Exchange, detection: DetectionPool, out: Outbound): void {
    detection.check(this.#dialect.name, out.body)
      .then((outcome) => { this.#judged(x, outcome, out) })
      .catch((err: unknown) => { x.fail(err) })
  }

  #judged (x: Exchange, outcome: DetectionOutcome, out: Outbound): void {
    if (x.finished || x.aborted) return
    if (outcome.ok) {
      const v = outcome.verdict
      x.verdict = v
      if (v.blocked) {
        x.fail(new TracegateError('prompt_injection_detected', { extra: { detection: blockedSummary(v) } }), 'blocked')
        return
      }
    } else {
      x.detectionFailure = outcome.failure
      if (this.#deps.config.detection.failureMode === 'closed') {
        x.fail(new TracegateError('detection_unavailable', { extra: { detection: { failure: outcome.failure } } }))
        return
      }
    }
    this.#dispatch(x, out)
  }

  /** Steps 9 and 10: the provider's answer streams back through Passthrough. */
  #dispatch (x: Exchange, out: Outbound): void {
    x.upstreamStartAt = performance.now()
    this.#deps.upstream.dispatch({
      origin: this.#origin,
      path: this.#basePath + out.path,
      method: 'POST',
      headers: out.headers,
      body: out.body,
    }, new Passthrough(x))
  }
}

export function proxyRoute (dialect: Dialect, deps: ProxyDeps): (res: HttpResponse, req: HttpRequest) => void {
  return new ProxyRoute(dialect, deps).handle
}
