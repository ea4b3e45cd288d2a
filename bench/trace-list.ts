// The trace list's filtered pages, totals and export over many traces, through the dashboard's
// HTTP API of a real `tracegate serve` on embedded ClickHouse. BENCH_TRACE_LIST_ROWS synthetic traces
// (default 1,000,000) over 30 days, half in the signed-in account and half in another, are inserted
// straight into the data directory before the server starts on it. Each list page (50 rows) and each
// totals query runs BENCH_TRACE_LIST_ROUNDS times (default 10) after one warm-up; target p95 < 300 ms.
// Then an export of BENCH_TRACE_LIST_EXPORT rows (default 100,000) as CSV and as JSONL, read as fast as
// the client can, with the server process's RSS sampled every 20 ms (Linux /proc): its growth over the
// level before the export. The store worker is a thread of that process, so its memory is in that
// figure. Prints one JSON line.
import { randomUUID } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MIGRATIONS_DIR } from '../src/store/client.js'
import { connect } from '../src/store/worker/connect.js'
import { migrate } from '../src/store/worker/migrate.js'
import { CLI, spawnUntil, type Proc, quantile, round2, rssOf } from './processes.js'

const rows = Number(process.env.BENCH_TRACE_LIST_ROWS ?? 1_000_000)
const rounds = Number(process.env.BENCH_TRACE_LIST_ROUNDS ?? 10)
const exportRows = Number(process.env.BENCH_TRACE_LIST_EXPORT ?? 100_000)
const DAY = 86_400_000


/** The process's RSS in kB. */
const rssKb = (pid: number): number => rssOf(pid) / 1024

const SERVE_ENV = (dataDir: string): Record<string, string> => ({
  TRACEGATE_DATA_DIR: dataDir,
  TRACEGATE_PROXY_PORT: '0',
  TRACEGATE_DASHBOARD_PORT: '0',
  TRACEGATE_LOG_LEVEL: 'warn',
})

async function serve (dataDir: string, first: boolean): Promise<{ proc: Proc; dashboard: string; signIn: RegExpExecArray | null }> {
  const patterns = [/dashboard on (http:\/\/\S+)/, /proxy listening on (http:\/\/\S+)/]
  if (first) patterns.push(/sign in: +(\S+ \/ \S+)/)
  const { proc, matches } = await spawnUntil(process.execPath, [CLI, 'serve', '--mock-providers'], SERVE_ENV(dataDir), patterns, 120_000)
  return { proc, dashboard: matches[0]!, signIn: first ? /(\S+) \/ (\S+)/.exec(matches[2]!) : null }
}

/** Synthetic traces for one account, evenly over 30 days: 5 models, 2,000 users, 100,000 sessions, 2 % errors, 1 % blocked. */
async function fill (dataDir: string, accounts: readonly string[], now: number): Promise<number> {
  const ch = await connect(dataDir, null)
  const t0 = performance.now()
  try {
    await migrate(ch, MIGRATIONS_DIR)
    const each = Math.floor(rows / accounts.length)
    for (const account of accounts) {
      await ch.command({
        query: `INSERT INTO traces (account_id, time, trace_id, key_id, provider, model, endpoint, user, session, tags, streaming,
            status, outcome, prompt, response, input_tokens, output_tokens, latency_ms, ttfb_ms, overhead_ms, cost_usd, cost_status)
          SELECT {a:UUID}, toDateTime64({start:Int64} / 1000 + number * {gap:Float64}, 3, 'UTC'), generateUUIDv4(),
            {k:UUID}, ['alpha', 'beta', 'gamma'][number % 3 + 1], ['gpt-4o-mini', 'gpt-4o', 'claude-sonnet-4-5', 'gemini-2.0-flash', 'o3-mini'][number % 5 + 1],
            '/v1/chat/completions', concat('u-', toString(number % 2000)), concat('s-', toString(number % 100000)),
            if(number % 4 = 0, ['eval'], ['prod']), number % 10 = 0,
            multiIf(number % 50 = 0, 500, number % 100 = 1, 403, 200), multiIf(number % 50 = 0, 'provider_error', number % 100 = 1, 'blocked', 'ok'),
            concat('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"question ', toString(number % 9973), ' about proxies and caches"}]}'),
            '{"choices":[{"message":{"content":"an answer about proxies"}}]}',
            30 + number % 700, 20 + number % 400, 100 + (number * 7919) % 2900, if(number % 10 = 0, 40 + number % 200, NULL), 1.5,
            0.00001 * (number % 97), 'priced'
          FROM numbers({n:UInt64})`,
        query_params: { a: account, k: randomUUID(), start: now - 30 * DAY, gap: (30 * DAY / 1000) / each, n: each },
      })
    }
  } finally {
    await ch.close()
  }
  return performance.now() - t0
}

