// Numbered SQL migrations from clickhouse/, applied in order, each recorded so it runs once.
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { ClickHouseClient } from '@clickhouse/client'
import { chTime } from './connect.js'

export const MIGRATION_FILE = /^(\d+)_[a-z0-9_]+\.sql$/

export async function migrate (client: ClickHouseClient, dir: string): Promise<string[]> {
  await client.command({
    query: `CREATE TABLE IF NOT EXISTS schema_migrations
      (version UInt32, name String, applied_at DateTime64(3, 'UTC'))
      ENGINE = ReplacingMergeTree ORDER BY version`,
  })
  const rs = await client.query({ query: 'SELECT version FROM schema_migrations FINAL', format: 'JSONEachRow' })
  const done = new Set((await rs.json<{ version: number }>()).map((r) => Number(r.version)))
  const files = (await readdir(dir)).filter((f) => MIGRATION_FILE.test(f)).sort()
  const applied: string[] = []
  for (const file of files) {
    const version = Number(MIGRATION_FILE.exec(file)![1])
    if (done.has(version)) continue
    const sql = await readFile(join(dir, file), 'utf8')
    for (const statement of splitStatements(sql)) await client.command({ query: statement })
    await client.insert({
      table: 'schema_migrations',
      values: [{ version, name: file, applied_at: chTime(Date.now()) }],
      format: 'JSONEachRow',
    })
    applied.push(file)
  }
  return applied
}

/** Statements end with `;` at the end of a line; `--` comment lines are dropped. */
export function splitStatements (sql: string): string[] {
  const lines = sql.split('\n').filter((l) => !l.trimStart().startsWith('--'))
  return lines.join('\n').split(/;\s*$/m).map((s) => s.trim()).filter((s) => s !== '')
}
