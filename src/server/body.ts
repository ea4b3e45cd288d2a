// Reading a request body with one copy: uWS lends each chunk only for the length of the callback, so
// every chunk is copied once, into a buffer sized from content-length when the client sent one, or
// into a buffer that doubles when it did not. The limit is enforced both ways.
import type { HttpResponse } from './uws.js'

export type BodyResult = { ok: true; body: Buffer } | { ok: false; tooLarge: true }

/**
 * `contentLength` is the parsed header, or -1 when absent. Calls `done` once, unless the client goes
 * away first (the route's onAborted handles that). A body over the limit is reported as soon as it
 * is known, and whatever the client still sends is discarded.
 */
export function readBody (res: HttpResponse, contentLength: number, limit: number, done: (r: BodyResult) => void): void {
  let buf = Buffer.allocUnsafe(contentLength >= 0 ? contentLength : 16 * 1024)
  let length = 0
  let finished = false
  res.onData((chunk, isLast) => {
    if (finished) return
    const n = chunk.byteLength
    if (length + n > limit) {
      finished = true
      done({ ok: false, tooLarge: true })
      return
    }
    if (length + n > buf.length) {
      const grown = Buffer.allocUnsafe(Math.min(limit, Math.max(buf.length * 2, length + n)))
      buf.copy(grown, 0, 0, length)
      buf = grown
    }
    Buffer.from(chunk).copy(buf, length)
    length += n
    if (isLast) {
      finished = true
      done({ ok: true, body: length === buf.length ? buf : buf.subarray(0, length) })
    }
  })
}
