// An undici dispatch handler that pipes the provider's answer to the uWS response as it arrives.
// Backpressure runs both ways: when uWS cannot take a chunk at once the upstream is paused, and it
// resumes when the socket drains (uWebSockets.js examples/VideoStreamer.js shows the pattern).
//
// Every cork ends in one send(2), so writes are grouped: the status and headers go out with the first
// body chunk, and a non-streaming answer (anything but an event stream, up to BUFFER_LIMIT) is sent
// whole with its content-length in one write at the end. A stream is written as it arrives, but the
// chunks undici parses out of one socket read are sent together: they are queued and flushed in a
// microtask, which runs as soon as undici's parser returns, so nothing waits for a later tick.
import type { Dispatcher } from 'undici'
import type { Exchange } from '../proxy/exchange.js'
import type { CachedAnswer } from '../proxy/response-cache.js'
import { statusLine } from '../server/respond.js'
import { afterWriteAhead } from '../proxy/write-ahead.js'

type Controller = Dispatcher.DispatchController
type Headers = Record<string, string | string[] | undefined>

/** Says whether the response cache answered (hit) or the provider did (miss), when the call asked it. */
export const CACHE_HEADER = 'x-tracegate-cache'

/** A non-streaming answer larger than this is streamed through instead of held. */
const BUFFER_LIMIT = 1024 * 1024
/**
 * The largest single write into uWS: uWebSockets.js 20.30 mis-frames a chunked body under backpressure
 * when one write (size line, data and CRLF) does not fit its 16 KB cork buffer (the slow-reader
 * streaming test catches it).
 */
const MAX_WRITE = 8 * 1024

export class Passthrough implements Dispatcher.DispatchHandler {
  readonly #x: Exchange
  /** Response headers to send, as name/value pairs, already mapped by the dialect. */
  #headers: string[] = []
  #headersWritten = false
  /** Chunks held while the answer is being buffered; null once it is streamed. */
  #held: Buffer[] | null = null
  #heldBytes = 0
  /** Stream chunks waiting for the microtask flush, or for onWritable while uWS holds bytes. */
  #pending: Buffer[] = []
  #blocked = false
  /** The provider's answer is complete; the response ends once the pending chunks are written. */
  #ended = false
  #controller: Controller | null = null
  readonly #flush = (): void => { this.#flushPending() }

  constructor (exchange: Exchange) {
    this.#x = exchange
  }

  onRequestStart (controller: Controller): void {
    this.#x.attachUpstream(controller)
  }

  onResponseStart (controller: Controller, statusCode: number, headers: Headers): void {
    const x = this.#x
    x.upstreamResponded(statusCode)
    const dialect = x.dialect
    const out: string[] = []
    for (const name in headers) {
      const mapped = dialect.responseHeader(name)
      const value = headers[name]
      if (mapped === null || value === undefined) continue
      if (typeof value === 'string') out.push(mapped, value)
      else for (const v of value) out.push(mapped, v)
    }
    this.#headers = out
    x.cacheFill?.start(statusCode, out)
    const type = headers['content-type']
    // An event stream, or the answer to a streaming request (Gemini's JSON-array stream has a JSON type).
    const streaming = (typeof type === 'string' && type.startsWith('text/event-stream')) || (x.streaming && statusCode < 300)
    this.#held = streaming ? null : []
  }

  #writeHead (): void {
    writeHead(this.#x, this.#headers)
    this.#headersWritten = true
  }

