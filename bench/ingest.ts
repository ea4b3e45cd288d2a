// Trace ingest: (1) the traces per second the store worker sustains into embedded ClickHouse with ~2 KB
// prompts and answers, and the posting thread's event-loop delay meanwhile; (2) the same with traces
// offered at the target rate (20,000/s), the posting thread's delay while the worker keeps up; (3) proxy
// throughput with tracing on against off, a check that the traced server stored one row per call it
// answered, and how soon a call is listed by the read API while the traced server takes a fixed rate: a
// probe call every 100 ms, its list polled every 20 ms. Prints one JSON line per case.
// Settings: BENCH_INGEST_SECONDS (s, default 10), BENCH_INGEST_TRACES (stop after this many traces,
// default no limit), BENCH_INGEST_BATCH (traces per message, default 500, about the most the front
// thread's sink sends in one), BENCH_INGEST_PER_TURN (traces packed per event-loop turn, as exchanges end,
// default 25), BENCH_INGEST_RATE (the paced case's traces/s, 20000), BENCH_DURATION (s, 10),
// BENCH_CONNECTIONS (50), BENCH_VISIBLE_RATE (the probed run's req/s, 2000), BENCH_SKIP (comma list of:
// store, paced, proxy). The TRACEGATE_TRACE_* variables of the environment reach the store (flush
// interval, batch rows) in every case. Each case also splits the CPU it measured by thread, from /proc:
// the posting (or proxy) thread, ClickHouse's merges, ClickHouse's other threads (inserts, queries), and
// the rest (the store worker's JavaScript, V8's garbage collection helpers, libuv's pool).
import autocannon from 'autocannon'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { monitorEventLoopDelay, performance } from 'node:perf_hooks'
import { setImmediate as turn, setTimeout as sleep } from 'node:timers/promises'
import { loadConfig } from '../src/config.js'
import { newRequestId } from '../src/ids.js'
import { StoreClient } from '../src/store/client.js'
import { TraceBatchWriter, type EncodedTraces } from '../src/store/trace-codec.js'
import type { TraceStats } from '../src/store/trace-types.js'
import { mainThreadCpuUs, processCpuUs, proxyBody, skipped as skip, startMock, startTracegate, tracegateCli, type TracegateProc } from './processes.js'

const ingestSeconds = Number(process.env.BENCH_INGEST_SECONDS ?? 10)
const ingestTraces = Number(process.env.BENCH_INGEST_TRACES ?? Infinity)
const ingestBatch = Number(process.env.BENCH_INGEST_BATCH ?? 500)
const perTurn = Number(process.env.BENCH_INGEST_PER_TURN ?? 25)
const duration = Number(process.env.BENCH_DURATION ?? 10)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50)
const pacedRate = Number(process.env.BENCH_INGEST_RATE ?? 20_000)
const visibleRate = Number(process.env.BENCH_VISIBLE_RATE ?? 2_000)

const ACCOUNT_ID = '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b'
const KEY_ID = '0190a1b2-c3d4-7e5f-8a9b-6c7d8e9f0a1b'

const round2 = (x: number): number => Math.round(x * 100) / 100
const round3 = (x: number): number => Math.round(x * 1000) / 1000

/** CPU (µs) of a process's live threads by kind: its main thread, ClickHouse's merges, ClickHouse's other threads, the rest. */
interface ThreadCpu { main: number; merges: number; clickhouse: number; node: number }

function threadCpu (pid: number): ThreadCpu {
  const cpu: ThreadCpu = { main: 0, merges: 0, clickhouse: 0, node: 0 }
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string
    try { stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8') } catch { continue }
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const us = (Number(fields[11]) + Number(fields[12])) * 10_000
    // Threads Node starts are all named "node"; ClickHouse names its own (MergeMutate runs the merges).
    if (Number(tid) === pid) cpu.main += us
    else if (name === 'MergeMutate') cpu.merges += us
    else if (name === 'node') cpu.node += us
    else cpu.clickhouse += us
  }
  return cpu
}

