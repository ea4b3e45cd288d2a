// The request head's framing, checked before a body is read. RFC 9112 §6.3: a request whose body length
// cannot be determined reliably is answered 400 and its connection closed, because a proxy in front may
// have framed it differently (request smuggling). uWebSockets.js 20.30 closes by itself on most such
// requests, but it frames by the first of two content-length headers and takes transfer codings it does
// not decode: those reach the routes, which refuse them here.
import { newRequestId } from '../ids.js'
import { sendError } from './respond.js'
import type { HttpRequest, HttpResponse } from './uws.js'

/** `requestLength` of a head that must be refused with malformed_request. */
export const MALFORMED = -2

const DIGITS = /^[0-9]+$/

/**
 * The body length the head announces: its content-length, -1 when the body is chunked or absent, or
 * MALFORMED for more than one content-length (even with equal values, as nginx does), one that is not
 * a plain decimal number, any transfer-encoding but a single `chunked` (or one beside content-length),
 * or more than one host. `onHeader` sees every header on the same pass.
 */
export function requestLength (req: HttpRequest, onHeader?: (name: string, value: string) => void): number {
  let lengths = 0
  let length = -1
  let codings = 0
  let chunked = true
  let hosts = 0
  req.forEach((name, value) => {
    if (name === 'content-length') {
      lengths++
      length = DIGITS.test(value) ? Number(value) : MALFORMED
    } else if (name === 'transfer-encoding') {
      codings++
      chunked = value.toLowerCase() === 'chunked'
    } else if (name === 'host') {
      hosts++
    }
    onHeader?.(name, value)
  })
  if (lengths > 1 || codings > 1 || hosts > 1 || (codings === 1 && (!chunked || lengths > 0))) return MALFORMED
  return length
}

/** A route that refuses a malformed head (400 malformed_request, connection closed) before it runs. */
export function framed (handler: (res: HttpResponse, req: HttpRequest) => void): (res: HttpResponse, req: HttpRequest) => void {
  return (res, req) => {
    if (requestLength(req) === MALFORMED) {
      sendError(res, 'malformed_request', newRequestId(), true)
      return
    }
    handler(res, req)
  }
}
