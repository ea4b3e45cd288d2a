// Reading a request body with one copy: uWS lends each chunk only for the length of the callback, so
// every chunk is copied once, into a buffer sized from content-length when the client sent one, or
// into a buffer that doubles when it did not. The limit is enforced both ways.
import type { HttpResponse } from './uws.js'

export type BodyResult = { ok: true; body: Buffer } | { ok: false; tooLarge: true }

/**
 * A body that passes the limit while it streams in is dropped, not cut: closing a socket that still
 * has unread bytes makes the kernel send a reset, and a client still sending then sees EPIPE or
 * ECONNRESET instead of the answer. So, as nginx's lingering close does, the rest is read and dropped:
 * the answer ends when the body ends or nothing came for DRAIN_IDLE_MS, and the connection is cut when
 * DRAIN_BYTES more came or DRAIN_MS passed with the client still sending.
 */
export const DRAIN_BYTES = 64 * 1024 * 1024
export const DRAIN_MS = 5_000
export const DRAIN_IDLE_MS = 1_000

/** What the reader needs to drop the rest of a body after the answer began. */
export interface Lingering {
  /** True once the client went away (the route's onAborted): `res` is not touched after that. */
  readonly aborted: boolean
}

/**
 * `contentLength` is the parsed header, or -1 when absent. Calls `done` once, unless the client goes
 * away first (the route's onAborted handles that). A body over the limit is reported as soon as it
 * is known. Without `lingering`, whatever the client still sends is ignored and the caller closes the
 * connection with its answer. With it, `done` must begin the answer without ending it (startError);
 * the reader drops the rest of the body and then ends the answer (Drain).
 */
export function readBody (res: HttpResponse, contentLength: number, limit: number, done: (r: BodyResult) => void, lingering?: Lingering): void {
  let buf = Buffer.allocUnsafe(contentLength >= 0 ? contentLength : 16 * 1024)
  let length = 0
  let finished = false
  let drain: Drain | null = null
  res.onData((chunk, isLast) => {
    if (drain !== null) {
      drain.chunk(chunk.byteLength, isLast)
      return
    }
    if (finished) return
    const n = chunk.byteLength
    if (length + n > limit) {
      finished = true
      done({ ok: false, tooLarge: true })
      if (lingering !== undefined && !lingering.aborted) {
        drain = new Drain(res, lingering)
        if (isLast) drain.chunk(0, true)
      }
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

/** Drops the rest of a refused body, then ends the answer that was begun. */
class Drain {
  readonly #res: HttpResponse
  readonly #lingering: Lingering
  readonly #startedAt = performance.now()
  #lastAt = this.#startedAt
  #dropped = 0
  #ended = false
  #timer: NodeJS.Timeout

  constructor (res: HttpResponse, lingering: Lingering) {
    this.#res = res
    this.#lingering = lingering
    this.#timer = setTimeout(() => { this.#check() }, DRAIN_IDLE_MS)
  }

  chunk (n: number, isLast: boolean): void {
    if (this.#ended) return
    this.#dropped += n
    this.#lastAt = performance.now()
    if (isLast) this.#end()
    else if (this.#dropped > DRAIN_BYTES) this.#cut()
  }

  #check (): void {
    if (this.#ended) return
    const now = performance.now()
    const idleLeft = DRAIN_IDLE_MS - (now - this.#lastAt)
    const totalLeft = DRAIN_MS - (now - this.#startedAt)
    if (idleLeft <= 0) this.#end()
    else if (totalLeft <= 0) this.#cut()
    else this.#timer = setTimeout(() => { this.#check() }, Math.min(idleLeft, totalLeft))
  }

  /**
   * The body ended, or the client stopped sending: the answer ends and the connection stays open (uWS
   * 20.30 writes a stray "Connection: close" header line into a chunked answer ended with close, so it
   * is never asked to). uWS's idle timer closes a connection left mid-body.
   */
  #end (): void {
    this.#stop()
    if (!this.#lingering.aborted) this.#res.cork(() => { this.#res.end() })
  }

  /** Past DRAIN_BYTES or DRAIN_MS with the client still sending: the connection is cut. */
  #cut (): void {
    this.#stop()
    if (!this.#lingering.aborted) this.#res.close()
  }

  #stop (): void {
    this.#ended = true
    clearTimeout(this.#timer)
  }
}
