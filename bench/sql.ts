// Proxy calls while analytic queries run on the SQL port: tracegate on its defaults in front of the mock
// provider, with the SQL port on. One account's calls go one after another on BENCH_CONNECTIONS
// connections, alone and then while BENCH_QUERIES analytic queries run back to back on the SQL port
// (each reads every trace of the account many times over, a few seconds of ClickHouse CPU), runs
// alternating. Prints the calls' p50 and p99 in each case, the queries run and their mean time, and the
// time another account's light SQL query takes alone and while the heavy ones run.
// BENCH_DURATION (s per run, default 5), BENCH_RUNS (pairs, default 3), BENCH_CONNECTIONS (default 2),
// BENCH_QUERIES (parallel analytic queries, default 2), BENCH_SEED (calls made first, default 2000),
// BENCH_CLI (another build's src/cli.js), TRACEGATE_* passed through.
import { performance } from 'node:perf_hooks'
import { freePort, proxyBody, quantile, round2, startMock, startTracegate, tracegateCli, type TracegateProc } from './processes.js'

const duration = Number(process.env.BENCH_DURATION ?? 5)
const runs = Number(process.env.BENCH_RUNS ?? 3)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 2)
const queries = Number(process.env.BENCH_QUERIES ?? 2)
const seed = Number(process.env.BENCH_SEED ?? 2000)
const cli = process.env.BENCH_CLI

const HEAVY = 'SELECT model, count() AS n, sum(cityHash64(prompt, number)) AS h FROM account.traces CROSS JOIN (SELECT number FROM system.numbers LIMIT 3000) AS n GROUP BY model'
const LIGHT = 'SELECT count() AS n FROM account.traces'

async function call (url: string, body: string): Promise<number> {
  const r = await fetch(`${url}/api/alpha_service/chat_completion`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
  await r.arrayBuffer()
  return r.status
}

async function sql (port: number, key: string, query: string): Promise<{ ms: number; ok: boolean; text: string }> {
  const t0 = performance.now()
  const r = await fetch(`http://127.0.0.1:${port}/?default_format=JSONEachRow`, { method: 'POST', headers: { 'x-clickhouse-user': 'bench', 'x-clickhouse-key': key }, body: query })
  const text = await r.text()
  return { ms: performance.now() - t0, ok: r.status === 200, text }
}

interface Run { readonly ms: number[]; readonly failures: number; readonly queries: number[]; readonly queryFailures: number; readonly light: number[] }

async function run (tg: TracegateProc, port: number, sqlKey: string | null, seconds: number, otherKey: string): Promise<Run> {
  const until = performance.now() + seconds * 1000
  const ms: number[] = []
  const q: number[] = []
  let failures = 0
  let queryFailures = 0
  let n = 0
  const callLoop = async (): Promise<void> => {
    while (performance.now() < until) {
      const t0 = performance.now()
      const status = await call(tg.url, proxyBody(tg.key, false, n++)).catch(() => 0)
      ms.push(performance.now() - t0)
      if (status !== 200) failures++
    }
  }
  const queryLoop = async (): Promise<void> => {
    while (sqlKey !== null && performance.now() < until) {
      const r = await sql(port, sqlKey, HEAVY)
      if (r.ok) q.push(r.ms)
      else { queryFailures++; if (queryFailures === 1) process.stderr.write(r.text) }
    }
  }
  const light: number[] = []
  const lightLoop = async (): Promise<void> => {
    while (performance.now() < until) {
      light.push((await sql(port, otherKey, LIGHT)).ms)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  await Promise.all([...Array.from({ length: connections }, callLoop), ...Array.from({ length: sqlKey === null ? 0 : queries }, queryLoop), lightLoop()])
  return { ms, failures, queries: q, queryFailures, light }
}

async function main (): Promise<void> {
  const mock = await startMock()
  const port = await freePort()
  const tg = await startTracegate(mock.url, { TRACEGATE_SQL_PORT: String(port), TRACEGATE_SQL_MAX_EXECUTION_SECONDS: '120' }, cli)
  try {
    const sqlKey = (tracegateCli(tg, ['key', 'create', '--account', tg.accountId, '--scope', 'sql']) as { key: string }).key
    for (let i = 0; i < seed; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => call(tg.url, proxyBody(tg.key, false, i + j))))
    // The traces are inserted within TRACEGATE_TRACE_FLUSH_MS.
    while (true) {
      const r = await sql(port, sqlKey, LIGHT)
      if (r.ok && Number((JSON.parse(r.text) as { n: number }).n) >= seed) break
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
    const other = tracegateCli(tg, ['account', 'create', '--name', 'other', '--plan', 'pro']) as { id: string }
    const otherKey = (tracegateCli(tg, ['key', 'create', '--account', other.id, '--scope', 'sql']) as { key: string }).key
    await run(tg, port, null, 2, otherKey)
    const lightAlone: number[] = []
    const lightBusy: number[] = []
    const alone: number[] = []
    const busy: number[] = []
    const queryMs: number[] = []
    let aloneFailures = 0
    let busyFailures = 0
    let queryFailures = 0
    for (let i = 0; i < runs; i++) {
      const a = await run(tg, port, null, duration, otherKey)
      lightAlone.push(...a.light)
      alone.push(...a.ms)
      aloneFailures += a.failures
      const b = await run(tg, port, sqlKey, duration, otherKey)
      lightBusy.push(...b.light)
      busy.push(...b.ms)
      busyFailures += b.failures
      queryMs.push(...b.queries)
      queryFailures += b.queryFailures
    }
    process.stdout.write(JSON.stringify({
      bench: 'sql',
      build: cli ?? 'this',
      duration_s: duration,
      runs,
      connections,
      parallel_queries: queries,
      traces: seed,
      other_account_light_query_alone_ms: { p50: round2(quantile(lightAlone, 0.5)), p99: round2(quantile(lightAlone, 0.99)) },
      other_account_light_query_with_heavy_ms: { p50: round2(quantile(lightBusy, 0.5)), p99: round2(quantile(lightBusy, 0.99)) },
      calls_alone: { calls: alone.length, failures: aloneFailures, p50_ms: round2(quantile(alone, 0.5)), p99_ms: round2(quantile(alone, 0.99)) },
      calls_with_queries: { calls: busy.length, failures: busyFailures, p50_ms: round2(quantile(busy, 0.5)), p99_ms: round2(quantile(busy, 0.99)) },
      queries: { done: queryMs.length, failures: queryFailures, mean_ms: round2(queryMs.reduce((s, x) => s + x, 0) / Math.max(1, queryMs.length)) },
      p99_added_ms: round2(quantile(busy, 0.99) - quantile(alone, 0.99)),
      loadavg: (await import('node:os')).loadavg().map(round2),
    }) + '\n')
  } finally {
    await tg.stop()
    await mock.proc.stop()
  }
}

await main()
