// The store worker: the only thread that talks to ClickHouse. It answers the front thread's requests
// (protocol.ts), takes its finished exchanges and writes them as traces in batches, and on close
// flushes every trace (to ClickHouse, or to the spool when it is away).
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { parentPort, workerData } from 'node:worker_threads'
import { Pricing } from '../../pricing/index.js'
import { TracegateError } from '../../errors.js'
import { AccountStore } from './accounts.js'
import { connect } from './connect.js'
import { migrate } from './migrate.js'
import { lowerStoreThreads } from './priority.js'
import type { ClickHouseClient } from '@clickhouse/client'
import type { Handlers } from '../../domain/rpc.js'
import type { ExportAck, LiveMessage, OpName, StoreOps, StoreRequest, StoreResponse, StoreWorkerData, TraceMessage } from '../protocol.js'
import { applyRetention } from './retention.js'
import { Spool } from './spool.js'
import { HANDOFF_FILE } from '../handoff.js'
import { replayHandoffs } from './handoff-replay.js'
import { TraceWriter, type ClientHolder } from './trace-writer.js'
import type { RawTrace, TraceRow, TraceStats } from '../trace-types.js'
import { UsageCollector } from './usage-feedback.js'
import { decodeTraces } from '../trace-codec.js'
import type { SpanExport } from './spans.js'
import { listItem, type LiveBatch, type TraceListItem, type TraceSummary } from '../trace-types.js'
import { keysLastUsed } from './key-last-used.js'
import { listTraces } from './trace-queries.js'
import { recentPage, recentTrace } from './recent-traces.js'
import { heldColumns, traceTotals } from './trace-totals.js'
import { exportTraces } from './trace-export.js'
import { usageBreakdown, usageSeries, usageTotals } from './usage-queries.js'
import { usageReport } from './usage-report.js'
import { storeStatus } from './status.js'
import { limitUsage } from './limit-usage.js'
import { usageByUser, usageExtras } from './usage-extra-queries.js'
import { listSessions, sessionCalls } from './session-queries.js'
import { serveFrontPorts, type Replier } from './ports.js'
import { sqlQuery } from './sql-query.js'
import { SqlPool } from './sql-pool.js'

const data = workerData as StoreWorkerData
const port = parentPort!
const spoolDir = join(data.dataDir, 'spool')


let holder: ClientHolder | null = null
let accounts: AccountStore | null = null
let traces: TraceWriter | null = null
/** Span export over OTLP, loaded only when an endpoint is configured (spans.ts). */
let spans: SpanExport | null = null
const spansLoaded: Promise<void> = data.otel === null
  ? Promise.resolve()
  : import('./spans.js').then((m) => { spans = new m.SpanExport(data.otel!) })
let ready: Promise<void> | null = null
/** The SQL port's own ClickHouse connections (sql-pool.ts), made on first use. */
let sqlPool: SqlPool | null = null
/** Where the store's connection points (the test seam moves it), so the SQL port's follow. */
let sqlServer = data.clickhouse
let writes: Promise<unknown> = Promise.resolve()

const SERIAL: ReadonlySet<OpName> = new Set(['createAccount', 'createUser', 'createKey', 'revokeKey', 'migrate', 'setPassword', 'updateKeyLimits', 'updateAccountLimits'])

function warn (msg: string, fields: Record<string, unknown>): void {
  // The store worker has no logger of its own; warnings go to the main thread's log.
  port.postMessage({ log: 'warn', msg, fields })
}

/** Accounts with a live list open on the dashboard; only their rows are reported. */
let watched: ReadonlySet<string> = new Set()

/**
 * Rows of watched accounts as soon as they are built, as the live list's message text, one per account.
 * From then on the trace list and the trace's detail show them too (from memory until they are inserted).
 */
function published (summaries: readonly TraceSummary[]): void {
  if (watched.size === 0) return
  const byAccount = new Map<string, TraceListItem[]>()
  for (const s of summaries) {
    if (!watched.has(s.account_id)) continue
    let list = byAccount.get(s.account_id)
    if (list === undefined) byAccount.set(s.account_id, list = [])
    list.push(listItem(s))
  }
  if (byAccount.size === 0) return
  const batches: LiveBatch[] = []
  for (const [accountId, traces] of byAccount) {
    batches.push({ accountId, message: JSON.stringify({ type: 'traces', traces }) })
  }
  port.postMessage({ written: batches })
}

