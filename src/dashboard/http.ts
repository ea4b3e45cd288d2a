// The dashboard port's request plumbing: what a handler needs of the request (copied out of uWS's `req`
// before the handler's first await), the security headers every answer carries, JSON bodies, and the
// one wrapper that turns a handler's result or error into a response.
import { newRequestId } from '../ids.js'
import { bodyTooLarge, TracegateError } from '../errors.js'
import { asTracegateError, closingBody, errorBody, startError, statusLine } from '../server/respond.js'
import { readBody } from '../server/body.js'
import { MALFORMED, requestLength } from '../server/head.js'
import type { HttpRequest, HttpResponse } from '../server/uws.js'

export const SECURITY_HEADERS: ReadonlyArray<readonly [string, string]> = [
  ['content-security-policy', "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"],
  ['x-content-type-options', 'nosniff'],
  ['referrer-policy', 'no-referrer'],
  ['x-frame-options', 'DENY'],
]

/** UI bodies are small JSON objects. */
const BODY_LIMIT = 64 * 1024

export interface Req {
  readonly id: string
  readonly method: string
  readonly path: string
  readonly query: URLSearchParams
  /** Route parameters (`:id`), in pattern order. */
  readonly params: readonly string[]
  readonly headers: ReadonlyMap<string, string>
  /** The TCP peer's address as text: the socket's, whatever the client sent. */
  readonly peer: string
  /**
   * The client a PROXY protocol header named, or ''. This uWS build accepts that header from any peer,
   * so it is only believed when the operator says a proxy sits in front (guards.ts).
   */
  readonly proxiedPeer: string
  body: unknown
}

export interface Reply {
  readonly status: number
  /** JSON-serialised unless it is a Buffer or a string (then sent as is). */
  readonly body?: unknown
  readonly headers?: ReadonlyArray<readonly [string, string]>
  /** Close the connection after the answer. */
  readonly close?: boolean
}

export type Handler = (req: Req) => Promise<Reply> | Reply

const decoder = new TextDecoder()

/** A malformed escape stays as sent: it then matches no id and is answered as unknown. */
function decodeParam (raw: string): string {
  try {
    return decodeURIComponent(raw)
  } catch {
    return raw
  }
}

/** Copies what a handler needs out of uWS's `req`, which is gone after the first await. */
export function readRequest (res: HttpResponse, req: HttpRequest, paramCount = 0): Req {
  const headers = new Map<string, string>()
  req.forEach((k, v) => { headers.set(k, v) })
  const params: string[] = []
  for (let i = 0; i < paramCount; i++) params.push(decodeParam(req.getParameter(i) ?? ''))
  return {
    id: newRequestId(),
    method: req.getMethod().toUpperCase(),
    path: req.getUrl(),
    query: new URLSearchParams(req.getQuery() ?? ''),
    params,
    headers,
    peer: decoder.decode(res.getRemoteAddressAsText()),
    proxiedPeer: decoder.decode(res.getProxiedRemoteAddressAsText()),
    body: undefined,
  }
}

/** Writes the answer, corked (it may come after an await, outside uWS's callback). */
export function send (res: HttpResponse, id: string, reply: Reply): void {
  let body: string | Buffer
  let type: string | null = 'application/json'
  if (reply.body === undefined) {
    body = ''
    type = null
  } else if (typeof reply.body === 'string' || Buffer.isBuffer(reply.body)) {
    body = reply.body
    type = null
  } else {
    body = JSON.stringify(reply.body)
  }
  res.cork(() => {
    res.writeStatus(statusLine(reply.status))
    for (const [k, v] of SECURITY_HEADERS) res.writeHeader(k, v)
    res.writeHeader('x-request-id', id)
    if (type !== null) res.writeHeader('content-type', type)
    const headers = reply.headers ?? []
    // API answers are per user and never cached; static files say otherwise.
    if (!headers.some(([k]) => k === 'cache-control')) res.writeHeader('cache-control', 'no-store')
    for (const [k, v] of headers) res.writeHeader(k, v)
    if (reply.status === 204 || reply.status === 304) res.endWithoutBody()
    else if (reply.close === true) res.end(typeof body === 'string' ? closingBody(body) : body, true)
    else res.end(body)
  })
}

