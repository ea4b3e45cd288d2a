// The SQL port's queries. Isolation never rests on reading SQL text here: ClickHouse parses the caller's
// query (formatQuery, which refuses a second statement, then EXPLAIN AST and EXPLAIN QUERY TREE on its own
// formatted text), the checks below walk what it reports, and what runs is that formatted single SELECT
// inside an outer SELECT whose SETTINGS make it read-only, bound it, and name the caller's account, which
// the `account` views (clickhouse/014_sql_views.sql) read. The caller can set no setting in the query.
import type { ClickHouseClient, ClickHouseSettings } from '@clickhouse/client'
import { TracegateError } from '../../errors.js'
import type { SqlLimits, SqlQuery, SqlResult } from '../query-types.js'

/** Tables a query may read; every other table, and every table function, is refused. */
const TABLES: ReadonlySet<string> = new Set([
  'account.traces', 'account.usage',
  'system.one', 'system.numbers', 'system.databases', 'system.tables', 'system.columns',
  'system.functions', 'system.data_type_families', 'system.time_zones', 'system.settings',
])

/**
 * The catalogue tables list every database, so only their descriptive columns may be read: never sizes,
 * row counts, paths, or definitions, which would tell about other accounts' data.
 */
const CATALOGUE_COLUMNS: Readonly<Record<string, ReadonlySet<string>>> = {
  'system.databases': new Set(['name', 'engine', 'comment']),
  'system.tables': new Set(['database', 'name', 'engine', 'is_temporary', 'comment']),
  'system.columns': new Set(['database', 'table', 'name', 'type', 'position', 'default_kind', 'default_expression', 'comment', 'is_in_partition_key', 'is_in_sorting_key', 'is_in_primary_key', 'is_in_sampling_key']),
}

/**
 * Functions that read outside the query (files, URLs, servers, dictionaries, join tables, models) or about
 * the host, by name (lower case) or by the prefix of a family. Table functions need no entry: every one
 * is refused where it stands (a function in FROM, a TABLE_FUNCTION of the query tree).
 */
const DENIED_NAMES: ReadonlySet<string> = new Set(['file', 'url', 'input', 'remote', 'remotesecure', 'joinget', 'joingetornull',
  'catboostevaluate', 'evalmlmethod', 'showcertificate', 'getserversetting', 'getclienthttpheader', 'getmacro', 'globalvariable',
  'hascolumnintable'])
const DENIED_PREFIXES = ['dict', 'filesystem', 's3', 'azure', 'hdfs', 'mysql', 'postgresql', 'odbc', 'jdbc', 'executable']

function denied (fn: string): boolean {
  const name = fn.toLowerCase()
  return DENIED_NAMES.has(name) || DENIED_PREFIXES.some((p) => name.startsWith(p))
}

/** Output formats the port serves; a FORMAT clause or default_format names one of these. */
export const SQL_FORMATS: ReadonlySet<string> = new Set([
  'JSON', 'JSONEachRow', 'JSONCompact', 'JSONCompactEachRow', 'JSONCompactEachRowWithNamesAndTypes', 'JSONStrings', 'JSONStringsEachRow',
  'JSONCompactStrings', 'JSONCompactStringsEachRow', 'JSONObjectEachRow', 'JSONLines', 'NDJSON',
  'TabSeparated', 'TabSeparatedRaw', 'TabSeparatedWithNames', 'TabSeparatedWithNamesAndTypes', 'TSV', 'TSVRaw', 'TSVWithNames', 'TSVWithNamesAndTypes',
  'CSV', 'CSVWithNames', 'CSVWithNamesAndTypes', 'Parquet', 'RowBinary', 'RowBinaryWithNames', 'RowBinaryWithNamesAndTypes', 'Native', 'Pretty', 'PrettyCompact', 'Values',
])

const PARAM = '__tracegate_sql'
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

function refuse (message: string): never {
  throw new TracegateError('sql_not_allowed', { message })
}

