// The one place an error becomes a response, and the small helpers every route writes with.
// Writes made outside a uWS callback must be corked; these helpers always cork.
import { STATUS_CODES } from 'node:http'
import { TracegateError, type ErrorCode } from '../errors.js'
import type { ClientAnswer, Dialect } from '../providers/index.js'
import type { HttpResponse } from './uws.js'

const STATUS_LINES = new Map<number, string>()

export function statusLine (status: number): string {
  let line = STATUS_LINES.get(status)
  if (line === undefined) {
    line = `${status} ${STATUS_CODES[status] ?? 'Unknown'}`
    STATUS_LINES.set(status, line)
  }
  return line
}

export function errorBody (err: TracegateError, requestId: string): string {
  return JSON.stringify({
    error: { type: err.type, code: err.code, message: err.message, param: err.param, request_id: requestId, ...err.extra },
  })
}

/** How a route writes its errors: tracegate's own body, or a provider's shape on its native routes. */
export type ErrorShape = (e: TracegateError, requestId: string) => ClientAnswer

export const TRACEGATE_SHAPE: ErrorShape = (e, requestId) => ({ status: e.status, body: errorBody(e, requestId) })

const NATIVE_SHAPES = new WeakMap<Dialect, ErrorShape>()

/** The provider's own error shape and statuses, still carrying tracegate's code and request id. */
export function nativeShape (dialect: Dialect): ErrorShape {
  let shape = NATIVE_SHAPES.get(dialect)
  if (shape === undefined) {
    shape = (e, requestId) => dialect.native.clientError({ status: e.status, type: e.type, code: e.code, message: e.message, param: e.param, requestId, extra: e.extra })
    NATIVE_SHAPES.set(dialect, shape)
  }
  return shape
}

/** Turns anything thrown into the error the client sees; unknown faults become internal_error. */
export function asTracegateError (err: unknown): TracegateError {
  return err instanceof TracegateError ? err : new TracegateError('internal_error', { cause: err })
}

export type Headers = ReadonlyArray<readonly [string, string]>

/** uWS's cork buffer (LoopData::CORK_BUFFER_SIZE in uWebSockets 20.30). */
const CORK_BUFFER_BYTES = 16 * 1024

/**
 * The body of an answer after which the connection closes, padded past uWS's cork buffer. An answer
 * given inside uWS's request callback goes into that buffer, and uWS parses and serves the next request
 * of the same read before the buffer is sent and the connection closed: a request pipelined (or
 * smuggled) behind a refused one would be answered. A larger body is written to the socket at once,
 * so end() closes the connection there and then, and uWS stops parsing it. The padding is trailing
 * whitespace, which JSON allows.
 */
export function closingBody (body: string): string {
  return body.padEnd(CORK_BUFFER_BYTES + 1)
}

/** With `closeConnection`, nothing else on the connection is answered (closingBody). */
export function sendJson (res: HttpResponse, status: number, body: string, requestId: string, closeConnection = false, headers: Headers = []): void {
  res.cork(() => {
    res.writeStatus(statusLine(status))
    for (const [k, v] of headers) res.writeHeader(k, v)
    res.writeHeader('content-type', 'application/json')
      .writeHeader('x-request-id', requestId)
      .writeHeader('request-id', requestId)
      .end(closeConnection ? closingBody(body) : body, closeConnection)
  })
}

/** Answers with an error in the route's shape; returns the status sent. */
export function sendError (res: HttpResponse, err: TracegateError | ErrorCode, requestId: string, closeConnection = false, headers: Headers = [], shape: ErrorShape = TRACEGATE_SHAPE): number {
  const e = typeof err === 'string' ? new TracegateError(err) : err
  const a = shape(e, requestId)
  sendJson(res, a.status, a.body, requestId, closeConnection, headers)
  return a.status
}

/**
 * Begins an error answer without ending it: status, headers and the error body as one chunk, so a
 * client still sending a body that will be dropped (body.ts) can read the answer at once. The reader
 * that drops the body ends it.
 */
export function startError (res: HttpResponse, err: TracegateError | ErrorCode, requestId: string, headers: Headers = [], shape: ErrorShape = TRACEGATE_SHAPE): number {
  const e = typeof err === 'string' ? new TracegateError(err) : err
  const { status, body } = shape(e, requestId)
  res.cork(() => {
    res.writeStatus(statusLine(status))
    for (const [k, v] of headers) res.writeHeader(k, v)
    res.writeHeader('content-type', 'application/json').writeHeader('x-request-id', requestId).writeHeader('request-id', requestId)
    res.write(body)
  })
  return status
}
