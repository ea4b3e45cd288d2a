// What the front thread hands the store worker when a call ends: the raw bytes and the timings, not a
// finished row. The worker does the JSON work (usage, tokens, cost) so the front thread stays fast.
// Also the one home of the shapes traces and usage come back in (rows, the dashboard's JSON): pure types,
// compiled into the browser build too, so the dashboard reads exactly what the server answers.
import type { ProviderName } from '../providers/index.js'

/**
 * What the caller said about a call in the x-tracegate-user, -session, -tags and -metadata headers,
 * stored on its trace so queries can filter on it. Labels, never prompt text: a confidential call keeps them.
 */
export interface CallLabels {
  /** '' when not given. */
  readonly user: string
  readonly session: string
  readonly tags: readonly string[]
  readonly metadata: Readonly<Record<string, string>>
}

export interface RawTrace {
  readonly traceId: string
  readonly accountId: string
  readonly keyId: string
  /** Epoch ms when the request arrived. */
  readonly time: number
  readonly provider: ProviderName
  readonly model: string
  readonly endpoint: string
  readonly streaming: boolean
  readonly confidential: boolean
  readonly status: number
  readonly outcome: string
  readonly errorCode: string
  /** Why tracegate failed the call itself (upstream failure or fault), or ''. */
  readonly errorCause: string
  /**
   * The attempts over the provider's targets, as a JSON array of {target, key_id, status, ms, cause}
   * (upstream/fallover.ts), the last one the answer's; '' for a call made directly to its only target.
   */
  readonly attempts: string
  /**
   * What the response cache did for the call: answered it (`hit`: the provider was not called) or not
   * (`miss`); absent when the call did not ask it.
   */
  readonly cache?: 'hit' | 'miss'
  /**
   * One buffer holding the forwarded request body, then the captured head of the response, then its
   * captured tail (when the response was longer than the capture limit). Offsets below.
   */
  readonly bytes: Uint8Array
  readonly requestLength: number
  /** The forwarded body's whole size (requestLength is what was captured of it). */
  readonly requestBytes: number
  readonly headLength: number
  readonly responseBytes: number
  /** For streams: pairs of (end offset in the response, ms since the request arrived) per chunk. */
  readonly chunkMarks: readonly number[] | null
  readonly latencyMs: number
  readonly ttfbMs: number | null
  readonly providerMs: number | null
  readonly overheadMs: number
  /** Detection results and issues, JSON, filled by the detection issue; empty when none ran. */
  readonly detection: string
  readonly issues: string
  /** The caller's labels; null when it sent none. */
  readonly labels: CallLabels | null
  /**
   * The account's PII at rest is `mask` (its setting when the call's key was checked): the store worker
   * masks PII and secrets in the stored prompt and response (store/worker/pii-at-rest.ts). Absent: false.
   */
  readonly maskPii?: boolean
  /** The call's span when OpenTelemetry export is on and the span is sampled, else null (store/worker/spans.ts). */
  readonly span: TraceSpan | null
  /** False for a record that only carries a span: a call refused before its key was known, or traces off. */
  readonly stored: boolean
}

/** A call's span ids as the front thread made them (otel/propagation.ts). */
export interface TraceSpan {
  readonly traceId: string
  readonly spanId: string
  /** '' for a root span. */
  readonly parentSpanId: string
  readonly tracestate: string
}

export interface TraceStats {
  /** Rows written to ClickHouse. */
  written: number
  /** Rows written to the spool because ClickHouse did not answer. */
  spooled: number
  /** Rows replayed from the spool. */
  replayed: number
  /** Rows dropped because the spool refused them and memory was full (or the process was closing). */
  dropped: number
  /** Batches the spool refused (full, or its file could not be written); their rows went back to memory or were dropped. */
  spoolRefused: number
  /** Rows waiting in memory. */
  queued: number
  spoolBytes: number
  /**
   * How far behind the calls, in ms: the oldest trace not yet in ClickHouse (in memory, in the spool, or
   * not yet taken by the store worker), and the oldest the dashboard and read API cannot show yet (rows
   * in memory are shown from there: in the spool, or not yet taken). 0 when none waits.
   */
  lag: { clickhouseMs: number; dashboardMs: number }
  /** The last insert succeeded (false from the first refused insert until one succeeds again). */
  clickhouseUp: boolean
  /** Why traces cannot be written to ClickHouse right now, or null. */
  insertError: string | null
  /** Why the spool refused its last batch (full, or an I/O error), or null once it takes one again. */
  spoolError: string | null
  /** Tokens and cost of the rows built since start, by provider and priced model (`other` when unpriced). */
  usage: UsageTotal[]
  /** How long trace inserts took (ClickHouse inserts and spool replays, failed ones too). */
  inserts: InsertLatency
  /** Spans not exported over OTLP, by reason; absent or null when span export is off. */
  spanDrops?: SpanDrops | null
}

/** Tokens and cost a key spent, summed per minute, as the store worker reports them for the limits. */
export interface UsageFeedback {
  readonly keyId: string
  readonly accountId: string
  /** When (epoch ms) the last summed call ended. */
  atMs: number
  tokens: number
  costUsd: number
}

/**
 * What a front thread's calls of one key held on the request board (limits/board.ts) in one quarter hour
 * (its epochOf), summed over one trace batch: tokens and whole micro-dollars, let go once the batch's
 * traces are built.
 */
export type HeldRelease = readonly [keyId: string, accountId: string, epoch: number, tok: number, micro: number]

/**
 * Requests a front thread admitted for one key without asking the main thread (limits/front.ts): n
 * counted there, 0 for calls counted on the request board (the main thread still keeps the key current).
 */
