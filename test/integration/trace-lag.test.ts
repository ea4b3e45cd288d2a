// How far the traces are behind the calls (TraceStats.lag, /readyz, tracegate_trace_lag_seconds): rows
// waiting in memory for their insert are behind for ClickHouse and not for the dashboard, which shows them
// from memory; once inserted, nothing is behind. (Spooled rows: test/faults/store-faults.test.ts and
// test/browser/traces-behind.test.ts.)
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { handOver, traceMeta } from '../helpers/handoff.js'
import { send } from '../helpers/http.js'
import { startServer } from '../helpers/server.js'
import { sleep, until } from '../helpers/wait.js'

// Inserts only when asked: a trace handed over waits in memory.
const s = await startServer(t, { TRACEGATE_TRACE_FLUSH_MS: '60000' })
const readyz = async (): Promise<unknown> => JSON.parse((await send(`${s.url}/readyz`, { method: 'GET' })).body.toString('utf8'))

t.test('a trace waiting in memory is behind for ClickHouse, not for the dashboard', async (t) => {
  await s.tg.store.call('flushTraces')
  t.same(await readyz(), { status: 'ready', traces_behind_s: { clickhouse: 0, dashboard: 0 } }, 'nothing waits at first')
  handOver(s.tg, [traceMeta({ accountId: s.accountId, keyId: randomUUID() }, null)])
  await until(async () => ((await s.tg.store.call('traceStats'))?.queued ?? 0) > 0, { tries: 100, everyMs: 20, what: 'the trace waits in memory' })
  // Past the 2 s in which the store's lateness in taking the batch still counts.
  await sleep(2_200)
  const stats = (await s.tg.store.call('traceStats'))!
  t.ok(stats.lag.clickhouseMs >= 2_200, `behind for ClickHouse by as long as it waited (${stats.lag.clickhouseMs} ms)`)
  t.ok(stats.lag.clickhouseMs < 30_000, 'and no longer')
  t.equal(stats.lag.dashboardMs, 0, 'not behind for the dashboard: it shows rows in memory')
  const ready = await readyz() as { status: string; traces_behind_s: { clickhouse: number; dashboard: number } }
  t.equal(ready.status, 'ready', 'still ready: the trace is kept')
  t.ok(ready.traces_behind_s.clickhouse >= 2.2, `/readyz says how far behind ClickHouse is (${ready.traces_behind_s.clickhouse} s)`)
  t.equal(ready.traces_behind_s.dashboard, 0, 'and the dashboard not')
  const flushed = (await s.tg.store.call('flushTraces'))!
  t.same(flushed.lag, { clickhouseMs: 0, dashboardMs: 0 }, 'once inserted, nothing is behind')
})
