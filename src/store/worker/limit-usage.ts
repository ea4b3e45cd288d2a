// The use each key already has in the limits' current windows, for the limiter to start from after a
// restart (issue 14): one query on the usage_minute rollup, never the raw traces.
import type { ClickHouseClient } from '@clickhouse/client'
import type { LimitUsageRow } from '../protocol.js'
import { chTime } from './connect.js'

/**
 * Per account and key with any use this UTC month: requests and input + output tokens in the minute
 * containing `now`, cost in the UTC day and month containing it. Only the current month's partition is
 * read (usage_minute is partitioned by month), so the cost stays that of one month of minutes.
 *
 * The rollup counts every traced call, refused ones included (it does not tell a limiter's refusal from
 * an admitted call), so after a restart the rest of that one minute errs on the side of refusing.
 */
export async function limitUsage (ch: ClickHouseClient, now: number): Promise<LimitUsageRow[]> {
  const at = new Date(now)
  const params = {
    minute: chTime(Math.floor(now / 60_000) * 60_000),
    day: chTime(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate())),
    month: chTime(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1)),
  }
  const rs = await ch.query({
    query: `SELECT account_id, key_id,
        sumIf(requests, minute = {minute:DateTime64(3, 'UTC')}) AS minute_requests,
        sumIf(input_tokens + output_tokens, minute = {minute:DateTime64(3, 'UTC')}) AS minute_tokens,
        sumIf(cost_usd, minute >= {day:DateTime64(3, 'UTC')}) AS day_usd,
        sum(cost_usd) AS month_usd
      FROM usage_minute
      WHERE minute >= {month:DateTime64(3, 'UTC')} AND minute <= {minute:DateTime64(3, 'UTC')}
      GROUP BY account_id, key_id`,
    query_params: params,
    format: 'JSONEachRow',
  })
  const rows = await rs.json<{ account_id: string; key_id: string; minute_requests: number; minute_tokens: number; day_usd: number; month_usd: number }>()
  return rows.map((r) => ({
    accountId: r.account_id,
    keyId: r.key_id,
    minuteRequests: Number(r.minute_requests),
    minuteTokens: Number(r.minute_tokens),
    dayUsd: Number(r.day_usd),
    monthUsd: Number(r.month_usd),
  }))
}