export function errorReply (err: unknown, id: string, headers: ReadonlyArray<readonly [string, string]> = []): Reply {
  const e = asTracegateError(err)
  return { status: e.status, body: errorBody(e, id), headers: [['content-type', 'application/json'], ...headers] }
}

/** An error thrown with extra headers for its answer (retry-after, www-authenticate). */
export class HttpError extends TracegateError {
  readonly headers: ReadonlyArray<readonly [string, string]>
  constructor (code: ConstructorParameters<typeof TracegateError>[0], options: ConstructorParameters<typeof TracegateError>[1] & { headers?: ReadonlyArray<readonly [string, string]> } = {}) {
    super(code, options)
    this.headers = options.headers ?? []
  }
}

export interface RouteOptions {
  /** Number of `:param` segments in the pattern. */
  readonly params?: number
  /** Read a JSON object body first (POST). */
  readonly json?: boolean
  /** Answer 503 while the server closes. */
  readonly isClosing?: () => boolean
  /** Called with faults that became internal_error (never with their request's secrets). */
  readonly onFault?: (err: unknown) => void
}

/** Headers every dashboard answer carries, for an answer begun with startError. */
const ERROR_HEADERS: ReadonlyArray<readonly [string, string]> = [...SECURITY_HEADERS, ['cache-control', 'no-store']]

/**
 * Refuses a head with ambiguous framing (server/head.ts): 400 malformed_request, connection closed.
 * Returns the announced body length otherwise (-1: none or chunked).
 */
export function checkHead (res: HttpResponse, ureq: HttpRequest): number {
  const length = requestLength(ureq)
  if (length === MALFORMED) {
    const id = newRequestId()
    send(res, id, { ...errorReply(new TracegateError('malformed_request'), id), close: true })
  }
  return length
}

/** Wraps a handler for uWS: copies the request, reads the body, sends the reply or the error. */
export function route (handler: Handler, options: RouteOptions = {}) {
  return (res: HttpResponse, ureq: HttpRequest): void => {
    const length = checkHead(res, ureq)
    if (length === MALFORMED) return
    const req = readRequest(res, ureq, options.params ?? 0)
    const state = { aborted: false }
    res.onAborted(() => { state.aborted = true })
    const finish = (reply: Reply): void => { if (!state.aborted) send(res, req.id, reply) }
    const fail = (err: unknown): void => {
      if (!(err instanceof TracegateError)) options.onFault?.(err)
      finish(errorReply(err, req.id, err instanceof HttpError ? err.headers : []))
    }
    const run = (): void => {
      try {
        Promise.resolve(handler(req)).then(finish, fail)
      } catch (err) {
        fail(err)
      }
    }
    if (options.isClosing?.() === true) {
      fail(new TracegateError('service_unavailable'))
      return
    }
    if (options.json !== true) {
      run()
      return
    }
    const type = req.headers.get('content-type') ?? ''
    // A cross-site form cannot send application/json without a CORS preflight, which this port never grants.
    if (!/^application\/json\s*(;|$)/i.test(type)) {
      fail(new TracegateError('unsupported_media_type'))
      return
    }
    // Decided before reading: uWS reads and drops the announced body after the answer (proxy/handler.ts).
    if (length > BODY_LIMIT) {
      fail(bodyTooLarge(BODY_LIMIT, 'the dashboard\'s'))
      return
    }
    readBody(res, length, BODY_LIMIT, (r) => {
      if (state.aborted) return
      if (!r.ok) {
        // Passed the limit while streaming in: answered at once, the rest dropped (server/body.ts).
        startError(res, bodyTooLarge(BODY_LIMIT, 'the dashboard\'s'), req.id, ERROR_HEADERS)
        return
      }
      let body: unknown
      try {
        body = JSON.parse(r.body.toString('utf8'))
      } catch {
        body = undefined
      }
      if (body === null || typeof body !== 'object' || Array.isArray(body)) {
        fail(new TracegateError('invalid_json'))
        return
      }
      req.body = body
      run()
    }, state)
  }
}
