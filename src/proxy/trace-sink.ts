// Hands finished exchanges to the store worker. Records are packed into one transferable buffer each
// (so postMessage moves them without a copy) and sent in batches: every FLUSH_MS or MAX_BATCH records.
// A postMessage costs tens of microseconds on this thread while the worker is busy, so one per
// event-loop turn (the first design) cost more than half the proxy's throughput under load.
import type { RawTrace } from '../store/trace-types.js'
import type { Exchange } from './exchange.js'

export type TracePoster = (traces: RawTrace[], transfer: ArrayBuffer[]) => void

const MAX_BATCH = 512
const FLUSH_MS = 20

function pack (x: Exchange, requestLimit: number): { bytes: Uint8Array; requestLength: number; headLength: number } {
  const req = x.body
  const capture = x.capture
  const requestLength = req === null ? 0 : Math.min(req.length, requestLimit)
  const headLength = capture?.headBytes ?? 0
  const bytes = new Uint8Array(requestLength + headLength + (capture?.tailBytes ?? 0))
  if (req !== null) bytes.set(req.subarray(0, requestLength), 0)
  if (capture !== null) {
    let at = requestLength
    for (const c of capture.head) { bytes.set(c, at); at += c.length }
    for (const c of capture.tail) { bytes.set(c, at); at += c.length }
  }
  return { bytes, requestLength, headLength }
}

function detectionJson (x: Exchange): string {
  const v = x.verdict
  if (v !== null) return JSON.stringify({ ran: true, blocked: v.blocked, score: v.score, categories: v.categories, ms: v.ms })
  if (x.detectionFailure !== null) return JSON.stringify({ ran: false, failure: x.detectionFailure })
  return ''
}

const round = (ms: number): number => Math.round(ms * 1000) / 1000

export function toRawTrace (x: Exchange, requestLimit: number): RawTrace {
  const { bytes, requestLength, headLength } = pack(x, requestLimit)
  const latency = x.endedAt - x.startedAt
  const providerMs = x.upstreamStartAt === 0 ? null : x.endedAt - x.upstreamStartAt
  return {
    traceId: x.requestId,
    accountId: x.accountId!,
    keyId: x.keyId!,
    time: x.startedWall,
    provider: x.dialect.name,
    model: x.model ?? '',
    endpoint: x.dialect.route,
    streaming: x.streaming,
    confidential: x.confidential,
    status: x.status,
    outcome: x.outcome ?? 'proxy_error',
    errorCode: x.errorCode ?? '',
    bytes,
    requestLength,
    requestBytes: x.body?.length ?? 0,
    headLength,
    responseBytes: x.capture?.total ?? 0,
    chunkMarks: x.capture?.marks ?? null,
    latencyMs: round(latency),
    ttfbMs: x.firstWriteAt === 0 ? null : round(x.firstWriteAt - x.startedAt),
    providerMs: providerMs === null ? null : round(providerMs),
    overheadMs: round(Math.max(0, latency - (providerMs ?? 0))),
    detection: detectionJson(x),
    issues: x.verdict === null || x.verdict.issues.length === 0 ? '' : JSON.stringify(x.verdict.issues),
  }
}

export class TraceSink {
  readonly #post: TracePoster
  readonly #requestLimit: number
  #queue: RawTrace[] = []
  #transfer: ArrayBuffer[] = []
  #timer: NodeJS.Timeout | null = null
  readonly #flush = (): void => { this.flush() }

  constructor (post: TracePoster, requestLimit: number) {
    this.#post = post
    this.#requestLimit = requestLimit
  }

  push (x: Exchange): void {
    const t = toRawTrace(x, this.#requestLimit)
    this.#queue.push(t)
    this.#transfer.push(t.bytes.buffer as ArrayBuffer)
    if (this.#queue.length >= MAX_BATCH) this.flush()
    else if (this.#timer === null) this.#timer = setTimeout(this.#flush, FLUSH_MS)
  }

  flush (): void {
    if (this.#timer !== null) { clearTimeout(this.#timer); this.#timer = null }
    if (this.#queue.length === 0) return
    const batch = this.#queue
    const transfer = this.#transfer
    this.#queue = []
    this.#transfer = []
    this.#post(batch, transfer)
  }
}
