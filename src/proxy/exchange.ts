// One proxied call: the client's response, what the checks learnt, the upstream controller and the
// timings. Every field is set in the constructor so all exchanges share one shape.
import { performance } from 'node:perf_hooks'
import type { Dispatcher } from 'undici'
import { TracegateError } from '../errors.js'
import type { CallKind, Dialect } from '../providers/index.js'
import type { SpanRef } from '../otel/propagation.js'
import { asTracegateError, sendError, type ErrorShape, type Headers } from '../server/respond.js'
import type { HttpResponse } from '../server/uws.js'
import { describeCause, upstreamErrorCode } from '../upstream/client.js'
import type { ResponseCapture } from './capture.js'
import type { CacheFill } from './response-cache.js'
import type { Verdict } from '../detection/types.js'
import type { CallLabels } from '../store/trace-types.js'
import type { Outcome } from '../domain/outcome.js'
import type { AccountDetection } from '../domain/detection-policy.js'

const NO_HEADERS: Headers = []

export type FinishListener = (x: Exchange) => void

/** One attempt over a provider's targets as the trace lists it (upstream/fallover.ts): never a key, only a pooled key's id. */
export interface AttemptRecord {
  /** The target's base URL. */
  readonly target: string
  /** The pooled server-side key's id (key-pool.ts), or '' when the key is not pooled. */
  readonly key_id: string
  /** The provider's status, or 0 when it did not answer. */
  readonly status: number
  /** From the attempt's dispatch to its status (or its failure), ms. */
  readonly ms: number
  /** Why it gave way ('' for the attempt whose answer the client got). */
  readonly cause: string
  /** The model asked of the target, on a routes file's model route (absent otherwise). */
  readonly model?: string
}

export class Exchange {
  readonly res: HttpResponse
  readonly dialect: Dialect
  readonly requestId: string
  /** The route the client called, as the trace's endpoint column names it (`/v1/chat/completions`). */
  readonly endpoint: string
  /** How this route writes its errors (tracegate's body, or the provider's on a native route). */
  readonly shape: ErrorShape
  readonly startedAt: number
  /** Epoch ms at arrival, for the trace's time column. */
  readonly startedWall: number
  /** Client request headers passed on to the provider (lower-case names). */
  readonly forwardHeaders: Array<[string, string]>
  /** The body sent upstream (service fields cut out), once the key is accepted; never the raw body. */
  forwarded: Buffer | null = null
  /** The forwarded body's size (the trace's copy may differ: a tool server's credentials are masked in it). */
  forwardedBytes = 0
  /** What the trace keeps of the response; null when tracing is off or nothing was forwarded. */
  capture: ResponseCapture | null = null
  accountId: string | null = null
  keyId: string | null = null
  model: string | null = null
  streaming = false
  /** What the call does (providers/types.ts): a relayed one is not traced, an embedding not judged. */
  kind: CallKind = 'generate'
  confidential = false
  /** The TTL the caller asked the response cache for (x-tracegate-cache-ttl), seconds; 0: not asked. */
  cacheTtlS = 0
  /** What the response cache did: answered the call (hit) or not (miss); null when it was not asked. */
  cache: 'hit' | 'miss' | null = null
  /** A miss's answer on its way to the cache (kept once it ended whole); null otherwise. */
  cacheFill: CacheFill | null = null
  /** The caller's x-tracegate-* labels; null when it sent none. */
  labels: CallLabels | null = null
  /** The account stores its text with PII and secrets masked (its setting when the key was checked). */
  maskPii = false
  /** What the call holds on the request board (limits/board.ts) until its trace is built: tokens, whole micro-dollars. */
  heldTokens = 0
  heldMicro = 0
  /** The quarter hour it holds in (limits/board.ts epochOf). */
  heldEpoch = 0
  aborted = false
  /** True once the status line has been written to the client: from then on a failure is a cut. */
  headersSent = false
  /** The provider's answer is complete (the client may still be reading its last bytes). */
  upstreamEnded = false
  finished = false
  status = 0
  outcome: Outcome | null = null
  errorCode: string | null = null
  /** Why tracegate failed the call itself (an upstream failure, a fault), for the log and the trace. */
  errorCause: string | null = null
  /** Detection's answer; null when it did not run (confidential, off) or could not judge. */
  verdict: Verdict | null = null
  /** Why detection could not judge the request (error, deadline, queue_full, too_large). */
  detectionFailure: string | null = null
  /** The account's detection policy, once the call reached the detection step (the trace names it). */
  detectionPolicy: AccountDetection | null = null
  upstreamStartAt = 0
  /** The attempts over the provider's targets, the last one the answer's; null for a call made directly to its only target. */
  attempts: AttemptRecord[] | null = null
  /** When the first response byte was handed to the client's socket. */
  firstWriteAt = 0
  endedAt = 0
  controller: Dispatcher.DispatchController | null = null
  /** The call's span when OpenTelemetry export is on (otel/propagation.ts), else null. */
  span: SpanRef | null = null
  readonly #onFinish: FinishListener