function open (): Promise<void> {
  ready ??= (async () => {
    const client = await connect(data.dataDir, data.clickhouse, true)
    // Storage work below the front thread's priority (priority.ts), and every few seconds for the threads
    // chDB and libuv start on first use (a few dozen /proc reads).
    lowerStoreThreads()
    setInterval(lowerStoreThreads, 2_000).unref()
    holder = { client }
    accounts = new AccountStore(holder)
    await spansLoaded
    if (data.traces.enabled) {
      const spool = new Spool(spoolDir, data.traces.spoolMaxBytes)
      const exported = spans
      const built = exported === null
        ? usage.add.bind(usage)
        : (raw: RawTrace, row: TraceSummary | null) => { usage.add(raw, row); exported.add(raw, row) }
      traces = new TraceWriter(holder, spool, Pricing.load(data.pricingFile), data.traces, published, warn, built)
      await replayHandoffs(spoolDir, spool, traces, client, warn)
    }
  })()
  return ready
}

function seam (): void {
  if (!data.testSeams) throw new TracegateError('not_allowed', { message: 'test seams are off' })
}

/** Streamed answers waiting for the front thread to take their last chunk, by request id. */
const acks = new Map<number, (more: boolean) => void>()

/** Sends one chunk of request `id`'s answer; resolves when it was taken (false: stop). */
function sendChunk (id: number, chunk: string): Promise<boolean> {
  return new Promise((resolve) => {
    acks.set(id, resolve)
    port.postMessage({ id, chunk })
  })
}

/** What a handler works with: the open ClickHouse client, the account store, and its request's id. */
interface Call {
  readonly ch: ClickHouseClient
  readonly store: AccountStore
  readonly id: number
}

/** One handler per operation of the table (protocol.ts); tsc refuses a missing, extra or mistyped one. */
const handlers: Handlers<StoreOps, Call> = {
  ping: async ({ ch }) => (await ch.ping()).success,
  migrate: async ({ ch }) => {
    const applied = await migrate(ch, data.migrationsDir)
    await applyRetention(ch, data.traces.bodyTtlDays, data.traces.rowTtlDays)
    return applied
  },
  lookupKey: ({ store }, a) => store.lookupKey(a),
  countAccounts: ({ store }) => store.countAccounts(),
  createAccount: ({ store }, a) => store.createAccount(a),
  getAccount: ({ store }, a) => store.getAccount(a),
  createUser: ({ store }, a) => store.createUser(a),
  createKey: ({ store }, a) => store.createKey(a),
  revokeKey: ({ store }, a) => store.revokeKey(a),
  updateKeyLimits: ({ store }, a) => store.updateKeyLimits(a),
  updateAccountLimits: ({ store }, a) => store.updateAccountLimits(a),
  limitUsage: ({ ch }, a) => limitUsage(ch, a.now),
  listKeys: ({ store }, a) => store.listKeys(a),
  findUserByEmail: ({ store }, a) => store.findUserByEmail(a),
  getUser: ({ store }, a) => store.getUser(a),
  // The rows in memory are read before ClickHouse is asked: a row inserted in between is then in both
  // answers (and shown once), never in neither.
  listTraces: ({ ch }, f) => listTraces(ch, f, traces === null ? null : recentPage(traces.held(), f)),
  // Read before ClickHouse is asked, as for the list: a row inserted in between is counted from memory.
  traceTotals: ({ ch }, f) => traceTotals(ch, f, traces === null ? null : heldColumns(traces.held(), f)),
  exportTraces: ({ ch, id }, a) => exportTraces(ch, a, (chunk) => sendChunk(id, chunk)),
  keysLastUsed: ({ ch }, a) => keysLastUsed(ch, a.accountId),
  flushTraces: async () => {
    await traces?.flush()
    // On the main thread's port before its reply there: asked by the main thread, its counts then
    // include every batch taken so far.
    reportNow()
    return statsWithSpans()
  },
  traceStats: () => statsWithSpans(),
  getTrace: async ({ ch }, a) => {
    // A row leaves memory only once ClickHouse has it, so one not found here is asked of ClickHouse.
    const recent = traces === null ? null : recentTrace(traces.held(), a.accountId, a.traceId)
    if (recent !== null) return recent
    const rs = await ch.query({
      // The bloom filter on trace_id finds the granule; account_id keeps it the caller's.
      query: 'SELECT * FROM traces WHERE account_id = {accountId:UUID} AND trace_id = {traceId:UUID} LIMIT 1',
      query_params: a,
      format: 'JSONEachRow',
    })
    return (await rs.json<TraceRow>())[0] ?? null
  },
  usageTotals: ({ ch }, a) => usageTotals(ch, a),
  usageSeries: ({ ch }, a) => usageSeries(ch, a),
  usageBreakdown: ({ ch }, a) => usageBreakdown(ch, a),
  usageReport: ({ ch }, a) => usageReport(ch, a),
  usageExtras: ({ ch }, a) => usageExtras(ch, a),
  usageByUser: ({ ch }, a) => usageByUser(ch, a),
  listSessions: ({ ch }, a) => listSessions(ch, a),
  sessionCalls: ({ ch }, a) => sessionCalls(ch, a),
  sqlQuery: (_, a) => {
    sqlPool ??= new SqlPool(() => connect(data.dataDir, sqlServer), a.connections)
    return sqlPool.run(a.accountId, (ch) => sqlQuery(ch, a))
  },
  testSwitchConnection: async (_, a) => {
    seam()
    const old = holder!.client
    holder!.client = await connect(data.dataDir, a.server)
    sqlServer = a.server
    await old.close().catch(() => {})
    const oldSql = sqlPool
    sqlPool = null
    await oldSql?.close()
    return true
  },
  testQuery: async ({ ch }, a) => {
    seam()
    const rs = await ch.query({ query: a.query, query_params: a.params ?? {}, format: 'JSONEachRow' })
    return rs.json<Record<string, unknown>>()
  },
  listAccounts: ({ store }) => store.listAccounts(),
  setPassword: ({ store }, a) => store.setPassword(a),
  storeStatus: ({ ch }) => storeStatus(ch, data.clickhouse?.url ?? null, data.migrationsDir),
}

