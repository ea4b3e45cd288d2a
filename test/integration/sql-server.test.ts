// The SQL port over a ClickHouse server (CLICKHOUSE_URL; here the tests' stand-in, ClickHouse's HTTP
// interface over chDB in its own process): the same views, checks and formats as on the embedded store,
// and the memory limit.
import t from 'tap'
import { createClient } from '@clickhouse/client'
import { stored } from '../helpers/store.js'
import { proxyCall, startDashboard } from '../helpers/dashboard.js'
import { startStandIn } from '../helpers/clickhouse-standin.js'

const server = await startStandIn(t)
const s = await startDashboard(t, { TRACEGATE_SQL_PORT: '0', CLICKHOUSE_URL: server, TRACEGATE_SQL_MAX_MEMORY_BYTES: String(8 * 1024 * 1024) }, { testSeams: true })
const a = await s.tenant('acme')
const b = await s.tenant('globex')
const key = await s.tg.admin.createKey({ account: a.accountId, scope: 'sql' })
const idsA = [(await proxyCall(s, a.proxyKey)).traceId, (await proxyCall(s, a.proxyKey)).traceId]
const idsB = [(await proxyCall(s, b.proxyKey)).traceId]
await stored(s.tg, a.accountId, idsA)
await stored(s.tg, b.accountId, idsB)
const ch = createClient({ url: `http://127.0.0.1:${s.tg.sqlPort!}`, username: 'x', password: key.key })
t.teardown(() => ch.close())

t.test('own rows only, through the server', async (t) => {
  const rows = await (await ch.query({ query: 'SELECT trace_id FROM account.traces', format: 'JSONEachRow' })).json<{ trace_id: string }>()
  t.same(rows.map((r) => r.trace_id).sort(), [...idsA].sort())
  const csv = await (await ch.query({ query: 'SELECT count() FROM account.traces', format: 'CSV' })).text()
  t.equal(csv.trim(), '2')
  for (const q of ['SELECT count() FROM default.traces', 'SELECT key_hash FROM api_keys', `SELECT count() FROM account.traces SETTINGS log_comment = '${b.accountId}'`, "SELECT * FROM url('http://127.0.0.1:1/', 'CSV', 'a String')"]) {
    await t.rejects(ch.query({ query: q, format: 'JSONEachRow' }).then((r) => r.json()), q)
  }
})

t.test('a query over its memory limit fails with ClickHouse\'s code', async (t) => {
  const err = await ch.query({ query: 'SELECT length(groupArray(toString(number))) AS n FROM (SELECT number FROM system.numbers LIMIT 5000000)', format: 'JSONEachRow' })
    .then((r) => r.json()).then(() => null, (e: unknown) => e as { code?: string })
  t.equal(err?.code, '241', 'MEMORY_LIMIT_EXCEEDED')
  const ok = await (await ch.query({ query: 'SELECT length(groupArray(number)) AS n FROM (SELECT number FROM system.numbers LIMIT 1000)', format: 'JSONEachRow' })).json()
  t.same(ok, [{ n: 1000 }])
})
