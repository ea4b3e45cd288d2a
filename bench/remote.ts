// The remote path: tracegate with CLICKHOUSE_URL at a sink that takes trace inserts
// and does nothing with them (bench/clickhouse-sink.ts, its own process), tracing on against
// TRACEGATE_TRACES=off, alternating runs. ClickHouse's work happens elsewhere, so what tracing costs
// here is tracegate's alone: its CPU per request on minus off (all its threads, from /proc) is the
// proxy-side cost per trace. Two comparisons: with detection at its default (on) and with detection off
// on both, which isolates tracing. The ratio comes from alternating runs at full speed; the CPU per
// trace also from paced runs where both take the same rate at the same time, so the machine's drift
// (other work on these cores moves CPU per request by 2x within minutes) falls on both alike. Prints one
// JSON line per comparison, with the sink's bytes per trace and inserts per second. Every request asks
// something new (words drawn from a vocabulary of a few thousand), so compressed inserts meet text that
// compresses about as real prompts do, not one prompt repeated. BENCH_DURATION (s per
// run, default 5), BENCH_RUNS (pairs, default 3), BENCH_CONNECTIONS (50), BENCH_RATE (requests/s to each
// in the paced runs, default 2000; 0 skips them), BENCH_SKIP (comma list of: detection, bare). The
// TRACEGATE_* variables of the environment reach both tracegates (e.g. TRACEGATE_TRACE_FLUSH_MS).
import autocannon from 'autocannon'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { alternate, MESSAGES, mainThreadCpuUs, processCpuUs, skipped, spawnUntil, startMock, startTracegate, type PairedRun, type Proc, type TracegateProc } from './processes.js'

const duration = Number(process.env.BENCH_DURATION ?? 5)
const runs = Number(process.env.BENCH_RUNS ?? 3)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50)
const rate = Number(process.env.BENCH_RATE ?? 2000)

const SINK = fileURLToPath(new URL('./clickhouse-sink.js', import.meta.url))

/** Pseudo-words from syllables, drawn with a skew toward the first, roughly as word frequencies fall. */
const SYLLABLES = ['ka', 'to', 'ri', 'sen', 'mo', 'la', 've', 'dor', 'pi', 'nu', 'gar', 'te', 'lis', 'o', 'bra', 'che', 'am', 'ul', 'fin', 'qua']
const VOCABULARY = Array.from({ length: 4000 }, (_, i) => {
  let w = ''
  for (let n = i + 1; n > 0; n = Math.floor(n / SYLLABLES.length)) w += SYLLABLES[n % SYLLABLES.length]
  return w
})
let seed = 1

function prompt (chars: number): string {
  let s = ''
  while (s.length < chars) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
    const u = seed / 2 ** 32
    s += VOCABULARY[Math.floor(u * u * VOCABULARY.length)]! + (seed % 11 === 0 ? '. ' : ' ')
  }
  return s
}

/** tracegate's request body for a chat whose user message is new text of the usual length. */
function variedBody (key: string): string {
  return JSON.stringify({ api_key: key, alpha_api_key: 'sk-bench', model: 'gpt-4o-mini', messages: [MESSAGES[0], { role: 'user', content: prompt(MESSAGES[1]!.content.length) }], stream: false, temperature: 0.7 })
}

interface SinkStats { inserts: number; rows: number; wireBytes: number; bytes: number; compressedInserts: number; refused: number }

interface Sink {
  readonly url: string
  readonly pid: number
  stats (): Promise<SinkStats>
  stop (): Promise<void>
}

