// A process crash loses no trace the store worker took: a real `tracegate serve
// --mock-providers` process with a flush interval far longer than the test gets SIGKILL once its store
// worker holds every answered call's row (some already inserted in full batches, the rest waiting for
// the next flush, written ahead to the spool directory). The test then opens the data directory itself
// (its own store worker, as the next start would) and finds every call in ClickHouse once and counted
// once in usage_minute; putting the segments back and starting once more changes nothing (a batch that
// reached ClickHouse replays as a no-op). A segment whose last row was cut short (a write that did not
// finish) replays its whole rows and counts the cut one as dropped, unless a hand-off file the proxy thread
// left holds that call too. A separate file: chDB allows one data directory per process.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { copyFileSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Pricing } from '../../src/pricing/index.js'
import { decodeTraces, TraceBatchWriter, type EncodedTraces } from '../../src/store/trace-codec.js'
import { HandoffFile, handoffName } from '../../src/store/handoff.js'
import { buildRecord, encodeRecord, TRACE_COLUMNS } from '../../src/store/worker/rows.js'
import { TsvWriter } from '../../src/store/worker/tsv.js'
import { reopenedStore, startServe, storedCounts } from '../helpers/serve.js'
import { ANSWER, PROMPT, traceMeta } from '../helpers/handoff.js'
import { tempDir } from '../helpers/server.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { send } from '../helpers/http.js'
import { parseMetrics, value } from '../helpers/prometheus.js'
import { until, withTimeout } from '../helpers/wait.js'

const CALLS = 25
const BATCH_ROWS = 10
const METRICS_TOKEN = 'crash-test-metrics-token'

const dataDir = tempDir('tracegate-crash-')
const spoolDir = join(dataDir, 'spool')
t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })

/** The store worker's write-ahead segments, oldest first. */
function segments (): string[] {
  return readdirSync(spoolDir).filter((f) => /^wal-.*\.tsv$/.test(f)).sort()
}

