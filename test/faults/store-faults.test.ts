// Faults in the embedded trace store under load (hardening issue, items 1 and 2): the insert folder and
// the spool made unwritable, the insert folder deleted, ClickHouse refusing inserts until the spool is
// full. For each, every 200 response ends as a stored row, a spooled row or a counted drop, losses are
// logged once per episode with their cause, /readyz says why while traces cannot be written, the store
// recovers without a restart, and /healthz answers throughout.
// The folders are swapped for plain files rather than chmod-ed: tests run as root, whom modes do not stop.
import t, { type Test } from 'tap'
import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startMockProvider } from '../../src/mock-provider/index.js'
import { insertInbox } from '../../src/store/worker/connect.js'
import { send } from '../helpers/http.js'
import { parseMetrics, value } from '../helpers/prometheus.js'
import { tempDir } from '../helpers/server.js'
import { sleep } from '../helpers/wait.js'
import { accounted, chat, loadUntil, readyz, startTracegate, stats, statsUntil, watchHealth, type Running } from './fault-helpers.js'

// chDB allows one data directory per process: every scenario restarts tracegate on this one, so each
// starts with its own counters.
const dataDir = tempDir('tracegate-store-faults-')
t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })
const mock = await startMockProvider({ recordLimit: 0 })
t.teardown(() => mock.close())

const inbox = insertInbox(dataDir)
const spoolDir = join(dataDir, 'spool')

/** Puts a plain file where the folder was (writes under it then fail with ENOTDIR); returns the undo. */
function block (dir: string): () => void {
  const aside = dir + '.aside'
  if (existsSync(dir)) renameSync(dir, aside)
  writeFileSync(dir, 'not a folder')
  return () => {
    rmSync(dir, { force: true })
    if (existsSync(aside)) renameSync(aside, dir)
  }
}

async function scenario (t: Test, env: Record<string, string>): Promise<Running> {
  const r = await startTracegate(t, dataDir, mock, { TRACEGATE_TRACE_FLUSH_MS: '100', ...env })
  const warm = await chat(r)
  t.equal(warm.status, 200, 'the warm-up call is served')
  await statsUntil(r.tg, 'the warm-up trace is written', (s) => s.written >= 1)
  return r
}

function total200 (statuses: Map<number, number>): number {
  return statuses.get(200) ?? 0
}

t.test('spool and insert folder unwritable for 3 s: rows wait in memory, the overflow is dropped, counted and logged once', async (t) => {
  const r = await scenario(t, { TRACEGATE_TRACE_QUEUE_ROWS: '200', TRACEGATE_TRACE_BATCH_ROWS: '50' })
  const health = watchHealth(r.url)
  let stop = false
  const load = loadUntil(r, () => stop)
  await sleep(300)
  const unblockInbox = block(inbox)
  const unblockSpool = block(spoolDir)
  let undone = false
  const undo = (): void => { if (!undone) { undone = true; unblockSpool(); unblockInbox() } }
  t.teardown(undo)
  await sleep(1_500)
  const during = await readyz(r.url)
  t.equal(during.status, 503, '/readyz says not ready while traces cannot be written')
  t.equal(during.reason, 'spool_refusing', `its reason says the spool refuses (${String(during.reason)})`)
  const mid = await stats(r.tg)
  t.ok(mid.queued > 0, `rows wait in memory while neither ClickHouse nor the spool takes them (${mid.queued})`)
  await sleep(1_500)
  undo()
  await sleep(500)
  stop = true
  const statuses = await load
  t.same([...statuses.keys()], [200], 'every call was answered 200 during the fault')
  const s = await statsUntil(r.tg, 'the store recovers', (s) => s.queued === 0 && s.spoolBytes === 0 && s.clickhouseUp && s.spoolError === null)
  const ok = total200(statuses) + 1
  await accounted(t, r, dataDir, ok, 'after the fault')
  t.ok(s.dropped > 0, `rows past the memory bound were dropped and counted (${s.dropped})`)
  t.ok(s.spoolRefused > 0, `the spool's refusals are counted (${s.spoolRefused} batches)`)
  // Whichever answers first after the fault takes the rows kept in memory: ClickHouse (written) or the
  // spool, replayed from there (replayed). Either way they end in ClickHouse, which accounted() counts.
  t.ok(s.written + s.replayed > 1, `rows kept in memory reached ClickHouse once it took them again (written ${s.written}, replayed ${s.replayed})`)
  // One line when a loss episode starts and one when traces are stored again, never one per batch. The
  // fault's first instant can race an insert already in flight (it lands, ending a first short episode),
  // so the lines must alternate rather than number exactly one each.
  const episodes = r.logs.lines.filter((l) => l.msg === 'traces dropped' || l.msg === 'traces are stored again after a loss')
  const starts = episodes.filter((l) => l.msg === 'traces dropped')
  t.ok(starts.length >= 1 && starts.length <= 2, `one line per loss episode (${starts.length} episodes for ${s.spoolRefused} refused batches)`)
  t.ok(episodes.every((l, i) => l.msg === (i % 2 === 0 ? 'traces dropped' : 'traces are stored again after a loss')),
    `each episode's start and end are logged once, in turn (${JSON.stringify(episodes.map((l) => l.msg))})`)
  t.equal(episodes.length, 2 * starts.length, 'every episode ended')
  t.ok(starts.every((l) => /spool cannot be written: .*ENOTDIR/.test(String(l.cause))), 'each naming its cause')
  t.equal((await readyz(r.url)).status, 200, '/readyz is ready again')
  t.same(await health.stop(), [], '/healthz answered 200 throughout')
  await r.tg.close()
})