async function startSink (): Promise<Sink> {
  const dir = mkdtempSync(join(tmpdir(), 'tracegate-bench-sink-'))
  let started: { proc: Proc; matches: string[] }
  try {
    started = await spawnUntil(process.execPath, [SINK, dir], {}, [/listening (\d+)/])
  } catch (err) {
    rmSync(dir, { recursive: true, force: true })
    throw err
  }
  const { proc } = started
  const url = `http://127.0.0.1:${started.matches[0]!}`
  return {
    url,
    pid: proc.child.pid!,
    stats: async () => (await fetch(`${url}/sink-stats`)).json() as Promise<SinkStats>,
    stop: async () => {
      await proc.stop()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

interface Run extends PairedRun {
  readonly requests: number
  readonly ok: number
  readonly seconds: number
  /** tracegate's proxy thread alone, per request. */
  readonly proxyThreadUs: number
  /** What the sink received during the run (the traced side only), and its own CPU. */
  readonly inserts: number
  readonly rows: number
  readonly wireBytes: number
  readonly sinkCpuUs: number
}

/** `perSecond` null: as fast as it answers (autocannon paces by bursts once a second otherwise). */
async function load (tg: TracegateProc, sink: Sink, seconds: number, perSecond: number | null = null): Promise<Run> {
  const s0 = await sink.stats()
  const cpu0 = processCpuUs(tg.pid)
  const main0 = mainThreadCpuUs(tg.pid)
  const sinkCpu0 = processCpuUs(sink.pid)
  const t0 = Date.now()
  const r = await autocannon({
    url: `${tg.url}/api/alpha_service/chat_completion`,
    method: 'POST',
    body: variedBody(tg.key),
    headers: { 'content-type': 'application/json' },
    requests: [{ setupRequest: (req) => ({ ...req, body: variedBody(tg.key) }) }],
    connections,
    duration: seconds,
    timeout: 20,
    ...(perSecond === null ? {} : { overallRate: perSecond }),
  })
  const cpu = processCpuUs(tg.pid) - cpu0
  const main = mainThreadCpuUs(tg.pid) - main0
  const elapsed = (Date.now() - t0) / 1000
  const s1 = await sink.stats()
  const n = Math.max(1, r.requests.total)
  // autocannon counts responses per status class; its typings here leave them out.
  const ok = Number((r as unknown as Record<string, unknown>)['2xx'] ?? 0)
  return {
    rps: r.requests.average,
    errors: r.errors + r.timeouts + r.non2xx,
    cpuUsPerRequest: cpu / n,
    requests: r.requests.total,
    ok,
    seconds: elapsed,
    proxyThreadUs: main / n,
    inserts: s1.inserts - s0.inserts,
    rows: s1.rows - s0.rows,
    wireBytes: s1.wireBytes - s0.wireBytes,
    sinkCpuUs: processCpuUs(sink.pid) - sinkCpu0,
  }
}

const round1 = (x: number): number => Math.round(x * 10) / 10

async function compare (name: string, env: Record<string, string>, mockUrl: string): Promise<void> {
  const sinkOff = await startSink()
  const sinkOn = await startSink()
  const started: Array<{ stop (): Promise<void> }> = [sinkOff, sinkOn]
  try {
    const off = await startTracegate(mockUrl, { ...env, TRACEGATE_TRACES: 'off', CLICKHOUSE_URL: sinkOff.url })
    started.push(off)
    const on = await startTracegate(mockUrl, { ...env, TRACEGATE_TRACES: 'on', CLICKHOUSE_URL: sinkOn.url })
    started.push(on)
    const warm = Math.max(3, Math.round(duration / 2))
    await load(off, sinkOff, warm)
    const warmOn = await load(on, sinkOn, warm)
    const { offRuns, onRuns, summary } = await alternate(runs, () => load(off, sinkOff, duration), () => load(on, sinkOn, duration))
    const paced: Array<[Run, Run]> = []
    for (let i = 0; rate > 0 && i < runs; i++) paced.push(await Promise.all([load(off, sinkOff, duration, rate), load(on, sinkOn, duration, rate)]))
    // SIGTERM flushes every trace: then each call the traced side answered must have reached the sink.
    const before = await sinkOn.stats()
    await on.stop()
    started.pop()
    const total = await sinkOn.stats()
    const sum = (f: (r: Run) => number): number => onRuns.reduce((s, r) => s + f(r), 0)
    const rows = sum((r) => r.rows)
    const responses = sum((r) => r.ok) + warmOn.ok + paced.reduce((s, [, r]) => s + r.ok, 0)
    const pacedMean = (f: (p: [Run, Run]) => number): number => round1(paced.reduce((s, p) => s + f(p), 0) / Math.max(1, paced.length))
    process.stdout.write(JSON.stringify({
      bench: 'remote',
      case: name,
      connections,
      duration_s: duration,
      ...summary,
      // What tracing costs tracegate per call, all its threads: the proxy-side cost per trace.
      cpu_us_per_trace: round1(sum((r) => r.cpuUsPerRequest) / runs - offRuns.reduce((s, r) => s + r.cpuUsPerRequest, 0) / runs),
      cpu_us_per_trace_runs: onRuns.map((r, i) => round1(r.cpuUsPerRequest - offRuns[i]!.cpuUsPerRequest)),
      // The proxy thread's share of that cost; the rest is the store worker, GC helpers and the threadpool.
      proxy_thread_us_per_request_off: round1(offRuns.reduce((s, r) => s + r.proxyThreadUs, 0) / runs),
      proxy_thread_us_per_request_on: round1(sum((r) => r.proxyThreadUs) / runs),
      paced_rate: rate,
      paced_rps_on_runs: paced.map(([, r]) => Math.round(r.rps)),
      paced_cpu_us_per_request_off: pacedMean(([a]) => a.cpuUsPerRequest),
      paced_cpu_us_per_request_on: pacedMean(([, b]) => b.cpuUsPerRequest),
      paced_cpu_us_per_trace: pacedMean(([a, b]) => b.cpuUsPerRequest - a.cpuUsPerRequest),
      paced_cpu_us_per_trace_runs: paced.map(([a, b]) => round1(b.cpuUsPerRequest - a.cpuUsPerRequest)),
      paced_proxy_thread_us_per_trace: pacedMean(([a, b]) => b.proxyThreadUs - a.proxyThreadUs),
      sink_bytes_per_trace: Math.round(sum((r) => r.wireBytes) / Math.max(1, rows)),
      sink_inserts_per_s: round1(sum((r) => r.inserts) / sum((r) => r.seconds)),
      sink_rows_per_insert: Math.round(rows / Math.max(1, sum((r) => r.inserts))),
      sink_cpu_us_per_trace: round1(sum((r) => r.sinkCpuUs) / Math.max(1, rows)),
      sink_compressed_inserts: total.compressedInserts,
      sink_refused: total.refused,
      responses,
      rows_at_close: total.rows,
      rows_flushed_at_close: total.rows - before.rows,
      target_ratio: 0.95,
      target_cpu_us_per_trace: 15,
    }) + '\n')
    // Every answered call is a row; autocannon's calls cut at a run's end may add one per connection.
    if (total.rows < responses || total.rows > responses + (2 * runs + 1) * connections || total.refused > 0) {
      process.stderr.write(`${name}: ${responses} 2xx responses but ${total.rows} rows at the sink (${total.refused} inserts refused)\n`)
      process.exitCode = 1
    }
  } finally {
    for (const p of started.reverse()) await p.stop()
  }
}

async function main (): Promise<void> {
  const mock = await startMock()
  try {
    if (!skipped.has('detection')) await compare('tracing_on_vs_off', {}, mock.url)
    if (!skipped.has('bare')) await compare('tracing_on_vs_off_detection_off', { TRACEGATE_DETECTION: 'off' }, mock.url)
  } finally {
    await mock.proc.stop()
  }
}

await main()
