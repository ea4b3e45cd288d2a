// Retention from the configuration, applied at every start: prompt and response bodies are cleared
// after TRACEGATE_BODY_TTL_DAYS, whole rows deleted after TRACEGATE_TRACE_TTL_DAYS (0: kept). These are
// metadata changes; ClickHouse applies TTLs as it merges parts (materialize_ttl_after_modify is off,
// so a start never rewrites the whole table).
import type { ClickHouseClient } from '@clickhouse/client'

const SETTINGS = { materialize_ttl_after_modify: 0 } as const

export async function applyRetention (ch: ClickHouseClient, bodyDays: number, rowDays: number): Promise<void> {
  const body = Math.floor(bodyDays)
  const rows = Math.floor(rowDays)
  for (const column of ['prompt', 'response']) {
    await ch.command({
      query: body > 0
        ? `ALTER TABLE traces MODIFY COLUMN ${column} TTL toDateTime(time) + toIntervalDay(${body})`
        : `ALTER TABLE traces MODIFY COLUMN ${column} REMOVE TTL`,
      clickhouse_settings: SETTINGS,
    }).catch((err: Error) => {
      // Removing a TTL that is not there is an error in ClickHouse; nothing to do then.
      if (body > 0 || !/TTL/i.test(err.message)) throw err
    })
  }
  await ch.command({
    query: rows > 0 ? `ALTER TABLE traces MODIFY TTL toDateTime(time) + toIntervalDay(${rows})` : 'ALTER TABLE traces REMOVE TTL',
    clickhouse_settings: SETTINGS,
  }).catch((err: Error) => {
    if (rows > 0 || !/TTL/i.test(err.message)) throw err
  })
}
