// Traces survive ClickHouse going away: batches go to the disk spool while the
// store points at an address that refuses connections (the connection-level test seam), are replayed in
// order once it answers again, never twice (the insert deduplication token), across a restart too, and
// when memory and spool are both full the overflow is dropped and counted, never silently.
// chDB allows one data directory per process: every tracegate in this file runs on the same one, closed
// and started again as needed. Each test uses its own account so its rows can be counted alone.
import t, { type Test } from 'tap'
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startMockProvider } from '../../src/mock-provider/index.js'
import { insertInbox } from '../../src/store/worker/connect.js'
import { EncodedRow, readSummary } from '../../src/store/worker/tsv-read.js'
import type { TraceStats } from '../../src/store/trace-types.js'
import { Tracegate } from '../../src/tracegate.js'
import { closedPort, tempDir, testConfig } from '../helpers/server.js'
import { type RawResponse, send } from '../helpers/http.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { sleep, withTimeout } from '../helpers/wait.js'
import { stats as flushed, statsUntil as faultStatsUntil } from '../faults/fault-helpers.js'
import { capturingLogger, type Logs } from '../helpers/logs.js'

const N = 40
const CONCURRENCY = 8
// Long enough that no key lookup happens while the store is pointed away.
const BASE_ENV = { TRACEGATE_KEY_CACHE_TTL_MS: '600000', TRACEGATE_SHUTDOWN_GRACE_MS: '5000' }
const STORE_TIMEOUT_MS = 10_000
const REPLAY_TIMEOUT_MS = 20_000

const dataDir = tempDir('tracegate-durability-')
const spoolDir = join(dataDir, 'spool')
t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })

const mock = await startMockProvider({ recordLimit: 0 })
t.teardown(() => mock.close())

const REFUSING = { url: `http://127.0.0.1:${await closedPort()}`, username: 'default', password: '', database: 'default', compression: false }

interface Running {
  readonly tg: Tracegate
  readonly logs: Logs
  readonly url: string
  close (): Promise<void>
}

/** Starts tracegate on the file's data directory, with the test seams; closed at teardown if still running. */
async function start (t: Test, env: Record<string, string> = {}): Promise<Running> {
  const logs = capturingLogger('warn')
  const tg = await Tracegate.start(testConfig(dataDir, mock, { ...BASE_ENV, ...env }), { bootstrap: false, testSeams: true, log: logs.log })
  let closing: Promise<void> | null = null
  const close = (): Promise<void> => { closing ??= tg.close(); return closing }
  t.teardown(close)
  return { tg, logs, url: `http://127.0.0.1:${tg.proxyPort}`, close }
}

function stats (tg: Tracegate): Promise<TraceStats> {
  return withTimeout(tg.store.call('traceStats').then((s) => { if (s === null) throw new Error('tracing is off'); return s }), STORE_TIMEOUT_MS, 'traceStats')
}

function flush (tg: Tracegate): Promise<TraceStats> {
  return flushed(tg, STORE_TIMEOUT_MS)
}

function statsUntil (tg: Tracegate, what: string, done: (s: TraceStats) => boolean, ms = REPLAY_TIMEOUT_MS): Promise<TraceStats> {
  return faultStatsUntil(tg, what, done, ms, STORE_TIMEOUT_MS)
}

function switchAway (tg: Tracegate): Promise<boolean> {
  return withTimeout(tg.store.call('testSwitchConnection', { server: REFUSING }), STORE_TIMEOUT_MS, 'switch away')
}

function switchBack (tg: Tracegate): Promise<boolean> {
  return withTimeout(tg.store.call('testSwitchConnection', { server: null }), STORE_TIMEOUT_MS, 'switch back')
}

interface Counted { rows: number; unique: number; ids: Set<string> }

async function counted (tg: Tracegate, accountId: string): Promise<Counted> {
  const agg = await withTimeout(tg.store.call('testQuery', {
    query: 'SELECT count() AS n, uniqExact(trace_id) AS u FROM traces WHERE account_id = {a:UUID}',
    params: { a: accountId },
  }), STORE_TIMEOUT_MS, 'count query')
  const ids = await withTimeout(tg.store.call('testQuery', {
    query: 'SELECT toString(trace_id) AS id FROM traces WHERE account_id = {a:UUID}',
    params: { a: accountId },
  }), STORE_TIMEOUT_MS, 'ids query')
  const row = agg[0] ?? {}
  return { rows: Number(row.n), unique: Number(row.u), ids: new Set(ids.map((r) => String(r.id))) }
}

