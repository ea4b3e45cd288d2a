// Finished exchanges travel from the front thread to the store worker packed into one ArrayBuffer per
// batch, moved (not copied) by postMessage: no allocation per trace and no structured clone, a few bytes
// copied and a handful of writes. The record layout lives only here: `TraceBatchWriter.add` writes it
// and `decodeTraces` reads it.
import type { ProviderName } from '../providers/index.js'
import type { CallLabels, RawTrace, TraceSpan } from './trace-types.js'

/** What a batch message carries: the buffer, the bytes used in it, and the record count. */
export interface EncodedTraces {
  readonly buffer: ArrayBuffer
  readonly length: number
  readonly count: number
}

/** A trace's fields other than its bytes, as the front thread knows them when the exchange ends. */
export type TraceMeta = Omit<RawTrace, 'bytes' | 'requestLength' | 'headLength'>

const INITIAL_BYTES = 256 * 1024
/** The next batch starts at the size of the last one, up to this (a burst of big traces does not set it). */
const MAX_START_BYTES = 4 * 1024 * 1024
// Fixed part: 11 float64 numbers, 1 flag byte.
const NUMBERS = 11
const STREAMING = 1
const CONFIDENTIAL = 2
/**
 * The record carries the caller's labels after its strings: user, session, a u32 tag count and the tags,
 * a u32 entry count and each key and value. Without it, labels cost nothing beyond this bit.
 */
const LABELLED = 4
/** The record ends its strings with the span's ids and tracestate (four strings). */
const SPAN = 8
/** The record only carries a span: no trace row is built from it (trace-types.ts `stored`). */
const SPAN_ONLY = 16
/** The account masks PII and secrets in its stored text (trace-types.ts `maskPii`). */
const MASK_PII = 32
/** The record ends its strings with the attempts' JSON (trace-types.ts `attempts`). */
const ATTEMPTS = 64
/** The record ends its strings with what the response cache did (trace-types.ts `cache`). */
const CACHED = 128

export class TraceBatchWriter {
  #buf: Buffer
  #pos = 0
  #count = 0

  constructor (initialBytes = INITIAL_BYTES) {
    this.#buf = Buffer.from(new ArrayBuffer(initialBytes))
  }