  onResponseData (controller: Controller, chunk: Buffer): void {
    const x = this.#x
    if (x.aborted) return
    x.responseChunk(chunk)
    const held = this.#held
    if (held !== null) {
      held.push(chunk)
      this.#heldBytes += chunk.length
      if (this.#heldBytes <= BUFFER_LIMIT) return
      // Too big to hold: send what we have and stream the rest.
      this.#held = null
      this.#write(controller, held.length === 1 ? held[0]! : Buffer.concat(held, this.#heldBytes))
      return
    }
    this.#write(controller, chunk)
  }

  #write (controller: Controller, chunk: Buffer): void {
    this.#controller = controller
    const first = this.#pending.length === 0
    if (chunk.length <= MAX_WRITE) this.#pending.push(chunk)
    else for (let at = 0; at < chunk.length; at += MAX_WRITE) this.#pending.push(chunk.subarray(at, at + MAX_WRITE))
    if (first && !this.#blocked) queueMicrotask(this.#flush)
  }

  /**
   * Writes queued chunks until uWS has to buffer one (that one is taken); the caller corks. Returns
   * false when it had to: the rest wait in JS for onWritable rather than piling into uWS's buffer.
   */
  #writePending (): boolean {
    const res = this.#x.res
    if (!this.#headersWritten) this.#writeHead()
    this.#x.wrote()
    const pending = this.#pending
    let i = 0
    let ok = true
    while (ok && i < pending.length) ok = res.write(pending[i++]!)
    this.#pending = i === pending.length ? [] : pending.slice(i)
    return ok
  }

  #flushPending (): void {
    const x = this.#x
    if (this.#blocked || this.#pending.length === 0 || x.finished || x.aborted) return
    let ok = true
    x.res.cork(() => { ok = this.#writePending() })
    if (!ok) this.#block()
  }

  /** uWS holds bytes it could not send: pause the provider until the client has read them. */
  #block (): void {
    this.#blocked = true
    const controller = this.#controller
    if (controller !== null && !controller.paused) controller.pause()
    this.#x.res.onWritable(this.#writable)
  }

  /** uWS calls this corked, once its buffer drained; false asks to be called again. */
  readonly #writable = (): boolean => {
    const x = this.#x
    if (x.aborted || x.finished) return true
    if (this.#pending.length > 0 && !this.#writePending()) return false
    this.#blocked = false
    if (this.#ended) {
      this.#endResponse()
      return true
    }
    this.#controller?.resume()
    return true
  }

  onResponseEnd (): void {
    const x = this.#x
    x.upstreamEnded = true
    if (x.aborted) {
      x.finish('client_aborted')
      return
    }
    this.#ended = true
    // The last chunks wait behind the client's backpressure; onWritable ends the response.
    if (this.#blocked) return
    let ok = true
    x.res.cork(() => {
      ok = this.#pending.length === 0 || this.#writePending()
      if (ok) this.#endResponse()
    })
    if (!ok) this.#block()
  }

  /**
   * Ends the exchange and the response (the caller corks): the response's end waits for the turn's
   * write-ahead of the trace (proxy/write-ahead.ts), so a client never has an answer whose record is not on disk.
   */
  #endResponse (): void {
    const x = this.#x
    x.wrote()
    if (!afterWriteAhead(this.#endLater)) this.#endNow()
    x.finish(x.status >= 400 ? 'provider_error' : 'ok')
  }

  readonly #endLater = (): void => {
    const x = this.#x
    if (!x.aborted) x.res.cork(() => { this.#endNow() })
  }

  #endNow (): void {
    const res = this.#x.res
    const held = this.#held
    if (!this.#headersWritten) this.#writeHead()
    if (held === null || held.length === 0) res.end()
    else res.end(held.length === 1 ? held[0]! : Buffer.concat(held, this.#heldBytes))
  }

  onResponseError (controller: Controller, err: Error): void {
    this.#x.upstreamFailed(err)
  }
}

/**
 * An answer's status line and headers (name, value pairs), with the request id under both names (OpenAI's
 * SDKs read x-request-id, Anthropic's request-id) and x-tracegate-cache when the cache was asked.
 */
function writeHead (x: Exchange, headers: readonly string[]): void {
  const res = x.res
  res.writeStatus(statusLine(x.status)).writeHeader('x-request-id', x.requestId).writeHeader('request-id', x.requestId)
  for (let i = 0; i < headers.length; i += 2) res.writeHeader(headers[i]!, headers[i + 1]!)
  if (x.cache !== null) res.writeHeader(CACHE_HEADER, x.cache)
  x.headersSent = true
}

/**
 * Answers a call from the response cache: the kept status, headers and body bytes as the provider sent
 * them (a stream's events in one write), with `x-tracegate-cache: hit`. Like a held answer, it is sent
 * once the turn's write-ahead of the trace is on disk.
 */
export function answerFromCache (x: Exchange, answer: CachedAnswer): void {
  x.cache = 'hit'
  x.status = answer.status
  x.capture?.add(answer.body, performance.now() - x.startedAt)
  x.upstreamEnded = true
  const send = (): void => {
    writeHead(x, answer.headers)
    x.res.end(answer.body)
  }
  x.res.cork(() => {
    x.wrote()
    if (!afterWriteAhead(() => { if (!x.aborted) x.res.cork(send) })) send()
    x.finish('ok')
  })
}
