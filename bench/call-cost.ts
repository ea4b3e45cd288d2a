// What one traced, detected call costs tracegate (issue 25's CPU target, at 1,000 calls/s): two tracegates
// in front of one mock, the defaults and the defaults with BENCH_COMPARE_ENV, each sent the proxy bench's
// chat at a fixed rate with a new user message every call (as real traffic has: the detector's caches do
// not make it free), in alternating runs. Per run: the process's CPU per call (all threads, /proc), the
// main thread's, p50 and p99 from send to last byte, and resident memory at the end.
// Settings: BENCH_RATE (calls/s, default 1000), BENCH_DURATION (s per run, 8), BENCH_RUNS (pairs, 3),
// BENCH_COMPARE_ENV (space-separated NAME=value pairs, default TRACEGATE_DETECTION_INLINE_BYTES=0).
// Prints a JSON line per run and one for the comparison, then a line a person reads.
import { readFileSync } from 'node:fs'
import { Pool } from 'undici'
import { fixedRate, mainThreadCpuUs, processCpuUs, proxyBody, round2, rssOf, say, startMock, startTracegate, type TracegateProc } from './processes.js'

const rate = Number(process.env.BENCH_RATE ?? 1000)
const seconds = Number(process.env.BENCH_DURATION ?? 8)
const runs = Number(process.env.BENCH_RUNS ?? 3)
const compareEnv = Object.fromEntries((process.env.BENCH_COMPARE_ENV ?? 'TRACEGATE_DETECTION_INLINE_BYTES=0').split(' ').filter(Boolean).map((pair) => {
  const at = pair.indexOf('=')
  if (at < 1) throw new Error(`BENCH_COMPARE_ENV: ${pair} is not NAME=value`)
  return [pair.slice(0, at), pair.slice(at + 1)]
}))
const PATH = '/api/alpha_service/chat_completion'

const loadavg = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ')[0]!

interface Run { readonly cpuUs: number; readonly mainUs: number; readonly p50: number; readonly p99: number; readonly errors: number; readonly rssMb: number }

let message = 0

/** `rate` calls a second for `secs`, open loop, each with a message never sent before. */
async function paced (tg: TracegateProc, pool: Pool, secs: number): Promise<Run> {
  const cpu0 = processCpuUs(tg.pid)
  const main0 = mainThreadCpuUs(tg.pid)
  const first = message
  message += Math.round(rate * secs)
  const r = await fixedRate(pool, rate, PATH, (n) => proxyBody(tg.key, false, first + n), {}, secs)
  const calls = Math.max(1, r.calls)
  return {
    cpuUs: Math.round((processCpuUs(tg.pid) - cpu0) / calls),
    mainUs: Math.round((mainThreadCpuUs(tg.pid) - main0) / calls),
    p50: r.p50,
    p99: r.p99,
    errors: r.errors,
    rssMb: Math.round(rssOf(tg.pid) / 1048576),
  }
}

const mock = await startMock()
const variants = [{ name: 'defaults', env: {} }, { name: 'compared', env: compareEnv }]
const servers: TracegateProc[] = []
const pools: Pool[] = []
try {
  for (const v of variants) {
    const tg = await startTracegate(mock.url, v.env)
    servers.push(tg)
    pools.push(new Pool(tg.url, { connections: 20 }))
  }
  for (let i = 0; i < servers.length; i++) await paced(servers[i]!, pools[i]!, 2)
  const results: Run[][] = variants.map(() => [])
  for (let r = 0; r < runs; r++) {
    for (let i = 0; i < servers.length; i++) {
      const run = await paced(servers[i]!, pools[i]!, seconds)
      results[i]!.push(run)
      process.stdout.write(JSON.stringify({ bench: 'call-cost', variant: variants[i]!.name, run: r, rate, ...run, loadavg: loadavg() }) + '\n')
    }
  }
  const mean = (rs: readonly Run[], f: (x: Run) => number): number => Math.round(rs.reduce((s, x) => s + f(x), 0) / rs.length)
  const [a, b] = results as [Run[], Run[]]
  const summary = {
    bench: 'call-cost',
    case: 'summary',
    rate,
    compare_env: compareEnv,
    cpu_us_per_call_defaults: mean(a, (x) => x.cpuUs),
    cpu_us_per_call_compared: mean(b, (x) => x.cpuUs),
    ratio_runs: a.map((x, i) => round2(x.cpuUs / b[i]!.cpuUs)),
    main_us_per_call_defaults: mean(a, (x) => x.mainUs),
    main_us_per_call_compared: mean(b, (x) => x.mainUs),
    rss_mb_defaults: a[a.length - 1]!.rssMb,
    rss_mb_compared: b[b.length - 1]!.rssMb,
    target_cpu_us_per_call: 80,
  }
  process.stdout.write(JSON.stringify(summary) + '\n')
  say(`CPU per call at ${rate}/s: defaults ${summary.cpu_us_per_call_defaults} µs, with ${Object.entries(compareEnv).map(([k, v]) => `${k}=${v}`).join(' ')} ${summary.cpu_us_per_call_compared} µs (defaults/compared per run: ${summary.ratio_runs.join(', ')}; target 80 µs)`)
} finally {
  for (const p of pools) await p.close()
  for (const tg of servers) await tg.stop()
  await mock.proc.stop()
}