t.test('the insert folder deleted under load: inserts make it again, nothing is spooled or lost, no restart', async (t) => {
  const r = await scenario(t, {})
  const health = watchHealth(r.url)
  let stop = false
  const load = loadUntil(r, () => stop)
  for (let i = 0; i < 5; i++) {
    await sleep(300)
    rmSync(inbox, { recursive: true, force: true })
  }
  await sleep(300)
  stop = true
  const statuses = await load
  t.same([...statuses.keys()], [200], 'every call was answered 200')
  const s = await statsUntil(r.tg, 'every trace is written', (s) => s.queued === 0 && s.spoolBytes === 0, 15_000)
  await accounted(t, r, dataDir, total200(statuses) + 1, 'after the deletions')
  t.equal(s.dropped, 0, 'nothing dropped')
  t.ok(existsSync(inbox), 'the insert folder exists again')
  t.equal((await readyz(r.url)).status, 200, '/readyz is ready')
  t.same(await health.stop(), [], '/healthz answered 200 throughout')
  await r.tg.close()
})

t.test('ClickHouse refusing inserts: spooled up to TRACEGATE_SPOOL_MAX_BYTES, refusals counted, replayed when it takes them again', async (t) => {
  const r = await scenario(t, { TRACEGATE_SPOOL_MAX_BYTES: '60000', TRACEGATE_TRACE_QUEUE_ROWS: '100', TRACEGATE_TRACE_BATCH_ROWS: '20', TRACEGATE_METRICS_PORT: '0' })
  const health = watchHealth(r.url)
  let stop = false
  const load = loadUntil(r, () => stop)
  await sleep(200)
  const unblock = block(inbox)
  let undone = false
  const undo = (): void => { if (!undone) { undone = true; unblock() } }
  t.teardown(undo)
  const first = await statsUntil(r.tg, 'inserts fail and the spool takes the batches', (s) => !s.clickhouseUp && s.spooled > 0, 10_000)
  const spooling = await readyz(r.url)
  t.equal(spooling.status, 503, '/readyz says not ready while inserts fail')
  t.ok(spooling.reason === 'trace_inserts_failing' || spooling.reason === 'spool_refusing', `with the reason (${String(spooling.reason)})`)
  // ENOTDIR when the batch file is written; chDB's own words when the folder went while it read one.
  t.match(String(first.insertError), /ENOTDIR|Not a directory|doesn't exist/, `the stats name why inserts fail (${String(first.insertError)})`)
  // The spooled traces are behind for the dashboard as for ClickHouse, and the metric says by how much.
  const behind = await statsUntil(r.tg, 'the spooled traces are a second behind', (s) => s.lag.dashboardMs >= 1_000, 10_000)
  t.ok(behind.lag.clickhouseMs >= behind.lag.dashboardMs, `ClickHouse is at least as far behind (${behind.lag.clickhouseMs} ms) as the dashboard (${behind.lag.dashboardMs} ms)`)
  const scraped = parseMetrics((await send(`http://127.0.0.1:${r.tg.metricsPort}/metrics`, { method: 'GET' })).body.toString('utf8'))
  t.ok((value(scraped, 'tracegate_trace_lag_seconds', { view: 'dashboard' }) ?? 0) >= 1, 'tracegate_trace_lag_seconds{view="dashboard"} says so')
  t.ok((value(scraped, 'tracegate_trace_lag_seconds', { view: 'clickhouse' }) ?? 0) >= 1, 'and {view="clickhouse"}')
  const full = await statsUntil(r.tg, 'the spool fills and refuses', (s) => s.spoolRefused > 0, 20_000)
  t.ok(full.spoolBytes <= 60_000, `the spool stays within its bound (${full.spoolBytes} bytes)`)
  t.equal((await readyz(r.url)).reason, 'spool_refusing', '/readyz then says the spool refuses')
  undo()
  await sleep(300)
  stop = true
  const statuses = await load
  t.same([...statuses.keys()], [200], 'every call was answered 200')
  const s = await statsUntil(r.tg, 'the spool is replayed', (s) => s.queued === 0 && s.spoolBytes === 0 && s.clickhouseUp)
  await accounted(t, r, dataDir, total200(statuses) + 1, 'after the outage')
  t.ok(s.replayed > 0, `spooled rows were replayed (${s.replayed})`)
  // How late the store took its last batch counts for 2 s after it (the store worker's own backlog).
  await sleep(2_100)
  t.same((await stats(r.tg)).lag, { clickhouseMs: 0, dashboardMs: 0 }, 'nothing is behind once the spool is replayed')
  t.equal(r.logs.find('ClickHouse refused a trace batch; spooling to disk').length, 1, 'the outage is logged once')
  t.equal(r.logs.find('ClickHouse takes trace inserts again').length, 1, 'and its end once')
  t.equal((await readyz(r.url)).status, 200, '/readyz is ready again')
  t.same(await health.stop(), [], '/healthz answered 200 throughout')
  await r.tg.close()
})
