// The SQL port with @clickhouse/client as the client: a sql key reads its own account's traces and
// nothing else whatever the SQL (other accounts' rows, the keys and users tables, system tables' sizes,
// files, URLs, other servers, settings), in the formats the clients use, compressed or not, and within
// the configured limits.
import t from 'tap'
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client'
import { request } from 'undici'
import { brotliCompressSync, gzipSync } from 'node:zlib'
import { stored } from '../helpers/store.js'
import { proxyCall, signedIn, startDashboard, type Tenant } from '../helpers/dashboard.js'
import { cliEnv, runTracegate } from '../helpers/cli.js'

// One ClickHouse thread per query: the heavy queries below run to their 2 s limit, and on a 2-core
// machine two threads each would take the CPU from the test files running beside this one.
const s = await startDashboard(t, { TRACEGATE_SQL_PORT: '0', TRACEGATE_SQL_MAX_RESULT_ROWS: '1000', TRACEGATE_SQL_MAX_EXECUTION_SECONDS: '2', TRACEGATE_SQL_MAX_THREADS: '1' }, { testSeams: true })
const a = await s.tenant('acme')
const b = await s.tenant('globex')
const sqlA = await s.tg.admin.createKey({ account: a.accountId, scope: 'sql', name: 'bi' })
const sqlB = await s.tg.admin.createKey({ account: b.accountId, scope: 'sql', name: 'bi' })
const url = `http://127.0.0.1:${s.tg.sqlPort!}`

async function calls (x: Tenant, n: number): Promise<string[]> {
  const ids: string[] = []
  for (let i = 0; i < n; i++) ids.push((await proxyCall(s, x.proxyKey, 'alpha')).traceId)
  await stored(s.tg, x.accountId, ids)
  return ids
}
const sentA = await calls(a, 3)
const sentB = await calls(b, 2)

function client (password: string, extra: Parameters<typeof createClient>[0] = {}): ClickHouseClient {
  // Refusals are what most cases here expect: the client is not to log each one as an error.
  const c = createClient({ url, username: 'anyone', password, log: { level: ClickHouseLogLevel.OFF }, ...extra })
  t.teardown(() => c.close())
  return c
}
const ca = client(sqlA.key)
const cb = client(sqlB.key)

async function rows<T> (c: ClickHouseClient, query: string, params?: Record<string, unknown>): Promise<T[]> {
  const rs = await c.query({ query, format: 'JSONEachRow', query_params: params })
  return rs.json<T>()
}

/** The ClickHouse error a refused query fails with. */
async function refused (c: ClickHouseClient, query: string, params?: Record<string, unknown>): Promise<{ code: string; message: string }> {
  try {
    await (await c.query({ query, format: 'JSONEachRow', query_params: params })).json()
  } catch (err) {
    return { code: String((err as { code?: unknown }).code), message: String((err as Error).message) }
  }
  return { code: 'none', message: 'the query ran' }
}

t.test('a sql key reads its own account\'s traces', async (t) => {
  const mine = await rows<{ trace_id: string; account_id: string }>(ca, 'SELECT trace_id, account_id FROM account.traces ORDER BY time')
  t.same(mine.map((r) => r.trace_id).sort(), [...sentA].sort())
  t.ok(mine.every((r) => r.account_id === a.accountId))
  const theirs = await rows<{ trace_id: string }>(cb, 'SELECT trace_id FROM account.traces')
  t.same(theirs.map((r) => r.trace_id).sort(), [...sentB].sort())
  t.same(await rows(ca, 'SELECT version() AS v').then((r) => r.length), 1)
  const byParam = await rows<{ n: number }>(ca, 'SELECT count() AS n FROM account.traces WHERE model = {m:String}', { m: 'no-such-model' })
  t.same(byParam, [{ n: 0 }])
  const odd = "a\tb\nc'd\\e"
  t.same(await rows(ca, 'SELECT {v:String} AS v', { v: odd }), [{ v: odd }], 'a parameter with escapes arrives as sent')
  t.same(await rows(ca, "SELECT 'x\\ny' AS v -- a comment\n"), [{ v: 'x\ny' }], 'literals and comments as ClickHouse reads them')
  // What Grafana's and Metabase's drivers ask to list databases, tables and columns.
  const tables = await rows<{ name: string }>(ca, "SELECT name FROM system.tables WHERE database = 'account' ORDER BY name")
  t.same(tables.map((r) => r.name), ['traces', 'usage'])
  const cols = await rows<{ name: string; type: string }>(ca, "SELECT name, type FROM system.columns WHERE database = 'account' AND table = 'traces'")
  t.ok(cols.some((c) => c.name === 'cost_usd' && c.type === 'Nullable(Float64)'))
  t.ok((await rows<{ name: string }>(ca, 'SELECT name FROM system.databases')).some((d) => d.name === 'account'))
  t.ok((await rows<{ name: string }>(ca, "SELECT name, value FROM system.settings WHERE name = 'max_threads'")).length === 1, 'the settings a client reads at start')
  // And the statements schema browsers send instead.
  t.same(await rows(ca, 'SHOW DATABASES'), [{ name: 'account' }])
  t.same(await rows(ca, 'SHOW TABLES FROM "account"'), [{ name: 'traces' }, { name: 'usage' }])
  const described = await rows<{ name: string; type: string }>(ca, 'DESC TABLE "account"."usage"')
  t.same(described.map((c) => c.name).slice(0, 3), ['account_id', 'minute', 'key_id'])
  t.not((await refused(ca, 'DESCRIBE TABLE default.api_keys')).code, 'none', 'DESCRIBE of another table')
  t.not((await refused(ca, 'SHOW TABLES FROM default')).code, 'none', 'SHOW TABLES of another database')
})

