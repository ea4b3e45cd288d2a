// Hands finished exchanges to the store worker. Records are packed into one transferable buffer per
// batch (store/trace-codec.ts; postMessage moves it without a copy), sent every FLUSH_MS or MAX_HANDOFF_TRACES
// records.
// Batched because a postMessage costs this thread tens of microseconds while the worker is busy.
import { TraceBatchWriter, type EncodedTraces, type TraceMeta } from '../store/trace-codec.js'
import type { Exchange } from './exchange.js'

export type TracePoster = (traces: EncodedTraces, transfer: ArrayBuffer[]) => void

const MAX_HANDOFF_TRACES = 512
/** Big prompts and answers: a batch is also sent once it holds this many bytes. */
const MAX_HANDOFF_BYTES = 8 * 1024 * 1024
const FLUSH_MS = 20

/**
 * What detection did for the call, with the account's policy that decided it: `blocked` is whether the
 * call was refused, `would_block` whether the verdict at `threshold` says injection (under `monitor` the
 * call went on anyway). '' when the call never reached detection (refused before, confidential,
 * detection off for the whole server).
 */
function detectionJson (x: Exchange): string {
  const p = x.detectionPolicy
  if (p === null) return ''
  const v = x.verdict
  if (v !== null) {
    return JSON.stringify({
      ran: true, policy: p.policy, blocked: v.blocked && p.policy === 'block', would_block: v.blocked, threshold: v.threshold,
      ...(v.dataThreshold !== undefined ? { data_threshold: v.dataThreshold } : {}),
      allow_applied: v.allowApplied, score: v.score, categories: v.categories, ms: v.ms,
    })
  }
  if (x.detectionFailure !== null) return JSON.stringify({ ran: false, policy: p.policy, failure: x.detectionFailure })
  // Not judged: the policy is `off`, or the client left before the verdict.
  return p.policy === 'off' ? JSON.stringify({ ran: false, policy: 'off' }) : ''
}

const round = (ms: number): number => Math.round(ms * 1000) / 1000

function traceMeta (x: Exchange, stored: boolean): TraceMeta {
  const latency = x.endedAt - x.startedAt
  const providerMs = x.upstreamStartAt === 0 ? null : x.endedAt - x.upstreamStartAt
  return {
    traceId: x.requestId,
    accountId: x.accountId ?? '',
    keyId: x.keyId ?? '',
    time: x.startedWall,
    provider: x.dialect.name,
    model: x.model ?? '',
    endpoint: x.endpoint,
    streaming: x.streaming,
    confidential: x.confidential,
    status: x.status,
    outcome: x.outcome ?? 'proxy_error',
    errorCode: x.errorCode ?? '',
    errorCause: x.errorCause ?? '',
    requestBytes: x.forwarded?.length ?? 0,
    responseBytes: x.capture?.total ?? 0,
    chunkMarks: x.capture?.marks ?? null,
    latencyMs: round(latency),
    ttfbMs: x.firstWriteAt === 0 ? null : round(x.firstWriteAt - x.startedAt),
    providerMs: providerMs === null ? null : round(providerMs),
    overheadMs: round(Math.max(0, latency - (providerMs ?? 0))),
    detection: detectionJson(x),
    issues: x.verdict === null || x.verdict.issues.length === 0 ? '' : JSON.stringify(x.verdict.issues),
    labels: x.labels,
    maskPii: x.maskPii,
    span: x.span === null || !x.span.sampled ? null : x.span,
    stored,
  }
}

const NONE: readonly Buffer[] = []

export class TraceSink {
  readonly #post: TracePoster
  readonly #requestLimit: number
  /** False when traces are off: the sink then only carries spans (OpenTelemetry export on). */
  readonly #rows: boolean
  #batch = new TraceBatchWriter()
  #timer: NodeJS.Timeout | null = null
  readonly #flush = (): void => { this.flush() }

  constructor (post: TracePoster, requestLimit: number, rows = true) {
    this.#post = post
    this.#requestLimit = requestLimit
    this.#rows = rows
  }

  /**
   * A finished exchange: its trace row when it has an account and traces are on, else only its span
   * (when one is exported); nothing when it has neither.
   */
  push (x: Exchange): void {
    const stored = this.#rows && x.accountId !== null
    if (!stored) {
      if (x.span === null || !x.span.sampled) return
      this.#batch.add(traceMeta(x, false), null, 0, NONE, 0, NONE, 0)
    } else {
      const req = x.forwarded
      const c = x.capture
      this.#batch.add(traceMeta(x, true), req, req === null ? 0 : Math.min(req.length, this.#requestLimit),
        c?.head ?? NONE, c?.headBytes ?? 0, c?.tail ?? NONE, c?.tailBytes ?? 0)
    }
    if (this.#batch.count >= MAX_HANDOFF_TRACES || this.#batch.bytes >= MAX_HANDOFF_BYTES) this.flush()
    else if (this.#timer === null) this.#timer = setTimeout(this.#flush, FLUSH_MS)
  }

  flush (): void {
    if (this.#timer !== null) { clearTimeout(this.#timer); this.#timer = null }
    if (this.#batch.count === 0) return
    const batch = this.#batch.take()
    this.#post(batch, [batch.buffer])
  }
}