/** Requests the usage rollup counted for the account (the materialized view fed by every trace insert). */
async function rolledUp (tg: Tracegate, accountId: string): Promise<number> {
  const rs = await withTimeout(tg.store.call('testQuery', {
    query: 'SELECT sum(requests) AS n FROM usage_minute WHERE account_id = {a:UUID}',
    params: { a: accountId },
  }), STORE_TIMEOUT_MS, 'rollup query')
  return Number(rs[0]?.n ?? 0)
}

interface Account { readonly accountId: string; readonly key: string }

/** A new account and key, with the key in the proxy's cache and its warm-up trace written. */
async function warmAccount (t: Test, r: Running, name: string): Promise<Account & { warmId: string }> {
  const account = await r.tg.admin.createAccount({ name, plan: 'pro' })
  const key = await r.tg.admin.createKey({ account: account.id, scope: 'proxy' })
  const warm = await chat(r.url, key.key)
  t.equal(warm.status, 200, `the warm-up request is served (${warm.body.toString('utf8').slice(0, 200)})`)
  const warmId = String(warm.headers['x-request-id'])
  const deadline = Date.now() + 10_000
  let before = await counted(r.tg, account.id)
  while (before.rows === 0 && Date.now() < deadline) {
    await sleep(50)
    await flush(r.tg)
    before = await counted(r.tg, account.id)
  }
  t.equal(before.rows, 1, 'the warm-up trace is in ClickHouse before the store goes away')
  return { accountId: account.id, key: key.key, warmId }
}

function chat (url: string, key: string): Promise<RawResponse> {
  return send(url + ROUTES.alpha, { body: JSON.stringify(bodyFor('alpha', { api_key: key })) })
}

/** `n` requests, `CONCURRENCY` at a time; every answer is checked for 200 and its x-request-id kept. */
async function load (t: Test, url: string, key: string, n: number): Promise<string[]> {
  const ids: string[] = []
  const statuses = new Map<number, number>()
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < n) {
      next++
      const r = await chat(url, key)
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
      const id = r.headers['x-request-id']
      if (r.status === 200 && typeof id === 'string') ids.push(id)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  t.same(Object.fromEntries(statuses), { 200: n }, `all ${n} requests answered 200 while ClickHouse is away`)
  t.equal(new Set(ids).size, n, 'each with its own x-request-id')
  return ids
}

interface SpoolFile { readonly name: string; readonly rows: Array<Record<string, unknown>> }

function spoolFiles (): SpoolFile[] {
  let names: string[] = []
  try { names = readdirSync(spoolDir) } catch { return [] }
  // Batches in the spool, not the write-ahead segment of a batch still taking rows (wal-…).
  return names.filter((n) => /^\d{16}-.*\.tsv$/.test(n)).sort().map((name) => ({ name, rows: spooledRows(readFileSync(join(spoolDir, name))) }))
}

/**
 * The rows of a spool file. Most files' first line lists the batch's rows (their summaries) and the
 * TabSeparated batch follows its columns line; a segment taken over (`.rows.tsv`) is its columns line
 * and the rows alone, read back from their bytes.
 */
function spooledRows (bytes: Buffer): Array<Record<string, unknown>> {
  const nl = bytes.indexOf(0x0a)
  const first = JSON.parse(bytes.toString('utf8', 0, nl)) as unknown[]
  if (first.length === 0 || typeof first[0] !== 'string') return first as Array<Record<string, unknown>>
  const rows: Array<Record<string, unknown>> = []
  const r = new EncodedRow()
  for (let at = nl + 1; at < bytes.length;) {
    const end = bytes.indexOf(0x0a, at) + 1
    rows.push({ ...readSummary(r.index(bytes, at, end)) })
    at = end
  }
  return rows
}

function spooledIds (accountId: string): string[] {
  return spoolFiles().flatMap((f) => f.rows.filter((r) => r.account_id === accountId).map((r) => String(r.trace_id)))
}

const replayed = (s: TraceStats): boolean => s.spoolBytes === 0 && s.clickhouseUp && s.queued === 0

