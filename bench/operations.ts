// What the operations features cost the proxy: tracegate with the Prometheus endpoint scraped every 5 s and
// one span per call exported over OTLP/HTTP to a local receiver, against tracegate with neither (both with
// the defaults otherwise: detection and tracing on). Runs alternate between the two processes, so drift in
// the machine's speed falls on both alike. The per-call metric updates run in both (they are always on).
// Prints one JSON line. BENCH_DURATION (s per run, default 5), BENCH_RUNS (pairs, default 3),
// BENCH_CONNECTIONS (50).
import autocannon from 'autocannon'
import { createServer } from 'node:http'
import { alternate, freePort, processCpuUs, proxyBody, startMock, startTracegate, type PairedRun, type TracegateProc } from './processes.js'

const duration = Number(process.env.BENCH_DURATION ?? 5)
const runs = Number(process.env.BENCH_RUNS ?? 3)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50)

interface Run extends PairedRun { requests: number }

async function load (tg: TracegateProc, seconds: number): Promise<Run> {
  const cpu0 = processCpuUs(tg.pid)
  const r = await autocannon({
    url: `${tg.url}/api/alpha_service/chat_completion`,
    method: 'POST',
    body: proxyBody(tg.key, false),
    headers: { 'content-type': 'application/json', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
    connections,
    duration: seconds,
    timeout: 20,
  })
  return { rps: r.requests.average, errors: r.errors + r.timeouts + r.non2xx, cpuUsPerRequest: (processCpuUs(tg.pid) - cpu0) / Math.max(1, r.requests.total), requests: r.requests.total }
}

/** An OTLP/HTTP receiver that reads and counts what it is sent (bytes and export requests), nothing more. */
async function startReceiver (): Promise<{ url: string; exports: () => number; bytes: () => number; close (): Promise<void> }> {
  let exports = 0
  let bytes = 0
  const server = createServer((req, res) => {
    req.on('data', (c: Buffer) => { bytes += c.length })
    req.on('end', () => {
      exports++
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    exports: () => exports,
    bytes: () => bytes,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => { resolve() }) }),
  }
}

async function main (): Promise<void> {
  const mock = await startMock()
  const receiver = await startReceiver()
  const metricsPort = await freePort()
  const off = await startTracegate(mock.url)
  const on = await startTracegate(mock.url, { TRACEGATE_METRICS_PORT: String(metricsPort), OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url })
  // Prometheus' way: a scrape every few seconds, here every 5 s.
  let scrapes = 0
  const scraper = setInterval(() => {
    fetch(`http://127.0.0.1:${metricsPort}/metrics`).then(async (r) => { await r.text(); if (r.ok) scrapes++ }).catch(() => {})
  }, 5000)
  try {
    await load(off, 3)
    await load(on, 3)
    const { onRuns, summary } = await alternate(runs, () => load(off, duration), () => load(on, duration))
    // The last spans leave on the exporter's timer (5 s by default).
    await new Promise((resolve) => setTimeout(resolve, 6000))
    process.stdout.write(JSON.stringify({
      bench: 'operations',
      case: 'metrics_and_otlp_on_vs_off',
      connections,
      duration_s: duration,
      ...summary,
      calls_on: onRuns.reduce((s, r) => s + r.requests, 0),
      otlp_exports: receiver.exports(),
      otlp_bytes: receiver.bytes(),
      scrapes,
      target_ratio: 0.95,
    }) + '\n')
  } finally {
    clearInterval(scraper)
    await on.stop()
    await off.stop()
    await receiver.close()
    await mock.proc.stop()
  }
}

await main()
