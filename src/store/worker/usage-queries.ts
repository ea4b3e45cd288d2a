// The dashboard's usage queries, all from the usage_minute rollup (never the raw traces), all
// parameterised and filtered by the caller's account.
import type { ClickHouseClient } from '@clickhouse/client'
import type { Breakdown, Bucket, UsageRange } from '../query-types.js'
import type { UsageMeasures } from '../trace-types.js'
import { chTime } from './connect.js'

export const MEASURES = `sum(requests) AS requests, sum(blocked) AS blocked, sum(errors) AS errors,
  sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
  sum(cached_input_tokens) AS cached_input_tokens, sum(cost_usd) AS cost_usd,
  sum(unpriced_calls) AS unpriced_calls, quantilesTDigestMerge(0.5, 0.95, 0.99)(latency) AS q`

const WHERE = `account_id = {accountId:UUID} AND minute >= toStartOfMinute({from:DateTime64(3)})
  AND minute < {to:DateTime64(3)}`

export const BUCKETS: Record<Bucket, string> = {
  minute: 'minute',
  hour: 'toStartOfHour(minute)',
  day: 'toStartOfDay(minute)',
}

const GROUPS: Record<Breakdown, string> = { key: 'key_id', model: 'model', provider: 'provider' }

export type Raw = Record<string, unknown> & { q: number[] }

export function measures (r: Raw): UsageMeasures {
  const requests = Number(r.requests ?? 0)
  const q = requests > 0 ? r.q : []
  const at = (i: number): number | null => (q[i] === undefined || Number.isNaN(q[i]) ? null : Math.round(Number(q[i]) * 1000) / 1000)
  return {
    requests,
    blocked: Number(r.blocked ?? 0),
    errors: Number(r.errors ?? 0),
    input_tokens: Number(r.input_tokens ?? 0),
    output_tokens: Number(r.output_tokens ?? 0),
    cached_input_tokens: Number(r.cached_input_tokens ?? 0),
    cost_usd: Number(r.cost_usd ?? 0),
    unpriced_calls: Number(r.unpriced_calls ?? 0),
    latency_p50_ms: at(0),
    latency_p95_ms: at(1),
    latency_p99_ms: at(2),
  }
}

function params (r: UsageRange): Record<string, unknown> {
  return { accountId: r.accountId, from: chTime(r.from), to: chTime(r.to) }
}

async function rows (ch: ClickHouseClient, query: string, p: Record<string, unknown>): Promise<Raw[]> {
  const rs = await ch.query({ query, query_params: p, format: 'JSONEachRow' })
  return rs.json<Raw>()
}

export async function usageTotals (ch: ClickHouseClient, r: UsageRange): Promise<UsageMeasures> {
  const [row] = await rows(ch, `SELECT ${MEASURES} FROM usage_minute WHERE ${WHERE}`, params(r))
  return measures(row ?? { q: [] })
}

export async function usageSeries (ch: ClickHouseClient, r: UsageRange & { bucket: Bucket }): Promise<Array<UsageMeasures & { t: string }>> {
  const bucket = BUCKETS[r.bucket]
  const out = await rows(ch, `SELECT ${bucket} AS t, ${MEASURES} FROM usage_minute WHERE ${WHERE} GROUP BY t ORDER BY t`, params(r))
  return out.map((x) => ({ t: String(x.t), ...measures(x) }))
}

export async function usageBreakdown (ch: ClickHouseClient, r: UsageRange & { by: Breakdown }): Promise<Array<UsageMeasures & { group: string }>> {
  const g = GROUPS[r.by]
  const out = await rows(ch, `SELECT ${g} AS group_value, ${MEASURES} FROM usage_minute WHERE ${WHERE}
    GROUP BY group_value ORDER BY requests DESC, group_value`, params(r))
  return out.map((x) => ({ group: String(x.group_value), ...measures(x) }))
}
