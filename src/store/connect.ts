// The one place a ClickHouse client is made: embedded chDB in the data directory, or a server by URL.
import { randomUUID } from 'node:crypto'
import { mkdirSync, readdirSync, rmSync } from 'node:fs'
import { open, unlink } from 'node:fs/promises'
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

/** Where each embedded client stages its insert batches as files (see insertTsv). */
const embedded = new WeakMap<ClickHouseClient, string>()
/**
 * Batch file names carry an id of this run (not the process id: in a container every run can be pid 1)
 * and a number counted across clients: a client made while another still inserts (the test seam that
 * switches connections) never reuses a name in use, nor clears a file in use.
 */
const RUN = randomUUID().slice(0, 8)
let batchSeq = 0

export function insertInbox (dataDir: string): string {
  return join(dataDir, 'insert-batches')
}

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
    // Batch files are removed when their insert returns; one left here belongs to an insert a crash
    // cut short, whose rows are accounted for elsewhere (the spool) or not at all, never by this file.
    const inbox = insertInbox(dataDir)
    mkdirSync(inbox, { recursive: true })
    for (const f of readdirSync(inbox)) if (!f.includes(`-${RUN}-`)) rmSync(join(inbox, f), { force: true })
    embedded.set(client, inbox)
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

/** A string literal for ClickHouse SQL. */
function sqlString (s: string): string {
  return `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`
}

/**
 * Inserts a TabSeparated batch given as parts (rows never span two parts). Embedded, the batch is written
 * to a file and ClickHouse reads it with `INSERT … SELECT * FROM file()`: chDB's own raw insert puts the
 * bytes into the query text and parses them there, which cost 15 µs more per 4 KB row than reading the
 * same bytes from a file (into a Null table: 21.6 against 6.5 µs per row, about half of all the CPU an
 * embedded insert took). The columns of the file are the insert's columns, with the table's types. A
 * server gets the batch as the HTTP body.
 */
export async function insertTsv (client: ClickHouseClient, table: string, columns: readonly string[], parts: readonly Uint8Array[],
  settings: Record<string, string | number>): Promise<void> {
  const inbox = embedded.get(client)
  if (inbox !== undefined) {
    const file = join(inbox, `${table}-${RUN}-${++batchSeq}.tsv`)
    const fh = await open(file, 'w')
    try {
      await fh.writev(parts as Uint8Array[])
    } finally {
      await fh.close()
    }
    try {
      await client.command({
        query: `INSERT INTO ${table} (${columns.join(', ')}) SELECT * FROM file(${sqlString(file)}, TabSeparated)`,
        clickhouse_settings: { ...settings, use_structure_from_insertion_table_in_table_functions: '1' },
      })
    } finally {
      await unlink(file).catch(() => {})
    }
    return
  }
  await client.insert({
    table,
    columns: columns as [string, ...string[]],
    values: Readable.from(parts),
    format: 'TabSeparated',
    clickhouse_settings: settings,
  })
}
