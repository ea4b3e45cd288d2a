// The dashboard's trace list in a real browser (Debian's chromium through playwright-core): how long
// 100 rows take to build and lay out with the list's own row code, and how long a page of the list
// takes from its data arriving to the rows laid out and to the next frame, as the page marks them
// (performance.measure 'tracegate:list-render' and 'tracegate:list-frame'). Target: 100 rows < 100 ms.
// Prints one JSON line. Settings: BENCH_DASHBOARD_TRACES (calls sent first, default 200),
// BENCH_DASHBOARD_ROUNDS (default 20).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import { CLI, spawnUntil, quantile, round2 } from './processes.js'

const traces = Number(process.env.BENCH_DASHBOARD_TRACES ?? 200)
const rounds = Number(process.env.BENCH_DASHBOARD_ROUNDS ?? 20)
const CHROMIUM = '/usr/bin/chromium'


async function main (): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tracegate-bench-dashboard-'))
  const { proc, matches } = await spawnUntil(process.execPath, [CLI, 'serve', '--mock-providers'], {
    TRACEGATE_DATA_DIR: dataDir,
    TRACEGATE_PROXY_PORT: '0',
    TRACEGATE_DASHBOARD_PORT: '0',
    TRACEGATE_LOG_LEVEL: 'warn',
  }, [/proxy listening on (http:\/\/\S+)/, /dashboard on (http:\/\/\S+)/, /proxy key: (tgk_\S+)/, /sign in: +(\S+) \/ (\S+)/])
  const [proxy, dashboard, key] = matches as [string, string, string]
  const signIn = /sign in: +(\S+) \/ (\S+)/.exec(proc.output.join(''))!
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'] })
  try {
    for (let i = 0; i < traces; i += 20) {
      await Promise.all(Array.from({ length: Math.min(20, traces - i) }, async (_, j) => {
        const res = await fetch(`${proxy}/api/alpha_service/chat_completion`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ api_key: key, alpha_api_key: 'sk-bench', model: 'gpt-4o-mini', messages: [{ role: 'user', content: `Row ${i + j}: tell me about proxies.` }] }),
        })
        await res.arrayBuffer()
      }))
    }
    const context = await browser.newContext({ baseURL: dashboard })
    const page = await context.newPage()
    const signed = await page.request.post('/api/ui/signin', { data: { email: signIn[1], password: signIn[2] }, headers: { origin: dashboard } })
    if (signed.status() !== 200) throw new Error(`sign-in answered ${signed.status()}`)
    // Wait until the calls are stored (the list answers with them).
    for (let n = 0; n < traces;) {
      const r = await page.request.get(`/api/ui/traces?range=all&limit=200`)
      n = ((await r.json()) as { traces: unknown[] }).traces.length
      if (n < traces) await new Promise((resolve) => setTimeout(resolve, 200))
    }

    // 1. The list page as a user opens it: data in, rows laid out, next frame.
    const render: number[] = []
    const frame: number[] = []
    let pageRows = 0
    for (let r = 0; r < rounds; r++) {
      await page.goto('/traces?range=all')
      await page.waitForFunction(() => performance.getEntriesByName('tracegate:list-frame').length > 0)
      const m = await page.evaluate(() => {
        const a = performance.getEntriesByName('tracegate:list-render')[0] as PerformanceMeasure
        const b = performance.getEntriesByName('tracegate:list-frame')[0] as PerformanceMeasure
        return { render: a.duration, frame: b.duration, rows: Number(a.detail) }
      })
      render.push(m.render)
      frame.push(m.frame)
      pageRows = m.rows
    }

    // 2. 100 rows with the list's own row code, into a table of the page, laid out.
    const hundred: number[] = await page.evaluate(async (n) => {
      const list = await import('/assets/traces.js' as string) as { traceRows (items: unknown[]): DocumentFragment }
      const res = await fetch('/api/ui/traces?range=all&limit=100')
      const items = ((await res.json()) as { traces: unknown[] }).traces
      const table = document.createElement('table')
      const body = document.createElement('tbody')
      table.append(body)
      document.body.append(table)
      const out: number[] = []
      for (let i = 0; i < n; i++) {
        body.textContent = ''
        void body.offsetHeight
        const t0 = performance.now()
        body.appendChild(list.traceRows(items))
        void body.offsetHeight
        out.push(performance.now() - t0)
        if (body.rows.length !== items.length) throw new Error(`${body.rows.length} rows of ${items.length}`)
      }
      table.remove()
      return out
    }, rounds)

    process.stdout.write(JSON.stringify({
      bench: 'dashboard',
      traces,
      rounds,
      rows_100_ms_p50: round2(quantile(hundred, 0.5)),
      rows_100_ms_max: round2(Math.max(...hundred)),
      list_page_rows: pageRows,
      list_page_render_ms_p50: round2(quantile(render, 0.5)),
      list_page_render_ms_max: round2(Math.max(...render)),
      list_page_to_frame_ms_p50: round2(quantile(frame, 0.5)),
      list_page_to_frame_ms_max: round2(Math.max(...frame)),
      target_rows_100_ms: 100,
    }) + '\n')
  } finally {
    await browser.close()
    await proc.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

const watchdog = setTimeout(() => {
  process.stderr.write('dashboard bench took over 300 s; stopping\n')
  process.exit(1)
}, 300_000)
watchdog.unref()
main().catch((err: unknown) => {
  process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n')
  process.exitCode = 1
})
