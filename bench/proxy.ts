// Proxy throughput and latency: autocannon against (a) the mock provider called directly, (b) tracegate
// in front of it, on the contract endpoint, on the native /v1/chat/completions route (the keys in
// headers, as the OpenAI SDK sends them) and on the Responses API's /v1/responses with the same prompt
// (its ratio_vs_native compares it with chat completions), and (c) nginx proxy_pass in front of it when nginx is installed, non-streaming and
// streaming; then a fixed 2,000 requests/s; then RSS growth under 1,000 concurrent slow streams.
// Prints one JSON line per case, then one line for people on standard error. Settings: BENCH_DURATION
// (s, default 10), BENCH_CONNECTIONS (50), BENCH_RATE (2000), BENCH_SLOW_STREAMS (1000), BENCH_SKIP (comma
// list of: throughput, rate, memory). BENCH_URL and BENCH_KEY aim it at a deployment instead
// (processes.ts benchTarget): its three routes only, nothing to compare them with, and no memory case
// (its RSS is not readable from here); every call then reaches the provider behind it.
import autocannon from 'autocannon'
import { connect, type Socket } from 'node:net'
import { request } from 'undici'
import { benchTarget, MESSAGES, providerBody, proxyBody, round2, rssOf, say, skipped as skip, startMock, startNginx, startTracegate, thousands } from './processes.js'

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

/** The chat's prompt as a Responses API body: the system message as instructions, the user's as input. */
function responsesBody (model: string, stream: boolean): string {
  return JSON.stringify({ model, instructions: MESSAGES[0]!.content, input: [{ role: 'user', content: MESSAGES[1]!.content }], stream, temperature: 0.7 })
}

/** What is measured: the targets, and the tracegate the memory case reads (null: a deployment's). */
interface Setup {
  readonly targets: Target[]
  readonly local: { readonly url: string; readonly key: string; readonly pid: number } | null
  /** Who the people's line names: loopback, or the deployment's host (never its path or credentials). */
  readonly where: string
  /** The keys the calls carry, blanked in anything printed from an answer. */
  readonly secrets: readonly string[]
  stop (): Promise<void>
}

/** The mock, a tracegate on its defaults and nginx (when installed) in front of it, on loopback. */
async function onLoopback (): Promise<Setup> {
  const mock = await startMock()
  const tg = await startTracegate(mock.url)
  const nginx = await startNginx(mock.url)
  const auth = { authorization: 'Bearer sk-bench' }
  const targets: Target[] = [
    { name: 'direct', url: `${mock.url}/v1/chat/completions`, body: providerBody, headers: auth },
    { name: 'tracegate', url: `${tg.url}/api/alpha_service/chat_completion`, body: (s) => proxyBody(tg.key, s), headers: {} },
    { name: 'tracegate_native', url: `${tg.url}/v1/chat/completions`, body: providerBody, headers: { ...auth, 'x-tracegate-key': tg.key } },
    { name: 'tracegate_responses', url: `${tg.url}/v1/responses`, body: (s) => responsesBody('gpt-4o-mini', s), headers: { ...auth, 'x-tracegate-key': tg.key } },
  ]
  if (nginx !== null) targets.push({ name: 'nginx', url: `${nginx.url}/v1/chat/completions`, body: providerBody, headers: auth })
  return {
    targets,
    local: { url: tg.url, key: tg.key, pid: tg.pid },
    where: 'loopback',
    secrets: [tg.key],
    stop: async () => {
      await tg.stop()
      await nginx?.stop()
      await mock.proc.stop()
    },
  }
}

/** A deployment's three routes (BENCH_URL): the SDK's key header carries its provider key, else the tracegate key. */
async function deployment (): Promise<Setup> {
  const t = await benchTarget({}, ['BENCH_DURATION', 'BENCH_RATE'])
  const native: Record<string, string> = t.providerKey === null ? { authorization: `Bearer ${t.key}` } : { authorization: `Bearer ${t.providerKey}`, 'x-tracegate-key': t.key }
  return {
    targets: [
      { name: 'tracegate', url: `${t.url}/api/alpha_service/chat_completion`, body: (s) => t.body(s), headers: {} },
      { name: 'tracegate_native', url: `${t.url}/v1/chat/completions`, body: (s) => providerBody(s, null, t.model), headers: native },
      { name: 'tracegate_responses', url: `${t.url}/v1/responses`, body: (s) => responsesBody(t.model, s), headers: native },
    ],
    local: null,
    where: new URL(t.url).host,
    secrets: [t.key, t.providerKey ?? ''],
    stop: async () => { await t.stop() },
  }
}

type Result = Awaited<ReturnType<typeof load>>

/** A target's refusal: printed as its answer alone, without a stack. */
class Refused extends Error {}

/**
 * One call to each target before any load: a target that does not answer 2xx (a wrong key, no provider
 * key, a model the deployment does not route) stops the bench with its answer, instead of measuring how
 * fast it refuses. The answer is printed with the keys the bench sent blanked (a provider's 401 or a
 * proxy that echoes the request could repeat one), and a target silent for 20 s stops it too.
 */
