// An external ClickHouse (CLICKHOUSE_URL; hardening issue, item 3). At start, a closed port or a server
// that is not ClickHouse stops `tracegate serve` with a message naming the URL (it died of SIGSEGV,
// printing nothing); the documented choice is to refuse to start, since keys and migrations live there.
// Later, ClickHouse going away is spooled and replayed as with the embedded store: the server here is
// the test stand-in (ClickHouse's HTTP interface over chDB, its own process), killed and started again.
import t, { type Test } from 'tap'
import { ServeChild } from '../helpers/serve.js'
import { createServer } from 'node:http'
import { rmSync } from 'node:fs'
import { startMockProvider } from '../../src/mock-provider/index.js'
import { closedPort, tempDir } from '../helpers/server.js'
import { sleep } from '../helpers/wait.js'
import { spawnStandIn } from '../helpers/clickhouse-standin.js'
import { accounted, chat, loadUntil, readyz, startTracegate, statsUntil, watchHealth } from './fault-helpers.js'


interface Exit { code: number | null; signal: NodeJS.Signals | null; stderr: string; ms: number }

/** Runs `tracegate serve` with the environment; it must exit by itself within 30 s. */
async function serve (t: Test, env: Record<string, string>): Promise<Exit> {
  const dataDir = tempDir('tracegate-chserver-')
  t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })
  const started = Date.now()
  const child = new ServeChild(t, { args: ['serve'], env: { ...process.env, TRACEGATE_DATA_DIR: dataDir, TRACEGATE_PROXY_PORT: '0', TRACEGATE_DASHBOARD_PORT: '0', ...env } })
  const timer = setTimeout(() => { child.child.kill('SIGKILL') }, 30_000)
  const { code, signal } = await child.exit
  clearTimeout(timer)
  return { code, signal, stderr: child.stderr, ms: Date.now() - started }
}

t.test('a closed port stops the start with a message naming the URL, never its password', async (t) => {
  const port = await closedPort()
  const r = await serve(t, { CLICKHOUSE_URL: `http://tg:hunter2@127.0.0.1:${port}` })
  t.equal(r.signal, null, 'the process was not killed by a signal (it died of SIGSEGV)')
  t.equal(r.code, 1, 'it exits with status 1')
  t.match(r.stderr, `ClickHouse at http://127.0.0.1:${port} (CLICKHOUSE_URL) is not reachable`, 'the message names the URL')
  t.match(r.stderr, /ECONNREFUSED/, 'and the cause')
  t.notMatch(r.stderr, 'hunter2', 'never the password')
})

t.test('a server that answers HTTP but is not ClickHouse stops the start', async (t) => {
  // It answers every request 200 "Ok.", /ping included: a ping alone would take it for ClickHouse.
  const fake = createServer((req, res) => { req.resume(); res.end('Ok.\n') })
  await new Promise<void>((resolve) => { fake.listen(0, '127.0.0.1', resolve) })
  t.teardown(() => { fake.close() })
  const addr = fake.address()
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0
  const r = await serve(t, { CLICKHOUSE_URL: `http://127.0.0.1:${port}` })
  t.equal(r.signal, null, 'no signal')
  t.equal(r.code, 1, 'it exits with status 1')
  t.match(r.stderr, `the server at http://127.0.0.1:${port} (CLICKHOUSE_URL) did not answer as ClickHouse`, 'the message names the URL')
})

t.test('ClickHouse going away later: spooled, /readyz says so, replayed when it is back', async (t) => {
  const chDir = tempDir('tracegate-standin-')
  const dataDir = tempDir('tracegate-chserver-')
  t.teardown(() => { rmSync(chDir, { recursive: true, force: true }); rmSync(dataDir, { recursive: true, force: true }) })
  const mock = await startMockProvider({ recordLimit: 0 })
  t.teardown(() => mock.close())
  let ch = await spawnStandIn(t, chDir)
  const r = await startTracegate(t, dataDir, mock, { CLICKHOUSE_URL: `http://127.0.0.1:${ch.port}`, TRACEGATE_TRACE_FLUSH_MS: '100' })
  t.equal((await chat(r)).status, 200, 'a call is served with the server as the store')
  await statsUntil(r.tg, 'its trace is written to the server', (s) => s.written >= 1)
  t.equal((await readyz(r.url)).status, 200, '/readyz is ready')

  const health = watchHealth(r.url)
  let stop = false
  const load = loadUntil(r, () => stop, 4)
  await sleep(200)
  await ch.stop()
  const away = await statsUntil(r.tg, 'batches are spooled while the server is away', (s) => !s.clickhouseUp && s.spooled > 0, 15_000)
  t.match(String(away.insertError), /ECONNREFUSED|socket hang up|ECONNRESET|EPIPE/, `the stats say why (${String(away.insertError)})`)
  const during = await readyz(r.url)
  t.equal(during.status, 503, '/readyz is not ready while the server is away')
  t.equal(during.reason, 'store_unreachable', `reason ${String(during.reason)}`)
  await sleep(500)
  ch = await spawnStandIn(t, chDir, ch.port)
  await sleep(300)
  stop = true
  const statuses = await load
  t.same([...statuses.keys()], [200], 'every call was answered 200 (keys come from the cache meanwhile)')
  const s = await statsUntil(r.tg, 'the spool is replayed', (s) => s.queued === 0 && s.spoolBytes === 0 && s.clickhouseUp)
  t.ok(s.replayed > 0, `spooled rows were replayed (${s.replayed})`)
  await accounted(t, r, dataDir, (statuses.get(200) ?? 0) + 1, 'after the outage')
  t.equal(s.dropped, 0, 'nothing dropped')
  t.equal((await readyz(r.url)).status, 200, '/readyz is ready again')
  t.same(await health.stop(), [], '/healthz answered 200 throughout')
  await r.tg.close()
})
