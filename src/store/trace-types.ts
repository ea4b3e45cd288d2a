// What the front thread hands the store worker when a call ends: the raw bytes and the timings, not a
// finished row. The worker does the JSON work (usage, tokens, cost) so the front thread stays fast.
import type { ProviderName } from '../providers/index.js'

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
  /** The last insert succeeded (false from the first refused insert until one succeeds again). */
  clickhouseUp: boolean
  /** Why traces cannot be written to ClickHouse right now, or null. */
  insertError: string | null
  /** Why the spool refused its last batch (full, or an I/O error), or null once it takes one again. */
  spoolError: string | null
}

/**
 * What the dashboard's live list shows of a trace, sent to the front thread once its row is stored
 * (written to ClickHouse, or replayed from the spool), so what is shown live is what is stored.
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
