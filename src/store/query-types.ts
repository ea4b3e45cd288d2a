// The store's query arguments and answers (trace list, export, usage, sessions): what the dashboard and
// the read API build and the store worker answers. Both sides import them with `import type`; this file
// imports no worker module, so the contract (protocol.ts) never reaches into the worker.
import type { Outcome } from '../domain/outcome.js'
import type { SortKey } from '../domain/sort-key.js'
import type { SessionCall, SessionSummary, TtftMeasures } from './insight-types.js'
import type { TraceSummary, UsageMeasures } from './trace-types.js'

export interface TraceCursor {
  /** ClickHouse's DateTime64(3) text of the last row shown. */
  readonly time: string
  readonly traceId: string
}

/** The last row shown under the list's order: its sort value too (null when sorted by time). */
export interface ListCursor extends TraceCursor {
  readonly value: number | null
}

/** The list's filters; each is described once, for ClickHouse and for rows in memory, in trace-filters.ts. */
export interface TraceFilter {
  readonly accountId: string
  /** Epoch ms, inclusive; null: no bound. */
  readonly from: number | null
  /** Epoch ms, exclusive; null: no bound. */
  readonly to: number | null
  readonly provider: string | null
  readonly model: string | null
  /** Any of these outcomes. */
  readonly outcomes: readonly Outcome[] | null
  /** Any of these status classes (2 for 2xx…). */
  readonly statusClasses: readonly number[] | null
  /** Latency in ms and cost in USD, both bounds inclusive; an unpriced call is in no cost range. */
  readonly latencyMin: number | null
  readonly latencyMax: number | null
  readonly costMin: number | null
  readonly costMax: number | null
  readonly streaming: boolean | null
  readonly confidential: boolean | null
  /** Calls that needed more than one attempt over their provider's targets (true), or one (false). */
  readonly fellOver: boolean | null
  readonly keyId: string | null
  /** The caller's labels: exactly this user, this session, and a trace whose tags hold this one. */
  readonly user: string | null
  readonly session: string | null
  readonly tag: string | null
  /** A metadata key holding exactly this value (a key the trace lacks reads as ''). */
  readonly meta: { readonly key: string; readonly value: string } | null
  /** Case-insensitive text in the prompt or the response. */
  readonly q: string | null
  readonly sort: SortKey
  readonly order: 'asc' | 'desc'
  readonly limit: number
  /** Rows strictly after this one in the list's order (the last row of the previous page). */
  readonly cursor: ListCursor | null
}

export interface TracePage {
  readonly traces: TraceSummary[]
  /** The cursor of the next page, or null when this page is the last. */
  readonly next: ListCursor | null
}

export type ExportFormat = 'csv' | 'jsonl'

export interface ExportArgs {
  readonly filter: TraceFilter
  readonly format: ExportFormat
  /** At most this many rows (the caller bounds it). */
  readonly maxRows: number
}

export interface UsageRange {
  readonly accountId: string
  /** Epoch ms, inclusive. */
  readonly from: number
  /** Epoch ms, exclusive. */
  readonly to: number
}

export type Bucket = 'minute' | 'hour' | 'day'
export type Breakdown = 'key' | 'model' | 'provider'

export interface UsageReport {
  readonly totals: UsageMeasures
  /** Only the buckets that have rows, oldest first; `t` is ClickHouse's `YYYY-MM-DD hh:mm:ss` (UTC). */
  readonly series: Array<UsageMeasures & { t: string }>
  readonly byKey: Array<UsageMeasures & { group: string }>
  readonly byModel: Array<UsageMeasures & { group: string }>
  readonly byProvider: Array<UsageMeasures & { group: string }>
}

export interface UsageScope extends UsageRange {
  readonly bucket: Bucket
  /** One key of the account, or null for all. */
  readonly keyId: string | null
  /** One `user` label, or null for all calls. */
  readonly user: string | null
}

export interface UsageExtras {
  readonly totals: TtftMeasures
  /** Only buckets that have calls; `t` as in UsageReport's series. */
  readonly series: Array<TtftMeasures & { t: string }>
  /**
   * The whole report read from the traces, when the scope names a user (the rollup has no user);
   * null otherwise (the caller reads the rollup).
   */
  readonly report: UsageReport | null
}

export interface SessionCursor {
  /** The last_time (ClickHouse's DateTime64(3) text) and id of the last session shown. */
  readonly last: string
  readonly session: string
}

export interface SessionListFilter {
  readonly accountId: string
  /** Epoch ms, inclusive. */
  readonly from: number
  /** Epoch ms, exclusive. */
  readonly to: number
  readonly user: string | null
  readonly limit: number
  readonly cursor: SessionCursor | null
}

export interface SessionPage {
  readonly sessions: SessionSummary[]
  readonly next: SessionCursor | null
}

export interface CallCursor {
  readonly time: string
  readonly traceId: string
}

export interface SessionCallsQuery {
  readonly accountId: string
  readonly session: string
  readonly limit: number
  /** Calls strictly after this one (the last call of the previous page). */
  readonly cursor: CallCursor | null
}

export interface SessionCalls {
  /** Null when the account has no call with this session id. */
  readonly totals: SessionSummary | null
  readonly calls: SessionCall[]
  readonly next: CallCursor | null
}

/** The limits every query of the SQL port runs under (TRACEGATE_SQL_*). */
export interface SqlLimits {
  readonly maxExecutionSeconds: number
  readonly maxMemoryBytes: number
  readonly maxResultRows: number
  readonly maxResultBytes: number
  readonly maxThreads: number
}

/** One query of the SQL port, for the account whose `sql` key sent it. */
export interface SqlQuery {
  readonly accountId: string
  readonly query: string
  /** Its `param_*` values, by name without the prefix, as text. */
  readonly params: Readonly<Record<string, string>>
  /** The format when the query names none (default_format, else TabSeparated). */
  readonly format: string
  readonly limits: SqlLimits
  /** How many ClickHouse connections the SQL port's queries share (TRACEGATE_SQL_CONNECTIONS). */
  readonly connections: number
}

export interface SqlResult {
  readonly format: string
  readonly body: Uint8Array
}
