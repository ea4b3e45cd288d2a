// What `tracegate doctor` asks the store: does ClickHouse answer, and which migrations it has of those
// this install ships. Read only: the doctor never migrates.
import { readdir } from 'node:fs/promises'
import type { ClickHouseClient } from '@clickhouse/client'
import type { StoreStatus } from '../protocol.js'
import { MIGRATION_FILE } from './migrate.js'

export async function storeStatus (ch: ClickHouseClient, url: string | null, migrationsDir: string): Promise<StoreStatus> {
  const rows = async <T>(query: string): Promise<T[]> => (await ch.query({ query, format: 'JSONEachRow' })).json<T>()
  const [version] = await rows<{ v: string }>('SELECT version() AS v')
  const table = await rows<{ name: string }>("SELECT name FROM system.tables WHERE database = currentDatabase() AND name = 'schema_migrations'")
  const applied = table.length === 0
    ? []
    : (await rows<{ name: string }>('SELECT name FROM schema_migrations FINAL ORDER BY version')).map((r) => r.name)
  const available = (await readdir(migrationsDir)).filter((f) => MIGRATION_FILE.test(f)).sort()
  return { url, version: version?.v ?? '', applied, available }
}
