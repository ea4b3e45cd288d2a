// Front threads (TRACEGATE_THREADS). Prints one JSON line per case:
// - one_thread_vs_baseline: TRACEGATE_THREADS=1 against another build (BENCH_BASELINE_CLI, the src/cli.js
//   of a build without front threads; skipped when unset): two baseline processes and one of this build,
//   runs in turn (A B A'), so the two baselines' ratio shows the noise a difference must exceed.
// - two_vs_one: TRACEGATE_THREADS=2 against 1, with defaults, and with TRACEGATE_TRACES=off
//   TRACEGATE_DETECTION=off (the proxy alone), runs alternating.
// Each load line has the means, the ratio overall and per pair, the server's CPU per request (two_vs_one: also
// the main thread's, which with front threads is what serving them costs it), and the load
// average before and after; the last line, on standard error, sums the cases up for people. BENCH_DURATION (s per run, default 10), BENCH_RUNS (pairs, default 3),
// BENCH_CONNECTIONS (50), BENCH_SKIP (comma list of: baseline, two, off), BENCH_LIMITS (CLI limit flags set on
// the bench account of every server before its runs, e.g. `--tpm 1000000000`: every call a counted one).
import autocannon from 'autocannon'
import { readFileSync } from 'node:fs'
import { alternate, mainThreadCpuUs, processCpuUs, proxyBody, say, skipped, thousands, startMock, startTracegate as startServer, tracegateCli, type PairedRun, type TracegateProc } from './processes.js'

const duration = Number(process.env.BENCH_DURATION ?? 10)
const runs = Number(process.env.BENCH_RUNS ?? 3)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50)
const baselineCli = process.env.BENCH_BASELINE_CLI ?? ''
const limits = (process.env.BENCH_LIMITS ?? '').split(' ').filter(Boolean)

/** A server whose bench account has BENCH_LIMITS. */
async function startTracegate (mockUrl: string, env: Record<string, string>, cli?: string): Promise<TracegateProc> {
  const tg = await startServer(mockUrl, env, cli)
  if (limits.length > 0) tracegateCli(tg, ['account', 'update', '--id', tg.accountId, ...limits])
  return tg
}

const loadavg = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')

function line (obj: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ bench: 'threads', ...obj }) + '\n')
}

/** A load run, with the main thread's own CPU per request (with front threads: what serving them costs it). */
interface LoadRun extends PairedRun { readonly mainUsPerRequest: number }

async function load (tg: TracegateProc, seconds: number): Promise<LoadRun> {
  const cpu0 = processCpuUs(tg.pid)
  const main0 = mainThreadCpuUs(tg.pid)
  const r = await autocannon({
    url: `${tg.url}/api/alpha_service/chat_completion`,
    method: 'POST',
    body: proxyBody(tg.key, false),
    headers: { 'content-type': 'application/json' },
    connections,
    duration: seconds,
    timeout: 20,
  })
  const n = Math.max(1, r.requests.total)
  return { rps: r.requests.average, errors: r.errors + r.timeouts + r.non2xx, cpuUsPerRequest: (processCpuUs(tg.pid) - cpu0) / n, mainUsPerRequest: (mainThreadCpuUs(tg.pid) - main0) / n }
}

/** One clause per case for the people's line. */
const people: string[] = []

/** Two servers started once; runs alternate between them after a warm-up of each. */
async function compare (name: string, a: () => Promise<TracegateProc>, b: () => Promise<TracegateProc>, extra: Record<string, unknown>): Promise<void> {
  const off = await a()
  const on = await b()
  try {
    await load(off, 3)
    await load(on, 3)
    const before = loadavg()
    const r = await alternate(runs, () => load(off, duration), () => load(on, duration))
    const main = (rs: LoadRun[]): number => Math.round(rs.reduce((n, x) => n + x.mainUsPerRequest, 0) / rs.length * 10) / 10
    line({
      case: name, ...extra, ...(limits.length > 0 ? { limits: limits.join(' ') } : {}), connections, duration_s: duration, runs, ...r.summary,
      main_thread_us_per_request_off: main(r.offRuns), main_thread_us_per_request_on: main(r.onRuns),
      loadavg_before: before, loadavg_after: loadavg(),
    })
    const x = r.summary
    people.push(`${String(extra.settings)}: ${String(extra.on)} ${thousands(Number(x.rps_on))} calls/s against ${String(extra.off)} ` +
      `${thousands(Number(x.rps_off))} (${String(x.ratio)}×), CPU ${String(x.cpu_us_per_request_on)} against ${String(x.cpu_us_per_request_off)} µs per call, ` +
      `main thread ${main(r.onRuns)} against ${main(r.offRuns)} µs per call, ${String(x.errors)} errors`)
  } finally {
    await off.stop()
    await on.stop()
  }
}

