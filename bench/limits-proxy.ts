// What per-key limits cost the proxy: tracegate whose key has every limit set (none of them reached) against
// tracegate whose key has none, and the same with the counts shared through a local redis-server
// (TRACEGATE_REDIS_URL) when /usr/bin/redis-server exists. Defaults otherwise (detection and tracing on).
// Runs alternate within each pair of processes. Prints one JSON line per comparison, then one line for
// people on standard error.
// BENCH_DURATION (s per run, default 5), BENCH_RUNS (pairs, default 3), BENCH_CONNECTIONS (50).
import autocannon from 'autocannon'
import { existsSync } from 'node:fs'
import { alternate, freePort, processCpuUs, proxyBody, say, spawnUntil, startMock, startTracegate, tracegateCli, type PairedRun, type Proc, type TracegateProc } from './processes.js'

const duration = Number(process.env.BENCH_DURATION ?? 5)
const runs = Number(process.env.BENCH_RUNS ?? 3)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50)
const REDIS = '/usr/bin/redis-server'

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

/** Every limit on the key and its account, far above what a run reaches. */
function limitEverything (tg: TracegateProc): void {
  const { keys } = tracegateCli(tg, ['key', 'list', '--account', tg.accountId]) as { keys: Array<{ id: string }> }
  const limits = ['--rpm', '4000000000', '--tpm', '9000000000000', '--budget-day', '1000000', '--budget-month', '1000000000', '--models', 'gpt-3.5*,claude-*,gpt-4o*']
  for (const k of keys) tracegateCli(tg, ['key', 'update', '--id', k.id, ...limits, '--max-body-bytes', '4194304'])
  tracegateCli(tg, ['account', 'update', '--id', tg.accountId, ...limits])
}

async function startRedis (): Promise<{ url: string; proc: Proc } | null> {
  if (!existsSync(REDIS)) return null
  const port = await freePort()
  const { proc } = await spawnUntil(REDIS, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {}, [/(Ready to accept connections)/])
  return { url: `redis://127.0.0.1:${port}`, proc }
}

function line (obj: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ bench: 'limits_proxy', connections, duration_s: duration, ...obj }) + '\n')
}

async function main (): Promise<void> {
  const mock = await startMock()
  const redis = await startRedis()
  const none = await startTracegate(mock.url)
  const limited = await startTracegate(mock.url)
  const shared = redis === null ? null : await startTracegate(mock.url, { TRACEGATE_REDIS_URL: redis.url })
  try {
    limitEverything(limited)
    if (shared !== null) limitEverything(shared)
    for (const tg of [none, limited, shared]) if (tg !== null) await load(tg, 3)
    const local = await alternate(runs, () => load(none, duration), () => load(limited, duration))
    line({ case: 'limits_set_vs_none', ...local.summary, target_ratio: 0.95 })
    const clause = (what: string, x: Record<string, unknown>, target: number): string =>
      `${what} ${String(x.ratio)}× the calls/s of a key with none (target ${target}), CPU ${String(x.cpu_us_per_request_on)} against ${String(x.cpu_us_per_request_off)} µs per call`
    const people = [clause('every limit set', local.summary, 0.95)]
    if (shared === null) {
      line({ case: 'limits_shared_through_redis_vs_none', skipped: `${REDIS} is not installed (apt-get install redis-server)` })
      people.push('redis not measured (not installed)')
    } else {
      const viaRedis = await alternate(runs, () => load(none, duration), () => load(shared, duration))
      line({ case: 'limits_shared_through_redis_vs_none', ...viaRedis.summary, target_ratio: 0.9 })
      people.push(clause('shared through redis', viaRedis.summary, 0.9))
    }
    say(`limits: ${people.join('; ')}`)
  } finally {
    await shared?.stop()
    await limited.stop()
    await none.stop()
    await redis?.proc.stop()
    await mock.proc.stop()
  }
}

await main()
