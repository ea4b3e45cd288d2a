// Raw TCP clients for the front-end fault tests: bytes exactly as written, what came back, whether and
// when the server closed, and any socket error the client saw (EPIPE, ECONNRESET).
import { connect, type Socket } from 'node:net'

export interface RawResult {
  readonly bytes: Buffer
  /** Milliseconds from the first write until the server closed, or null when it was still open at the cap. */
  readonly closedMs: number | null
  readonly error: string | null
  /** Body bytes the client managed to write (uploads). */
  readonly sent: number
  /** Milliseconds until the `answers` wanted had all arrived (uploads), or null. */
  readonly answeredMs: number | null
}

export interface Parsed {
  readonly status: number
  readonly headers: Map<string, string>
  readonly body: Buffer
  /** Bytes the response took, so a second one can be parsed after it. */
  readonly length: number
}

/** Parses one HTTP/1.1 response (content-length or chunked) from the start of `buf`, or null if incomplete. */
export function parseResponse (buf: Buffer): Parsed | null {
  const end = buf.indexOf('\r\n\r\n')
  if (end < 0) return null
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n')
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(lines[0] ?? '')?.[1] ?? 0)
  const headers = new Map<string, string>()
  for (const line of lines.slice(1)) {
    const i = line.indexOf(':')
    headers.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim())
  }
  let at = end + 4
  if (headers.get('transfer-encoding')?.toLowerCase() === 'chunked') {
    const parts: Buffer[] = []
    for (;;) {
      const eol = buf.indexOf('\r\n', at)
      if (eol < 0) return null
      const size = parseInt(buf.subarray(at, eol).toString('latin1'), 16)
      if (Number.isNaN(size)) return null
      if (size === 0) {
        if (buf.length < eol + 4) return null
        return { status, headers, body: Buffer.concat(parts), length: eol + 4 }
      }
      if (buf.length < eol + 2 + size + 2) return null
      parts.push(buf.subarray(eol + 2, eol + 2 + size))
      at = eol + 2 + size + 2
    }
  }
  const length = Number(headers.get('content-length') ?? 0)
  if (buf.length < at + length) return null
  return { status, headers, body: buf.subarray(at, at + length), length: at + length }
}

function countResponses (buf: Buffer): number {
  let n = 0
  for (let r = parseResponse(buf); r !== null; r = parseResponse(buf)) {
    n++
    buf = buf.subarray(r.length)
  }
  return n
}

function open (port: number): Socket {
  const sock = connect(port, '127.0.0.1')
  sock.setNoDelay(true)
  return sock
}

/**
 * Writes `data` and reads until the server closes or `capMs` passes (then the client closes). With
 * `untilAnswer`, it stops as soon as one whole response has arrived.
 */
export function rawRequest (port: number, data: string | Buffer, capMs: number, untilAnswer = false): Promise<RawResult> {
  return upload(port, data, 0, capMs, untilAnswer ? { answers: 1 } : {})
}

/**
 * Sends `head`, then `total` body bytes as fast as the socket takes them (in `chunk`-byte writes, each
 * made by `piece`), then `after` (a next request on the same connection); reads until the server closes
 * or `capMs` passes.
 */
export function upload (port: number, head: string | Buffer, total: number, capMs: number, options: {
  readonly chunk?: number
  readonly piece?: (n: number) => Buffer
  readonly after?: string
  /** Stop once this many whole responses have arrived. */
  readonly answers?: number
} = {}): Promise<RawResult> {
  const size = options.chunk ?? 64 * 1024
  const piece = options.piece ?? ((n: number) => Buffer.alloc(n, 0x20))
  return new Promise((resolve) => {
    const sock = open(port)
    const chunks: Buffer[] = []
    let error: string | null = null
    let closedMs: number | null = null
    let sent = 0
    let answeredMs: number | null = null
    let done = false
    const t0 = performance.now()
    const finish = (): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      sock.destroy()
      resolve({ bytes: Buffer.concat(chunks), closedMs, error, sent, answeredMs })
    }
    const timer = setTimeout(finish, capMs)
    sock.on('data', (b: Buffer) => {
      chunks.push(b)
      if (options.answers !== undefined && countResponses(Buffer.concat(chunks)) >= options.answers) {
        answeredMs = performance.now() - t0
        finish()
      }
    })
    sock.on('error', (err: NodeJS.ErrnoException) => { error = err.code ?? err.message })
    sock.on('close', () => {
      if (!done) closedMs = performance.now() - t0
      finish()
    })
    sock.write(head)
    const pump = (): void => {
      while (sent < total && !sock.destroyed) {
        const n = Math.min(size, total - sent)
        sent += n
        if (!sock.write(piece(n))) {
          sock.once('drain', pump)
          return
        }
      }
      if (sent >= total && options.after !== undefined && !sock.destroyed) sock.write(options.after)
    }
    pump()
  })
}