/**
 * The CPU a case used, `total` µs in all, per unit of work and by thread. Threads that ended during the
 * case took their time with them: that share is counted in `node` (ClickHouse's named threads live on).
 */
function cpuSplit (before: ThreadCpu, after: ThreadCpu, total: number, per: number): Record<string, number> {
  const main = after.main - before.main
  const merges = after.merges - before.merges
  const clickhouse = after.clickhouse - before.clickhouse
  return {
    main: round2(main / per),
    merges: round2(merges / per),
    clickhouse_other: round2(clickhouse / per),
    node_other: round2(Math.max(0, total - main - merges - clickhouse) / per),
  }
}

function line (obj: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ bench: 'ingest', ...obj }) + '\n')
}

// Cleanups run last-in first-out (processes stop before their data dirs go), once, on success, error
// or a signal.
const cleanups: Array<() => unknown> = []
async function cleanup (): Promise<void> {
  while (cleanups.length > 0) {
    try { await cleanups.pop()!() } catch (err) { process.stderr.write(`cleanup failed: ${String(err)}\n`) }
  }
}

function tempDir (tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), `tracegate-bench-ingest-${tag}-`))
  cleanups.push(() => { rmSync(dir, { recursive: true, force: true }) })
  return dir
}

/** The trace settings of the environment (TRACEGATE_TRACE_FLUSH_MS, TRACEGATE_TRACE_BATCH_ROWS, …). */
const traceConfig = loadConfig(process.env).traces

function openStore (dataDir: string): StoreClient {
  const store = new StoreClient({
    dataDir,
    clickhouse: null,
    traces: { ...traceConfig },
    pricingFile: null,
    testSeams: true,
    warn: (msg, fields) => { process.stderr.write(`store: ${msg} ${JSON.stringify(fields)}\n`) },
  })
  cleanups.push(() => store.close())
  return store
}

async function countRows (store: StoreClient): Promise<{ rows: number; byOutcome: Record<string, number> }> {
  const rs = await store.call('testQuery', { query: 'SELECT outcome, count() AS n FROM traces GROUP BY outcome' })
  const byOutcome: Record<string, number> = {}
  let rows = 0
  for (const r of rs) {
    const n = Number(r.n)
    byOutcome[String(r.outcome)] = n
    rows += n
  }
  return { rows, byOutcome }
}

// ---- 1. store worker ingest rate -------------------------------------------------------------------

/**
 * A deterministic word stream, so prompts differ from one another as real ones do (and compress alike).
 * One sample in four carries non-ASCII words: V8 holds such text as two-byte strings, which costs the
 * worker noticeably more than ASCII, and real traffic has both.
 */
const WORDS = ('the of and to in is you that it he was for on are as with his they at be this have from or one had by ' +
  'word but not what all were we when your can said there use an each which she do how their if will up other about out ' +
  'many then them these so some her would make like him into time has look two more write go see number no way could ' +
  'people my than first water been call who oil its now find long down day did get come made may part proxy trace token ' +
  'latency stream provider model budget invoice customer').split(' ')
const WORDS_INTL = [...WORDS, 'région', 'naïve', 'coördinate', '東京', 'données', '“quoted”']

function text (seed: number, bytes: number): string {
  const words = seed % 4 === 3 ? WORDS_INTL : WORDS
  let x = seed * 2654435761 >>> 0
  let s = ''
  while (Buffer.byteLength(s) < bytes) {
    x = (x * 1103515245 + 12345) >>> 0
    s += words[x % words.length]! + ((x >>> 8) % 13 === 0 ? '. ' : ' ')
  }
  return s
}

