// Micro-benchmark of detection on the proxy bench's chat body (bench/proxy.ts sends the same one):
// (1) the worker function run in this thread, µs per body, with every user message distinct (the system
// prompt repeats, as it does in real traffic) and with the same body repeated, as bench/proxy.ts sends it
// (the worker keeps analyses of texts it has seen; a chat resends its history every turn); (2) the detection pool under 50
// concurrent checks, checks per second and front-thread µs per check (busy by event-loop utilisation,
// and CPU from /proc); (3) proxy throughput with detection on against off (tracing off on both, so
// nothing else differs), autocannon against tracegate in front of the mock provider, runs alternating,
// once with the same body every request and once with a new user message every request.
// (4) a 10-turn conversation (a system prompt, then each call resends the history with one new user
// message): median worker µs per call over all ten calls and at the tenth, and of a call whose every
// text was seen before, with no segment cache, with only the injection analyses kept (the detector before segment verdicts were cached)
// and with the PII and secret findings kept too.
// Prints one JSON line per case. BENCH_DETECT_N (iterations, default 20000), BENCH_DURATION (pool
// seconds, default 5), BENCH_CONNECTIONS (concurrent checks and connections, default 50),
// BENCH_PROXY_DURATION (s per proxy run, default 5), BENCH_PROXY_RUNS (runs per side and body, default 3),
// BENCH_SKIP (comma list of: worker, pool, proxy, conversation), TRACEGATE_DETECTION_THREADS (default 1),
// BENCH_CONVERSATIONS (default 300).
import autocannon from 'autocannon'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { DetectionPool } from '../src/detection/pool.js'
import { detectBody } from '../workers/detect.js'
import { setAnalysisCache } from '../workers/detector/injection.js'
import { setSegmentCache } from '../workers/detector/segment-cache.js'
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

const SYSTEM = 'You are a helpful assistant for Acme Corp. Answer questions about orders, shipping and returns. Be concise and polite; if you do not know, say so and offer to connect the customer with a human agent. Contact: support@acme.example or +1 415 555 0100.'

/** Call `turns` (1 to 10) of conversation `c`: the system prompt, the history, and a new user message. */
function conversation (c: number, turns: number): string {
  const messages: Array<{ role: string; content: string }> = [{ role: 'system', content: SYSTEM }]
  for (let t = 0; t < turns; t++) {
    messages.push({ role: 'user', content: `Conversation ${c}, turn ${t}: I ordered a blue kettle last week (order 4417-${c}) and it still has not shipped. Can you check the status and tell me when it will arrive? Also, can I change the delivery address to my office?` })
    if (t < turns - 1) messages.push({ role: 'assistant', content: `Thanks for waiting (conversation ${c}, turn ${t}). Your order is packed and will ship tomorrow from our Leeds warehouse; delivery usually takes two to three working days. I have updated the address to your office as requested. Is there anything else I can help with today?` })
  }
  return JSON.stringify({ model: 'gpt-4o-mini', messages, temperature: 0.7 })
}

const median = (xs: number[]): number => round(xs.sort((a, b) => a - b)[xs.length >> 1] ?? 0)

function conversationCase (mode: 'no cache' | 'injection analyses kept' | 'every finding kept'): void {
  setAnalysisCache(mode !== 'no cache')
  setSegmentCache(mode === 'every finding kept')
  const count = Number(process.env.BENCH_CONVERSATIONS ?? 300)
  const all: number[] = []
  const tenth: number[] = []
  for (let c = 0; c < count + 30; c++) {
    for (let turn = 1; turn <= 10; turn++) {
      const b = conversation(c, turn)
      const t0 = performance.now()
      detectBody('alpha', b)
      const us = (performance.now() - t0) * 1000
      // The first 30 conversations warm the engine up.
      if (c < 30) continue
      all.push(us)
      if (turn === 10) tenth.push(us)
    }
  }
  const seen: number[] = []
  const again = conversation(count, 10)
  for (let i = 0; i < 3000; i++) {
    const t0 = performance.now()
    detectBody('alpha', again)
    seen.push((performance.now() - t0) * 1000)
  }
  line({ case: 'conversation', mode, conversations: count, tenth_call_bytes: again.length, worker_us_median_per_call: median(all), worker_us_median_tenth_call: median(tenth), worker_us_median_all_seen: median(seen), target_us: 10 })
}

if (!skip.has('conversation')) {
  for (const mode of ['no cache', 'injection analyses kept', 'every finding kept'] as const) conversationCase(mode)
  setAnalysisCache(true)
  setSegmentCache(true)
}
if (!skip.has('worker')) {
  line({ case: 'worker', body_bytes: body(null).length, worker_us_distinct: round(perBody((i) => body(i))), worker_us_repeated: round(perBody(() => body(null))) })
}
if (!skip.has('pool')) line({ case: 'pool', threads, concurrency, ...await poolRate() })
if (!skip.has('proxy')) await proxyCase()
