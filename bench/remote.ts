// The remote path (issue 15, item 3): tracegate with CLICKHOUSE_URL at a sink that takes trace inserts
// and does nothing with them (bench/clickhouse-sink.ts, its own process), tracing on against
// TRACEGATE_TRACES=off, alternating runs. ClickHouse's work happens elsewhere, so what tracing costs
// here is tracegate's alone: its CPU per request on minus off (all its threads, from /proc) is the
// proxy-side cost per trace. Two comparisons: with detection at its default (on) and with detection off
// on both, which isolates tracing. Prints one JSON line per comparison, with the sink's bytes per trace
// and inserts per second. BENCH_DURATION (s per run, default 5), BENCH_RUNS (pairs, default 3),
// BENCH_CONNECTIONS (50), BENCH_SKIP (comma list of: detection, bare). The TRACEGATE_* variables of
// the environment reach both tracegates (e.g. TRACEGATE_TRACE_FLUSH_MS).
import autocannon from 'autocannon'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { alternate, processCpuUs, proxyBody, skipped, spawnUntil, startMock, startTracegate, type PairedRun, type Proc, type TracegateProc } from './processes.js'

const duration = Number(process.env.BENCH_DURATION ?? 5)
const runs = Number(process.env.BENCH_RUNS ?? 3)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50)

const SINK = fileURLToPath(new URL('./clickhouse-sink.js', import.meta.url))

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
  /** What the sink received during the run (the traced side only), and its own CPU. */
  readonly inserts: number
  readonly rows: number
  readonly wireBytes: number
  readonly sinkCpuUs: number
}

async function load (tg: TracegateProc, sink: Sink, seconds: number): Promise<Run> {
  const s0 = await sink.stats()
  const cpu0 = processCpuUs(tg.pid)
  const sinkCpu0 = processCpuUs(sink.pid)
  const t0 = Date.now()
  const r = await autocannon({
    url: `${tg.url}/api/alpha_service/chat_completion`,
    method: 'POST',
    body: proxyBody(tg.key, false),
    headers: { 'content-type': 'application/json' },
    connections,
    duration: seconds,
    timeout: 20,
  })
  const cpu = processCpuUs(tg.pid) - cpu0
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
    // SIGTERM flushes every trace: then each call the traced side answered must have reached the sink.
    const before = await sinkOn.stats()
    await on.stop()
    started.pop()
    const total = await sinkOn.stats()
    const sum = (f: (r: Run) => number): number => onRuns.reduce((s, r) => s + f(r), 0)
    const rows = sum((r) => r.rows)
    const responses = sum((r) => r.ok) + warmOn.ok
    process.stdout.write(JSON.stringify({
      bench: 'remote',
      case: name,
      connections,
      duration_s: duration,
      ...summary,
      // What tracing costs tracegate per call, all its threads: the proxy-side cost per trace.
      cpu_us_per_trace: round1(sum((r) => r.cpuUsPerRequest) / runs - offRuns.reduce((s, r) => s + r.cpuUsPerRequest, 0) / runs),
      cpu_us_per_trace_runs: onRuns.map((r, i) => round1(r.cpuUsPerRequest - offRuns[i]!.cpuUsPerRequest)),
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
    if (total.rows < responses || total.rows > responses + (runs + 1) * connections || total.refused > 0) {
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
