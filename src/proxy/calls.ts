// The proxy's calls in flight: what happens when one starts and ends (metrics, the trace, the log line of
// a failure), and the drain that shutdown waits for. Made before the proxy app, so the app's callbacks
// never wait on the server object that owns them.
import type { Metrics } from '../metrics.js'
import { accessFields } from './access-log.js'
import type { Exchange } from './exchange.js'
import type { TraceSink } from './trace-sink.js'
import { afterWriteAhead } from './write-ahead.js'

/** The log lines a call may write (a pino logger, or a front thread's forwarder to the main thread's). */
export interface CallLog {
  error (fields: object, msg: string): void
  warn (fields: object, msg: string): void
  info (fields: object, msg: string): void
}

export interface CallsOptions {
  readonly accessLog?: boolean
  /** A cell this thread keeps its in-flight count in, which the main thread reads (front threads). */
  readonly inflightCell?: { readonly cells: Int32Array; readonly at: number }
}

export class Calls {
  readonly #metrics: Metrics
  readonly #sink: TraceSink | null
  readonly #log: CallLog | null
  /** The access log (TRACEGATE_ACCESS_LOG): its logger when on, null when off. */
  readonly #access: CallLog | null
  readonly #cells: Int32Array | null
  readonly #at: number
  #closing = false
  #inflight = 0
  #drained: (() => void) | null = null

  constructor (metrics: Metrics, sink: TraceSink | null, log: CallLog | null, options: CallsOptions = {}) {
    this.#access = options.accessLog === true ? log : null
    this.#cells = options.inflightCell?.cells ?? null
    this.#at = options.inflightCell?.at ?? 0
    this.#metrics = metrics
    this.#sink = sink
    this.#log = log
  }

  get inflight (): number { return this.#inflight }
  get closing (): boolean { return this.#closing }

  readonly isClosing = (): boolean => this.#closing

  readonly started = (): void => {
    this.#inflight++
    if (this.#cells !== null) this.#cells[this.#at] = this.#inflight
    this.#metrics.started()
  }

  /** Once per exchange, whatever its outcome. */
  readonly finished = (x: Exchange): void => {
    this.#inflight--
    if (this.#cells !== null) this.#cells[this.#at] = this.#inflight
    // Each 5xx of tracegate's own and each cut stream is logged once, with its cause (never a key).
    if (x.errorCause !== null && this.#log !== null) {
      const fields = { request_id: x.requestId, provider: x.dialect.name, status: x.status, code: x.errorCode, outcome: x.outcome, cause: x.errorCause }
      if (x.errorCode === 'internal_error') this.#log.error(fields, 'request failed')
      else this.#log.warn(fields, 'request failed')
    }
    if (this.#access !== null) this.#access.info(accessFields(x), 'call')
    // Refused before authentication: counted, not traced (no account to trace it under); its span, when
    // spans are exported, still goes through the sink (every call gets one).
    if (x.accountId === null) this.#metrics.rejectedBeforeAuth(x.errorCode ?? x.outcome ?? 'unknown')
    else this.#metrics.finished(x)
    // A relayed call (token counting, reading a stored response) leaves no trace row, only its span (trace-sink.ts).
    this.#sink?.push(x)
    // Drained once the last responses have ended too (they may wait for the turn's write-ahead).
    const drained = this.#drained
    if (this.#inflight === 0 && drained !== null && !afterWriteAhead(drained)) drained()
  }

  /** New calls get 503 from now on; resolves when none is in flight, or after `graceMs`. */
  drain (graceMs: number): Promise<void> {
    this.#closing = true
    if (this.#inflight === 0) return Promise.resolve()
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, graceMs)
      this.#drained = () => { clearTimeout(timer); resolve() }
    })
  }
}