/** The forwarded alpha body (service fields already cut) and a chat.completion answer, ~2 KB each. */
function sample (i: number): { request: Buffer; response: Buffer } {
  const request = Buffer.from(JSON.stringify({
    model: 'gpt-4o-mini',
    messages: [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: text(i, 1900) }],
    stream: false,
    temperature: 0.7,
  }))
  const content = text(i + 7920, 1700)
  const response = Buffer.from(JSON.stringify({
    id: `chatcmpl-${(i * 48271).toString(36).padStart(29, 'x')}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: 'gpt-4o-mini-2024-07-18',
    choices: [{ index: 0, message: { role: 'assistant', content, refusal: null, annotations: [] }, logprobs: null, finish_reason: 'stop' }],
    usage: {
      prompt_tokens: 412 + (i % 50),
      completion_tokens: 377 + (i % 40),
      total_tokens: 789 + (i % 50) + (i % 40),
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    },
    service_tier: 'default',
    system_fingerprint: 'fp_0ba0d124f1',
  }))
  return { request, response }
}

const SAMPLES = Array.from({ length: 64 }, (_, i) => sample(i))

/** Appends `n` records as the sink does when exchanges end: to one buffer that the post transfers. */
function pack (w: TraceBatchWriter, n: number, seq: number): void {
  const now = Date.now()
  for (let i = 0; i < n; i++) {
    const { request, response } = SAMPLES[(seq + i) % SAMPLES.length]!
    const providerMs = 300 + ((seq + i) % 200) + 0.125
    w.add({
      traceId: newRequestId(),
      accountId: ACCOUNT_ID,
      keyId: KEY_ID,
      time: now,
      provider: 'alpha',
      model: 'gpt-4o-mini',
      endpoint: '/api/alpha_service/chat_completion',
      streaming: false,
      confidential: false,
      status: 200,
      outcome: 'ok',
      errorCode: '',
      errorCause: '',
      attempts: '',
      requestBytes: request.length,
      responseBytes: response.length,
      chunkMarks: null,
      latencyMs: providerMs + 0.25,
      ttfbMs: providerMs + 0.2,
      providerMs,
      overheadMs: 0.25,
      detection: '',
      issues: '',
      labels: null,
      span: null,
      stored: true,
    }, request, request.length, [response], response.length, [], 0)
  }
}

/**
 * `rate` null: as fast as the worker takes them (the rate it sustains). A number: traces offered at that
 * rate, the way a proxy thread serving that many calls hands them over, to read the posting thread's
 * event-loop delay while the worker keeps up with it.
 */
async function storeWorkerCase (rate: number | null): Promise<void> {
  const traces = traceConfig
  const store = openStore(tempDir('store'))
  await store.call('migrate')
  // Rows posted and not yet written (in messages, in the worker's queue, or in an insert) stay under
  // a few insert batches, so the rate measured is what the worker sustains, not what memory absorbs.
  const bound = Math.max(4 * traces.batchRows, 4 * ingestBatch)
  const delay = monitorEventLoopDelay({ resolution: 1 })
  let posted = 0
  let buildMs = 0
  let postMs = 0
  delay.enable()
  const threads0 = threadCpu(process.pid)
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  const deadline = t0 + ingestSeconds * 1000
  // Traces are on here, so the store always has their numbers.
  let stats: TraceStats = (await store.call('traceStats'))!
  const w = new TraceBatchWriter()
  let packed = 0
  while (performance.now() < deadline && posted < ingestTraces) {
    if (rate !== null) {
      // Paced: the next traces are due when the offered rate says so.
      const due = t0 + (packed / rate) * 1000
      const now = performance.now()
      if (now < due) { await sleep(Math.max(1, due - now)); continue }
    }
    if (stats.queued + (packed - stats.written) + perTurn > bound) {
      stats = (await store.call('traceStats'))!
      if (stats.queued + (packed - stats.written) + perTurn > bound) await sleep(2)
      continue
    }
    // A turn of the proxy thread: a few exchanges end and are packed; a full batch is posted.
    const n = Math.min(perTurn, ingestTraces - packed)
    const t1 = performance.now()
    pack(w, n, packed)
    packed += n
    const t2 = performance.now()
    buildMs += t2 - t1
    if (w.count >= ingestBatch || packed >= ingestTraces) {
      const b = w.take()
      store.postTraces(b, [b.buffer])
      posted += b.count
      postMs += performance.now() - t2
    }
    await turn()
  }
  if (w.count > 0) {
    const b = w.take()
    store.postTraces(b, [b.buffer])
    posted += b.count
  }
  const flushed = (await store.call('flushTraces'))!
  const seconds = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  const threads = cpuSplit(threads0, threadCpu(process.pid), cpu.user + cpu.system, posted)
  delay.disable()
  const { rows } = await countRows(store)
  await store.close()
  line({
    case: rate === null ? 'store_worker' : 'store_worker_paced',
    ...(rate === null ? {} : { offered_traces_per_s: rate }),
    traces: posted,
    seconds: round2(seconds),
    traces_per_s: Math.round(posted / seconds),
    event_loop_delay_p99_ms: round2(delay.percentile(99) / 1e6),
    event_loop_delay_max_ms: round2(delay.max / 1e6),
    batch: ingestBatch,
    per_turn: perTurn,
    // This thread's time per trace: packing (what the sink does per exchange, plus the id) and posting.
    pack_us_per_trace: round2(buildMs * 1000 / posted),
    // Every thread of this process (the posting thread, the store worker, chDB's insert and merge
    // threads): on a busy machine the rate falls with the CPU left over, this much less so.
    cpu_us_per_trace: round2((cpu.user + cpu.system) / posted),
    cores_used: round2((cpu.user + cpu.system) / 1e6 / seconds),
    // main: this (posting) thread; merges and clickhouse_other: chDB's threads; node_other: the store
    // worker's JavaScript, garbage collection and libuv.
    cpu_us_per_trace_by_thread: threads,
    flush_ms: traces.flushMs,
    batch_rows: traces.batchRows,
    post_us_per_trace: round2(postMs * 1000 / posted),
    rows,
    dropped: flushed.dropped,
    spooled: flushed.spooled,
    target_traces_per_s: 20000,
    target_delay_p99_ms: 2,
  })
  if (rows !== posted) {
    process.stderr.write(`store_worker: ${posted} traces posted but ${rows} rows in ClickHouse\n`)
    process.exitCode = 1
  }
}

// ---- 2. proxy throughput, tracing on against off ---------------------------------------------------


interface Run { rps: number; ok: number; non2xx: number; errors: number; cpuUsPerRequest: number; proxyThreadUsPerRequest: number; byThread: Record<string, number> }

/** `rate`: requests per second over all connections (autocannon's overallRate); null: as fast as they go. */
async function load (url: string, key: string, seconds: number, pid: number, rate: number | null = null): Promise<Run> {
  const threads0 = threadCpu(pid)
  const cpu0 = processCpuUs(pid)
  const main0 = mainThreadCpuUs(pid)
  const r = await autocannon({
    url: `${url}/api/alpha_service/chat_completion`,
    method: 'POST',
    body: proxyBody(key, false),
    headers: { 'content-type': 'application/json' },
    connections,
    duration: seconds,
    timeout: 20,
    ...(rate === null ? {} : { overallRate: rate }),
  })
  // autocannon counts responses per status class; its typings here leave them out.
  const ok = Number((r as unknown as Record<string, unknown>)['2xx'] ?? 0)
  const n = Math.max(1, r.requests.total)
  const cpu = processCpuUs(pid) - cpu0
  const cpuUsPerRequest = cpu / n
  const proxyThreadUsPerRequest = (mainThreadCpuUs(pid) - main0) / n
  const byThread = cpuSplit(threads0, threadCpu(pid), cpu, n)
  return { rps: r.requests.average, ok, non2xx: r.non2xx, errors: r.errors + r.timeouts, cpuUsPerRequest, proxyThreadUsPerRequest, byThread }
}

/** The user label of the visibility probe's calls: the list filtered by it holds only them. */
const PROBE_USER = 'visibility-probe'

/**
 * Until `done`: a call (labelled PROBE_USER) every 100 ms while the load runs, and the ms from its answer
 * until the read API's list shows it (polled every 20 ms; 10 s at most, then Infinity). Returns the
 * latencies and the probe calls answered 200 (they are rows like the load's).
 */
async function visibility (tg: TracegateProc, dashboard: string, readKey: string, done: () => boolean): Promise<{ ms: number[]; ok: number }> {
  const ms: number[] = []
  let ok = 0
  while (!done()) {
    const res = await fetch(`${tg.url}/api/alpha_service/chat_completion`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-tracegate-user': PROBE_USER }, body: proxyBody(tg.key, false),
    })
    await res.arrayBuffer()
    const answered = performance.now()
    if (res.status === 200) ok++
    const id = res.headers.get('x-request-id')
    for (;;) {
      const list = await fetch(`${dashboard}/api/v1/traces?user=${PROBE_USER}&limit=5`, { headers: { authorization: `Bearer ${readKey}` } })
      const page = await list.json() as { traces?: Array<{ trace_id: string }> }
      if (page.traces?.some((x) => x.trace_id === id) === true) { ms.push(performance.now() - answered); break }
      if (performance.now() - answered > 10_000) { ms.push(Infinity); break }
      await sleep(20)
    }
    await sleep(100)
  }
  return { ms, ok }
}

function percentile (xs: readonly number[], p: number): number | null {
  if (xs.length === 0) return null
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(p / 100 * sorted.length) - 1)]!
}

async function proxyCase (): Promise<void> {
  const mock = await startMock()
  cleanups.push(() => mock.proc.stop())
  // Our own data dirs (the env wins over startTracegate's), so the traced one outlives its process.
  // Detection is off on both: this case measures what tracing costs, and nothing else.
  const onDir = tempDir('on')
  const offDir = tempDir('off')
  const off = await startTracegate(mock.url, { TRACEGATE_TRACES: 'off', TRACEGATE_DETECTION: 'off', TRACEGATE_DATA_DIR: offDir })
  cleanups.push(() => off.stop())
  const on = await startTracegate(mock.url, { TRACEGATE_TRACES: 'on', TRACEGATE_DETECTION: 'off', TRACEGATE_DATA_DIR: onDir })
  cleanups.push(() => on.stop())
  // serve prints the dashboard's address right after the proxy's, maybe in a later chunk.
  let dashboard: string | undefined
  for (let i = 0; i < 100 && dashboard === undefined; i++) {
    dashboard = /dashboard on (http:\/\/\S+)/.exec(on.proc.output.join(''))?.[1]
    if (dashboard === undefined) await sleep(50)
  }
  if (dashboard === undefined) throw new Error('the traced tracegate did not say where its dashboard listens')
  // Through the running server's admin socket, found in its data directory (onDir, not the one startTracegate made).
  const readKey = (tracegateCli({ ...on, dataDir: onDir }, ['key', 'create', '--account', on.accountId, '--scope', 'read']) as { key: string }).key
  const visible: number[] = []

  // Every call the traced server answered, warm-up included, must be a row.
  let responses = 0
  let onNon2xx = 0
  let onRuns = 0
  const loadOn = async (seconds: number, rate: number | null = null, probed = false): Promise<Run> => {
    let done = false
    const probe = probed ? visibility(on, dashboard, readKey, () => done) : Promise.resolve({ ms: [], ok: 0 })
    const r = await load(on.url, on.key, seconds, on.pid, rate)
    done = true
    const p = await probe
    visible.push(...p.ms)
    responses += r.ok + p.ok
    onNon2xx += r.non2xx
    onRuns++
    return r
  }
  const warm = Math.max(3, Math.round(duration / 2))
  await load(off.url, off.key, warm, off.pid)
  await loadOn(warm)
  // Alternate so drift (other load on the machine, the traced server's merges) falls on both alike.
  const rpsOff: number[] = []
  const rpsOn: number[] = []
  const cpuOff: number[] = []
  const cpuOn: number[] = []
  const mainOff: number[] = []
  const mainOn: number[] = []
  const splitOn: Array<Record<string, number>> = []
  let errors = 0
  for (let i = 0; i < 2; i++) {
    const a = await load(off.url, off.key, duration, off.pid)
    const b = await loadOn(duration)
    rpsOff.push(a.rps)
    rpsOn.push(b.rps)
    cpuOff.push(a.cpuUsPerRequest)
    cpuOn.push(b.cpuUsPerRequest)
    mainOff.push(a.proxyThreadUsPerRequest)
    mainOn.push(b.proxyThreadUsPerRequest)
    splitOn.push(b.byThread)
    errors += a.errors + a.non2xx + b.errors + b.non2xx
  }

  // How soon a call is listed at a fixed rate, the load of the freshness target.
  const paced = await loadOn(duration, visibleRate, true)
  errors += paced.errors + paced.non2xx

  // Let the last batch reach the worker, then SIGTERM (which flushes every trace) and read the rows
  // straight from the data dir.
  await sleep(2000)
  await on.proc.stop()
  const store = openStore(onDir)
  const { rows, byOutcome } = await countRows(store)
  await store.close()

  const mean = (xs: number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length
  line({
    case: 'proxy_tracing',
    connections,
    duration_s: duration,
    rps_off: Math.round(mean(rpsOff)),
    rps_on: Math.round(mean(rpsOn)),
    ratio: round3(mean(rpsOn) / mean(rpsOff)),
    rps_off_runs: rpsOff.map((x) => Math.round(x)),
    rps_on_runs: rpsOn.map((x) => Math.round(x)),
    // tracegate's own CPU per request (all its threads, chDB's included): what tracing costs, read
    // without the noise of whatever else the machine runs. Traces still queued at a run's end are
    // paid for in the next run.
    cpu_us_per_request_off: Math.round(mean(cpuOff)),
    cpu_us_per_request_on: Math.round(mean(cpuOn)),
    // The proxy thread's own share: what tracing costs the one thread every request goes through. With
    // a core to spare for the store worker and ClickHouse, this would be the throughput ratio's bound.
    proxy_thread_us_per_request_off: round2(mean(mainOff)),
    proxy_thread_us_per_request_on: round2(mean(mainOn)),
    // The traced server's CPU per request by thread (see cpuSplit), per run.
    cpu_us_per_request_on_by_thread: splitOn,
    flush_ms: traceConfig.flushMs,
    errors,
    rows,
    rows_by_outcome: byOutcome,
    responses,
    // autocannon drops the calls in flight when a run's time is up (one per connection); the server
    // traces them as client_aborted, or ok when it had already answered: rows without a response.
    rows_without_response: rows - responses - onNon2xx,
    // From a probe call's answer until the read API lists it, at BENCH_VISIBLE_RATE.
    visible_rate: visibleRate,
    visible_rps: Math.round(paced.rps),
    visible_ms: { n: visible.length, p50: percentile(visible, 50), p99: percentile(visible, 99), max: percentile(visible, 100) },
    target_ratio: 0.8,
    target_visible_p99_ms: 2000,
  })
  if ((byOutcome.ok ?? 0) < responses || rows > responses + onNon2xx + onRuns * connections) {
    process.stderr.write(`proxy_tracing: ${responses} 2xx responses but ${rows} trace rows ${JSON.stringify(byOutcome)}\n`)
    process.exitCode = 1
  }
}

async function main (): Promise<void> {
  // Bounded in time whatever happens: the cases' own durations plus a generous margin for start-up,
  // warm-up and flushing.
  const budgetS = (skip.has('store') ? 0 : ingestSeconds + 60) + (skip.has('paced') ? 0 : ingestSeconds + 60) + (skip.has('proxy') ? 0 : 7 * duration + 120)
  const watchdog = setTimeout(() => {
    process.stderr.write(`ingest bench exceeded ${budgetS} s; stopping\n`)
    process.exitCode = 1
    void cleanup().finally(() => process.exit())
  }, budgetS * 1000)
  watchdog.unref()
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      process.exitCode = 130
      void cleanup().finally(() => process.exit())
    })
  }
  try {
    if (!skip.has('store')) await storeWorkerCase(null)
    if (!skip.has('paced')) await storeWorkerCase(pacedRate)
    if (!skip.has('proxy')) await proxyCase()
  } finally {
    await cleanup()
    clearTimeout(watchdog)
  }
}

main().catch((err: unknown) => {
  process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n')
  process.exitCode = 1
})
