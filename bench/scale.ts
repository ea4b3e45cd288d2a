// How one instance scales with its threads (`npm run bench:scale`), on a machine with cores to spare. The
// cores are split with taskset: the proxy under test on the first BENCH_PROXY_CORES, the mock provider on
// the next BENCH_MOCK_CORES, the load generator (autocannon, BENCH_LOADGEN_WORKERS worker threads, in a
// process of its own) on the rest, so the three never take each other's cores. The rows:
// - nginx in front of the mock with as many workers as the proxy has cores (when nginx is installed);
// - tracegate on its defaults (its threads follow the cores it is pinned to);
// - tracegate with TRACEGATE_THREADS of each count in BENCH_THREADS (default 1, 2, 4, … and the proxy's cores).
// Each row: calls/s at full speed over BENCH_CONNECTIONS connections for BENCH_DURATION s, the server's CPU
// per call (all its threads; nginx's workers included) and its main thread's, and p99 at a fixed
// BENCH_RATE calls/s. BENCH_ENV adds settings to every tracegate (`TRACEGATE_DETECTION=off TRACEGATE_TRACES=off`
// for the proxy alone). One JSON line per row, then the table on standard error. With fewer than 4 cores
// the mock and the load generator share a core (the line says `shared_cores`).
import autocannon, { type Result } from 'autocannon'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { fileURLToPath } from 'node:url'
import { mainThreadCpuUs, processCpuUs, providerBody, proxyBody, say, startMock, startNginx, startTracegate, CLI, type TracegateProc } from './processes.js'

const duration = Number(process.env.BENCH_DURATION ?? 10)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 200)
const rate = Number(process.env.BENCH_RATE ?? 5_000)
const extraEnv = Object.fromEntries((process.env.BENCH_ENV ?? '').split(/\s+/).filter(Boolean).map((kv) => {
  const at = kv.indexOf('=')
  return [kv.slice(0, at), kv.slice(at + 1)]
}))

/** The cores of each part, as taskset lists (`0-7`). */
interface Layout { readonly proxy: string; readonly mock: string; readonly loadgen: string; readonly proxyCores: number; readonly loadgenWorkers: number; readonly shared: boolean }

function layout (): Layout {
  const cores = availableParallelism()
  const loadgenCores = Number(process.env.BENCH_LOADGEN_CORES ?? Math.max(1, Math.floor(cores / 4)))
  const mockCores = Number(process.env.BENCH_MOCK_CORES ?? Math.max(1, Math.floor(cores / 8)))
  const proxyCores = Number(process.env.BENCH_PROXY_CORES ?? Math.max(1, cores - loadgenCores - mockCores))
  const span = (from: number, n: number): string => n <= 1 ? String(from) : `${from}-${from + n - 1}`
  const loadgenWorkers = Number(process.env.BENCH_LOADGEN_WORKERS ?? loadgenCores)
  if (proxyCores + mockCores + loadgenCores > cores) {
    // Too few cores to keep the parts apart: the proxy keeps its own, the others share the last one.
    const proxy = Math.max(1, cores - 1)
    const last = String(cores - 1)
    return { proxy: span(0, proxy), mock: last, loadgen: last, proxyCores: proxy, loadgenWorkers: 1, shared: true }
  }
  return {
    proxy: span(0, proxyCores),
    mock: span(proxyCores, mockCores),
    loadgen: span(proxyCores + mockCores, loadgenCores),
    proxyCores,
    loadgenWorkers,
    shared: false,
  }
}

/** What the load generator's process is asked to run, and answers. */
interface LoadJob { readonly url: string; readonly body: string; readonly headers: Record<string, string>; readonly connections: number; readonly duration: number; readonly workers: number; readonly rate: number | null }
interface LoadResult { readonly rps: number; readonly total: number; readonly errors: number; readonly p50: number; readonly p99: number }

/** Runs autocannon in a process of its own on `cpus`. */
function loadFrom (cpus: string, job: LoadJob): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('taskset', ['-c', cpus, process.execPath, fileURLToPath(import.meta.url)], {
      env: { ...process.env, BENCH_SCALE_LOAD: JSON.stringify(job) }, stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    child.stdout.on('data', (b: Buffer) => { out += b.toString('utf8') })
    child.once('error', reject)
    child.once('exit', (code) => {
      const last = out.trim().split('\n').pop() ?? ''
      if (code !== 0 || last === '') reject(new Error(`the load generator exited with ${code}`))
      else resolve(JSON.parse(last) as LoadResult)
    })
  })
}

/** The load generator's side: one autocannon run, its figures on one line. */
async function runLoad (job: LoadJob): Promise<void> {
  const r: Result = await autocannon({
    url: job.url,
    method: 'POST',
    body: job.body,
    headers: { 'content-type': 'application/json', ...job.headers },
    connections: job.connections,
    duration: job.duration,
    timeout: 20,
    ...(job.workers > 1 ? { workers: job.workers } : {}),
    // autocannon applies overallRate per worker.
    ...(job.rate === null ? {} : { overallRate: job.rate / Math.max(1, job.workers) }),
  })
  const out: LoadResult = { rps: r.requests.average, total: r.requests.total, errors: r.errors + r.timeouts + r.non2xx, p50: r.latency.p50, p99: r.latency.p99 }
  process.stdout.write(JSON.stringify(out) + '\n')
}