t.test('other accounts, keys and users are unreachable whatever the SQL', async (t) => {
  const other = b.accountId
  const cases: Array<[string, string, Record<string, unknown>?]> = [
    ['the raw table', 'SELECT * FROM traces'],
    ['the raw table by database', 'SELECT count() FROM default.traces'],
    ['the keys', 'SELECT key_hash FROM api_keys'],
    ['the users', 'SELECT email, password_hash FROM users'],
    ['the accounts', 'SELECT * FROM accounts'],
    ['UNION', 'SELECT trace_id FROM account.traces UNION ALL SELECT trace_id FROM default.traces'],
    ['a scalar subquery', 'SELECT (SELECT count() FROM default.traces) AS n'],
    ['IN a subquery', `SELECT count() FROM account.traces WHERE account_id IN (SELECT id FROM default.accounts WHERE id = '${other}')`],
    ['a CTE', 'WITH x AS (SELECT * FROM default.traces) SELECT count() FROM x'],
    ['a JOIN', 'SELECT count() FROM account.traces AS t JOIN default.api_keys AS k ON t.key_id = k.id'],
    ['IN a table', 'SELECT count() FROM account.traces WHERE key_id IN default.api_keys'],
    ['IN a table of the database', 'SELECT count() FROM account.traces WHERE key_id IN api_keys'],
    ['NOT IN a table', 'SELECT count() FROM account.traces WHERE key_id NOT IN default.api_keys'],
    ['a value in the error of a scalar subquery', `SELECT toUInt8(assumeNotNull((SELECT any(toString(trace_id)) FROM default.traces WHERE account_id = '${other}'))) AS x`],
    ['a value in the error of a scalar subquery on the bare name', `SELECT toUInt8(assumeNotNull((SELECT any(toString(trace_id)) FROM traces WHERE account_id = '${other}'))) AS x`],
    ['a CTE named like a table, read outside its scope', 'SELECT count() FROM (WITH traces AS (SELECT 1 AS a) SELECT a FROM traces) AS q CROSS JOIN traces'],
    ['a table of the database by its bare name', 'SELECT count() FROM api_keys'],
    ['a table by parameter', 'SELECT count() FROM {t:Identifier}', { t: 'default.traces' }],
    ['system.parts', 'SELECT * FROM system.parts'],
    ['system.tables sizes', 'SELECT total_rows FROM system.tables'],
    ['system.tables whole', 'SELECT * FROM system.tables'],
    ['system.query_log', 'SELECT query FROM system.query_log'],
    ['file()', "SELECT * FROM file('/etc/passwd', 'LineAsString')"],
    ['the file function', "SELECT file('/etc/passwd') AS f"],
    ['url()', "SELECT * FROM url('http://127.0.0.1:1/', 'CSV', 'a String')"],
    ['remote()', "SELECT count() FROM remote('127.0.0.1', default.traces)"],
    ['merge()', "SELECT count() FROM merge('default', '^traces$')"],
    ['numbers()', 'SELECT * FROM numbers(10)'],
    ['dictGet', "SELECT dictGet('d', 'a', toUInt64(1)) AS x"],
    ['joinGet', "SELECT joinGet('default.api_keys', 'key_hash', toUUID('00000000-0000-0000-0000-000000000000')) AS x"],
    ['hasColumnInTable', "SELECT hasColumnInTable('default', 'api_keys', 'key_hash') AS x"],
    ['a denied function in a lambda', "SELECT arrayMap(x -> file(x), ['/etc/passwd']) AS x"],
    ['a table function in a subquery', "SELECT count() FROM account.traces WHERE model IN (SELECT * FROM file('/etc/passwd', 'LineAsString'))"],
    ['EXPLAIN', 'EXPLAIN SELECT * FROM default.traces'],
    ['SHOW CREATE', 'SHOW CREATE TABLE default.api_keys'],
    ['COLUMNS of system.tables', "SELECT COLUMNS('.*') FROM system.tables"],
    ['a SETTINGS clause naming the account', `SELECT count() FROM account.traces SETTINGS log_comment = '${other}'`],
    ['a SETTINGS clause lifting read-only', 'SELECT count() FROM account.traces SETTINGS readonly = 0'],
    ['a SETTINGS clause in a subquery', `SELECT * FROM (SELECT count() FROM account.traces SETTINGS log_comment = '${other}')`],
    ['INSERT', `INSERT INTO default.traces (account_id) VALUES ('${other}')`],
    ['DROP', 'DROP TABLE account.traces'],
    ['two statements', 'SELECT 1; DROP TABLE default.api_keys'],
    ['CREATE', 'CREATE TABLE default.x (a UInt8) ENGINE = Memory'],
    ['INTO OUTFILE', "SELECT 1 INTO OUTFILE '/tmp/tracegate-sql-test'"],
    ['a SETTINGS clause in a scalar subquery', `SELECT (SELECT count() FROM account.traces SETTINGS log_comment = '${other}') AS n`],
    ['INTERSECT with the raw table', 'SELECT trace_id FROM account.traces INTERSECT SELECT trace_id FROM default.traces'],
    ['EXCEPT with the raw table', 'SELECT trace_id FROM default.traces EXCEPT SELECT trace_id FROM account.traces'],
    ['EXISTS over the raw table', `SELECT count() FROM account.traces WHERE EXISTS (SELECT 1 FROM traces WHERE account_id = '${other}')`],
    ['ARRAY JOIN over the raw table', 'SELECT t FROM default.traces ARRAY JOIN tags AS t'],
    ['a window over the raw table', 'SELECT count() OVER () FROM traces'],
    ['a recursive CTE reaching the raw table', 'WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r JOIN traces ON 1 = 1 WHERE n < 2) SELECT * FROM r'],
    ['IN a tuple of tables', 'SELECT count() FROM account.traces WHERE (key_id, model) IN default.api_keys'],
    ['getServerSetting', "SELECT getServerSetting('path') AS x"],
    ['dictGetOrDefault', "SELECT dictGetOrDefault('d', 'a', toUInt64(1), 'x') AS x"],
  ]
  for (const [what, query, params] of cases) {
    const r = await refused(ca, query, params)
    t.not(r.code, 'none', `${what}: refused`)
    t.notOk(r.message.includes(other), `${what}: no other account in the error`)
    t.notOk(sentB.some((id) => r.message.includes(id)), `${what}: no other account's trace in the error`)
  }
  // The query's own CTEs, subqueries and IN lists stay usable.
  t.same(await rows(ca, 'WITH mine AS (SELECT trace_id FROM account.traces) SELECT count() AS n FROM mine WHERE trace_id IN (SELECT trace_id FROM mine)'), [{ n: sentA.length }])
  t.same(await rows(ca, 'WITH mine AS (SELECT trace_id FROM account.traces) SELECT count() AS n FROM account.traces WHERE trace_id IN mine'), [{ n: sentA.length }])
  t.same(await rows(ca, 'SELECT (SELECT count() FROM account.traces) AS n'), [{ n: sentA.length }], 'a scalar subquery over its own account')
  // Ordinary functions stay usable, whatever their name starts with.
  t.same(await rows(ca, "SELECT cos(0) AS c, domain('http://a.example/x') AS d, length(URLHierarchy('http://a.example/x/y')) AS h"), [{ c: 1, d: 'a.example', h: 3 }])
  // A WHERE on another account is allowed and finds nothing.
  t.same(await rows(ca, `SELECT count() AS n FROM account.traces WHERE account_id = '${other}'`), [{ n: 0 }])
  // The settings the port takes from the URL cannot name an account or lift read-only.
  const viaUrl = client(sqlA.key, { clickhouse_settings: { log_comment: other } as never })
  t.not((await refused(viaUrl, 'SELECT count() FROM account.traces')).code, 'none', 'log_comment in the URL')
  // The tables are all still there.
  t.same((await rows<{ n: number }>(cb, 'SELECT count() AS n FROM account.traces'))[0]!.n, sentB.length)
})

