// Raw HTTP/1.1 clients, for tests where exact bytes and connection behaviour matter. RawCall: one POST
// over its own socket with its own framing decoder, so a missing terminating chunk or a cut connection is
// seen as it is, and the caller can pause and resume it. rawRequest and upload: any bytes exactly as
// written (malformed requests, pipelined ones, large uploads), what came back, whether and when the
// server closed, and the socket error the client saw (EPIPE, ECONNRESET); parseResponse reads the answers.
// And a TCP relay a test can take down to make a provider unreachable.
import { connect, createServer, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'

export interface ResponseHead {
  readonly status: number
  /** Lower-case names; repeated headers keep every value. */
  readonly headers: Record<string, string[]>
  /** performance.now() when the header block was complete. */
  readonly at: number
}

export interface RawOutcome {
  /** The body ended as its framing says (terminating zero-length chunk, or content-length reached). */
  readonly complete: boolean
  /** The socket error, if the connection died with one (ECONNRESET…). */
  readonly error: Error | null
  /** The response head, or null when the connection closed before one arrived. */
  readonly head: ResponseHead | null
  /** Decoded body bytes received. */
  readonly bodyBytes: number
}

type Framing = { kind: 'chunked' } | { kind: 'length'; remaining: number } | { kind: 'close' }

const CRLF = Buffer.from('\r\n')
const HEAD_END = Buffer.from('\r\n\r\n')

/** A loopback connection with Nagle off, so each write leaves as written. */
function open (port: number): Socket {
  const sock = connect(port, '127.0.0.1')
  sock.setNoDelay(true)
  return sock
}

/** A response head's status and headers (lower-case names; repeated headers keep every value). */
function readHead (text: string): { status: number; headers: Record<string, string[]> } {
  const lines = text.split('\r\n')
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1] ?? 0)
  const headers: Record<string, string[]> = {}
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':')
    if (colon <= 0) continue
    const name = line.slice(0, colon).trim().toLowerCase()
    ;(headers[name] ??= []).push(line.slice(colon + 1).trim())
  }
  return { status, headers }
}

/**
 * One POST over its own connection. The caller registers `onBody` for decoded body bytes (each call
 * gets the bytes as they arrived, with their arrival time) and may pause and resume `socket`.
 */
export class RawCall {
  readonly socket: Socket
  readonly head: Promise<ResponseHead>
  readonly done: Promise<RawOutcome>
  onBody: (bytes: Buffer, at: number) => void = () => {}
  #head: ResponseHead | null = null
  #headParts: Buffer[] = []
  #framing: Framing = { kind: 'close' }
  // Chunked decoder state: 'size' reads a size line, 'data' copies `left` bytes, 'crlf' skips the CRLF
  // after a chunk, 'trailer' reads trailer lines up to the empty one, 'end' is a finished message.
  #state: 'size' | 'data' | 'crlf' | 'trailer' | 'end' = 'size'
  #left = 0
  #line: Buffer = Buffer.alloc(0)
  #complete = false
  #error: Error | null = null
  #bodyBytes = 0
  #resolveHead!: (h: ResponseHead) => void
  #rejectHead!: (e: Error) => void