/** CPU time of a process and its children (nginx's workers), in µs. */
function treeCpuUs (pid: number): number {
  let us = processCpuUs(pid)
  try {
    for (const child of readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean)) us += processCpuUs(Number(child))
  } catch { /* no children file: the parent's time alone */ }
  return us
}

interface Row { readonly name: string; readonly rps: number; readonly cpuUsPerCall: number; readonly mainUsPerCall: number | null; readonly p99AtRate: number; readonly errors: number }

/** A warm-up, a run at full speed (CPU read around it), and one at the fixed rate. */
async function measure (name: string, url: string, body: string, headers: Record<string, string>, pid: number, main: boolean, lay: Layout): Promise<Row> {
  const job = (seconds: number, r: number | null): LoadJob => ({ url, body, headers, connections, duration: seconds, workers: lay.loadgenWorkers, rate: r })
  await loadFrom(lay.loadgen, job(2, null))
  const cpu0 = treeCpuUs(pid)
  const main0 = main ? mainThreadCpuUs(pid) : 0
  const full = await loadFrom(lay.loadgen, job(duration, null))
  const n = Math.max(1, full.total)
  const cpu = (treeCpuUs(pid) - cpu0) / n
  const mainUs = main ? (mainThreadCpuUs(pid) - main0) / n : null
  const fixed = await loadFrom(lay.loadgen, job(duration, rate))
  const row: Row = { name, rps: Math.round(full.rps), cpuUsPerCall: Math.round(cpu), mainUsPerCall: mainUs === null ? null : Math.round(mainUs * 10) / 10, p99AtRate: fixed.p99, errors: full.errors + fixed.errors }
  process.stdout.write(JSON.stringify({ bench: 'scale', ...row, connections, duration_s: duration, rate, proxy_cpus: lay.proxy, mock_cpus: lay.mock, loadgen_cpus: lay.loadgen, loadgen_workers: lay.loadgenWorkers, shared_cores: lay.shared, env: extraEnv }) + '\n')
  return row
}

function threadCounts (proxyCores: number): number[] {
  const fromEnv = (process.env.BENCH_THREADS ?? '').split(',').filter(Boolean).map(Number)
  if (fromEnv.length > 0) return fromEnv
  const counts = new Set<number>()
  for (let n = 1; n < proxyCores; n *= 2) counts.add(n)
  counts.add(proxyCores)
  return [...counts]
}

async function main (): Promise<void> {
  const lay = layout()
  const mock = await startMock([], lay.mock)
  const mockUrl = mock.url
  const rows: Row[] = []
  try {
    const nginx = await startNginx(mockUrl, { workers: lay.proxyCores, cpus: lay.proxy })
    if (nginx !== null) {
      try {
        rows.push(await measure(`nginx, ${lay.proxyCores} worker${lay.proxyCores === 1 ? "" : "s"}`, `${nginx.url}/v1/chat/completions`, providerBody(false), { authorization: 'Bearer sk-bench' }, nginx.pid, false, lay))
      } finally {
        await nginx.stop()
      }
    }
    const cases: Array<[string, Record<string, string>]> = [['tracegate defaults', {}], ...threadCounts(lay.proxyCores).map((n): [string, Record<string, string>] => [`tracegate, ${n} thread${n === 1 ? '' : 's'}`, { TRACEGATE_THREADS: String(n) }])]
    for (const [name, env] of cases) {
      const tg: TracegateProc = await startTracegate(mockUrl, { ...env, ...extraEnv }, CLI, lay.proxy)
      try {
        rows.push(await measure(name, `${tg.url}/api/alpha_service/chat_completion`, proxyBody(tg.key, false), {}, tg.pid, true, lay))
      } finally {
        await tg.stop()
      }
    }
  } finally {
    await mock.proc.stop()
  }
  const nginxRps = rows.find((r) => r.name.startsWith('nginx'))?.rps ?? null
  say(`proxy on cores ${lay.proxy}, mock on ${lay.mock}, load generator on ${lay.loadgen} (${lay.loadgenWorkers} autocannon worker${lay.loadgenWorkers === 1 ? '' : 's'})${lay.shared ? ': too few cores, the mock and the load generator share one' : ''}`)
  say('| proxy | calls/s | × nginx | CPU µs per call | main thread µs per call | p99 ms at ' + rate + '/s | errors |')
  say('|---|---|---|---|---|---|---|')
  for (const r of rows) {
    const ratio = nginxRps === null ? '–' : (r.rps / nginxRps).toFixed(2)
    say(`| ${r.name} | ${r.rps} | ${ratio} | ${r.cpuUsPerCall} | ${r.mainUsPerCall ?? '–'} | ${r.p99AtRate} | ${r.errors} |`)
  }
}

const job = process.env.BENCH_SCALE_LOAD
if (job !== undefined) {
  runLoad(JSON.parse(job) as LoadJob).catch((err: unknown) => {
    process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n')
    process.exitCode = 1
  })
} else {
  main().catch((err: unknown) => {
    process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n')
    process.exitCode = 1
  })
}