/**
 * Runs request `id`'s operation once the store is open. Generic in K, so the operation's arguments and its
 * handler are checked as a pair: the request came from StoreClient.call, which the same table types.
 */
async function run<K extends OpName> (op: K, args: StoreOps[K]['args'], id: number): Promise<StoreOps[K]['result']> {
  await open()
  return handlers[op]({ ch: holder!.client, store: accounts!, id }, ...args)
}

/** Tokens and cost of the rows built, for the front thread's limits. */
const usage = new UsageCollector()
/**
 * Reports leave at most this often: every message wakes the main thread, which costs it more than the
 * report's contents. Until a report arrives the calls' holds stand in for their costs (reserve.ts's
 * estimate, above what most calls cost; a call that costs more counts up to this much later), and the
 * front threads' admitted requests (no limit depends on them) wait with it.
 */
const REPORT_MS = 100
let reporting: NodeJS.Timeout | null = null

function sendUsage (): void {
  reporting = null
  const taken = usage.take()
  if (taken !== null) port.postMessage(taken)
}

function reportUsage (): void {
  reporting ??= setTimeout(sendUsage, REPORT_MS)
}

/** Sends the report that waits now, if one does. */
function reportNow (): void {
  if (reporting !== null) { clearTimeout(reporting); sendUsage() }
}

/**
 * How late this worker took its last trace batch (ms after it was posted), while it takes batches: a
 * worker that is busy for seconds takes every batch that late. Forgotten INBOUND_FRESH_MS after it was
 * taken (no batch since: none is waiting either).
 */
let inbound = { lateMs: 0, at: 0 }
const INBOUND_FRESH_MS = 2000

function taken (sentAt: number): void {
  const now = Date.now()
  inbound = { lateMs: Number.isFinite(sentAt) ? Math.max(0, now - sentAt) : 0, at: now }
}

/**
 * A proxy thread's batch: its rows go to the writer, its hand-off file goes. An empty batch (one that only
 * closes a hand-off file) holds no trace, so how late it came says nothing of traces behind.
 */
function takeTraces (msg: TraceMessage): void {
  if (msg.traces.count > 0) {
    taken(msg.sentAt)
    traces?.add(msg.traces, null, msg.sentAt)
  }
  handedOver(msg.handoff)
  // Built above (add is synchronous), so the report counts their costs before it lets their holds go.
  takeLimits(msg)
  reportUsage()
}

/** A batch whose traces are not built (traces off, or the store did not open): its holds end, its requests are counted. */
function takeLimits (msg: TraceMessage): void {
  if (msg.held !== undefined) usage.release(msg.held)
  if (msg.admitted !== undefined) usage.admit(msg.admitted)
  if (msg.held !== undefined || msg.admitted !== undefined) reportUsage()
}

