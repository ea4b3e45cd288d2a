// The use each key already has in the limits' current windows, for the limiter to start from after a
// restart: the usage_minute rollup for tokens and cost, the current minute's traces for requests.
import type { ClickHouseClient } from '@clickhouse/client'
import { chTime } from './connect.js'
import type { LimitUsageRow } from '../../domain/limits.js'

/**
 * Per account and key with any use this UTC month: requests and input + output tokens in the minute
 * containing `now`, cost in the UTC day and month containing it. Only the current month's partition is
 * read (usage_minute is partitioned by month), so the cost stays that of one month of minutes.
 *
 * Requests are counted as the limiter counts them, admitted ones only: the rollup cannot tell those from
 * calls refused by the limits or by an earlier check, so they come from the traces of that one minute
 * (a time range of one partition: a few granules per account).
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
        sumIf(input_tokens + output_tokens, minute = {minute:DateTime64(3, 'UTC')}) AS minute_tokens,
        sumIf(cost_usd, minute >= {day:DateTime64(3, 'UTC')}) AS day_usd,
        sum(cost_usd) AS month_usd
      FROM usage_minute
      WHERE minute >= {month:DateTime64(3, 'UTC')} AND minute <= {minute:DateTime64(3, 'UTC')}
      GROUP BY account_id, key_id`,
    query_params: params,
    format: 'JSONEachRow',
  })
  const rows = await rs.json<{ account_id: string; key_id: string; minute_tokens: number; day_usd: number; month_usd: number }>()
  const admitted = await ch.query({
    // Refused before or by the limits: 'limited', and 'rejected' except detection's 503, which comes after them.
    query: `SELECT key_id, count() AS n FROM traces
      WHERE time >= {minute:DateTime64(3, 'UTC')} AND time < {minute:DateTime64(3, 'UTC')} + INTERVAL 1 MINUTE
        AND outcome != 'limited' AND NOT (outcome = 'rejected' AND error_code != 'detection_unavailable')
      GROUP BY key_id`,
    query_params: params,
    format: 'JSONEachRow',
  })
  const requests = new Map((await admitted.json<{ key_id: string; n: number }>()).map((r) => [r.key_id, Number(r.n)]))
  return rows.map((r) => ({
    accountId: r.account_id,
    keyId: r.key_id,
    minuteRequests: requests.get(r.key_id) ?? 0,
    minuteTokens: Number(r.minute_tokens),
    dayUsd: Number(r.day_usd),
    monthUsd: Number(r.month_usd),
  }))
}