function missing (expected: Iterable<string>, got: Set<string>): string[] {
  return [...expected].filter((id) => !got.has(id))
}

/** The spool is empty, and the account holds the warm-up trace and the `N` of `ids`, each once. */
async function allStoredOnce (t: Test, tg: Tracegate, a: { accountId: string; warmId: string }, ids: readonly string[]): Promise<void> {
  t.same(spoolFiles().map((f) => f.name), [], 'the spool directory is empty')
  const c = await counted(tg, a.accountId)
  t.equal(c.rows, N + 1, `exactly ${N} + 1 warm-up rows`)
  t.equal(c.unique, N + 1, 'no trace id twice')
  t.same(missing([...ids, a.warmId], c.ids), [], 'every x-request-id the clients received is stored')
}

t.test('ClickHouse away, then back: every trace is spooled, replayed once, none lost', async (t) => {
  const r = await start(t)
  const a = await warmAccount(t, r, 'away-and-back')
  t.ok(await switchAway(r.tg), 'the store now points at an address that refuses')
  const before = await stats(r.tg)

  const ids = await load(t, r.url, a.key, N)
  const away = await statsUntil(r.tg, 'the traces reach the spool', (s) => s.spooled - before.spooled >= N, 10_000)
  t.ok(away.spooled - before.spooled >= N, `spooled ${away.spooled - before.spooled} rows (≥ ${N})`)
  t.equal(away.clickhouseUp, false, 'traceStats says ClickHouse is down')
  t.ok(away.spoolBytes > 0, 'the spool holds bytes')
  t.equal(away.dropped, 0, 'nothing dropped')
  const files = spoolFiles()
  t.ok(files.length > 0, `${files.length} spool file(s) in <dataDir>/spool`)
  t.same(new Set(spooledIds(a.accountId)), new Set(ids), 'the spool files hold exactly the traces of the requests')
  t.ok(r.logs.lines.some((l) => /spool/i.test(String(l.msg))), 'the switch to the spool was logged')

  t.ok(await switchBack(r.tg), 'the store points at the embedded ClickHouse again')
  const back = await statsUntil(r.tg, 'the spool is replayed', replayed)
  t.ok(back.replayed - before.replayed >= N, `replayed ${back.replayed - before.replayed} rows`)
  await allStoredOnce(t, r.tg, a, ids)
  await r.close()
})

t.test('a replayed batch replayed again (after a restart) is a no-op', async (t) => {
  const r = await start(t)
  const a = await warmAccount(t, r, 'replay-twice')
  await switchAway(r.tg)
  const before = await stats(r.tg)
  const ids = await load(t, r.url, a.key, N)
  await statsUntil(r.tg, 'the traces reach the spool', (s) => s.spooled - before.spooled >= N, 10_000)

  // Copies of every spool file, with their names (the name carries the deduplication token).
  const files = spoolFiles()
  t.ok(files.length > 0, 'the spool has files')
  const aside = tempDir('tracegate-spool-copy-')
  t.teardown(() => { rmSync(aside, { recursive: true, force: true }) })
  for (const f of files) copyFileSync(join(spoolDir, f.name), join(aside, f.name))
  const copiedRows = files.reduce((n, f) => n + f.rows.length, 0)

  await switchBack(r.tg)
  await statsUntil(r.tg, 'the spool is replayed', replayed)
  const once = await counted(r.tg, a.accountId)
  t.equal(once.rows, N + 1, 'after the first replay: N + 1 rows')
  t.equal(once.unique, N + 1)
  t.same(missing(ids, once.ids), [])
  t.equal(await rolledUp(r.tg, a.accountId), N + 1, 'the usage rollup counts N + 1 requests')
  await r.close()

  // The same batches again, as a crash between insert and delete would leave them.
  mkdirSync(spoolDir, { recursive: true })
  for (const f of files) copyFileSync(join(aside, f.name), join(spoolDir, f.name))
  const again = await start(t)
  const s = await statsUntil(again.tg, 'the restored spool is replayed', (st) => replayed(st) && st.replayed >= copiedRows)
  t.equal(s.replayed, copiedRows, `the new process replayed the ${copiedRows} restored rows`)
  t.same(spoolFiles().map((f) => f.name), [], 'the spool directory is empty again')
  const twice = await counted(again.tg, a.accountId)
  t.equal(twice.rows, N + 1, 'the second replay added no row (deduplication token)')
  t.equal(twice.unique, N + 1, 'no trace id twice')
  // The rollup is fed by the insert, not by the rows that stay: a batch the traces table deduplicated
  // must not be counted again there either.
  t.equal(await rolledUp(again.tg, a.accountId), N + 1, 'the usage rollup still counts N + 1 requests')
  await again.close()
})