t.test('SIGKILL before the flush interval: every answered call is stored once and counted once after restart', async (t) => {
  const serve = await startServe(t, dataDir, {
    // No flush by time while the test runs: only full batches are inserted before the kill.
    TRACEGATE_TRACE_FLUSH_MS: '60000',
    TRACEGATE_TRACE_BATCH_ROWS: String(BATCH_ROWS),
    TRACEGATE_METRICS_TOKEN: METRICS_TOKEN,
  })
  const { port, key, child, exit } = serve

  const answered: string[] = []
  for (let i = 0; i < CALLS; i++) {
    const body = bodyFor('alpha', { api_key: key, alpha_api_key: 'sk-x', model: 'gpt-4o-mini', ...(i % 2 === 0 ? { stream: true } : {}) }, `crash ${i}`)
    const r = await send(`http://127.0.0.1:${port}${ROUTES.alpha}`, { body: JSON.stringify(body) })
    t.equal(r.status, 200, `call ${i} answered`)
    answered.push(r.requestId)
  }

  // The store worker holds every row: the full batches inserted, the rest waiting for the interval.
  const want = CALLS - (CALLS % BATCH_ROWS)
  let metrics = ''
  await until(async () => {
    const r = await send(`http://127.0.0.1:${port}/metrics`, { method: 'GET', headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
    metrics = r.text
    // A full batch's segment is removed only after its rollup is in too, a moment after its rows count as written.
    const all = parseMetrics(metrics)
    return value(all, 'tracegate_traces_total', { event: 'written' }) === want &&
      value(all, 'tracegate_trace_queue_rows') === CALLS - want &&
      segments().length <= 1
  }, { ms: 20_000, everyMs: 50, what: () => `${want} rows written and ${CALLS - want} waiting, the inserted batches' segments gone: ${metrics.split("\n").filter((l) => l.startsWith("tracegate_trace")).join("; ")}; segments ${segments().join(", ")}` })
  t.pass(`${want} rows inserted in full batches, ${CALLS - want} waiting for the flush interval`)
  const left = segments()
  t.equal(left.length, 1, 'the waiting rows are in one write-ahead segment')

  child.kill('SIGKILL')
  const status = await withTimeout(exit, 10_000, 'serve did not exit after SIGKILL')
  t.equal(status.signal, 'SIGKILL', 'the process was killed')
  t.same(segments(), left, 'the segment is left on disk')
  const kept = join(dataDir, 'kept')
  mkdirSync(kept)
  for (const f of left) copyFileSync(join(spoolDir, f), join(kept, f))

  const first = await reopenedStore(t, dataDir)
  t.equal(first.stats.replayed, CALLS - want, 'the restart replays the waiting rows')
  t.equal(first.stats.dropped, 0, 'nothing dropped')
  const c = await storedCounts(first.store)
  t.equal(c.rows, CALLS, `${CALLS} rows`)
  t.equal(c.unique, CALLS, 'no trace twice')
  t.same(answered.filter((id) => !c.ids.has(id)), [], 'every answered call is stored')
  t.equal(c.requests, CALLS, 'usage_minute counts every call once')
  t.same(segments(), [], 'no segment left')
  await first.store.close()

  // The same segment found again (as if the process had died after its insert, before removing it).
  for (const f of left) copyFileSync(join(kept, f), join(spoolDir, f))
  const second = await reopenedStore(t, dataDir)
  t.equal(second.stats.replayed, CALLS - want, 'the segment is replayed again')
  const again = await storedCounts(second.store)
  t.same(again, c, 'a batch ClickHouse already has is a no-op in traces and in usage_minute')
  await second.store.close()
})

/**
 * Three calls of a new account, as a killed process left them: a segment whose rows the store worker
 * encoded, ending halfway through the third; also the records of all three, as the proxy thread handed
 * them over (to write as a hand-off file, or not).
 */
function cutSegment (): { owner: { accountId: string; keyId: string }; metas: Array<ReturnType<typeof traceMeta>>; records: EncodedTraces } {
  const owner = { accountId: randomUUID(), keyId: randomUUID() }
  const metas = [traceMeta(owner, null), traceMeta(owner, null), traceMeta(owner, null)]
  const w = new TraceBatchWriter(1024)
  for (const m of metas) w.add(m, PROMPT, PROMPT.length, [ANSWER], ANSWER.length, [], 0)
  const records = w.take()
  const tsv = new TsvWriter(1024)
  const ends: number[] = []
  for (const raw of decodeTraces(records)) {
    encodeRecord(tsv, buildRecord(raw, Pricing.load(null)))
    ends.push(tsv.size)
  }
  const rows = tsv.view()
  const cut = ends[1]! + Math.floor((ends[2]! - ends[1]!) / 2)
  writeFileSync(join(spoolDir, `wal-0000000000000001-${randomUUID()}.tsv`),
    Buffer.concat([Buffer.from(JSON.stringify(TRACE_COLUMNS) + '\n'), rows.subarray(0, cut)]))
  return { owner, metas, records }
}

t.test('a segment whose last row was not written whole: the whole rows are replayed, the cut one counted as dropped', async (t) => {
  const { owner, metas } = cutSegment()
  const { store, stats } = await reopenedStore(t, dataDir)
  t.equal(stats.replayed, 2, 'the two whole rows are replayed')
  t.equal(stats.dropped, 1, 'the cut row is counted as dropped')
  const stored = await store.call('testQuery', {
    query: 'SELECT toString(trace_id) AS id FROM traces WHERE account_id = {a:UUID} ORDER BY id',
    params: { a: owner.accountId },
  })
  t.same(stored.map((r) => String(r.id)), metas.slice(0, 2).map((m) => m.traceId).sort(), 'the two whole rows are stored')
  const [usage] = await store.call('testQuery', { query: 'SELECT sum(requests) AS r FROM usage_minute WHERE account_id = {a:UUID}', params: { a: owner.accountId } })
  t.equal(Number(usage!.r), 2, 'and counted')
  t.same(readdirSync(spoolDir).filter((f) => f.endsWith('.tsv')), [], 'the segment is gone')
  await store.close()
})

t.test('the cut row is also in a hand-off file: all three are stored once, none counted as dropped', async (t) => {
  const { owner, metas, records } = cutSegment()
  const handoff = new HandoffFile(spoolDir, handoffName(randomUUID(), 1))
  handoff.append(new Uint8Array(records.buffer, 0, records.length), records.count)
  handoff.close()

  const { store, stats } = await reopenedStore(t, dataDir)
  t.equal(stats.dropped, 0, 'nothing counted as dropped: the hand-off file had the cut row')
  const stored = await store.call('testQuery', {
    query: 'SELECT toString(trace_id) AS id FROM traces WHERE account_id = {a:UUID} ORDER BY id',
    params: { a: owner.accountId },
  })
  t.same(stored.map((r) => String(r.id)), metas.map((m) => m.traceId).sort(), 'the three are stored, once each')
  const [usage] = await store.call('testQuery', { query: 'SELECT sum(requests) AS r FROM usage_minute WHERE account_id = {a:UUID}', params: { a: owner.accountId } })
  t.equal(Number(usage!.r), 3, 'and counted once each')
  t.same(readdirSync(spoolDir).filter((f) => f.endsWith('.tsv') || f.endsWith('.wal')), [], 'the segment and the hand-off file are gone')
  await store.close()
})

t.test('a segment an earlier version left, without the later columns: its rows are replayed, those columns take their defaults', async (t) => {
  const owner = { accountId: randomUUID(), keyId: randomUUID() }
  const metas = [traceMeta(owner, null), traceMeta(owner, null)]
  const w = new TraceBatchWriter(1024)
  for (const m of metas) w.add(m, PROMPT, PROMPT.length, [ANSWER], ANSWER.length, [], 0)
  const tsv = new TsvWriter(1024)
  for (const raw of decodeTraces(w.take())) encodeRecord(tsv, buildRecord(raw, Pricing.load(null)))
  // The version before the response cache wrote its rows up to `attempts`.
  const earlier = TRACE_COLUMNS.slice(0, TRACE_COLUMNS.indexOf('attempts') + 1)
  const rows = tsv.view().toString('utf8').split('\n').filter((l) => l !== '').map((l) => l.split('\t').slice(0, earlier.length).join('\t') + '\n').join('')
  writeFileSync(join(spoolDir, `wal-0000000000000001-${randomUUID()}.tsv`), JSON.stringify(earlier) + '\n' + rows)
  const { store, stats } = await reopenedStore(t, dataDir)
  t.equal(stats.replayed, 2, 'both rows are replayed')
  t.equal(stats.dropped, 0, 'none dropped')
  const stored = await store.call('testQuery', {
    query: "SELECT toString(trace_id) AS id, cache, cost_saved_usd IS NULL AS unsaved, input_tokens FROM traces WHERE account_id = {a:UUID} ORDER BY id",
    params: { a: owner.accountId },
  })
  t.same(stored.map((r) => [String(r.id), r.cache, Number(r.unsaved), Number(r.input_tokens)]), metas.map((m) => [m.traceId, '', 1, 3]).sort(), 'stored whole, the later columns at their defaults')
  t.same(readdirSync(spoolDir).filter((f) => f.endsWith('.tsv')), [], 'the segment is gone')
  await store.close()
})
