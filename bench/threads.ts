// Front threads (TRACEGATE_THREADS). Prints one JSON line per case:
// - one_thread_vs_baseline: TRACEGATE_THREADS=1 against another build (BENCH_BASELINE_CLI, the src/cli.js
//   of a build without front threads; skipped when unset): two baseline processes and one of this build,
//   runs in turn (A B A'), so the two baselines' ratio shows the noise a difference must exceed.
// - two_vs_one: TRACEGATE_THREADS=2 against 1, with defaults, and with TRACEGATE_TRACES=off
//   TRACEGATE_DETECTION=off (the proxy alone), runs alternating.
// - detection_hop: what a front thread's detection costs over the main thread's own, in one process: one
//   check at a time (latency) and 64 in flight (throughput), the same pool behind both.
// Each load line has the means, the ratio overall and per pair, the server's CPU per request, and the load
// average before and after. BENCH_DURATION (s per run, default 10), BENCH_RUNS (pairs, default 3),
// BENCH_CONNECTIONS (50), BENCH_SKIP (comma list of: baseline, two, off, hop).
import autocannon from 'autocannon'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { DetectionPool, type DetectionOutcome } from '../src/detection/pool.js'
import { DetectionClient } from '../src/front/detection.js'
import { Hub } from '../src/front/hub.js'
import type { MainSide } from '../src/front/protocol.js'
import { alternate, MESSAGES, processCpuUs, proxyBody, skipped, startMock, startTracegate, type PairedRun, type TracegateProc } from './processes.js'

const duration = Number(process.env.BENCH_DURATION ?? 10)
const runs = Number(process.env.BENCH_RUNS ?? 3)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50)
const baselineCli = process.env.BENCH_BASELINE_CLI ?? ''
const HOP_CHECKS = 2_000
const HOP_BATCH = 64
const BODY = Buffer.from(JSON.stringify({ model: 'gpt-4o-mini', messages: MESSAGES }))

const loadavg = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')

function line (obj: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ bench: 'threads', ...obj }) + '\n')
}

async function load (tg: TracegateProc, seconds: number): Promise<PairedRun> {
  const cpu0 = processCpuUs(tg.pid)
  const r = await autocannon({
    url: `${tg.url}/api/alpha_service/chat_completion`,
    method: 'POST',
    body: proxyBody(tg.key, false),
    headers: { 'content-type': 'application/json' },
    connections,
    duration: seconds,
    timeout: 20,
  })
  return { rps: r.requests.average, errors: r.errors + r.timeouts + r.non2xx, cpuUsPerRequest: (processCpuUs(tg.pid) - cpu0) / Math.max(1, r.requests.total) }
}

/** Two servers started once; runs alternate between them after a warm-up of each. */
async function compare (name: string, a: () => Promise<TracegateProc>, b: () => Promise<TracegateProc>, extra: Record<string, unknown>): Promise<void> {
  const off = await a()
  const on = await b()
  try {
    await load(off, 3)
    await load(on, 3)
    const before = loadavg()
    const r = await alternate(runs, () => load(off, duration), () => load(on, duration))
    line({ case: name, ...extra, connections, duration_s: duration, runs, ...r.summary, loadavg_before: before, loadavg_after: loadavg() })
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
  } finally {
    for (const p of procs) await p.stop()
  }
}

/** The time of `n` checks one after another, and of `n` checks `batch` at a time (µs per check). */
async function timeChecks (check: () => Promise<DetectionOutcome>, n: number, batch: number): Promise<{ seq_us: number; batch_us: number }> {
  for (let i = 0; i < 200; i++) await check()
  let t0 = performance.now()
  for (let i = 0; i < n; i++) await check()
  const seq = (performance.now() - t0) * 1000 / n
  t0 = performance.now()
  for (let i = 0; i < n; i += batch) await Promise.all(Array.from({ length: batch }, check))
  const par = (performance.now() - t0) * 1000 / n
  return { seq_us: Math.round(seq), batch_us: Math.round(par * 10) / 10 }
}

/** The hop's two sides: the main thread's pool answers `detect`, and hears the front thread's times. */
interface HopTimes { seq_us: number; batch_us: number }
type HopMain = { serves: Pick<MainSide['serves'], 'detect'>; hears: { done: HopTimes } }
type HopFront = { serves: Record<never, never>; hears: Record<never, never> }

/** A front thread's side of the hop: the same checks through the hub (this file, started as a worker). */
async function hopWorker (): Promise<void> {
  const hub = new Hub<HopFront, HopMain>(parentPort!, {}, {})
  const client = new DetectionClient((args, moved) => hub.request('detect', args, moved))
  const r = await timeChecks(() => client.check('alpha', BODY), HOP_CHECKS, HOP_BATCH)
  hub.note('done', r)
  hub.flush()
}

async function detectionHop (): Promise<void> {
  const pool = new DetectionPool({ threads: 1, maxQueue: 4096, deadlineMs: 5_000 })
  await pool.warm()
  try {
    const direct = await timeChecks(() => pool.check('alpha', BODY), HOP_CHECKS, HOP_BATCH)
    const worker = new Worker(new URL(import.meta.url), { workerData: { hop: true } })
    const hopped = await new Promise<HopTimes>((resolve, reject) => {
      // The main thread's side, as front/threads.ts serves it.
      new Hub<HopMain, HopFront>(worker, {
        detect: (a) => pool.check(a.provider, Buffer.from(a.body.buffer, a.body.byteOffset, a.body.byteLength), a.allow),
      }, { done: (r) => { resolve(r) } })
      worker.once('error', reject)
    })
    await worker.terminate()
    line({
      case: 'detection_hop', checks: HOP_CHECKS, batch: HOP_BATCH, body_bytes: BODY.length,
      main_thread_seq_us: direct.seq_us, front_thread_seq_us: hopped.seq_us, hop_seq_us: hopped.seq_us - direct.seq_us,
      main_thread_batch_us: direct.batch_us, front_thread_batch_us: hopped.batch_us, loadavg: loadavg(),
    })
  } finally {
    await pool.close()
  }
}

async function main (): Promise<void> {
  if (!skipped.has('hop')) await detectionHop()
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
  } finally {
    await mock.proc.stop()
  }
}

if (!isMainThread && (workerData as { hop?: boolean } | null)?.hop === true) {
  hopWorker().catch((err: unknown) => { throw err })
} else {
  main().catch((err: unknown) => {
    process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n')
    process.exitCode = 1
  })
}
