// One account flooding detection against another's ordinary calls: tracegate on its
// defaults in front of the mock provider; a quiet account sends the proxy bench's chat call on
// BENCH_QUIET_CONNECTIONS connections, one call after another, with no neighbour and then while a noisy
// account keeps 16 bodies of 1 MB in flight (each a new text; sent from a worker thread at a low CPU
// priority, since in production that client runs on another machine: making and sending them neither
// delays the quiet account's calls in this event loop nor takes the cores from tracegate), runs alternating. Prints the quiet
// account's p50 and p99 and its failures in each case, and what the noisy account got, then one line for
// people on standard error.
// BENCH_DURATION (s per run, default 5), BENCH_RUNS (pairs, default 3), BENCH_QUIET_CONNECTIONS (default 2),
// BENCH_NOISY (parallel noisy calls, default 16), BENCH_NOISY_BYTES (default 1000000), BENCH_CLI (another
// build's src/cli.js to measure instead of this one, e.g. the commit before), TRACEGATE_* passed through.
import { readlinkSync } from 'node:fs'
import { setPriority } from 'node:os'
import { performance } from 'node:perf_hooks'
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads'
import { proxyBody, quantile, round2, say, startMock, startTracegate, tracegateCli, type TracegateProc } from './processes.js'
import { prose } from '../test/helpers/bodies.js'

const duration = Number(process.env.BENCH_DURATION ?? 5)
const runs = Number(process.env.BENCH_RUNS ?? 3)
const quietConnections = Number(process.env.BENCH_QUIET_CONNECTIONS ?? 2)
const noisyParallel = Number(process.env.BENCH_NOISY ?? 16)
const noisyBytes = Number(process.env.BENCH_NOISY_BYTES ?? 1_000_000)
const cli = process.env.BENCH_CLI

interface Quiet { readonly ms: number[]; readonly failures: number; readonly statuses: Record<string, number> }

async function call (url: string, body: string): Promise<number> {
  const r = await fetch(`${url}/api/alpha_service/chat_completion`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  await r.arrayBuffer()
  return r.status
}

interface Flood { readonly url: string; readonly key: string; readonly seconds: number }

/** The noisy account's calls, `noisyParallel` at a time for `seconds` (in a worker thread); answers the statuses. */
async function flood ({ url, key, seconds }: Flood): Promise<Record<string, number>> {
  const until = performance.now() + seconds * 1000
  const noisy: Record<string, number> = {}
  const doc = prose(noisyBytes, 1)
  let seq = 0
  const loop = async (): Promise<void> => {
    while (performance.now() < until) {
      const body = JSON.stringify({ api_key: key, alpha_api_key: 'sk-bench', model: 'gpt-4o-mini', messages: [{ role: 'user', content: `${seq++} ${doc}` }] })
      const status = await call(url, body).catch(() => 0)
      noisy[status] = (noisy[status] ?? 0) + 1
    }
  }
  await Promise.all(Array.from({ length: noisyParallel }, loop))
  return noisy
}

function floodInWorker (f: Flood): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL(import.meta.url), { workerData: f })
    w.once('message', resolve)
    w.once('error', reject)
  })
}

/** The quiet account's calls for `seconds`, `quietConnections` at a time; with `noisyKey`, the flood runs meanwhile. */
async function run (tg: TracegateProc, quietKey: string, noisyKey: string | null, seconds: number): Promise<{ quiet: Quiet; noisy: Record<string, number> }> {
  const noisy = noisyKey === null ? Promise.resolve({}) : floodInWorker({ url: tg.url, key: noisyKey, seconds })
  const until = performance.now() + seconds * 1000
  const quiet: Quiet = { ms: [], failures: 0, statuses: {} }
  let n = 0
  const quietLoop = async (): Promise<void> => {
    while (performance.now() < until) {
      const t0 = performance.now()
      const status = await call(tg.url, proxyBody(quietKey, false, n++)).catch(() => 0)
      quiet.ms.push(performance.now() - t0)
      quiet.statuses[status] = (quiet.statuses[status] ?? 0) + 1
      if (status !== 200) (quiet as { failures: number }).failures++
    }
  }
  await Promise.all(Array.from({ length: quietConnections }, quietLoop))
  return { quiet, noisy: await noisy }
}

async function main (): Promise<void> {
  const mock = await startMock()
  const tg = await startTracegate(mock.url, {}, cli)
  try {
    const account = tracegateCli(tg, ['account', 'create', '--name', 'noisy', '--plan', 'pro']) as { id: string }
    const noisyKey = (tracegateCli(tg, ['key', 'create', '--account', account.id, '--scope', 'proxy']) as { key: string }).key
    await run(tg, tg.key, null, 2)
    const alone: number[] = []
    const flooded: number[] = []
    let aloneFailures = 0
    let floodedFailures = 0
    const quietStatuses: Record<string, number> = {}
    const noisyStatuses: Record<string, number> = {}
    for (let i = 0; i < runs; i++) {
      const a = await run(tg, tg.key, null, duration)
      alone.push(...a.quiet.ms)
      aloneFailures += a.quiet.failures
      const f = await run(tg, tg.key, noisyKey, duration)
      flooded.push(...f.quiet.ms)
      floodedFailures += f.quiet.failures
      for (const [k, v] of Object.entries(f.quiet.statuses)) quietStatuses[k] = (quietStatuses[k] ?? 0) + v
      for (const [k, v] of Object.entries(f.noisy)) noisyStatuses[k] = (noisyStatuses[k] ?? 0) + v
    }
    const p50Alone = quantile(alone, 0.5)
    const p99Alone = quantile(alone, 0.99)
    const p99Flooded = quantile(flooded, 0.99)
    process.stdout.write(JSON.stringify({
      bench: 'detection_fairness',
      build: cli ?? 'this',
      duration_s: duration,
      runs,
      quiet_connections: quietConnections,
      noisy_parallel: noisyParallel,
      noisy_bytes: noisyBytes,
      quiet_alone: { calls: alone.length, failures: aloneFailures, p50_ms: round2(p50Alone), p99_ms: round2(p99Alone) },
      quiet_flooded: { calls: flooded.length, failures: floodedFailures, statuses: quietStatuses, p50_ms: round2(quantile(flooded, 0.5)), p99_ms: round2(p99Flooded) },
      noisy_statuses: noisyStatuses,
      p99_added_ms: round2(p99Flooded - p99Alone),
      target_p99_added_ms: 5,
    }) + '\n')
    const added = round2(p99Flooded - p99Alone)
    const noisy = Object.entries(noisyStatuses).map(([status, n]) => `${n} × ${status === '0' ? 'no answer' : status}`).join(', ')
    say(`detection fairness: the quiet account's p99 ${round2(p99Alone)} ms alone, ${round2(p99Flooded)} ms beside ${noisyParallel} parallel ` +
      `${round2(noisyBytes / 1e6)} MB bodies of another account (${added >= 0 ? '+' : ''}${added} ms; target within 5); ` +
      `${floodedFailures} of its ${flooded.length} calls failed; the noisy account got ${noisy === '' ? 'no answer' : noisy}`)
  } finally {
    await tg.stop()
    await mock.proc.stop()
  }
}

if (isMainThread) await main()
else {
  setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 19)
  parentPort!.postMessage(await flood(workerData as Flood))
}
