// The dashboard's and the read API's trace queries. Every value is a query parameter and every query is
// filtered by the caller's account. The list pages with a keyset on (time, trace_id), the table's own
// sort order after account_id, so page N costs what page 1 costs (never OFFSET).
import type { ClickHouseClient } from '@clickhouse/client'
import { newestFirst } from './recent-traces.js'
import { where } from './trace-filters.js'
import type { TraceSummary } from '../trace-types.js'

export interface TraceCursor {
  /** ClickHouse's DateTime64(3) text of the last row shown. */
  readonly time: string
  readonly traceId: string
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
  readonly outcome: string | null
  readonly keyId: string | null
  /** The caller's labels: exactly this user, this session, and a trace whose tags hold this one. */
  readonly user: string | null
  readonly session: string | null
  readonly tag: string | null
  /** Case-insensitive text in the prompt or the response. */
  readonly q: string | null
  readonly limit: number
  /** Rows strictly older than this one (the last row of the previous page). */
  readonly cursor: TraceCursor | null
}

export interface TracePage {
  readonly traces: TraceSummary[]
  /** The cursor of the next page, or null when this page is the last. */
  readonly next: TraceCursor | null
}

// The columns of TraceSummary (trace-types.ts), the live list's shape.
const SUMMARY_COLUMNS = `account_id, trace_id, time, key_id, provider, model, streaming, confidential, status,
  outcome, error_code, input_tokens, output_tokens, cached_input_tokens, token_source, latency_ms, cost_usd,
  user, session, tags`

/**
 * A page of the list. `recent`: the rows of the page's filter still held in memory, newest first, at most
 * limit + 1 (recent-traces.ts; null when they cannot be filtered exactly). Both answers hold every row
 * of the true page that each knows of, so their union by trace id, newest first, is the page: a row not
 * inserted yet shows, a row in both shows once.
 */
export async function listTraces (ch: ClickHouseClient, f: TraceFilter, recent: readonly TraceSummary[] | null = null): Promise<TracePage> {
  const w = where(f)
  // One row more than asked tells whether another page exists.
  const rs = await ch.query({
    query: `SELECT ${SUMMARY_COLUMNS} FROM traces WHERE ${w.sql}
      ORDER BY time DESC, trace_id DESC LIMIT {limit:UInt32}`,
    query_params: { ...w.params, limit: f.limit + 1 },
    format: 'JSONEachRow',
  })
  const stored = await rs.json<TraceSummary>()
  const rows = recent === null || recent.length === 0 ? stored : merged(stored, recent, f.limit + 1)
  const more = rows.length > f.limit
  const traces = more ? rows.slice(0, f.limit) : rows
  const last = traces[traces.length - 1]
  return { traces, next: more && last !== undefined ? { time: last.time, traceId: last.trace_id } : null }
}

/** The union of two newest-first lists by trace id (ClickHouse's row wins), newest first, at most `n`. */
function merged (stored: readonly TraceSummary[], recent: readonly TraceSummary[], n: number): TraceSummary[] {
  const ids = new Set(stored.map((r) => r.trace_id))
  const all = [...stored]
  for (const r of recent) if (!ids.has(r.trace_id)) all.push(r)
  return all.sort(newestFirst).slice(0, n)
}