async function preflight (targets: readonly Target[], secrets: readonly string[]): Promise<void> {
  for (const t of targets) {
    const route = `${t.name} (${new URL(t.url).pathname})`
    const r = await request(t.url, { method: 'POST', body: t.body(false), headers: { 'content-type': 'application/json', ...t.headers }, headersTimeout: 20_000, bodyTimeout: 20_000 })
      .catch((err: unknown) => { throw new Refused(`${route} did not answer: ${err instanceof Error ? err.message : String(err)}`) })
    let text = await r.body.text()
    for (const s of secrets) if (s !== '') text = text.split(s).join('***')
    if (r.statusCode >= 300) throw new Refused(`${route} answered ${r.statusCode}: ${text.slice(0, 300)}`)
  }
}

/** What the people's line is made of, filled as the cases run. */
interface Summary {
  json?: Record<string, Result>
  stream?: Record<string, Result>
  rate?: Record<string, Result>
  memory?: { streams: number; growthMb: number }
}

/** One line a person can read: calls per second, the ratios where nginx ran beside, the tail at the fixed rate. */
function peopleLine (where: string, s: Summary): string {
  const parts: string[] = []
  const ratio = (r: Record<string, Result>, name: string): string => {
    const x = r[name]
    if (x === undefined) return '–'
    return r.nginx === undefined ? `${thousands(x.rps)} calls/s` : `${round2(x.rps / r.nginx.rps)}× nginx`
  }
  if (s.json !== undefined) {
    const tg = s.json.tracegate
    const nginx = s.json.nginx
    parts.push(`tracegate ${thousands(tg?.rps ?? 0)} calls/s` + (nginx === undefined ? '' : `, ${ratio(s.json, 'tracegate')} (${thousands(nginx.rps)}; target 0.5×)`) +
      `, native route ${ratio(s.json, 'tracegate_native')}, Responses ${ratio(s.json, 'tracegate_responses')}`)
  }
  if (s.stream !== undefined) parts.push(`streaming ${ratio(s.stream, 'tracegate')}`)
  if (s.rate !== undefined) {
    const tg = s.rate.tracegate
    const nginx = s.rate.nginx
    if (tg !== undefined) {
      parts.push(`p99 at ${thousands(rate)} calls/s ${tg.p99} ms` + (nginx === undefined ? '' : `, nginx ${nginx.p99} ms (${tg.p99 >= nginx.p99 ? '+' : ''}${round2(tg.p99 - nginx.p99)}; target within 2)`))
    }
  }
  if (s.memory !== undefined) parts.push(`${thousands(s.memory.streams)} slow streams +${s.memory.growthMb} MB`)
  const failed = [s.json, s.stream, s.rate].flatMap((r) => r === undefined ? [] : Object.entries(r).filter(([name]) => name.startsWith('tracegate')).map(([, x]) => x.errors + x.non2xx))
  parts.push(`${thousands(failed.reduce((a, b) => a + b, 0))} failed calls`)
  return `proxy (${where}): ${parts.join('; ')}`
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
  const setup = (process.env.BENCH_URL ?? '') === '' ? await onLoopback() : await deployment()
  const { targets } = setup
  const summary: Summary = {}
  try {
    await preflight(targets, setup.secrets)
    if (!skip.has('throughput')) {
      for (const stream of [false, true]) {
        const results: Record<string, Result> = {}
        for (const t of targets) {
          await load(t, stream, {}).catch(() => null) // warm-up pass, discarded
          results[t.name] = await load(t, stream)
        }
        for (const t of targets) {
          const r = results[t.name]!
          line({
            case: 'throughput', mode: stream ? 'stream' : 'json', target: t.name, connections, duration_s: duration,
            rps: r.rps, p50_ms: r.p50, p99_ms: r.p99, errors: r.errors, non2xx: r.non2xx,
            ...(results.direct === undefined ? {} : { ratio_vs_direct: round2(r.rps / results.direct.rps) }),
            ...(t.name === 'tracegate_native' ? { ratio_vs_contract: round2(r.rps / results.tracegate!.rps) } : {}),
            ...(t.name === 'tracegate_responses' ? { ratio_vs_native: round2(r.rps / results.tracegate_native!.rps) } : {}),
            ...(results.nginx === undefined ? {} : { ratio_vs_nginx: round2(r.rps / results.nginx.rps) }),
          })
        }
        summary[stream ? 'stream' : 'json'] = results
      }
    }
    if (!skip.has('rate')) {
      const results: Record<string, Result> = {}
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
      summary.rate = results
    }
    const tg = setup.local
    if (!skip.has('memory') && tg !== null) {
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
      const growth = round2((peak - idle) / 2 ** 20)
      line({ case: 'slow_streams_rss', streams: slowStreams, idle_rss_mb: round2(idle / 2 ** 20), peak_rss_mb: round2(peak / 2 ** 20), growth_mb: growth })
      summary.memory = { streams: slowStreams, growthMb: growth }
    }
    say(peopleLine(setup.where, summary))
  } finally {
    await setup.stop()
  }
}

main().catch((err: unknown) => {
  process.stderr.write(String(err instanceof Refused ? `proxy: ${err.message}` : err instanceof Error ? err.stack : err) + '\n')
  process.exitCode = 1
})
