// W3C Trace Context on the front thread (https://www.w3.org/TR/trace-context/): the caller's traceparent
// read, a span id made for the call, and the traceparent the provider receives. No OpenTelemetry code runs
// here: the span itself is built and exported by the store worker (store/worker/spans.ts) from the trace
// record, so a call costs this thread an id and a few strings, not a span object and its serialisation.
import { randomFillSync } from 'node:crypto'

/** The span of one call as the front thread knows it; the store worker builds the exported span from it. */
export interface SpanRef {
  /** 32 lower-case hex digits: the caller's trace, or a new one. */
  readonly traceId: string
  /** 16 hex digits: this call's span. */
  readonly spanId: string
  /** The caller's span, or '' when this span starts the trace. */
  readonly parentSpanId: string
  /** Recorded and exported: a new trace always, a continued one when its parent was sampled (parent-based sampling). */
  readonly sampled: boolean
  /** The caller's tracestate, passed on as it came (valid or ''). */
  readonly tracestate: string
}

// version 00 has exactly four fields; a later version may add fields after the flags (spec §3.2.4).
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/
const ZERO_TRACE = '0'.repeat(32)
const ZERO_SPAN = '0'.repeat(16)
// list-members of key=value, at most 32 and 512 characters (spec §3.3.1); anything else is dropped.
const TRACESTATE = /^[ \t]*[a-z0-9][a-z0-9_\-*/@]{0,255}=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[ \t]*(,[ \t]*([a-z0-9][a-z0-9_\-*/@]{0,255}=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255})?[ \t]*){0,31}$/

/** Random ids from a pool refilled 4 KiB at a time: one syscall per 170 calls instead of one per call. */
const POOL = Buffer.alloc(4096)
let used = POOL.length

function randomHex (bytes: number): string {
  for (;;) {
    if (used + bytes > POOL.length) { randomFillSync(POOL); used = 0 }
    const hex = POOL.toString('hex', used, used + bytes)
    used += bytes
    // An all-zero id is invalid (spec §3.2.2.3, §3.2.2.4); one in 2^64 draws at worst.
    if (hex !== (bytes === 16 ? ZERO_TRACE : ZERO_SPAN)) return hex
  }
}

/** The call's span: under the caller's trace when `traceparent` is valid, else the root of a new trace. */
export function startSpan (traceparent: string, tracestate: string): SpanRef {
  const m = traceparent === '' ? null : TRACEPARENT.exec(traceparent)
  const spanId = randomHex(8)
  if (m === null || m[1] === 'ff' || (m[1] === '00' && m[5] !== undefined) || m[2] === ZERO_TRACE || m[3] === ZERO_SPAN) {
    return { traceId: randomHex(16), spanId, parentSpanId: '', sampled: true, tracestate: '' }
  }
  const state = tracestate.length <= 512 && TRACESTATE.test(tracestate) ? tracestate : ''
  return { traceId: m[2]!, spanId, parentSpanId: m[3]!, sampled: (parseInt(m[4]!, 16) & 1) === 1, tracestate: state }
}

/** The traceparent (and tracestate) naming the call's span, for the provider's request. */
export function injectSpan (span: SpanRef, headers: Record<string, string>): void {
  headers.traceparent = `00-${span.traceId}-${span.spanId}-${span.sampled ? '01' : '00'}`
  if (span.tracestate !== '') headers.tracestate = span.tracestate
}