/** ClickHouse's refusal as the port's error: its first line, which names the ClickHouse code. */
function chError (err: unknown): TracegateError {
  if (err instanceof TracegateError) return err
  // Both clients give ClickHouse's error as a ClickHouseError: its code, its name and the message.
  const e = err as { message?: unknown; code?: unknown; type?: unknown }
  const message = String(e?.message ?? err).split('\n')[0]!.slice(0, 1000)
  const code = typeof e?.code === 'string' && /^\d+$/.test(e.code) ? e.code : null
  const type = typeof e?.type === 'string' && /^[A-Z0-9_]+$/.test(e.type) ? e.type : null
  if (code === null || /^Code: \d+/.test(message)) return new TracegateError('sql_error', { message })
  return new TracegateError('sql_error', { message: `Code: ${code}. DB::Exception: ${message}${type === null ? '' : ` (${type})`}` })
}

async function text (ch: ClickHouseClient, query: string, params: Record<string, unknown>, settings?: ClickHouseSettings): Promise<string> {
  const rs = await ch.query({ query, query_params: params, format: 'TabSeparatedRaw', ...(settings === undefined ? {} : { clickhouse_settings: settings }) })
  return rs.text()
}

/** One line of an EXPLAIN: its depth (its indentation: one space per level in AST) and its text. */
function lines (out: string): Array<{ depth: number; text: string }> {
  return out.split('\n').filter((l) => l.trim() !== '').map((l) => {
    const raw = l.startsWith('"') && l.endsWith('"') ? l.slice(1, -1) : l
    const text = raw.trimStart()
    return { depth: raw.length - text.length, text }
  })
}

/**
 * Checks the parse of one statement without its FORMAT clause: a SELECT (UNION, WITH and subqueries
 * included), no SETTINGS, no INTO OUTFILE, no table function, no denied function. The one top-level
 * identifier allowed is the output format the client asked of EXPLAIN.
 */
function checkAst (ast: Array<{ depth: number; text: string }>): void {
  if (ast.length === 0 || !ast[0]!.text.startsWith('SelectWithUnionQuery')) refuse('only a SELECT query may run here')
  let explainFormat = false
  for (let i = 1; i < ast.length; i++) {
    const { depth, text } = ast[i]!
    const kind = text.split(' ')[0]!
    if (depth === 1) {
      if (kind === 'ExpressionList') continue
      if (kind === 'Identifier' && !explainFormat) { explainFormat = true; continue }
      refuse('a query may not set settings or write its result to a file')
    }
    if (kind === 'Set' || kind === 'SetQuery') refuse('a query may not change settings')
    if (kind === 'Function') {
      const name = text.slice('Function '.length).split(' ')[0]!
      // A function straight under a TableExpression is a table function.
      const parent = ast.slice(0, i).reverse().find((l) => l.depth < depth)
      if (parent?.text.startsWith('TableExpression')) refuse(`table function ${name} is not allowed; read account.traces or account.usage`)
      if (denied(name)) refuse(`function ${name} is not allowed here`)
    }
  }
}

/** The functions whose second argument, written as a bare name, is a table. */
const IN_FUNCTIONS: ReadonlySet<string> = new Set(['in', 'notIn', 'globalIn', 'globalNotIn', 'nullIn', 'notNullIn', 'globalNullIn', 'globalNotNullIn'])
/** Where a bare name in the unanalysed tree names a table. */
const TABLE_PLACES: ReadonlySet<string> = new Set(['JOIN TREE', 'LEFT TABLE EXPRESSION', 'RIGHT TABLE EXPRESSION', 'TABLE EXPRESSION'])

/**
 * Checks the tree before analysis, which runs scalar subqueries (their values and errors would reach the
 * caller): every name in a table's place is an allowed table or one of the query's own CTEs. A CTE may not
 * share a name with a table of the connection's database, so a name read outside the CTE's scope cannot
 * reach that table either.
 */
