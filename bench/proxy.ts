// Proxy throughput and latency: autocannon against (a) the mock provider called directly, (b) tracegate
// in front of it, on the contract endpoint, on the native /v1/chat/completions route (the keys in
// headers, as the OpenAI SDK sends them) and on the Responses API's /v1/responses with the same prompt
// (its ratio_vs_native compares it with chat completions), and (c) nginx proxy_pass in front of it when nginx is installed, non-streaming and
// streaming; then a fixed 2,000 requests/s; then RSS growth under 1,000 concurrent slow streams.
// Prints one JSON line per case. Settings: BENCH_DURATION (s, default 10), BENCH_CONNECTIONS (50),
// BENCH_RATE (2000), BENCH_SLOW_STREAMS (1000), BENCH_SKIP (comma list of: throughput, rate, memory).
import autocannon from 'autocannon'
import { connect, type Socket } from 'node:net'
import { MESSAGES, providerBody, proxyBody, rssOf, skipped as skip, startMock, startNginx, startTracegate } from './processes.js'

const duration = Number(process.env.BENCH_DURATION ?? 10)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50)
const rate = Number(process.env.BENCH_RATE ?? 2000)
const slowStreams = Number(process.env.BENCH_SLOW_STREAMS ?? 1000)

interface Target { name: string; url: string; body (stream: boolean): string; headers: Record<string, string> }

async function load (target: Target, stream: boolean, extra: { overallRate?: number } = {}): Promise<{ rps: number; p50: number; p99: number; errors: number; non2xx: number }> {
  const r = await autocannon({
    url: target.url,
    method: 'POST',
    body: target.body(stream),
    headers: { 'content-type': 'application/json', ...target.headers },
    connections,
    duration,
    timeout: 20,
    ...extra,
  })
  return { rps: Math.round(r.requests.average), p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts, non2xx: r.non2xx }
}

function line (obj: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ bench: 'proxy', ...obj }) + '\n')
}

const round2 = (x: number): number => Math.round(x * 100) / 100

/** The chat's prompt as a Responses API body: the system message as instructions, the user's as input. */
function responsesBody (stream: boolean): string {
  return JSON.stringify({ model: 'gpt-4o-mini', instructions: MESSAGES[0]!.content, input: [{ role: 'user', content: MESSAGES[1]!.content }], stream, temperature: 0.7 })
}

/** Opens n streaming requests that each take ~10 s and reads them slowly; resolves when all are open. */
async function openSlowStreams (url: string, key: string, n: number): Promise<Socket[]> {
  const u = new URL(url)
  const body = JSON.stringify({ api_key: key, alpha_api_key: 'sk-bench', model: 'gpt-4o-mini-chunks-100-gap-100', messages: MESSAGES, stream: true })
  const req = `POST /api/alpha_service/chat_completion HTTP/1.1\r\nhost: ${u.host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  const sockets: Socket[] = []
  const opened: Array<Promise<void>> = []
  for (let i = 0; i < n; i++) {
    opened.push(new Promise((resolve, reject) => {
      const s = connect(Number(u.port), u.hostname, () => { s.write(req) })
      s.once('data', () => { resolve() })
      s.on('data', () => {})
      s.once('error', reject)
      sockets.push(s)
    }))
    if (i % 100 === 99) await new Promise((r) => setTimeout(r, 20))
  }
  await Promise.all(opened)
  return sockets
}

async function main (): Promise<void> {
  const mock = await startMock()
  const tg = await startTracegate(mock.url)
  const nginx = await startNginx(mock.url)
  const auth = { authorization: 'Bearer sk-bench' }
  const targets: Target[] = [
    { name: 'direct', url: `${mock.url}/v1/chat/completions`, body: providerBody, headers: auth },
    { name: 'tracegate', url: `${tg.url}/api/alpha_service/chat_completion`, body: (s) => proxyBody(tg.key, s), headers: {} },
    { name: 'tracegate_native', url: `${tg.url}/v1/chat/completions`, body: providerBody, headers: { ...auth, 'x-tracegate-key': tg.key } },
    { name: 'tracegate_responses', url: `${tg.url}/v1/responses`, body: responsesBody, headers: { ...auth, 'x-tracegate-key': tg.key } },
  ]
  if (nginx !== null) targets.push({ name: 'nginx', url: `${nginx.url}/v1/chat/completions`, body: providerBody, headers: auth })
  try {
    if (!skip.has('throughput')) {
      for (const stream of [false, true]) {
        const results: Record<string, Awaited<ReturnType<typeof load>>> = {}
        for (const t of targets) {
          await load(t, stream, {}).catch(() => null) // warm-up pass, discarded
          results[t.name] = await load(t, stream)
        }
        for (const t of targets) {
          const r = results[t.name]!
          line({
            case: 'throughput', mode: stream ? 'stream' : 'json', target: t.name, connections, duration_s: duration,
            rps: r.rps, p50_ms: r.p50, p99_ms: r.p99, errors: r.errors, non2xx: r.non2xx,
            ratio_vs_direct: round2(r.rps / results.direct!.rps),
            ...(t.name === 'tracegate_native' ? { ratio_vs_contract: round2(r.rps / results.tracegate!.rps) } : {}),
            ...(t.name === 'tracegate_responses' ? { ratio_vs_native: round2(r.rps / results.tracegate_native!.rps) } : {}),
            ...(results.nginx === undefined ? {} : { ratio_vs_nginx: round2(r.rps / results.nginx.rps) }),
          })
        }
      }
    }
    if (!skip.has('rate')) {
      const results: Record<string, Awaited<ReturnType<typeof load>>> = {}
      for (const t of targets) {
        // Warm every process (JIT, pools) at the same rate before measuring, as the throughput case does.
        await autocannon({ url: t.url, method: 'POST', body: t.body(false), headers: { 'content-type': 'application/json', ...t.headers }, connections, duration: Math.max(5, duration / 2), overallRate: rate })
        results[t.name] = await load(t, false, { overallRate: rate })
      }
      for (const t of targets) {
        const r = results[t.name]!
        line({
          case: 'fixed_rate', mode: 'json', target: t.name, target_rps: rate, connections, rps: r.rps, p50_ms: r.p50, p99_ms: r.p99,
          errors: r.errors, non2xx: r.non2xx,
          ...(results.nginx === undefined ? {} : { p99_minus_nginx_ms: round2(r.p99 - results.nginx.p99) }),
        })
      }
    }
    if (!skip.has('memory')) {
      await new Promise((r) => setTimeout(r, 1000))
      const idle = rssOf(tg.pid)
      const sockets = await openSlowStreams(tg.url, tg.key, slowStreams)
      let peak = rssOf(tg.pid)
      const until = Date.now() + 5000
      while (Date.now() < until) {
        await new Promise((r) => setTimeout(r, 250))
        peak = Math.max(peak, rssOf(tg.pid))
      }
      for (const s of sockets) s.destroy()
      line({ case: 'slow_streams_rss', streams: slowStreams, idle_rss_mb: round2(idle / 2 ** 20), peak_rss_mb: round2(peak / 2 ** 20), growth_mb: round2((peak - idle) / 2 ** 20) })
    }
  } finally {
    await tg.stop()
    await nginx?.stop()
    await mock.proc.stop()
  }
}

main().catch((err: unknown) => {
  process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n')
  process.exitCode = 1
})
