// The dashboard's whole usage answer in one query: totals, the series and the three breakdowns as
// GROUPING SETS over the usage_minute rollup. One query reads one snapshot, so the totals always equal
// the sum of the series and of each breakdown, even while a batch of traces lands (five separate
// queries could straddle an insert and disagree by the rows it brought).
import type { ClickHouseClient } from '@clickhouse/client'
import { chTime } from './connect.js'
import { BUCKETS, MEASURES, measures, type Raw } from './usage-queries.js'
import type { Bucket, UsageRange, UsageReport } from '../query-types.js'
import type { UsageMeasures } from '../trace-types.js'

const ZERO: Raw = { q: [] }

/** `keyId` narrows the report to one key of the account (the usage page's drill-down). */
export async function usageReport (ch: ClickHouseClient, r: UsageRange & { bucket: Bucket; keyId?: string | null }): Promise<UsageReport> {
  const oneKey = r.keyId !== undefined && r.keyId !== null
  const rs = await ch.query({
    // The bucket expression comes from a fixed table; every value is a parameter.
    query: `SELECT ${BUCKETS[r.bucket]} AS t, key_id, model, provider, ${MEASURES}
      FROM usage_minute
      WHERE account_id = {accountId:UUID} AND minute >= toStartOfMinute({from:DateTime64(3, 'UTC')})
        AND minute < {to:DateTime64(3, 'UTC')}${oneKey ? ' AND key_id = {keyId:UUID}' : ''}
      GROUP BY GROUPING SETS ((), (t), (key_id), (model), (provider))`,
    query_params: { accountId: r.accountId, from: chTime(r.from), to: chTime(r.to), ...(oneKey ? { keyId: r.keyId } : {}) },
    // A column outside a row's grouping set comes back NULL, which tells the sets apart.
    clickhouse_settings: { group_by_use_nulls: 1 },
    format: 'JSONEachRow',
  })
  const rows = await rs.json<Raw & { t: string | null; key_id: string | null; model: string | null; provider: string | null }>()
  let totals = measures(ZERO)
  const series: UsageReport['series'] = []
  const byKey: UsageReport['byKey'] = []
  const byModel: UsageReport['byModel'] = []
  const byProvider: UsageReport['byProvider'] = []
  for (const row of rows) {
    const m = measures(row)
    if (row.t !== null) series.push({ t: row.t, ...m })
    else if (row.key_id !== null) byKey.push({ group: row.key_id, ...m })
    else if (row.model !== null) byModel.push({ group: row.model, ...m })
    else if (row.provider !== null) byProvider.push({ group: row.provider, ...m })
    else totals = m
  }
  const busiestFirst = (x: { requests: number; group: string }, y: { requests: number; group: string }): number =>
    y.requests - x.requests || (x.group < y.group ? -1 : x.group > y.group ? 1 : 0)
  series.sort((x, y) => (x.t < y.t ? -1 : x.t > y.t ? 1 : 0))
  byKey.sort(busiestFirst)
  byModel.sort(busiestFirst)
  byProvider.sort(busiestFirst)
  return { totals, series, byKey, byModel, byProvider }
}