t.test('keys: only a live sql key, as basic auth or X-ClickHouse-Key', async (t) => {
  t.equal((await refused(client(a.proxyKey), 'SELECT 1')).code, '516', 'a proxy key')
  t.equal((await refused(client(`tgk_${'A'.repeat(43)}`), 'SELECT 1')).code, '516', 'an unknown key')
  const revoked = await s.tg.admin.createKey({ account: a.accountId, scope: 'sql' })
  await s.tg.admin.revokeKey({ id: revoked.id })
  t.equal((await refused(client(revoked.key), 'SELECT 1')).code, '516', 'a revoked key')
  const r = await request(`${url}/?query=${encodeURIComponent('SELECT count() FROM account.traces FORMAT JSONEachRow')}`, {
    headers: { 'x-clickhouse-user': 'me', 'x-clickhouse-key': sqlA.key },
  })
  t.equal(r.statusCode, 200)
  t.same(JSON.parse(await r.body.text()), { 'count()': sentA.length })
  const none = await request(`${url}/?query=SELECT+1`)
  t.equal(none.statusCode, 401)
  t.equal(none.headers['x-tracegate-error-code'], 'unauthorized')
  await none.body.text()
})

t.test('formats and compression', async (t) => {
  const q = 'SELECT trace_id, model FROM account.traces ORDER BY trace_id'
  const json = await (await ca.query({ query: q, format: 'JSON' })).json<{ data: unknown[]; meta: Array<{ name: string }> }>()
  t.equal(json.data.length, sentA.length)
  t.same(json.meta!.map((m) => m.name), ['trace_id', 'model'])
  const compact = await (await ca.query({ query: q, format: 'JSONCompact' })).json<{ data: unknown[][] }>() as unknown as { data: unknown[][] }
  t.equal(compact.data[0]!.length, 2)
  const csv = await (await ca.query({ query: q, format: 'CSV' })).text()
  t.equal(csv.trim().split('\n').length, sentA.length)
  t.match(csv, /^"[0-9a-f-]{36}","/)
  const tsv = await (await ca.query({ query: q, format: 'TabSeparated' })).text()
  t.same(tsv.trim().split('\n').map((l) => l.split('\t')[0]).sort(), [...sentA].sort())
  // A FORMAT clause in the text wins, as on ClickHouse.
  const parquet = await ca.exec({ query: `${q} FORMAT Parquet` })
  const chunks: Buffer[] = []
  for await (const c of parquet.stream) chunks.push(c as Buffer)
  const bytes = Buffer.concat(chunks)
  t.equal(bytes.subarray(0, 4).toString(), 'PAR1')
  const gz = client(sqlA.key, { compression: { request: true, response: true } })
  t.same(await rows<{ n: number }>(gz, 'SELECT count() AS n FROM account.traces'), [{ n: sentA.length }])
  const raw = await request(`${url}/?enable_http_compression=1&default_format=JSONEachRow`, {
    method: 'POST', body: 'SELECT 1 AS one', headers: { 'x-clickhouse-key': sqlA.key, 'accept-encoding': 'gzip' },
  })
  t.equal(raw.headers['content-encoding'], 'gzip', String(raw.statusCode))
  await raw.body.arrayBuffer()
  const native = await request(`${url}/?compress=1`, { method: 'POST', body: 'SELECT 1', headers: { 'x-clickhouse-key': sqlA.key } })
  t.equal(native.statusCode, 403, 'ClickHouse\'s block compression is refused, not answered uncompressed')
  t.match(await native.body.text(), /compress=1/)
  // A small compressed body that would grow past the query's size limit is refused before it has grown.
  for (const [encoding, pack] of [['br', brotliCompressSync], ['gzip', gzipSync]] as const) {
    const bomb = pack(Buffer.alloc(64 * 1024 * 1024, 0x20))
    t.ok(bomb.length < 128 * 1024, `${encoding}: the body sent is ${bomb.length} bytes`)
    const big = await request(`${url}/`, { method: 'POST', body: bomb, headers: { 'x-clickhouse-key': sqlA.key, 'content-encoding': encoding } })
    t.equal(big.statusCode, 413, `${encoding}: a body that decompresses past 1 MiB`)
    t.match(await big.body.text(), /larger than 1048576 bytes/)
  }
  t.same(await rows(ca, 'SELECT 1 AS one'), [{ one: 1 }], 'the port still answers')
})

t.test('limits: result rows and execution time', async (t) => {
  const many = await refused(ca, 'SELECT number FROM system.numbers LIMIT 5000')
  t.equal(many.code, '396', 'max_result_rows: ' + many.message)
  const long = await refused(ca, 'SELECT count() FROM system.numbers')
  t.equal(long.code, '159', 'max_execution_time: ' + long.message)
  t.same(await rows(ca, 'SELECT number FROM system.numbers LIMIT 3'), [{ number: 0 }, { number: 1 }, { number: 2 }])
})

t.test('a heavy query holds up neither trace inserts nor the dashboard\'s queries', async (t) => {
  const order: string[] = []
  // Runs until the port's 2 s limit stops it.
  const heavy = refused(ca, 'SELECT count() FROM system.numbers').then((r) => { order.push('heavy'); return r })
  await new Promise((resolve) => setTimeout(resolve, 100))
  const id = (await proxyCall(s, b.proxyKey, 'alpha')).traceId
  await stored(s.tg, b.accountId, [id])
  await s.tg.store.call('listKeys', { accountId: a.accountId })
  order.push('store')
  t.equal((await heavy).code, '159', 'the heavy query ran to its limit')
  t.same(order, ['store', 'heavy'], 'the insert and the store query finished while the heavy query ran')
})

t.test('a sql key made in the dashboard or with the command line', async (t) => {
  const ui = await signedIn(s, a)
  const made = await ui.post('/api/ui/keys', { name: 'grafana', scope: 'sql' })
  t.equal(made.status, 201)
  t.equal(made.json.key.scope, 'sql')
  const fromUi = client(made.json.key.key as string)
  t.same(await rows(fromUi, 'SELECT count() AS n FROM account.traces'), [{ n: sentA.length }])
  const r = await runTracegate(['key', 'create', '--account', b.accountId, '--scope', 'sql', '--json'], cliEnv(s.dataDir))
  t.equal(r.code, 0, r.stderr)
  const fromCli = JSON.parse(r.stdout) as { key: string; scope: string }
  t.equal(fromCli.scope, 'sql')
  t.same(await rows(client(fromCli.key), 'SELECT count() AS n FROM account.traces'), [{ n: sentB.length + 1 }])
  // A sql key is no proxy key.
  t.equal((await proxyCall(s, fromCli.key, 'alpha')).status, 401)
})

t.test('one account\'s heavy queries keep no other account waiting, and a third at once is refused', async (t) => {
  const order: string[] = []
  const heavy = [1, 2].map(() => refused(ca, 'SELECT count() FROM system.numbers').then((r) => { order.push('a'); return r }))
  await new Promise((resolve) => setTimeout(resolve, 100))
  const third = await refused(ca, 'SELECT 1 AS x')
  t.equal(third.code, '202', 'a third query of the same account: sql_busy')
  t.same(await rows(cb, 'SELECT 1 AS x'), [{ x: 1 }])
  order.push('b')
  for (const r of await Promise.all(heavy)) t.equal(r.code, '159')
  t.same(order, ['b', 'a', 'a'], 'the other account\'s query ran while both heavy ones did')
})

t.test('the metrics count the queries by how they ended', async (t) => {
  const text = await s.tg.metrics.registry.metrics()
  for (const result of ['ok', 'refused', 'error', 'busy', 'unauthorized']) {
    const m = new RegExp(`^tracegate_sql_queries_total\\{result="${result}"\\} (\\d+)$`, 'm').exec(text)
    t.ok(m !== null && Number(m[1]) > 0, `${result} counted`)
  }
  t.match(text, /tracegate_sql_query_duration_seconds_bucket\{le="0.01",result="ok"\}/)
})

t.test('doctor: the SQL port, when set, is checked like the others', async (t) => {
  const r = await runTracegate(['doctor', '--json'], cliEnv(s.dataDir, { TRACEGATE_SQL_PORT: String(s.tg.sqlPort!) }))
  const checks = (JSON.parse(r.stdout.trim().split('\n').pop() ?? 'null') as { checks: Array<{ id: string; ok: boolean; detail: string }> }).checks
  const sql = checks.find((c) => c.id === 'sql_port')
  t.ok(sql?.ok, sql?.detail ?? 'no sql_port check')
  t.match(sql?.detail, /held by the running tracegate/)
  const none = await runTracegate(['doctor', '--json'], cliEnv(s.dataDir))
  t.notOk(none.stdout.includes('"sql_port"'), 'no check when the port is off')
})