function checkNames (tree: Array<{ depth: number; text: string }>, ownTables: ReadonlySet<string>): void {
  const ctes = new Set<string>()
  for (const { text } of tree) {
    const cte = /cte_name: ([^,\s]+)/.exec(text)?.[1]
    if (cte === undefined) continue
    if (ownTables.has(cte)) refuse(`a CTE may not be named ${cte}, the name of a table; read account.traces or account.usage`)
    ctes.add(cte)
  }
  const parentOf = (i: number): number => {
    for (let j = i - 1; j >= 0; j--) if (tree[j]!.depth < tree[i]!.depth) return j
    return -1
  }
  for (let i = 0; i < tree.length; i++) {
    const { text } = tree[i]!
    if (text.startsWith('TABLE_FUNCTION')) refuse('a table function is not allowed; read account.traces or account.usage')
    if (!text.startsWith('IDENTIFIER ')) continue
    const name = /identifier: (\S+)$/.exec(text)?.[1] ?? ''
    const parent = parentOf(i)
    let table = parent >= 0 && TABLE_PLACES.has(tree[parent]!.text)
    if (!table && parent >= 0 && tree[parent]!.text.startsWith('LIST ')) {
      // The second of a FUNCTION in(...)'s ARGUMENTS list.
      const args = parentOf(parent)
      const fn = args >= 0 && tree[args]!.text === 'ARGUMENTS' ? parentOf(args) : -1
      const fnName = fn >= 0 ? /^FUNCTION id: \d+, function_name: ([^,\s]+)/.exec(tree[fn]!.text)?.[1] : undefined
      if (fnName !== undefined && IN_FUNCTIONS.has(fnName)) {
        const siblings = tree.slice(parent + 1).findIndex((l) => l.depth <= tree[parent]!.depth)
        const end = siblings < 0 ? tree.length : parent + 1 + siblings
        const children = tree.slice(parent + 1, end).filter((l) => l.depth === tree[i]!.depth)
        table = children.length === 2 && children[1] === tree[i]
      }
    }
    if (!table) continue
    if (name.includes('.') ? !TABLES.has(name) : !ctes.has(name)) refuse(`table ${name} is not readable here; read account.traces or account.usage`)
  }
}

/** The tables of the connection's own database, whose names a CTE may not take. */
async function ownTables (ch: ClickHouseClient): Promise<Set<string>> {
  const out = await text(ch, 'SELECT name FROM system.tables WHERE database = currentDatabase()', {})
  return new Set(out.split('\n').filter((n) => n !== ''))
}

/** Checks the analysed query: every table is allowed, catalogue tables only through their safe columns. */
function checkTree (tree: Array<{ depth: number; text: string }>): void {
  const tables = new Map<string, string>()
  const columns: Array<{ name: string; source: string }> = []
  for (const { text } of tree) {
    const node = /^([A-Z_]+) id: (\d+)(.*)$/.exec(text)
    if (node === null) continue
    const [, kind, id, rest] = node
    if (kind === 'TABLE_FUNCTION') refuse(`table function ${/table_function_name: ([^,\s]+)/.exec(rest!)?.[1] ?? ''} is not allowed`)
    if (kind === 'TABLE') {
      const table = /table_name: ([^,\s]+)/.exec(rest!)?.[1] ?? ''
      if (!TABLES.has(table)) refuse(`table ${table} is not readable here; read account.traces or account.usage`)
      tables.set(id!, table)
    }
    if (kind === 'FUNCTION') {
      const name = /function_name: ([^,\s]+)/.exec(rest!)?.[1] ?? ''
      if (denied(name)) refuse(`function ${name} is not allowed here`)
    }
    if (kind === 'COLUMN') {
      const name = /column_name: ([^,\s]+)/.exec(rest!)?.[1]
      const source = /source_id: (\d+)/.exec(rest!)?.[1]
      if (name !== undefined && source !== undefined) columns.push({ name, source })
    }
  }
  for (const c of columns) {
    const table = tables.get(c.source)
    const safe = table === undefined ? undefined : CATALOGUE_COLUMNS[table]
    if (safe !== undefined && !safe.has(c.name)) refuse(`column ${c.name} of ${table!} is not readable here`)
  }
}

/**
 * The schema browsers' statements (SHOW DATABASES, SHOW TABLES, DESCRIBE of the port's tables), by the
 * formatter's exact text, answered with the port's own query over the `account` database; null for any
 * other statement.
 */
function catalogue (formatted: string): string | null {
  if (formatted === 'SHOW DATABASES') return "SELECT name FROM system.databases WHERE name = 'account'"
  if (formatted === 'SHOW TABLES' || formatted === 'SHOW TABLES FROM account') return "SELECT name FROM system.tables WHERE database = 'account' ORDER BY name"
  const m = /^DESCRIBE TABLE (account\.(?:traces|usage))$/.exec(formatted)
  return m === null ? null : `DESCRIBE TABLE ${m[1]!}`
}

