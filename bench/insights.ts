// The usage drill-down and session queries (store/worker/usage-extra-queries.ts, session-queries.ts) on
// embedded ClickHouse, over synthetic traces: one account with BENCH_INSIGHTS_ROWS calls (default
// 1,000,000) spread over 30 days, 2,000 users and 100,000 sessions, beside another account as large.
// Each query runs BENCH_INSIGHTS_ROUNDS times (default 10); prints one JSON line of p50/p95 ms per query.
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MIGRATIONS_DIR } from '../src/store/client.js'
import { connect } from '../src/store/worker/connect.js'
import { migrate } from '../src/store/worker/migrate.js'
import { listSessions, sessionCalls } from '../src/store/worker/session-queries.js'
import { usageByUser, usageExtras } from '../src/store/worker/usage-extra-queries.js'
import { usageReport } from '../src/store/worker/usage-report.js'
import { quantile, round2 } from './processes.js'

const rows = Number(process.env.BENCH_INSIGHTS_ROWS ?? 1_000_000)
const rounds = Number(process.env.BENCH_INSIGHTS_ROUNDS ?? 10)
const DAY = 86_400_000


async function main (): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tracegate-bench-insights-'))
  const ch = await connect(dataDir, null)
  try {
    await migrate(ch, MIGRATIONS_DIR)
    const now = Date.now()
    const accounts = [randomUUID(), randomUUID()]
    for (const account of accounts) {
      // Calls evenly over 30 days; user i % 2000, session i % 100000 (so a session's calls are spread
      // over the month, the worst case for finding them), a tenth streamed.
      await ch.command({
        query: `INSERT INTO traces (account_id, time, trace_id, key_id, provider, model, endpoint, user, session, streaming,
            status, outcome, prompt, response, input_tokens, output_tokens, latency_ms, ttfb_ms, overhead_ms, cost_usd, cost_status)
          SELECT {a:UUID}, toDateTime64({start:Int64} / 1000 + number * {gap:Float64}, 3, 'UTC'), generateUUIDv4(),
            {k:UUID}, 'alpha', 'gpt-4o-mini', '/api/alpha_service/chat_completion',
            concat('u-', toString(number % 2000)), concat('s-', toString(number % 100000)), number % 10 = 0,
            if(number % 50 = 0, 500, 200), if(number % 50 = 0, 'provider_error', 'ok'),
            '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}]}', '{"choices":[{"message":{"content":"hi"}}]}',
            30 + number % 70, 20 + number % 40, 100 + number % 900, if(number % 10 = 0, 40 + number % 200, NULL), 1.5, 0.00001 * (number % 7), 'priced'
          FROM numbers({n:UInt64})`,
        query_params: { a: account, k: randomUUID(), start: now - 30 * DAY, gap: (30 * DAY / 1000) / rows, n: rows },
      })
    }
    const a = accounts[0]!
    const month = { accountId: a, from: now - 30 * DAY, to: now, bucket: 'day' as const, keyId: null, user: null }
    const day = { accountId: a, from: now - DAY, to: now, bucket: 'hour' as const, keyId: null, user: null }
    const queries: Record<string, () => Promise<unknown>> = {
      rollup_report_30d: () => usageReport(ch, month),
      ttft_30d: () => usageExtras(ch, month),
      top_users_30d: () => usageByUser(ch, { ...month, order: 'requests' }),
      ttft_24h: () => usageExtras(ch, day),
      top_users_24h: () => usageByUser(ch, { ...day, order: 'cost' }),
      one_user_report_30d: () => usageExtras(ch, { ...month, user: 'u-42' }),
      session_list_7d: () => listSessions(ch, { accountId: a, from: now - 7 * DAY, to: now, user: null, limit: 50, cursor: null }),
      one_session: () => sessionCalls(ch, { accountId: a, session: 's-4242', limit: 100, cursor: null }),
    }
    const result: Record<string, unknown> = { rows_per_account: rows, rounds }
    for (const [name, run] of Object.entries(queries)) {
      await run()
      const times: number[] = []
      for (let i = 0; i < rounds; i++) {
        const t0 = performance.now()
        await run()
        times.push(performance.now() - t0)
      }
      result[name] = { p50_ms: round2(quantile(times, 0.5)), p95_ms: round2(quantile(times, 0.95)) }
    }
    process.stdout.write(JSON.stringify(result) + '\n')
  } finally {
    await ch.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