t.test('a restart with a spool on disk: the new process replays it by itself', async (t) => {
  const r = await start(t)
  const a = await warmAccount(t, r, 'restart-in-the-middle')
  await switchAway(r.tg)
  const ids = await load(t, r.url, a.key, N)
  // No explicit flush: closing must hand every finished exchange to the worker and spool it.
  await withTimeout(r.close(), 20_000, 'close while ClickHouse is away')
  const onDisk = spooledIds(a.accountId)
  t.equal(onDisk.length, N, `after close the spool holds the ${N} traces`)
  t.same(new Set(onDisk), new Set(ids), 'exactly the traces of the requests')

  // A batch file an insert of an earlier run left behind (a crash between write and insert): the spool,
  // not this file, accounts for its rows, and the next start clears it.
  const leftover = join(insertInbox(dataDir), 'traces-0badc0de-1.tsv')
  writeFileSync(leftover, 'not a row\n')
  const next = await start(t)
  t.notOk(existsSync(leftover), 'a batch file left by an earlier run is removed at start')
  const s = await statsUntil(next.tg, 'the spool left by the previous run is replayed', (st) => replayed(st) && st.replayed >= N)
  t.equal(s.replayed, N, `the new process replayed ${N} rows`)
  await allStoredOnce(t, next.tg, a, ids)
  await next.close()
})

t.test('bounded: with spool and memory queue full, traces are dropped, counted and logged; the proxy keeps serving', async (t) => {
  const QUEUE_ROWS = 5
  const r = await start(t, {
    TRACEGATE_SPOOL_MAX_BYTES: '4096',
    TRACEGATE_TRACE_QUEUE_ROWS: String(QUEUE_ROWS),
    TRACEGATE_TRACE_BATCH_ROWS: '2',
  })
  const a = await warmAccount(t, r, 'bounded')
  await switchAway(r.tg)
  const before = await stats(r.tg)
  // Rounds of requests, with flushes between, so the spool fills and then the memory queue does.
  const ids: string[] = []
  for (let round = 0; round < 4; round++) {
    ids.push(...await load(t, r.url, a.key, N / 4))
    await sleep(50)
    await flush(r.tg)
  }
  const accounted = (s: TraceStats): number => (s.spooled - before.spooled) + s.queued + (s.dropped - before.dropped)
  const full = await statsUntil(r.tg, 'traces are dropped and every trace is accounted for', (s) => s.dropped - before.dropped > 0 && accounted(s) >= N, 10_000)
  const spooled = full.spooled - before.spooled
  const dropped = full.dropped - before.dropped
  t.ok(dropped > 0, `dropped ${dropped} rows`)
  t.ok(spooled > 0, `spooled ${spooled} rows before the spool was full`)
  t.ok(full.spoolBytes <= 4096, `the spool stays under its bound (${full.spoolBytes} bytes)`)
  t.ok(full.queued <= QUEUE_ROWS, `the memory queue stays under its bound (${full.queued} rows)`)
  t.equal(accounted(full), N, 'every trace is spooled, queued or dropped')
  t.ok(r.logs.lines.some((l) => /dropped/i.test(String(l.msg)) && l.level === 40), 'the drop was logged as a warning')
  const more = await chat(r.url, a.key)
  t.equal(more.status, 200, 'the proxy still answers 200')
  ids.push(String(more.headers['x-request-id']))

  await switchBack(r.tg)
  const end = await statsUntil(r.tg, 'the spool and queue are written', replayed)
  const totalDropped = end.dropped - before.dropped
  const c = await counted(r.tg, a.accountId)
  t.equal(c.unique, c.rows, 'no trace id twice')
  t.equal(c.rows + totalDropped, N + 2, 'stored + dropped = every request (none lost silently)')
  t.ok(c.rows > 1, 'what was spooled or queued reached ClickHouse')
  t.same([...c.ids].filter((id) => id !== a.warmId && !ids.includes(id)), [], 'every stored trace is one of the requests')
  await r.close()
})