/** Baseline, candidate, baseline again: runs in turn; the candidate against the baselines' mean, and A' against A. */
async function compareAba (name: string, base: () => Promise<TracegateProc>, candidate: () => Promise<TracegateProc>, extra: Record<string, unknown>): Promise<void> {
  const procs = [await base(), await candidate(), await base()]
  try {
    for (const p of procs) await load(p, 3)
    const before = loadavg()
    const results: PairedRun[][] = [[], [], []]
    for (let i = 0; i < runs; i++) for (let j = 0; j < 3; j++) results[j]!.push(await load(procs[j]!, duration))
    const mean = (rs: PairedRun[], f: (r: PairedRun) => number): number => rs.reduce((n, r) => n + f(r), 0) / rs.length
    const rps = results.map((rs) => mean(rs, (r) => r.rps))
    const cpu = results.map((rs) => mean(rs, (r) => r.cpuUsPerRequest))
    const r3 = (x: number): number => Math.round(x * 1000) / 1000
    line({
      case: name, ...extra, connections, duration_s: duration, runs,
      rps_baseline: Math.round(rps[0]!), rps_candidate: Math.round(rps[1]!), rps_baseline_again: Math.round(rps[2]!),
      ratio: r3(rps[1]! / ((rps[0]! + rps[2]!) / 2)), ratio_baselines: r3(rps[2]! / rps[0]!),
      cpu_us_per_request: cpu.map(Math.round),
      errors: results.flat().reduce((n, r) => n + r.errors, 0), loadavg_before: before, loadavg_after: loadavg(),
    })
    people.push(`${String(extra.candidate)} against the baseline build: ${r3(rps[1]! / ((rps[0]! + rps[2]!) / 2))}× its calls/s (the baseline against itself ${r3(rps[2]! / rps[0]!)}×)`)
  } finally {
    for (const p of procs) await p.stop()
  }
}

async function main (): Promise<void> {
  const mock = await startMock()
  try {
    if (!skipped.has('baseline')) {
      if (baselineCli === '') line({ case: 'one_thread_vs_baseline', skipped: 'set BENCH_BASELINE_CLI to the src/cli.js of a build without front threads' })
      else {
        await compareAba('one_thread_vs_baseline',
          () => startTracegate(mock.url, {}, baselineCli),
          () => startTracegate(mock.url, { TRACEGATE_THREADS: '1' }),
          { settings: 'defaults', candidate: 'threads=1', baseline_cli: baselineCli })
      }
    }
    if (!skipped.has('two')) {
      await compare('two_vs_one',
        () => startTracegate(mock.url, { TRACEGATE_THREADS: '1' }),
        () => startTracegate(mock.url, { TRACEGATE_THREADS: '2' }),
        { settings: 'defaults', off: 'threads=1', on: 'threads=2' })
    }
    if (!skipped.has('off')) {
      const bare = { TRACEGATE_TRACES: 'off', TRACEGATE_DETECTION: 'off' }
      await compare('two_vs_one',
        () => startTracegate(mock.url, { ...bare, TRACEGATE_THREADS: '1' }),
        () => startTracegate(mock.url, { ...bare, TRACEGATE_THREADS: '2' }),
        { settings: 'traces=off detection=off', off: 'threads=1', on: 'threads=2' })
    }
    if (people.length > 0) say(`threads: ${people.join('; ')}`)
  } finally {
    await mock.proc.stop()
  }
}

main().catch((err: unknown) => {
  process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n')
  process.exitCode = 1
})
