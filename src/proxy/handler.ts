// The proxy pipeline for one dialect's route, in the check order of DESIGN §2.
import { newRequestId } from '../ids.js'
import type { Agent } from 'undici'
import type { KeyCache } from '../auth/cache.js'
import { hashKey, KEY_PATTERN } from '../auth/keys.js'
import type { Config } from '../config.js'
import { ERRORS, TracegateError } from '../errors.js'
import type { Dialect } from '../providers/index.js'
import { readBody } from '../server/body.js'
import { MALFORMED, requestLength } from '../server/head.js'
import { sendError, startError } from '../server/respond.js'
import type { HttpRequest, HttpResponse } from '../server/uws.js'
import type { KeyInfo } from '../store/protocol.js'
import { Passthrough } from '../upstream/passthrough.js'
import { Exchange, type FinishListener } from './exchange.js'
import type { DetectionOutcome, DetectionPool } from '../detection/pool.js'
import type { Verdict } from '../detection/types.js'
import { ResponseCapture } from './capture.js'
import { cutMembers, Kind, stringValue } from './scan.js'
import { checkSchema, HEADER_VALUE, readServiceFields, type ServiceFields } from './validate.js'

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

/** Step 4: the key itself (401s; such requests are counted, not traced). */
function keyError (info: KeyInfo | null, now: number): TracegateError | null {
  if (info === null) return new TracegateError('invalid_api_key')
  if (info.revoked) return new TracegateError('revoked_api_key')
  if (info.expiresAt !== null && info.expiresAt <= now) return new TracegateError('expired_api_key')
  if (info.scope !== 'proxy') return new TracegateError('wrong_key_scope')
  return null
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

export function proxyRoute (dialect: Dialect, deps: ProxyDeps): (res: HttpResponse, req: HttpRequest) => void {
  const { config } = deps
  const limit = config.maxBodyBytes
  const serverKey = config.providers[dialect.name].apiKey
  const baseUrl = new URL(config.providers[dialect.name].baseUrl)
  const origin = baseUrl.origin
  const basePath = baseUrl.pathname === '/' ? '' : baseUrl.pathname

  function forward (x: Exchange, sf: ServiceFields, info: KeyInfo | null): void {
    if (x.aborted) return
    const denied = keyError(info, Date.now())
    if (denied !== null || info === null) {
      x.fail(denied)
      return
    }
    // Authenticated: the exchange is traced whatever follows, so from here on its body never holds keys.
    const body = x.body!
    const forwarded = cutMembers(body, sf.members, sf.cut)
    x.body = forwarded
    x.accountId = info.accountId
    x.keyId = info.keyId
    // Step 5: the plan.
    if (info.plan !== 'pro' && info.plan !== 'enterprise') {
      x.model = modelOf(body, sf, dialect)
      x.fail(new TracegateError('plan_required'))
      return
    }
    let checked: ReturnType<typeof checkSchema>
    try {
      checked = checkSchema(body, sf.members, dialect)
    } catch (err) {
      // The trace of a call the schema check refused still names the model, when it is readable.
      x.model = modelOf(body, sf, dialect)
      throw err
    }
    x.model = checked.model
    x.streaming = checked.stream
    x.confidential = checked.isConfidential
    const providerKey = checked.providerKey ?? (info.serverSideKeys ? serverKey : null)
    if (providerKey === null) throw new TracegateError('missing_provider_key', { param: dialect.keyField })
    if (deps.captureLimit !== null) x.capture = new ResponseCapture(deps.captureLimit, checked.stream)
    const target = dialect.target(checked)
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    for (const [name, value] of x.forwardHeaders) {
      if (!HEADER_VALUE.test(value)) throw new TracegateError('invalid_field', { param: name, message: `The ${name} header must be printable ASCII.` })
      headers[name] = value
    }
    for (const name in dialect.defaultHeaders) headers[name] ??= dialect.defaultHeaders[name]!
    Object.assign(headers, dialect.authHeaders(providerKey))
    // Step 8: detection on every non-confidential request, before anything is sent.
    const detection = deps.detection
    if (detection === null || checked.isConfidential) {
      dispatch(x, target.path, headers)
      return
    }
    detection.check(dialect.name, forwarded)
      .then((outcome) => { judged(x, outcome, target.path, headers) })
      .catch((err: unknown) => { x.fail(err) })
  }

  function judged (x: Exchange, outcome: DetectionOutcome, path: string, headers: Record<string, string>): void {
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
      if (deps.config.detection.failureMode === 'closed') {
        x.fail(new TracegateError('detection_unavailable', { extra: { detection: { failure: outcome.failure } } }))
        return
      }
    }
    dispatch(x, path, headers)
  }

  function dispatch (x: Exchange, path: string, headers: Record<string, string>): void {
    x.upstreamStartAt = performance.now()
    deps.upstream.dispatch({
      origin,
      path: basePath + path,
      method: 'POST',
      headers,
      body: x.body!,
    }, new Passthrough(x))
  }

  function handleBody (x: Exchange): void {
    let sf: ServiceFields
    try {
      sf = readServiceFields(x.body!, dialect)
    } catch (err) {
      x.fail(err)
      return
    }
    if (!KEY_PATTERN.test(sf.apiKey)) {
      x.fail(new TracegateError('invalid_api_key'))
      return
    }
    const hash = hashKey(sf.apiKey)
    const cached = deps.keys.peek(hash)
    if (cached !== undefined) {
      try { forward(x, sf, cached) } catch (err) { x.fail(err) }
      return
    }
    deps.keys.fetch(hash)
      .then((info) => { forward(x, sf, info) })
      .catch((err: unknown) => { x.fail(err) })
  }

  return (res, req) => {
    const x = new Exchange(res, dialect, newRequestId(), deps.onFinish)
    deps.onStart()
    res.onAborted(() => { x.clientAborted() })
    if (deps.isClosing()) {
      x.fail(new TracegateError('service_unavailable'))
      return
    }
    const contentLength = requestLength(req)
    // getHeader reads a value byte for byte (latin1), where forEach's UTF-8 decoding silently drops
    // bytes that are not UTF-8: a non-ASCII value must be seen as such to be refused (forward()).
    for (const name of dialect.forwardHeaders) {
      const value = req.getHeader(name)
      if (value !== '') x.forwardHeaders.push([name, value])
    }
    if (contentLength === MALFORMED) {
      malformed(x)
      return
    }
    // Over the limit, decided before reading when content-length says so.
    if (contentLength > limit) {
      tooLarge(x)
      return
    }
    readBody(res, contentLength, limit, (r) => {
      if (x.aborted) return
      if (!r.ok) {
        tooLargeMidBody(x)
        return
      }
      x.body = r.body
      try {
        handleBody(x)
      } catch (err) {
        x.fail(err)
      }
    }, x)
  }
}
