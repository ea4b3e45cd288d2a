// The dashboard's and the read API's trace queries. Every value is a query parameter and every query is
// filtered by the caller's account. The list pages with a keyset on its order, never OFFSET: (time,
// trace_id), the table's own sort order after account_id, so page N costs what page 1 costs; or (sort
// value, time, trace_id) when sorted by latency, cost or tokens.
import type { ClickHouseClient } from '@clickhouse/client'
import { listOrder, orderBy, SORTS, where } from './trace-filters.js'
import type { ListCursor, TraceFilter, TracePage } from '../query-types.js'
import type { TraceSummary } from '../trace-types.js'

/** No filter but the account: every trace, newest first. */
export function emptyFilter (accountId: string, limit = 50): TraceFilter {
  return {
    accountId, from: null, to: null, provider: null, model: null, outcomes: null, statusClasses: null,
    latencyMin: null, latencyMax: null, costMin: null, costMax: null, streaming: null, confidential: null, fellOver: null,
    keyId: null, user: null, session: null, tag: null, meta: null, q: null, sort: 'time', order: 'desc', limit, cursor: null,
  }
}

/** The cursor after a row under the filter's order. */
export function cursorOf (f: Pick<TraceFilter, 'sort'>, row: TraceSummary): ListCursor {
  return { value: f.sort === 'time' ? null : SORTS[f.sort].summary(row), time: row.time, traceId: row.trace_id }
}

// The columns of TraceSummary (trace-types.ts), the live list's shape.
export const SUMMARY_COLUMNS = `account_id, trace_id, time, key_id, provider, model, streaming, confidential, status,
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
      ORDER BY ${orderBy(f)} LIMIT {limit:UInt32}`,
    query_params: { ...w.params, limit: f.limit + 1 },
    format: 'JSONEachRow',
  })
  const stored = await rs.json<TraceSummary>()
  const rows = recent === null || recent.length === 0 ? stored : merged(f, stored, recent, f.limit + 1)
  const more = rows.length > f.limit
  const traces = more ? rows.slice(0, f.limit) : rows
  const last = traces[traces.length - 1]
  return { traces, next: more && last !== undefined ? cursorOf(f, last) : null }
}

/** The union of two lists in the filter's order by trace id (ClickHouse's row wins), in that order, at most `n`. */
function merged (f: TraceFilter, stored: readonly TraceSummary[], recent: readonly TraceSummary[], n: number): TraceSummary[] {
  const ids = new Set(stored.map((r) => r.trace_id))
  const all = [...stored]
  for (const r of recent) if (!ids.has(r.trace_id)) all.push(r)
  const order = listOrder(f)
  const value = SORTS[f.sort].summary
  return all
    .map((r) => ({ r, k: { value: value(r), time: r.time, trace_id: r.trace_id } }))
    .sort((a, b) => order(a.k, b.k))
    .slice(0, n)
    .map((x) => x.r)
}
