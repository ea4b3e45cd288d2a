// The one place a ClickHouse client is made: embedded chDB in the data directory, or a server by URL.
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client'
import { createChdbConnection } from 'chdb/connection'
import type { ClickHouseServerConfig } from '../config.js'

// Counts and byte sizes (UInt64) come back as JSON numbers, not strings, for every query.
const SETTINGS = { output_format_json_quote_64bit_integers: 0 } as const

export function chdbPath (dataDir: string): string {
  return join(dataDir, 'clickhouse')
}

type ChdbConnection = ReturnType<typeof createChdbConnection>

/** The chDB connection under each embedded client, for its zero-copy raw insert. */
const embedded = new WeakMap<ClickHouseClient, ChdbConnection>()

export async function connect (dataDir: string, server: ClickHouseServerConfig | null): Promise<ClickHouseClient> {
  if (server === null) {
    const path = chdbPath(dataDir)
    mkdirSync(path, { recursive: true })
    const connection = createChdbConnection({ path })
    const client = createClient({
      clickhouse_settings: SETTINGS,
      // chdb implements @clickhouse/client's Connection interface against its own copy of client-common.
      connection: connection as unknown as NonNullable<Parameters<typeof createClient>[0]>['connection'],
    })
    embedded.set(client, connection)
    return client
  }
  if (server.database !== 'default') {
    const bootstrap = createClient({ url: server.url, username: server.username, password: server.password })
    try {
      await bootstrap.command({ query: `CREATE DATABASE IF NOT EXISTS ${server.database}` })
    } finally {
      await bootstrap.close()
    }
  }
  return createClient({
    // The store reports failures itself (spooling, readiness); the client's own console logging would
    // print every refused connection while ClickHouse is away.
    log: { level: ClickHouseLogLevel.OFF },
    clickhouse_settings: SETTINGS,
    url: server.url,
    username: server.username,
    password: server.password,
    database: server.database,
    request_timeout: 30_000,
  })
}

/** ClickHouse's DateTime64(3) text form, in UTC. */
export function chTime (ms: number): string {
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', '')
}

/**
 * Inserts a TabSeparated batch as bytes. Embedded, the buffer goes to chDB without a copy (the
 * client's own insert would turn it into one SQL string); a server gets it as the HTTP body.
 */
export async function insertTsv (client: ClickHouseClient, table: string, columns: readonly string[], tsv: Uint8Array,
  settings: Record<string, string | number>): Promise<void> {
  const chdb = embedded.get(client)
  if (chdb !== undefined) {
    await chdb.chdb.rawInsert({ table, columns, values: tsv, format: 'TabSeparated', settings })
    return
  }
  await client.insert({
    table,
    columns: columns as [string, ...string[]],
    values: Readable.from([tsv]),
    format: 'TabSeparated',
    clickhouse_settings: settings,
  })
}
