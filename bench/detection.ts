// Micro-benchmark of detection on the proxy bench's chat body (bench/proxy.ts sends the same one):
// (1) the worker function run in this thread, µs per body, with every user message distinct (the system
// prompt repeats, as it does in real traffic) and with the same body repeated, as bench/proxy.ts sends it
// (the worker keeps analyses of texts it has seen; a chat resends its history every turn); (2) the detection pool under 50
// concurrent checks, checks per second and front-thread µs per check (busy by event-loop utilisation,
// and CPU from /proc); (3) proxy throughput with detection on against off (tracing off on both, so
// nothing else differs), autocannon against tracegate in front of the mock provider, runs alternating,
// once with the same body every request and once with a new user message every request.
// Prints one JSON line per case. BENCH_DETECT_N (iterations, default 20000), BENCH_DURATION (pool
// seconds, default 5), BENCH_CONNECTIONS (concurrent checks and connections, default 50),
// BENCH_PROXY_DURATION (s per proxy run, default 5), BENCH_PROXY_RUNS (runs per side and body, default 3),
// BENCH_SKIP (comma list of: worker, pool, proxy), TRACEGATE_DETECTION_THREADS (default 1).
import autocannon from 'autocannon'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { DetectionPool } from '../src/detection/pool.js'
import { detectBody } from '../workers/detect.js'
import { alternate, processCpuUs, providerBody, proxyBody, skipped as skip, startMock, startTracegate, type PairedRun, type TracegateProc } from './processes.js'

const n = Number(process.env.BENCH_DETECT_N ?? 20_000)
const duration = Number(process.env.BENCH_DURATION ?? 5)
const concurrency = Number(process.env.BENCH_CONNECTIONS ?? 50)
const threads = Number(process.env.TRACEGATE_DETECTION_THREADS ?? 1)
const proxyDuration = Number(process.env.BENCH_PROXY_DURATION ?? 5)
const proxyRuns = Number(process.env.BENCH_PROXY_RUNS ?? 3)
const body = (i: number | null): Buffer => Buffer.from(providerBody(false, i))

function perBody (make: (i: number) => Buffer): number {
  const warm = Math.min(2000, n)
  const bodies = Array.from({ length: warm + n }, (_, i) => make(i).toString('utf8'))
  for (let i = 0; i < warm; i++) detectBody('alpha', bodies[i]!)
  const t0 = performance.now()
  for (let i = warm; i < warm + n; i++) detectBody('alpha', bodies[i]!)
  return ((performance.now() - t0) * 1000) / n
}

/** CPU time of this process's main thread in ms (/proc: the event-loop utilisation also counts time the thread waits for a core). */
function mainThreadCpuMs (): number {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(f[11]) + Number(f[12])) * 10 // utime + stime, in clock ticks of 10 ms
}

async function poolRate (): Promise<{ checksPerS: number; frontUsPerCheck: number; frontCpuUsPerCheck: number; failures: number }> {
  const pool = new DetectionPool({ threads, maxQueue: 1024, deadlineMs: 500 })
  await pool.warm()
  const b = body(null)
  let done = 0
  let failures = 0
  const until = performance.now() + duration * 1000
  const elu0 = performance.eventLoopUtilization()
  const cpu0 = mainThreadCpuMs()
  const t0 = performance.now()
  const loop = async (): Promise<void> => {
    while (performance.now() < until) {
      const r = await pool.check('alpha', b)
      if (!r.ok) failures++
      done++
    }
  }
  await Promise.all(Array.from({ length: concurrency }, loop))
  const elapsed = (performance.now() - t0) / 1000
  const elu = performance.eventLoopUtilization(elu0)
  const cpu = mainThreadCpuMs() - cpu0
  await pool.close()
  return { checksPerS: Math.round(done / elapsed), frontUsPerCheck: Math.round((elu.active * 1000 / done) * 100) / 100, frontCpuUsPerCheck: Math.round((cpu * 1000 / done) * 100) / 100, failures }
}

const round = (us: number): number => Math.round(us * 100) / 100

function line (obj: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ bench: 'detection', ...obj }) + '\n')
}

type Run = PairedRun

/** One autocannon run; `distinct` puts a new number in front of the user message of every request. */
async function load (tg: TracegateProc, distinct: boolean, seconds: number): Promise<Run> {
  const payload = (i: number | null): string => proxyBody(tg.key, false, i)
  const fixed = payload(null)
  let seq = 0
  const cpu0 = processCpuUs(tg.pid)
  const r = await autocannon({
    url: `${tg.url}/api/alpha_service/chat_completion`,
    method: 'POST',
    body: fixed,
    headers: { 'content-type': 'application/json' },
    connections: concurrency,
    duration: seconds,
    timeout: 20,
    ...(distinct ? { requests: [{ setupRequest: (req) => ({ ...req, body: payload(seq++) }) }] } : {}),
  })
  return { rps: r.requests.average, errors: r.errors + r.timeouts + r.non2xx, cpuUsPerRequest: (processCpuUs(tg.pid) - cpu0) / Math.max(1, r.requests.total) }
}

async function proxyCase (): Promise<void> {
  const mock = await startMock()
  const env = { TRACEGATE_TRACES: 'off', TRACEGATE_DETECTION_THREADS: String(threads) }
  const off = await startTracegate(mock.url, { ...env, TRACEGATE_DETECTION: 'off' })
  const on = await startTracegate(mock.url, { ...env, TRACEGATE_DETECTION: 'on' })
  try {
    for (const distinct of [false, true]) {
      await load(off, distinct, 3)
      await load(on, distinct, 3)
      const { summary } = await alternate(proxyRuns, () => load(off, distinct, proxyDuration), () => load(on, distinct, proxyDuration))
      line({
        case: 'proxy_detection',
        body: distinct ? 'new user message every request' : 'same body every request',
        connections: concurrency,
        duration_s: proxyDuration,
        threads,
        ...summary,
        target_ratio: 0.7,
      })
    }
  } finally {
    await on.stop()
    await off.stop()
    await mock.proc.stop()
  }
}

if (!skip.has('worker')) {
  line({ case: 'worker', body_bytes: body(null).length, worker_us_distinct: round(perBody((i) => body(i))), worker_us_repeated: round(perBody(() => body(null))) })
}
if (!skip.has('pool')) line({ case: 'pool', threads, concurrency, ...await poolRate() })
if (!skip.has('proxy')) await proxyCase()