  constructor (res: HttpResponse, dialect: Dialect, endpoint: string, shape: ErrorShape, requestId: string, onFinish: FinishListener) {
    this.res = res
    this.dialect = dialect
    this.endpoint = endpoint
    this.shape = shape
    this.requestId = requestId
    this.startedAt = performance.now()
    this.startedWall = Date.now()
    this.forwardHeaders = []
    this.#onFinish = onFinish
  }

  /** uWS onAborted: the client went away. Never touch `res` after this. */
  clientAborted (): void {
    this.aborted = true
    if (this.upstreamEnded) {
      // Left while the last bytes waited behind its own backpressure: nothing upstream to abort.
      this.finish('client_aborted')
    } else if (this.controller !== null && !this.controller.aborted) {
      this.controller.abort(new Error('client aborted'))
    } else if (this.upstreamStartAt === 0) {
      this.finish('client_aborted')
    }
  }

  attachUpstream (controller: Dispatcher.DispatchController): void {
    this.controller = controller
    if (this.aborted) controller.abort(new Error('client aborted'))
  }

  upstreamResponded (status: number): void {
    this.status = status
  }

  responseChunk (chunk: Buffer): void {
    this.capture?.add(chunk, performance.now() - this.startedAt)
    this.cacheFill?.add(chunk)
  }

  wrote (): void {
    if (this.firstWriteAt === 0) this.firstWriteAt = performance.now()
  }

  /** Answers with an error when nothing has been sent yet; the outcome follows from the code. */
  fail (err: unknown, outcome: Outcome = 'rejected', headers: Headers = NO_HEADERS): void {
    if (this.finished) return
    const e = asTracegateError(err)
    this.errorCode = e.code
    if (e.status >= 500) this.errorCause ??= causeOf(e)
    if (!this.aborted) {
      if (this.headersSent) this.res.close()
      else {
        this.status = sendError(this.res, e, this.requestId, false, headers, this.shape)
        this.wrote()
      }
    }
    this.finish(e.code === 'internal_error' ? 'proxy_error' : outcome)
  }

  upstreamFailed (err: Error): void {
    if (this.finished) return
    if (this.aborted) {
      this.finish('client_aborted')
      return
    }
    this.errorCause = describeCause(err)
    if (this.headersSent) {
      // A stream the provider broke is not turned into a clean end: the client sees the cut.
      this.errorCode = 'provider_stream_error'
      this.res.close()
      this.finish('provider_stream_error')
      return
    }
    // Nothing reached the client yet (a held answer, or a stream cut before its first chunk): it gets a
    // clear error instead of a cut, and the trace keeps what the provider had sent.
    const code = upstreamErrorCode(err)
    const responded = this.status !== 0
    this.fail(new TracegateError(responded && code !== 'provider_timeout' ? 'provider_disconnected' : code, { cause: err }), 'provider_error')
  }

  finish (outcome: Outcome): void {
    if (this.finished) return
    this.finished = true
    this.outcome = outcome
    this.endedAt = performance.now()
    this.cacheFill?.end(outcome === 'ok' && this.upstreamEnded)
    this.cacheFill = null
    this.#onFinish(this)
  }
}

/** The cause of one of tracegate's own 5xx: what it wraps, or what the code itself says. */
function causeOf (e: TracegateError): string {
  if (e.cause !== undefined) return describeCause(e.cause)
  const failure = (e.extra?.detection as { failure?: unknown } | undefined)?.failure
  if (typeof failure === 'string') return `detection_${failure}: ${e.message}`
  return `${e.code}: ${e.message}`
}