  get count (): number { return this.#count }
  get bytes (): number { return this.#pos }

  #room (n: number): void {
    if (this.#pos + n <= this.#buf.length) return
    const next = Buffer.from(new ArrayBuffer(Math.max(this.#buf.length * 2, this.#pos + n)))
    this.#buf.copy(next, 0, 0, this.#pos)
    this.#buf = next
  }

  #f64 (v: number | null): void {
    this.#pos = this.#buf.writeDoubleLE(v ?? Number.NaN, this.#pos)
  }

  #str (s: string): void {
    // Room for the worst case (3 bytes per UTF-16 unit) plus the length word.
    this.#room(4 + s.length * 3)
    const n = this.#buf.write(s, this.#pos + 4, 'utf8')
    this.#buf.writeUInt32LE(n, this.#pos)
    this.#pos += 4 + n
  }

  #u32 (n: number): void {
    this.#room(4)
    this.#pos = this.#buf.writeUInt32LE(n, this.#pos)
  }

  #labels (l: CallLabels): void {
    this.#str(l.user)
    this.#str(l.session)
    this.#u32(l.tags.length)
    for (const t of l.tags) this.#str(t)
    // Own keys only: the metadata is a parsed header, but a prototype's keys are never the caller's.
    const keys = Object.keys(l.metadata)
    this.#u32(keys.length)
    for (const k of keys) {
      this.#str(k)
      this.#str(l.metadata[k]!)
    }
  }

  /**
   * Appends one trace: its fields, then the request (first `requestLength` bytes of `request`), the
   * response head chunks and the response tail chunks, contiguous, so the worker sees one byte range.
   */
  add (meta: TraceMeta, request: Uint8Array | null, requestLength: number,
    head: readonly Uint8Array[], headLength: number, tail: readonly Uint8Array[], tailLength: number): void {
    const marks = meta.chunkMarks
    const markCount = marks === null ? -1 : marks.length
    this.#room(NUMBERS * 8 + 1 + Math.max(0, markCount) * 8 + requestLength + headLength + tailLength)
    this.#f64(meta.time)
    this.#f64(meta.status)
    this.#f64(requestLength)
    this.#f64(meta.requestBytes)
    this.#f64(headLength)
    this.#f64(tailLength)
    this.#f64(meta.responseBytes)
    this.#f64(meta.latencyMs)
    this.#f64(meta.ttfbMs)
    this.#f64(meta.providerMs)
    this.#f64(meta.overheadMs)
    const labels = meta.labels
    const span = meta.span
    this.#buf[this.#pos++] = (meta.streaming ? STREAMING : 0) | (meta.confidential ? CONFIDENTIAL : 0) | (labels !== null ? LABELLED : 0) |
      (span !== null ? SPAN : 0) | (meta.stored ? 0 : SPAN_ONLY) | (meta.maskPii === true ? MASK_PII : 0) | (meta.attempts !== '' ? ATTEMPTS : 0) |
      (meta.cache !== undefined ? CACHED : 0)
    this.#room(4)
    this.#pos = this.#buf.writeInt32LE(markCount, this.#pos)
    if (marks !== null) {
      this.#room(marks.length * 8)
      for (const m of marks) this.#f64(m)
    }
    this.#str(meta.traceId)
    this.#str(meta.accountId)
    this.#str(meta.keyId)
    this.#str(meta.provider)
    this.#str(meta.model)
    this.#str(meta.endpoint)
    this.#str(meta.outcome)
    this.#str(meta.errorCode)
    this.#str(meta.errorCause)
    this.#str(meta.detection)
    this.#str(meta.issues)
    if (labels !== null) this.#labels(labels)
    if (span !== null) {
      this.#str(span.traceId)
      this.#str(span.spanId)
      this.#str(span.parentSpanId)
      this.#str(span.tracestate)
    }
    if (meta.attempts !== '') this.#str(meta.attempts)
    if (meta.cache !== undefined) this.#str(meta.cache)
    this.#room(requestLength + headLength + tailLength)
    if (request !== null && requestLength > 0) {
      this.#buf.set(request.length === requestLength ? request : request.subarray(0, requestLength), this.#pos)
      this.#pos += requestLength
    }
    for (const c of head) { this.#buf.set(c, this.#pos); this.#pos += c.length }
    for (const c of tail) { this.#buf.set(c, this.#pos); this.#pos += c.length }
    this.#count++
  }

  /** The encoded bytes from `from` to the end so far (a view: valid until the next add or take). */
  view (from: number): Uint8Array {
    return this.#buf.subarray(from, this.#pos)
  }

  /** The batch so far, to be transferred; the writer starts a new buffer sized like this one. */
  take (): EncodedTraces {
    const out: EncodedTraces = { buffer: this.#buf.buffer as ArrayBuffer, length: this.#pos, count: this.#count }
    this.#buf = Buffer.from(new ArrayBuffer(Math.min(MAX_START_BYTES, Math.max(INITIAL_BYTES, this.#pos))))
    this.#pos = 0
    this.#count = 0
    return out
  }
}

/** The records of a batch; their `bytes` are views on the batch's buffer. */
export function decodeTraces (batch: EncodedTraces): RawTrace[] {
  const buf = Buffer.from(batch.buffer, 0, batch.length)
  const out: RawTrace[] = []
  let pos = 0
  const f64 = (): number => { const v = buf.readDoubleLE(pos); pos += 8; return v }
  const nullable = (): number | null => { const v = f64(); return Number.isNaN(v) ? null : v }
  const str = (): string => {
    const n = buf.readUInt32LE(pos)
    pos += 4
    const s = buf.toString('utf8', pos, pos + n)
    pos += n
    return s
  }
  const labels = (): CallLabels => {
    const user = str()
    const session = str()
    const tagCount = buf.readUInt32LE(pos)
    pos += 4
    const tags = new Array<string>(tagCount)
    for (let t = 0; t < tagCount; t++) tags[t] = str()
    const entries = buf.readUInt32LE(pos)
    pos += 4
    // No prototype: a key named __proto__ or constructor is the caller's key like any other.
    const metadata = Object.create(null) as Record<string, string>
    for (let e = 0; e < entries; e++) {
      const k = str()
      metadata[k] = str()
    }
    return { user, session, tags, metadata }
  }
  for (let i = 0; i < batch.count; i++) {
    const time = f64()
    const status = f64()
    const requestLength = f64()
    const requestBytes = f64()
    const headLength = f64()
    const tailLength = f64()
    const responseBytes = f64()
    const latencyMs = f64()
    const ttfbMs = nullable()
    const providerMs = nullable()
    const overheadMs = f64()
    const flags = buf[pos++]!
    const markCount = buf.readInt32LE(pos)
    pos += 4
    let chunkMarks: number[] | null = null
    if (markCount >= 0) {
      chunkMarks = new Array<number>(markCount)
      for (let m = 0; m < markCount; m++) chunkMarks[m] = f64()
    }
    const traceId = str()
    const accountId = str()
    const keyId = str()
    const provider = str() as ProviderName
    const model = str()
    const endpoint = str()
    const outcome = str()
    const errorCode = str()
    const errorCause = str()
    const detection = str()
    const issues = str()
    const callLabels = (flags & LABELLED) !== 0 ? labels() : null
    const span: TraceSpan | null = (flags & SPAN) !== 0 ? { traceId: str(), spanId: str(), parentSpanId: str(), tracestate: str() } : null
    const attempts = (flags & ATTEMPTS) !== 0 ? str() : ''
    const cache = (flags & CACHED) !== 0 ? str() : ''
    const size = requestLength + headLength + tailLength
    const bytes = new Uint8Array(batch.buffer, pos, size)
    pos += size
    out.push({
      traceId, accountId, keyId, time, provider, model, endpoint,
      streaming: (flags & STREAMING) !== 0,
      confidential: (flags & CONFIDENTIAL) !== 0,
      status, outcome, errorCode, errorCause, attempts, bytes, requestLength, requestBytes, headLength, responseBytes, chunkMarks,
      latencyMs, ttfbMs, providerMs, overheadMs, detection, issues, labels: callLabels,
      span, stored: (flags & SPAN_ONLY) === 0, maskPii: (flags & MASK_PII) !== 0,
      ...(cache === 'hit' || cache === 'miss' ? { cache } : {}),
    })
  }
  return out
}
