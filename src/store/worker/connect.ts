// The one place a ClickHouse client is made: embedded chDB in the data directory, or a server by URL.
import { randomUUID } from 'node:crypto'
import { mkdirSync, readdirSync, rmSync } from 'node:fs'
import { open, unlink, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { promisify } from 'node:util'
import { brotliCompress, constants as zlib } from 'node:zlib'
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client'
import type { ClickHouseServerConfig } from '../../config.js'
import { TracegateError } from '../../errors.js'
import { clickhouseVersionProblem, MIN_CLICKHOUSE_VERSION } from '../../domain/clickhouse-version.js'

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

/** Server clients whose trace inserts are sent brotli-compressed (CLICKHOUSE_COMPRESSION). */
const compressed = new WeakSet<ClickHouseClient>()
const brotli = promisify(brotliCompress)
/**
 * Quality 0, the cheapest codec measured: 5.4x fewer bytes on trace rows for about 3 µs of CPU per row,
 * where quality 1 saves 7 % more bytes for 1.5x the CPU and gzip level 1 costs 2.5x (bench/RESULTS.md).
 */
const BROTLI = { params: { [zlib.BROTLI_PARAM_QUALITY]: 0 } }

const NETWORK_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE'])

/**
 * A server must answer as ClickHouse before tracegate starts on it: a wrong URL stops the start with a
 * message naming it, instead of every key lookup and trace failing later.
 */
async function checkServer (client: ClickHouseClient, server: ClickHouseServerConfig): Promise<void> {
  // config.ts keeps credentials out of the URL, so it may be printed as it is.
  const where = server.url.replace(/\/$/, '')
  let rows: unknown
  try {
    const rs = await client.query({ query: 'SELECT version() AS version', format: 'JSONEachRow' })
    rows = await rs.json()
  } catch (err) {
    const e = err as { code?: unknown; message?: unknown }
    let cause = String(e.message ?? err).split('\n')[0]!.slice(0, 200)
    if (cause.trimStart().startsWith('<')) cause = 'it answered with an HTML page'
    if (typeof e.code === 'string' && NETWORK_ERRORS.has(e.code)) {
      throw new TracegateError('clickhouse_unavailable', { message: `ClickHouse at ${where} (CLICKHOUSE_URL) is not reachable: ${cause}` })
    }
    throw new TracegateError('clickhouse_unavailable', { message: `the server at ${where} (CLICKHOUSE_URL) did not answer as ClickHouse: ${cause}` })
  }
  const first = Array.isArray(rows) ? rows[0] as { version?: unknown } | undefined : undefined
  if (typeof first?.version !== 'string') {
    throw new TracegateError('clickhouse_unavailable', { message: `the server at ${where} (CLICKHOUSE_URL) did not answer as ClickHouse: SELECT version() returned no version` })
  }
  // Refused before any migration touches it: an older server fails later on types it lacks.
  const tooOld = clickhouseVersionProblem(first.version)
  if (tooOld !== null) {
    throw new TracegateError('clickhouse_unavailable', { message: `the server at ${where} (CLICKHOUSE_URL): ${tooOld}; upgrade it to ${MIN_CLICKHOUSE_VERSION} or newer` })
  }
}

/** `check`: a server must answer as ClickHouse (the start's connection; the test seam's may point nowhere). */
export async function connect (dataDir: string, server: ClickHouseServerConfig | null, check = false): Promise<ClickHouseClient> {
  if (server === null) {
    const path = chdbPath(dataDir)
    mkdirSync(path, { recursive: true })
    // Loaded only when embedded: with a server URL the 550 MB engine never enters the process, and a
    // store worker that exits cannot take the process down with chDB's unloading (client.ts).
    const { createChdbConnection } = await import('chdb/connection')
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
  if (check || server.database !== 'default') {
    const bootstrap = createClient({ url: server.url, username: server.username, password: server.password, log: { level: ClickHouseLogLevel.OFF } })
    try {
      if (check) await checkServer(bootstrap, server)
      if (server.database !== 'default') await bootstrap.command({ query: `CREATE DATABASE IF NOT EXISTS ${server.database}` })
    } finally {
      await bootstrap.close()
    }
  }
  const client = createClient({
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
  if (server.compression) compressed.add(client)
  return client
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
 * bytes into the query text and parses them there, several times the CPU of reading them from a file
 * (figures in bench/RESULTS.md). The columns of the file are the insert's columns, with the
 * table's types. A server gets the batch as the HTTP body, brotli-compressed with CLICKHOUSE_COMPRESSION.
 */
export async function insertTsv (client: ClickHouseClient, table: string, columns: readonly string[], parts: readonly Uint8Array[],
  settings: Record<string, string | number>): Promise<void> {
  const inbox = embedded.get(client)
  if (inbox !== undefined) {
    const file = join(inbox, `${table}-${RUN}-${++batchSeq}.tsv`)
    let fh: FileHandle
    try {
      fh = await open(file, 'w')
    } catch (err) {
      // The folder was removed under the running process: made again, so inserts recover by themselves.
      if ((err as { code?: unknown }).code !== 'ENOENT') throw err
      mkdirSync(inbox, { recursive: true })
      fh = await open(file, 'w')
    }
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
  if (compressed.has(client)) {
    // The whole batch in one call on the thread pool: the client's own request compression streams it
    // through zlib in small chunks, 1.5x the CPU per row for the same codec (bench/RESULTS.md).
    // ClickHouse decodes a br body whatever its settings (its HTTP interface's Content-Encoding).
    const body = await brotli(parts.length === 1 ? parts[0]! : Buffer.concat(parts), BROTLI)
    await client.insert({
      table,
      columns: columns as [string, ...string[]],
      values: Readable.from([body], { objectMode: false }),
      format: 'TabSeparated',
      clickhouse_settings: settings,
      http_headers: { 'Content-Encoding': 'br' },
    })
    return
  }
  await client.insert({
    table,
    columns: columns as [string, ...string[]],
    // A byte stream: @clickhouse/client refuses an object-mode one for a raw format.
    values: Readable.from(parts, { objectMode: false }),
    format: 'TabSeparated',
    clickhouse_settings: settings,
  })
}