  constructor (port: number, path: string, body: string | Buffer, headers: Record<string, string> = {}) {
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body
    this.head = new Promise((resolve, reject) => { this.#resolveHead = resolve; this.#rejectHead = reject })
    // A rejected head is also reported through `done`; keep it from counting as unhandled.
    this.head.catch(() => {})
    this.socket = open(port)
    let text = `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: ${bytes.length}\r\n`
    for (const [name, value] of Object.entries(headers)) text += `${name}: ${value}\r\n`
    this.socket.write(text + '\r\n')
    this.socket.write(bytes)
    this.socket.on('data', (data: Buffer) => { this.#receive(data) })
    this.done = new Promise((resolve) => {
      this.socket.on('error', (err) => { this.#error ??= err })
      this.socket.on('close', () => {
        if (this.#head === null) this.#rejectHead(this.#error ?? new Error('connection closed before a response head'))
        if (this.#framing.kind === 'close' && this.#head !== null && this.#error === null) this.#complete = true
        resolve({ complete: this.#complete, error: this.#error, head: this.#head, bodyBytes: this.#bodyBytes })
      })
    })
  }

  /** Ends the exchange from the client side (a client that goes away). */
  destroy (): void {
    this.socket.destroy()
  }

  #receive (data: Buffer): void {
    const at = performance.now()
    if (this.#head === null) {
      this.#headParts.push(data)
      const all = Buffer.concat(this.#headParts)
      const end = all.indexOf(HEAD_END)
      if (end === -1) return
      this.#headParts = []
      this.#parseHead(all.subarray(0, end).toString('latin1'), at)
      data = all.subarray(end + 4)
      if (data.length === 0) return
    }
    this.#body(data, at)
  }

  #parseHead (text: string, at: number): void {
    const { status, headers } = readHead(text)
    const te = headers['transfer-encoding']?.join(',').toLowerCase() ?? ''
    const cl = headers['content-length']?.[0]
    if (te.includes('chunked')) this.#framing = { kind: 'chunked' }
    else if (cl !== undefined) this.#framing = { kind: 'length', remaining: Number(cl) }
    else this.#framing = { kind: 'close' }
    this.#head = { status, headers, at }
    this.#resolveHead(this.#head)
    if (this.#framing.kind === 'length' && this.#framing.remaining === 0) this.#finished()
  }

  /** The message is complete: the client closes its side, which resolves `done`. */
  #finished (): void {
    this.#complete = true
    this.socket.destroy()
  }

  #deliver (bytes: Buffer, at: number): void {
    if (bytes.length === 0) return
    this.#bodyBytes += bytes.length
    this.onBody(bytes, at)
  }

  #body (data: Buffer, at: number): void {
    const f = this.#framing
    if (f.kind === 'close') { this.#deliver(data, at); return }
    if (f.kind === 'length') {
      const take = data.subarray(0, f.remaining)
      f.remaining -= take.length
      this.#deliver(take, at)
      if (f.remaining === 0) this.#finished()
      return
    }
    let i = 0
    while (i < data.length && this.#state !== 'end') {
      if (this.#state === 'data') {
        const take = data.subarray(i, i + this.#left)
        this.#left -= take.length
        i += take.length
        this.#deliver(take, at)
        if (this.#left === 0) this.#state = 'crlf'
        continue
      }
      // size, crlf and trailer read short lines; only an unfinished line is kept between reads.
      if (this.#line.length > 0) {
        data = Buffer.concat([this.#line, data.subarray(i)])
        i = 0
        this.#line = Buffer.alloc(0)
      }
      const nl = data.indexOf(CRLF, i)
      if (nl === -1) {
        this.#line = Buffer.from(data.subarray(i))
        if (this.#line.length > 4096) throw new Error('chunked framing: line too long')
        return
      }
      const line = data.subarray(i, nl)
      i = nl + 2
      if (this.#state === 'crlf') {
        if (line.length !== 0) throw new Error('chunked framing: missing CRLF after chunk data')
        this.#state = 'size'
      } else if (this.#state === 'size') {
        const size = parseInt(line.toString('latin1').split(';')[0] ?? '', 16)
        if (!Number.isFinite(size)) throw new Error(`chunked framing: bad size line ${JSON.stringify(line.toString('latin1'))}`)
        if (size === 0) this.#state = 'trailer'
        else { this.#state = 'data'; this.#left = size }
      } else if (this.#state === 'trailer') {
        if (line.length === 0) { this.#state = 'end'; this.#finished() }
      }
    }
  }
}

/** Sends a POST over a raw socket; see RawCall. */
export function rawPost (port: number, path: string, body: string | Buffer, headers: Record<string, string> = {}): RawCall {
  return new RawCall(port, path, body, headers)
}

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
  const head = readHead(buf.subarray(0, end).toString('latin1'))
  const status = head.status
  // One value a name, the last one sent.
  const headers = new Map(Object.entries(head.headers).map(([name, values]) => [name, values[values.length - 1]!]))
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

/**
 * A TCP relay on its own port to a target port. `down()` stops listening and cuts every relayed
 * connection, so a provider pointed at the relay is refused (ECONNREFUSED); `up()` listens again on the
 * same port.
 */
export class Relay {
  target = 0
  #server: Server
  #port = 0
  readonly #sockets = new Set<Socket>()

  constructor () {
    this.#server = this.#create()
  }

  get port (): number {
    return this.#port
  }

  get url (): string {
    return `http://127.0.0.1:${this.#port}`
  }

  #create (): Server {
    return createServer((inbound) => {
      const outbound = connect(this.target, '127.0.0.1')
      this.#sockets.add(inbound)
      this.#sockets.add(outbound)
      inbound.pipe(outbound)
      outbound.pipe(inbound)
      const cut = (): void => { inbound.destroy(); outbound.destroy() }
      inbound.on('error', cut).on('close', () => { this.#sockets.delete(inbound); cut() })
      outbound.on('error', cut).on('close', () => { this.#sockets.delete(outbound); cut() })
    })
  }

  #listen (port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#server.once('error', reject)
      this.#server.listen(port, '127.0.0.1', () => {
        this.#server.off('error', reject)
        this.#port = (this.#server.address() as AddressInfo).port
        resolve()
      })
    })
  }

  start (): Promise<void> {
    return this.#listen(0)
  }

  async down (): Promise<void> {
    const closed = new Promise<void>((resolve) => { this.#server.close(() => { resolve() }) })
    for (const s of this.#sockets) s.destroy()
    await closed
  }

  async up (): Promise<void> {
    this.#server = this.#create()
    await this.#listen(this.#port)
  }

  async close (): Promise<void> {
    for (const s of this.#sockets) s.destroy()
    if (this.#server.listening) await new Promise<void>((resolve) => { this.#server.close(() => { resolve() }) })
  }
}
