// The one place an error becomes a response, and the small helpers every route writes with.
// Writes made outside a uWS callback must be corked; these helpers always cork.
import { STATUS_CODES } from 'node:http'
import { TracegateError, type ErrorCode } from '../errors.js'
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

/** Turns anything thrown into the error the client sees; unknown faults become internal_error. */
export function asTracegateError (err: unknown): TracegateError {
  return err instanceof TracegateError ? err : new TracegateError('internal_error', { cause: err })
}

export type Headers = ReadonlyArray<readonly [string, string]>

export function sendJson (res: HttpResponse, status: number, body: string, requestId: string, closeConnection = false, headers: Headers = []): void {
  res.cork(() => {
    res.writeStatus(statusLine(status))
    for (const [k, v] of headers) res.writeHeader(k, v)
    res.writeHeader('content-type', 'application/json')
      .writeHeader('x-request-id', requestId)
      .end(body, closeConnection)
  })
}

export function sendError (res: HttpResponse, err: TracegateError | ErrorCode, requestId: string, closeConnection = false, headers: Headers = []): void {
  const e = typeof err === 'string' ? new TracegateError(err) : err
  sendJson(res, e.status, errorBody(e, requestId), requestId, closeConnection, headers)
}

/**
 * Begins an error answer without ending it: status, headers and the error body as one chunk, so a
 * client still sending a body that will be dropped (body.ts) can read the answer at once. The reader
 * that drops the body ends it.
 */
export function startError (res: HttpResponse, err: TracegateError | ErrorCode, requestId: string, headers: Headers = []): void {
  const e = typeof err === 'string' ? new TracegateError(err) : err
  const body = errorBody(e, requestId)
  res.cork(() => {
    res.writeStatus(statusLine(e.status))
    for (const [k, v] of headers) res.writeHeader(k, v)
    res.writeHeader('content-type', 'application/json').writeHeader('x-request-id', requestId)
    res.write(body)
  })
}