async function main (): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tracegate-bench-trace-list-'))
  let proc: Proc | null = null
  try {
    // The first start makes the admin and its account; the traces go in while no server holds the data.
    const first = await serve(dataDir, true)
    const [email, password] = [first.signIn![1]!, first.signIn![2]!]
    const login = async (dashboard: string): Promise<string> => {
      const r = await fetch(`${dashboard}/api/ui/signin`, { method: 'POST', headers: { 'content-type': 'application/json', origin: dashboard }, body: JSON.stringify({ email, password }) })
      if (r.status !== 200) throw new Error(`sign-in answered ${r.status}`)
      return (r.headers.get('set-cookie') ?? '').split(';')[0]!
    }
    const cookie0 = await login(first.dashboard)
    const account = (await (await fetch(`${first.dashboard}/api/ui/account`, { headers: { cookie: cookie0 } })).json()) as { id: string }
    await first.proc.stop()
    const now = Date.now()
    const insertMs = await fill(dataDir, [account.id, randomUUID()], now)

    const second = await serve(dataDir, false)
    proc = second.proc
    const dashboard = second.dashboard
    const cookie = await login(dashboard)
    const pid = second.proc.child.pid!
    const get = async (path: string): Promise<number> => {
      const t0 = performance.now()
      const r = await fetch(dashboard + path, { headers: { cookie } })
      await r.arrayBuffer()
      if (r.status !== 200) throw new Error(`${path}: ${r.status}`)
      return performance.now() - t0
    }
    const measure = async (path: string): Promise<{ p50_ms: number; p95_ms: number }> => {
      await get(path)
      const times: number[] = []
      for (let i = 0; i < rounds; i++) times.push(await get(path))
      return { p50_ms: round2(quantile(times, 0.5)), p95_ms: round2(quantile(times, 0.95)) }
    }
    const filters: Record<string, string> = {
      none_30d: 'range=30d',
      none_all: 'range=all',
      model: 'range=30d&model=claude-sonnet-4-5',
      outcome: 'range=30d&outcome=provider_error,blocked',
      latency_range: 'range=30d&latency_min=2500&latency_max=2600',
      user: 'range=30d&user=u-42',
      text: 'range=30d&q=question%204242%20',
      status_5xx_24h: 'range=day&status=5xx',
      sorted_by_latency: 'range=30d&sort=latency',
      sorted_by_cost_model: 'range=30d&sort=cost&order=asc&model=gpt-4o',
    }
    const list: Record<string, unknown> = {}
    const totals: Record<string, unknown> = {}
    for (const [name, q] of Object.entries(filters)) {
      list[name] = await measure(`/api/ui/traces?${q}&limit=50`)
      if (!name.startsWith('sorted')) totals[name] = await measure(`/api/ui/traces/totals?${q}`)
    }
    // A deep page: the cursor of page 20 of the latency sort.
    let cursor: string | null = null
    for (let i = 0; i < 20; i++) {
      const r: Response = await fetch(`${dashboard}/api/ui/traces?range=30d&sort=latency&limit=50${cursor === null ? '' : `&cursor=${cursor}`}`, { headers: { cookie } })
      cursor = ((await r.json()) as { next_cursor: string | null }).next_cursor
    }
    list.sorted_by_latency_page_21 = await measure(`/api/ui/traces?range=30d&sort=latency&limit=50&cursor=${cursor}`)

    const exports: Record<string, unknown> = {}
    for (const format of ['csv', 'jsonl'] as const) {
      const before = rssKb(pid)
      let peak = before
      const sampler = setInterval(() => { peak = Math.max(peak, rssKb(pid)) }, 20)
      const t0 = performance.now()
      const r = await fetch(`${dashboard}/api/ui/traces/export?range=all&format=${format}&max_rows=${exportRows}`, { headers: { cookie } })
      let bytes = 0
      let lines = 0
      for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
        bytes += chunk.length
        for (const b of chunk) if (b === 0x0a) lines++
      }
      const ms = performance.now() - t0
      clearInterval(sampler)
      peak = Math.max(peak, rssKb(pid))
      exports[format] = {
        rows: format === 'csv' ? lines - 1 : lines,
        mb: round2(bytes / 1e6),
        seconds: round2(ms / 1000),
        rss_before_mb: round2(before / 1024),
        rss_peak_growth_mb: round2((peak - before) / 1024),
      }
    }
    // A client that stops reading for 3 s after the first chunk: the server must wait for it (the worker
    // reads no further page), so its RSS stays flat rather than growing by the export's size.
    {
      const before = rssKb(pid)
      let peak = before
      const sampler = setInterval(() => { peak = Math.max(peak, rssKb(pid)) }, 20)
      const r = await fetch(`${dashboard}/api/ui/traces/export?range=all&format=jsonl&max_rows=${exportRows}`, { headers: { cookie } })
      const reader = (r.body as ReadableStream<Uint8Array>).getReader()
      let bytes = (await reader.read()).value?.length ?? 0
      await new Promise((resolve) => setTimeout(resolve, 3000))
      const stalledGrowth = Math.max(peak, rssKb(pid)) - before
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        bytes += value.length
      }
      clearInterval(sampler)
      exports.jsonl_stalled_reader = { mb: round2(bytes / 1e6), rss_growth_while_stalled_mb: round2(stalledGrowth / 1024), rss_peak_growth_mb: round2((Math.max(peak, rssKb(pid)) - before) / 1024) }
    }
    process.stdout.write(JSON.stringify({
      bench: 'trace-list',
      rows,
      accounts: 2,
      rounds,
      insert_s: round2(insertMs / 1000),
      list_page_50: list,
      totals,
      export: exports,
      target_p95_ms: 300,
      loadavg: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
    }) + '\n')
  } finally {
    await proc?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

const watchdog = setTimeout(() => {
  process.stderr.write('trace-list bench took over 900 s; stopping\n')
  process.exit(1)
}, 900_000)
watchdog.unref()
main().catch((err: unknown) => {
  process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n')
  process.exitCode = 1
})
