// Writing one answer: delays (ttft, gaps), backpressure, the broken-answer mode, and noticing when the
// client goes away. Delays wait on one timer per request that close() or a client abort cancels, so a
// hanging or slow answer never keeps the process alive after the socket is gone.
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { Call, Rejection } from './dialect.js'
import type { Behaviour } from './options.js'

export class Reply {
  readonly res: ServerResponse
  /** Date.now() when the request arrived. */
  readonly receivedAt: number
  /** The socket is gone (answer done, client left, or the mock cut it). */
  closed = false
  /** The mock cut the connection on purpose (`drop`): not a client abort. */
  dropped = false
  #timer: NodeJS.Timeout | null = null
  #wake: (() => void) | null = null
  readonly #onClosed: (reply: Reply) => void
  readonly #wakeUp = (): void => {
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    const wake = this.#wake
    this.#wake = null
    if (wake !== null) wake()
  }

  constructor (res: ServerResponse, receivedAt: number, onClosed: (reply: Reply) => void) {
    this.res = res
    this.receivedAt = receivedAt
    this.#onClosed = onClosed
    // 'close' comes after 'finish' for a full answer and alone when the connection dies first.
    res.on('close', () => {
      this.closed = true
      this.#wakeUp()
      this.#onClosed(this)
    })
  }

  /** Resolves after ms, or at once when the connection closes; check `closed` afterwards. */
  wait (ms: number): Promise<void> {
    if (this.closed) return Promise.resolve()
    return new Promise((resolve) => {
      this.#wake = resolve
      this.#timer = setTimeout(this.#wakeUp, ms)
    })
  }

  /** Resolves when the response can take more, or the connection closes; check `closed` afterwards. */
  drain (): Promise<void> {
    if (this.closed) return Promise.resolve()
    return new Promise((resolve) => {
      this.#wake = resolve
      this.res.once('drain', this.#wakeUp)
    })
  }

  send (status: number, headers: OutgoingHttpHeaders, body: string): void {
    headers['content-length'] = Buffer.byteLength(body)
    this.res.writeHead(status, headers)
    this.res.end(body)
  }

  reject (rejection: Rejection): void {
    this.send(rejection.status, rejection.headers, rejection.body)
  }

  /** Writes data, then cuts the connection once it has reached the socket, so the client sees it first. */
  cutAfter (data: string | Buffer): void {
    this.dropped = true
    this.res.write(data, () => { this.res.destroy() })
  }
}

/** Answers an accepted call as its behaviour says. Never rejects: a failure just cuts the connection. */
export async function respond (reply: Reply, call: Call, behaviour: Behaviour, failure: Rejection | null): Promise<void> {
  if (behaviour.mode === 'hang') return
  if (behaviour.ttftMs > 0) {
    await reply.wait(behaviour.ttftMs)
    if (reply.closed) return
  }
  if (failure !== null) {
    reply.reject(failure)
    return
  }
  const headers = call.headers(Date.now() - reply.receivedAt)
  const drop = behaviour.mode === 'drop'
  if (!call.stream) {
    const body = call.body()
    if (!drop) {
      reply.send(200, headers, body)
      return
    }
    // The full length is announced and half the bytes are sent, so the client sees a short body.
    const bytes = Buffer.from(body)
    headers['content-length'] = bytes.length
    reply.res.writeHead(200, headers)
    reply.cutAfter(bytes.subarray(0, bytes.length >> 1))
    return
  }
  await stream(reply, call, behaviour, headers, drop)
}

async function stream (reply: Reply, call: Call, behaviour: Behaviour, headers: OutgoingHttpHeaders, drop: boolean): Promise<void> {
  const res = reply.res
  res.writeHead(200, headers)
  // Synchronous writes in one tick go out together: node:http corks the socket until the next tick.
  const head = call.head()
  if (head !== '' && !res.write(head)) {
    await reply.drain()
    if (reply.closed) return
  }
  const n = behaviour.chunks
  const last = drop ? Math.max(1, n >> 1) : n
  for (let k = 0; k < last; k++) {
    if (k > 0 && behaviour.gapMs > 0) {
      await reply.wait(behaviour.gapMs)
      if (reply.closed) return
    }
    const data = call.chunk(k)
    if (drop && k === last - 1) {
      reply.cutAfter(data)
      return
    }
    if (!res.write(data)) {
      await reply.drain()
      if (reply.closed) return
    }
  }
  res.end(call.tail())
}
