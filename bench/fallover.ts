// What several targets cost (docs/resilience.md): calls one after another, one connection, on the contract
// route, against three tracegate processes in front of the mock provider: (one) alpha's one target, the
// mock, dispatched directly; (healthy) a list whose first target is the mock and whose second answers
// 503, so every call is answered by its first attempt; (fall-over) the list the other way round, so every
// call falls over once. Rounds alternate between the three. The fall-over's own time is its median call
// minus the single target's, minus the 503 target's own median round trip (measured directly: provider
// time). Prints one JSON line per round and a summary. BENCH_CALLS (per round and process, default 400),
// BENCH_ROUNDS (default 3), TRACEGATE_* passed through.
import { createServer } from 'node:http'
import { performance } from 'node:perf_hooks'
import { request } from 'undici'
import { proxyBody, quantile, round2, startMock, startTracegate, type TracegateProc } from './processes.js'

const calls = Number(process.env.BENCH_CALLS ?? 400)
const rounds = Number(process.env.BENCH_ROUNDS ?? 3)

function line (obj: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ bench: 'fallover', ...obj }) + '\n')
}

const busy = createServer((req, res) => {
  req.resume()
  req.on('end', () => { res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"message":"busy"}}') })
})
await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve))
const busyUrl = `http://127.0.0.1:${(busy.address() as { port: number }).port}`

const mock = await startMock()
const procs: Record<string, TracegateProc> = {
  one: await startTracegate(mock.url),
  healthy: await startTracegate(mock.url, { TRACEGATE_ALPHA_BASE_URL: `${mock.url},${busyUrl}` }),
  fallover: await startTracegate(mock.url, { TRACEGATE_ALPHA_BASE_URL: `${busyUrl},${mock.url}` }),
}

/** Median and p99 ms of `n` sequential POSTs of `body` to `url`, each expected to answer `status`. */
async function sequential (url: string, body: string, n: number, status: number): Promise<{ p50: number; p99: number }> {
  const ms: number[] = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    const r = await request(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } })
    await r.body.arrayBuffer()
    ms.push(performance.now() - t0)
    if (r.statusCode !== status) throw new Error(`${url}: ${r.statusCode}`)
  }
  return { p50: round2(quantile(ms, 0.5)), p99: round2(quantile(ms, 0.99)) }
}

const medians: Record<string, number[]> = { one: [], healthy: [], fallover: [], busy: [] }
try {
  for (const tg of Object.values(procs)) await sequential(tg.url + '/api/alpha_service/chat_completion', proxyBody(tg.key, false), 50, 200)
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? ['one', 'healthy', 'fallover'] : ['fallover', 'healthy', 'one']
    const got: Record<string, unknown> = { round }
    for (const name of order) {
      const tg = procs[name]!
      const r = await sequential(tg.url + '/api/alpha_service/chat_completion', proxyBody(tg.key, false), calls, 200)
      medians[name]!.push(r.p50)
      got[name] = r
    }
    const b = await sequential(busyUrl + '/v1/chat/completions', '{}', calls, 503)
    medians.busy!.push(b.p50)
    got.busy_direct = b
    line(got)
  }
  const med = (xs: number[]): number => quantile(xs, 0.5)
  line({
    summary: true,
    median_ms: Object.fromEntries(Object.entries(medians).map(([k, v]) => [k, round2(med(v))])),
    healthy_minus_one_ms: round2(med(medians.healthy!) - med(medians.one!)),
    fallover_own_ms: round2(med(medians.fallover!) - med(medians.one!) - med(medians.busy!)),
    target_fallover_own_ms: 1,
  })
} finally {
  for (const tg of Object.values(procs)) await tg.stop()
  await mock.proc.stop()
  busy.close()
}
