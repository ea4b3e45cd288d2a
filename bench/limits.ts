// Micro-benchmark of the limiter's admit() on the front thread: ns per call with no limits, with every limit
// set on the key and the account (none of them reached), and the same with the sync to Redis running when
// BENCH_LIMITS_REDIS_URL is set. Calls cycle over BENCH_LIMITS_KEYS keys (default 1000) in 10 accounts;
// BENCH_LIMITS_N calls per case (default 2,000,000). Prints one JSON line.
import { performance } from 'node:perf_hooks'
import { Limiter, type LimitCall } from '../src/limits/limiter.js'
import { RedisCounters } from '../src/limits/redis.js'
import { NO_LIMITS, type Limits } from '../src/domain/limits.js'

const n = Number(process.env.BENCH_LIMITS_N ?? 2_000_000)
const keyCount = Number(process.env.BENCH_LIMITS_KEYS ?? 1000)
const redisUrl = process.env.BENCH_LIMITS_REDIS_URL ?? ''

const LIMITED: Limits = {
  rpm: 4_000_000_000, tpm: 9_000_000_000_000, budgetDayUsd: 1_000_000, budgetMonthUsd: 1_000_000_000,
  models: Object.freeze(['gpt-3.5*', 'claude-*', 'gpt-4o*']), maxBodyBytes: 4 * 1024 * 1024,
}
const ACCOUNT: Limits = { ...LIMITED, maxBodyBytes: null }

function calls (key: Limits, account: Limits): LimitCall[] {
  return Array.from({ length: keyCount }, (_, i) => ({ keyId: `key-${i}`, accountId: `acct-${i % 10}`, key, account }))
}

/** ns per admit() over `count` calls, after a warm-up. */
function nsPerAdmit (lim: Limiter, cs: readonly LimitCall[], count = n): number {
  let refused = 0
  const run = (m: number): void => {
    for (let i = 0; i < m; i++) if (lim.admit(cs[i % cs.length]!, 'gpt-4o-mini', 2048) !== null) refused++
  }
  run(Math.min(count, 200_000))
  const t0 = performance.now()
  run(count)
  const ns = ((performance.now() - t0) * 1e6) / count
  if (refused > 0) throw new Error(`${refused} calls were refused: the bench must stay under every limit`)
  return ns
}
const round = (ns: number): number => Math.round(ns * 10) / 10

const none = new Limiter()
const limited = new Limiter()
const results: Record<string, unknown> = {
  bench: 'limits',
  calls: n,
  keys: keyCount,
  admit_ns: {
    no_limits: round(nsPerAdmit(none, calls(NO_LIMITS, NO_LIMITS))),
    all_limits: round(nsPerAdmit(limited, calls(LIMITED, ACCOUNT))),
  },
}
await none.close()
await limited.close()
if (redisUrl !== '') {
  const shared = new Limiter({ shared: new RedisCounters(redisUrl) })
  const deadline = Date.now() + 5000
  while (shared.mode !== 'shared' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  if (shared.mode !== 'shared') throw new Error('Redis did not answer within 5 s')
  // In slices, so the sync gets its turns between them as it would between requests.
  const cs = calls(LIMITED, ACCOUNT)
  const slices = 20
  let total = 0
  for (let s = 0; s < slices; s++) {
    total += nsPerAdmit(shared, cs, Math.ceil(n / slices))
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  ;(results.admit_ns as Record<string, number>).all_limits_redis = round(total / slices)
  await shared.close()
}
console.log(JSON.stringify(results))
