// Micro-benchmark of detection on the proxy bench's chat body (bench/proxy.ts sends the same one):
// (1) the worker function run in this thread, µs per body, with every user message distinct (the system
// prompt repeats, as it does in real traffic) and with the same body repeated, as bench/proxy.ts sends it
// (the worker keeps analyses of texts it has seen; a chat resends its history every turn); (2) the detection pool under 50
// concurrent checks, checks per second and front-thread µs per check (busy by event-loop utilisation,
// and CPU from /proc).
// Prints one JSON line. BENCH_DETECT_N (iterations, default 20000), BENCH_DURATION (pool seconds,
// default 5), BENCH_CONNECTIONS (concurrent checks, default 50), TRACEGATE_DETECTION_THREADS (default 1).
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { DetectionPool } from '../src/detection/pool.js'
import { detectBody } from '../workers/detect.js'

const n = Number(process.env.BENCH_DETECT_N ?? 20_000)
const duration = Number(process.env.BENCH_DURATION ?? 5)
const concurrency = Number(process.env.BENCH_CONNECTIONS ?? 50)
const threads = Number(process.env.TRACEGATE_DETECTION_THREADS ?? 1)

const MESSAGES = [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'Write a haiku about proxies. '.repeat(20) }]
const body = (i: number | null): Buffer => Buffer.from(JSON.stringify({
  model: 'gpt-4o-mini', messages: i === null ? MESSAGES : [MESSAGES[0], { role: 'user', content: `${i} ${MESSAGES[1]!.content}` }], stream: false, temperature: 0.7,
}))

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
const distinct = round(perBody((i) => body(i)))
const same = round(perBody(() => body(null)))
const pool = await poolRate()
process.stdout.write(JSON.stringify({ bench: 'detection', body_bytes: body(null).length, worker_us_distinct: distinct, worker_us_repeated: same, threads, concurrency, ...pool }) + '\n')