function inboundLagMs (): number {
  return Date.now() - inbound.at < INBOUND_FRESH_MS ? inbound.lateMs : 0
}

/** The trace pipeline's numbers with the spans dropped; with traces off, zeros beside the spans' numbers. */
function statsWithSpans (): TraceStats | null {
  const drops = spans === null ? null : { ...spans.drops }
  if (traces !== null) return { ...traces.stats, lag: traces.lag(Date.now(), inboundLagMs()), spanDrops: drops }
  if (drops === null) return null
  return {
    written: 0, spooled: 0, replayed: 0, dropped: 0, spoolRefused: 0, queued: 0, spoolBytes: 0, lag: { clickhouseMs: 0, dashboardMs: 0 },
    clickhouseUp: true, insertError: null, spoolError: null, usage: [], inserts: { counts: [], sum: 0, count: 0 },
    spanDrops: drops,
  }
}

/** Traces off: the front thread sends span-only records, exported once the exporter has loaded. */
function spansOnly (batch: TraceMessage['traces']): void {
  spansLoaded.then(() => {
    for (const raw of decodeTraces(batch)) spans?.add(raw, null)
  }, (err: unknown) => { warn('spans dropped: the OpenTelemetry exporter did not load', { dropped: batch.count, err: String(err) }) })
}

/**
 * The batch that closes a proxy thread's hand-off file is in this worker's write-ahead segment (add wrote
 * it, synchronously), and so are the file's earlier batches (they came before on the same port): the file
 * is not needed any more.
 */
function handedOver (handoff: string | undefined): void {
  if (handoff === undefined || !HANDOFF_FILE.test(handoff)) return
  try {
    rmSync(join(spoolDir, handoff), { force: true })
  } catch (err) {
    warn('a hand-off file could not be removed; the next start replays it, leaving out what ClickHouse has', { file: handoff, err: (err as Error).message })
  }
}

function reply (msg: StoreResponse, to: Replier = port): void {
  to.postMessage(msg)
}

port.on('message', (msg: StoreRequest | TraceMessage | LiveMessage | ExportAck | 'close') => { onMessage(msg, port) })
serveFrontPorts(onMessage)

function onMessage (msg: StoreRequest | TraceMessage | LiveMessage | ExportAck | 'close', to: Replier): void {
  if (msg === 'close') {
    // Streams in progress stop at their current chunk.
    for (const stop of acks.values()) stop(false)
    acks.clear()
    reportNow()
    void (async () => {
      await writes.catch(() => {})
      if (ready !== null) await ready.catch(() => {})
      await traces?.close().catch((err: unknown) => { warn('flushing traces at close failed', { err: String(err) }) })
      await spansLoaded.catch(() => {})
      await spans?.close()
      await sqlPool?.close()
      if (holder !== null) await holder.client.close().catch(() => {})
      port.postMessage('closed')
      port.close()
    })()
    return
  }
  if ('ack' in msg) {
    const taken = acks.get(msg.ack)
    acks.delete(msg.ack)
    taken?.(msg.more)
    return
  }
  if ('live' in msg) {
    watched = new Set(msg.live)
    return
  }
  if ('traces' in msg) {
    if (traces !== null) takeTraces(msg)
    else if (!data.traces.enabled) {
      spansOnly(msg.traces)
      takeLimits(msg)
    }
    else {
      open().then(() => { takeTraces(msg) }, (err: unknown) => {
        warn('traces dropped: the store did not open', { dropped: msg.traces.count, err: (err as Error).message })
        // Their costs are never known: what their calls held is let go, as a hold whose trace never came.
        takeLimits(msg)
      })
    }
    return
  }
  const exec = (): Promise<StoreOps[OpName]['result']> => run(msg.op, msg.args, msg.id)
  let p: Promise<StoreOps[OpName]['result']>
  if (SERIAL.has(msg.op)) {
    p = writes.then(exec, exec)
    writes = p.catch(() => {})
  } else {
    p = exec()
  }
  p.then(
    (value) => reply({ id: msg.id, ok: true, value }, to),
    (err: unknown) => reply({
      id: msg.id,
      ok: false,
      error: {
        message: err instanceof Error ? err.message : String(err),
        code: err instanceof TracegateError ? err.code : null,
      },
    }, to),
  )
}