async function run (ch: ClickHouseClient, query: string, params: Readonly<Record<string, string>>, format: string): Promise<SqlResult> {
  try {
    const rs = await ch.exec({ query, query_params: params })
    const parts: Buffer[] = []
    for await (const chunk of rs.stream) parts.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array))
    const body = Buffer.concat(parts)
    return { format, body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength) }
  } catch (err) {
    throw chError(err)
  }
}

/**
 * The settings clause's bounds, for the analysis that runs before the query: it runs no statement but
 * the query's own scalar subqueries, which checkNames has confined to the account's tables.
 */
function settingsOf (accountId: string, limits: SqlLimits): ClickHouseSettings {
  return {
    log_comment: accountId,
    max_execution_time: limits.maxExecutionSeconds,
    timeout_overflow_mode: 'throw',
    max_memory_usage: String(limits.maxMemoryBytes),
    max_threads: limits.maxThreads,
  }
}

function settingsClause (accountId: string, limits: SqlLimits): string {
  // readonly last: every setting before it is the port's own.
  return [
    `log_comment = '${accountId}'`,
    `max_execution_time = ${limits.maxExecutionSeconds}`,
    `timeout_overflow_mode = 'throw'`,
    `max_memory_usage = ${limits.maxMemoryBytes}`,
    `max_result_rows = ${limits.maxResultRows}`,
    `max_result_bytes = ${limits.maxResultBytes}`,
    `result_overflow_mode = 'throw'`,
    `max_threads = ${limits.maxThreads}`,
    'readonly = 1',
  ].join(', ')
}

/**
 * Checks and runs one query of the SQL port for one account; the result comes back whole, in the format
 * the query names (its FORMAT clause, else `format`), its size bounded by max_result_bytes.
 */
export async function sqlQuery (ch: ClickHouseClient, q: SqlQuery): Promise<SqlResult> {
  const limits = q.limits
  if (!UUID.test(q.accountId)) throw new TracegateError('sql_not_allowed', { message: 'no account' })
  for (const name of Object.keys(q.params)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || name.startsWith('__')) refuse(`query parameter ${name} is not allowed`)
  }
  let inner: string
  let format: string | null = null
  try {
    // Sent as base64, so the text reaches ClickHouse as it is whatever a client's escaping of parameters;
    // TabSeparatedRaw writes the value back as it is, then one line end.
    inner = (await text(ch, `SELECT formatQuery(base64Decode({${PARAM}:String}))`, { [PARAM]: Buffer.from(q.query, 'utf8').toString('base64') })).replace(/\n$/, '')
    // The formatter writes a FORMAT clause as the last line and never a line end inside a literal.
    const m = /\nFORMAT ([A-Za-z0-9_]+)$/.exec(inner)
    if (m !== null) {
      format = m[1]!
      inner = inner.slice(0, m.index)
    }
  } catch (err) {
    throw chError(err)
  }
  const own = catalogue(inner)
  if (own !== null) {
    const fmt = format ?? q.format
    if (!SQL_FORMATS.has(fmt)) throw new TracegateError('sql_not_allowed', { message: `format ${fmt} is not served here` })
    return run(ch, `${own}\nFORMAT ${fmt}`, {}, fmt)
  }
  try {
    checkAst(lines(await text(ch, `EXPLAIN AST ${inner}`, q.params)))
  } catch (err) {
    throw chError(err)
  }
  const outFormat = format ?? q.format
  if (!SQL_FORMATS.has(outFormat)) throw new TracegateError('sql_not_allowed', { message: `format ${outFormat} is not served here` })
  try {
    checkNames(lines(await text(ch, `EXPLAIN QUERY TREE run_passes = 0 ${inner}`, q.params)), await ownTables(ch))
    // The analysis runs scalar subqueries: under the query's own account and limits.
    checkTree(lines(await text(ch, `EXPLAIN QUERY TREE ${inner}`, q.params, settingsOf(q.accountId, limits))))
  } catch (err) {
    throw chError(err)
  }
  return run(ch, `SELECT * FROM (\n${inner}\n) SETTINGS ${settingsClause(q.accountId, limits)}\nFORMAT ${outFormat}`, q.params, outFormat)
}
