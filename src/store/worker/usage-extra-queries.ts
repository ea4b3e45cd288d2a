// What the usage_minute rollup cannot answer, read from the traces table: time to first token, the
// breakdown by the caller's `user` label, and a whole usage report narrowed to one user. Every query is
// filtered by the caller's account and bounded by the window's minutes, so the primary key (account_id,
// time, …) reads only that account's granules of that window; a user filter also skips the granules
// whose bloom filter (user_idx) rules the user out. Every value is a query parameter.
import type { ClickHouseClient } from '@clickhouse/client'
import type { TtftMeasures, UsageGroupRow, UsersOrder } from '../insight-types.js'
import type { UsageMeasures } from '../trace-types.js'
import { chTime } from './connect.js'
import { ERROR_OUTCOMES_SQL } from './usage-rollup.js'
import { measures, type Raw } from './usage-queries.js'
import type { Bucket, UsageExtras, UsageReport, UsageScope } from '../query-types.js'

/** The most users a breakdown lists. */
export const TOP_USERS = 50

const MINUTE = 60_000

// The rollup's own error outcomes and unpriced calls (no cost_usd), so a report read from the traces counts
// what one read from usage_minute counts. The column is named with its table: bare, it would be the
// cost_usd alias of this same SELECT.
const TRACE_MEASURES = `count() AS requests, countIf(outcome = 'blocked') AS blocked,
  countIf(outcome IN ${ERROR_OUTCOMES_SQL}) AS errors,
  sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
  sum(cached_input_tokens) AS cached_input_tokens, sum(ifNull(cost_usd, 0)) AS cost_usd,
  countIf(isNull(traces.cost_usd)) AS unpriced_calls, quantilesTDigest(0.5, 0.95, 0.99)(latency_ms) AS q`
const STREAMED = 'streaming AND status >= 200 AND status < 300 AND isNotNull(ttfb_ms)'
const TTFT = `countIf(${STREAMED}) AS streams,
  quantilesTDigestIf(0.5, 0.95, 0.99)(assumeNotNull(ttfb_ms), ${STREAMED}) AS ttft`

const TRACE_BUCKETS: Record<Bucket, string> = {
  minute: 'toStartOfMinute(time)',
  hour: 'toStartOfHour(time)',
  day: 'toStartOfDay(time)',
}

/**
 * The WHERE clause over traces. The window is widened to whole minutes exactly as the rollup's is
 * (`minute >= toStartOfMinute(from) AND minute < to`), so both count the same calls.
 */
function where (s: UsageScope): { sql: string; params: Record<string, unknown> } {
  const parts = ["account_id = {accountId:UUID}", "time >= {from:DateTime64(3, 'UTC')}", "time < {to:DateTime64(3, 'UTC')}"]
  const params: Record<string, unknown> = {
    accountId: s.accountId,
    from: chTime(Math.floor(s.from / MINUTE) * MINUTE),
    to: chTime(Math.ceil(s.to / MINUTE) * MINUTE),
  }
  if (s.keyId !== null) {
    parts.push('key_id = {keyId:UUID}')
    params.keyId = s.keyId
  }
  if (s.user !== null) {
    parts.push('user = {user:String}')
    params.user = s.user
  }
  return { sql: parts.join(' AND '), params }
}

type TtftRaw = Record<string, unknown> & { streams?: number | string; ttft?: number[] }

function ttft (r: TtftRaw): TtftMeasures {
  const streams = Number(r.streams ?? 0)
  const q = streams > 0 && Array.isArray(r.ttft) ? r.ttft : []
  const at = (i: number): number | null => (q[i] === undefined || Number.isNaN(Number(q[i])) ? null : Math.round(Number(q[i]) * 1000) / 1000)
  return { streams, ttft_p50_ms: at(0), ttft_p95_ms: at(1), ttft_p99_ms: at(2) }
}

type Row = Raw & TtftRaw & { t: string | null; key_id: string | null; model: string | null; provider: string | null }

/**
 * TTFT per bucket and in all, and (with a user filter) the usage report itself: one query, so everything
 * it answers describes the same rows. Without a user filter only TTFT is computed (the rollup has the rest).
 */
export async function usageExtras (ch: ClickHouseClient, s: UsageScope): Promise<UsageExtras> {
  const w = where(s)
  const full = s.user !== null
  const sets = full ? '(), (t), (key_id), (model), (provider)' : '(), (t)'
  const rs = await ch.query({
    // The bucket expression and the grouping sets come from fixed text; every value is a parameter.
    query: `SELECT ${TRACE_BUCKETS[s.bucket]} AS t,
        ${full ? `key_id, model, provider, ${TRACE_MEASURES}` : 'NULL AS key_id, NULL AS model, NULL AS provider'}, ${TTFT}
      FROM traces WHERE ${w.sql}
      GROUP BY GROUPING SETS (${sets})`,
    query_params: w.params,
    // A column outside a row's grouping set comes back NULL, which tells the sets apart.
    clickhouse_settings: { group_by_use_nulls: 1 },
    format: 'JSONEachRow',
  })
  const rows = await rs.json<Row>()
  let totals: TtftMeasures = ttft({})
  let totalMeasures: UsageMeasures = measures({ q: [] })
  const series: UsageExtras['series'] = []
  const reportSeries: UsageReport['series'] = []
  const byKey: UsageGroupRow[] = []
  const byModel: UsageGroupRow[] = []
  const byProvider: UsageGroupRow[] = []
  for (const row of rows) {
    if (row.t !== null) {
      series.push({ t: row.t, ...ttft(row) })
      reportSeries.push({ t: row.t, ...measures(row) })
    } else if (row.key_id !== null) byKey.push({ group: row.key_id, ...measures(row) })
    else if (row.model !== null) byModel.push({ group: row.model, ...measures(row) })
    else if (row.provider !== null) byProvider.push({ group: row.provider, ...measures(row) })
    else {
      totals = ttft(row)
      totalMeasures = measures(row)
    }
  }
  const oldestFirst = (x: { t: string }, y: { t: string }): number => (x.t < y.t ? -1 : x.t > y.t ? 1 : 0)
  const busiestFirst = (x: UsageGroupRow, y: UsageGroupRow): number =>
    y.requests - x.requests || (x.group < y.group ? -1 : x.group > y.group ? 1 : 0)
  series.sort(oldestFirst)
  reportSeries.sort(oldestFirst)
  const report = full
    ? { totals: totalMeasures, series: reportSeries, byKey: byKey.sort(busiestFirst), byModel: byModel.sort(busiestFirst), byProvider: byProvider.sort(busiestFirst) }
    : null
  return { totals, series, report }
}

/**
 * The busiest users of the scope, by calls or by cost, at most TOP_USERS ('' stands for no user label),
 * and how many users there are in all (counted over the groups before the LIMIT).
 */
export async function usageByUser (ch: ClickHouseClient, s: UsageScope & { order: UsersOrder }): Promise<{ users: number; top: UsageGroupRow[] }> {
  const w = where(s)
  const order = s.order === 'cost' ? 'cost_usd DESC, requests DESC' : 'requests DESC, cost_usd DESC'
  const rs = await ch.query({
    query: `SELECT user AS group_value, ${TRACE_MEASURES}, count() OVER () AS users FROM traces WHERE ${w.sql}
      GROUP BY group_value ORDER BY ${order}, group_value LIMIT ${TOP_USERS}`,
    query_params: w.params,
    format: 'JSONEachRow',
  })
  const rows = await rs.json<Raw>()
  return { users: Number(rows[0]?.users ?? 0), top: rows.map((x) => ({ group: String(x.group_value), ...measures(x) })) }
}
