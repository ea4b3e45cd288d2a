// The response cache's hits against the provider's answers (docs/resilience.md#response-cache): one
// tracegate process (its defaults: traces and detection on) in front of the mock provider, calls sent at a
// fixed rate over a pool of connections, each timed from its send to its last byte. Rounds alternate: hits
// (the same body with x-tracegate-cache-ttl, answered from the cache after the first) and misses (the same
// body without the header, so the mock answers each), then the floor: GET /healthz at the same rate, what
// this machine and harness add to any call. Prints one JSON line per run and a summary with the hits'
// p99 against the target, then one line for people on standard error. BENCH_RATE (calls/s, default 1000),
// BENCH_DURATION (s per run, default 5), BENCH_RUNS (per side, default 3), BENCH_CONNECTIONS (default 16),
// BENCH_STREAM=1 (streamed calls), TRACEGATE_* passed through; BENCH_URL and BENCH_KEY aim it at a
// deployment instead (processes.ts benchTarget).
import { Pool } from 'undici'
import { benchTarget, fixedRate, say } from './processes.js'

const rate = Number(process.env.BENCH_RATE ?? 1000)
const duration = Number(process.env.BENCH_DURATION ?? 5)
const runs = Number(process.env.BENCH_RUNS ?? 3)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16)
const stream = process.env.BENCH_STREAM === '1'

function line (obj: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ bench: 'cache', ...obj }) + '\n')
}

const target = await benchTarget({}, ['BENCH_RATE', 'BENCH_DURATION', 'BENCH_RUNS'])
const pool = new Pool(target.url, { connections })
const path = '/api/alpha_service/chat_completion'
const body = target.body(stream)
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
  say(`cache: at ${rate} calls/s, hits p99 ${p99s.hit!.join(' / ')} ms, misses ${p99s.miss!.join(' / ')} ms, /healthz ${p99s.healthz!.join(' / ')} ms (target: hits within 1 ms)`)
} finally {
  await pool.close()
  await target.stop()
}