export type AdmittedCount = readonly [keyId: string, accountId: string, n: number]

/** What the store worker reports after the trace batches it took (store/worker/usage-feedback.ts). */
export interface UsageReport {
  readonly usage: UsageFeedback[]
  readonly settled: string[]
  readonly released: HeldRelease[]
  readonly admitted: AdmittedCount[]
}

/** Spans lost: the export queue was full, or the receiver refused or did not answer their batch. */
export interface SpanDrops {
  queue_full: number
  export_failed: number
}

/** The model label of every model outside the price table (in /metrics), so label values stay bounded. */
export const OTHER_MODEL = 'other'

export interface UsageTotal {
  readonly provider: string
  /** The price table's model id, or `other`: the label never takes a model name a client made up. */
  readonly model: string
  input: number
  output: number
  costUsd: number
}

/** Upper bounds (seconds) of the insert latency histogram's buckets; `counts` has one more, for +Inf. */
export const INSERT_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

export interface InsertLatency {
  /** Inserts per bucket (not cumulative), the last one past every bound. */
  counts: number[]
  sum: number
  count: number
}

/**
 * What the dashboard's live list shows of a trace, sent to the front thread once its row is built: from
 * then on the trace list and the detail show it too, from the store worker's memory until it is inserted.
 */
export interface TraceSummary {
  readonly account_id: string
  readonly trace_id: string
  readonly time: string
  readonly key_id: string
  readonly provider: string
  readonly model: string
  readonly streaming: boolean
  readonly confidential: boolean
  readonly status: number
  readonly outcome: string
  readonly error_code: string
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cached_input_tokens: number
  readonly token_source: string
  readonly latency_ms: number
  readonly cost_usd: number | null
  /** The caller's labels ('' and [] when not given); metadata is only in the trace's detail. */
  readonly user: string
  readonly session: string
  readonly tags: readonly string[]
}

/** A trace as the dashboard's lists show it. */
export type TraceListItem = TraceSummary & { readonly blocked: boolean }

export function listItem (s: TraceSummary): TraceListItem {
  return { ...s, blocked: s.outcome === 'blocked' }
}

/**
 * Stored traces of one watched account, as the live list's WebSocket message text. The store worker
 * serialises it, so the front thread only hands the text to uWS.
 */
export interface LiveBatch {
  readonly accountId: string
  readonly message: string
}

/** A row of the traces table as queries read it back. */
export interface TraceRow {
  account_id: string
  time: string
  trace_id: string
  key_id: string
  provider: string
  model: string
  endpoint: string
  user: string
  session: string
  tags: string[]
  metadata: Record<string, string>
  streaming: boolean
  confidential: boolean
  status: number
  outcome: string
  error_code: string
  error_cause: string
  prompt: string
  prompt_truncated: boolean
  response: string
  response_truncated: boolean
  request_bytes: number
  response_bytes: number
  input_tokens: number
  output_tokens: number
  cached_input_tokens: number
  token_source: 'provider' | 'estimated' | 'none'
  latency_ms: number
  ttfb_ms: number | null
  ttft_ms: number | null
  provider_ms: number | null
  overhead_ms: number
  cost_usd: number | null
  cost_status: 'priced' | 'unknown_model' | 'not_called'
  detection: string
  issues: string
  attempts: string
  /** 'hit', 'miss', or '' when the call did not ask the response cache. */
  cache: '' | 'hit' | 'miss'
  /** A cache hit's cost had the provider answered it (its cost_usd is 0); null otherwise. */
  cost_saved_usd: number | null
}

/** One trace as the UI API and the read API answer it: the row, its stored JSON parsed. */
export type TraceDetail = Omit<TraceRow, 'detection' | 'issues' | 'attempts'> & {
  readonly detection: unknown
  readonly issues: unknown
  /** The attempts' JSON parsed (an empty list for a call made directly to its only target). */
  readonly attempts: unknown
  readonly blocked: boolean
}

/** Counts, cost and latency of a set of calls (a bucket, a key, a model, or all). */
export interface UsageMeasures {
  requests: number
  blocked: number
  errors: number
  input_tokens: number
  output_tokens: number
  cached_input_tokens: number
  /** The priced calls' cost: a call with no price for its model adds nothing here and one to unpriced_calls. */
  cost_usd: number
  unpriced_calls: number
  latency_p50_ms: number | null
  latency_p95_ms: number | null
  latency_p99_ms: number | null
}

export type SeriesPoint = UsageMeasures & { t: string; ts: number }

export interface UsageBody {
  readonly from: number
  readonly to: number
  readonly bucket: string
  readonly totals: UsageMeasures
  /** One point per bucket from `from` to `to`, zeros where nothing happened. */
  readonly series: SeriesPoint[]
  readonly by_key: Array<UsageMeasures & { group: string; name: string | null }>
  readonly by_model: Array<UsageMeasures & { group: string }>
  readonly by_provider: Array<UsageMeasures & { group: string }>
}

/** Totals of the trace list's filter (GET /api/ui/traces/totals, store/worker/trace-totals.ts). */
export interface TraceTotals {
  readonly calls: number
  readonly errors: number
  /** errors / calls, or null without calls. */
  readonly error_rate: number | null
  readonly blocked: number
  readonly input_tokens: number
  readonly output_tokens: number
  /** The priced calls' cost; unpriced calls add nothing here and one each to unpriced_calls. */
  readonly cost_usd: number
  readonly unpriced_calls: number
  /** Exact percentiles (ClickHouse's quantileExact: the value at position ⌊level × calls⌋ in order). */
  readonly latency_p50_ms: number | null
  readonly latency_p95_ms: number | null
  readonly latency_p99_ms: number | null
}
