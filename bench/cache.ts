// The response cache's hits against the provider's answers (docs/resilience.md#response-cache): one
// tracegate process (its defaults: traces and detection on) in front of the mock provider, calls sent at a
// fixed rate over a pool of connections, each timed from its send to its last byte. Rounds alternate: hits
// (the same body with x-tracegate-cache-ttl, answered from the cache after the first) and misses (the same
// body without the header, so the mock answers each), then the floor: GET /healthz at the same rate, what
// this machine and harness add to any call. Prints one JSON line per run and a summary with the hits'
// p99 against the target. BENCH_RATE (calls/s, default 1000), BENCH_DURATION (s per run, default 5),
// BENCH_RUNS (per side, default 3), BENCH_CONNECTIONS (default 16), BENCH_STREAM=1 (streamed calls),
// TRACEGATE_* passed through.
import { Pool } from 'undici'
import { fixedRate, proxyBody, startMock, startTracegate } from './processes.js'

const rate = Number(process.env.BENCH_RATE ?? 1000)
const duration = Number(process.env.BENCH_DURATION ?? 5)
const runs = Number(process.env.BENCH_RUNS ?? 3)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16)
const stream = process.env.BENCH_STREAM === '1'

function line (obj: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ bench: 'cache', ...obj }) + '\n')
}

const mock = await startMock()
const passEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('TRACEGATE_'))) as Record<string, string>
const tg = await startTracegate(mock.url, passEnv)
const pool = new Pool(tg.url, { connections })
const path = '/api/alpha_service/chat_completion'
const body = proxyBody(tg.key, stream)
const cached = { 'x-tracegate-cache-ttl': '3600' }
const p99s: Record<string, number[]> = { hit: [], miss: [], healthz: [] }
try {
  // Warm-up: the engine, the detection workers and the cache's entry.
  await fixedRate(pool, rate, path, body, cached, 1)
  await fixedRate(pool, rate, path, body, {}, 1)
  for (let i = 0; i < runs * 3; i++) {
    const side = (['hit', 'miss', 'healthz'] as const)[i % 3]!
    const r = side === 'healthz' ? await fixedRate(pool, rate, '/healthz', null, {}, duration) : await fixedRate(pool, rate, path, body, side === 'hit' ? cached : {}, duration)
    p99s[side]!.push(r.p99)
    line({ side, rate, stream, ...r })
  }
  line({ summary: true, rate, stream, hit_p99_ms: p99s.hit, miss_p99_ms: p99s.miss, healthz_p99_ms: p99s.healthz, target_hit_p99_ms: 1 })
} finally {
  await pool.close()
  await tg.stop()
  await mock.proc.stop()
}
