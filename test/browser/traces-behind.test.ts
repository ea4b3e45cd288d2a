// Every page says how far the stored traces are behind once it is 5 s or more: ClickHouse refuses inserts
// (its insert folder is swapped for a file), so a call's trace waits in the spool, which the dashboard
// cannot show; the banner names the lag, and it goes once the spool is replayed. The status it reads
// (GET /api/ui/status) and /readyz say the same (the metric: test/faults/store-faults.test.ts).
import t from 'tap'
import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { insertInbox } from '../../src/store/worker/connect.js'
import { adminPage, checkWatched, screenshot } from '../helpers/browser.js'
import { handOver, traceMeta } from '../helpers/handoff.js'
import { until } from '../helpers/wait.js'

const { d, page, watched, owner } = await adminPage(t)
const banner = page.locator('[data-testid=traces-behind]')

t.test('no banner while the traces keep up', async (t) => {
  await page.goto('/traces')
  await page.locator('[data-testid=live-status]').waitFor()
  // Nothing is spooled; a trace batch the store took a few ms late may still show as a tenth of a second.
  const status = await page.evaluate(async () => (await fetch('/api/ui/status')).json() as Promise<{ traces_behind_s: unknown }>)
  t.same(Object.keys(status), ['traces_behind_s'], 'the status says how far the traces are behind')
  t.ok(typeof status.traces_behind_s === 'number' && status.traces_behind_s < 1, `less than a second (${String(status.traces_behind_s)})`)
  t.ok(await banner.isHidden(), 'the banner is hidden')
})

t.test('traces waiting in the spool: the banner names the lag on every page, and goes once they are replayed', async (t) => {
  const inbox = insertInbox(d.dataDir)
  const aside = inbox + '.aside'
  if (existsSync(inbox)) renameSync(inbox, aside)
  writeFileSync(inbox, 'not a folder')
  let undone = false
  const undo = (): void => {
    if (undone) return
    undone = true
    rmSync(inbox, { force: true })
    if (existsSync(aside)) renameSync(aside, inbox)
  }
  t.teardown(undo)
  const meta = traceMeta(owner, null)
  handOver(d.tg, [meta])
  await d.tg.store.call('flushTraces')
  const spooled = await until(async () => {
    const s = await d.tg.store.call('traceStats')
    return s !== null && s.spooled > 0 && s.lag.dashboardMs >= 6_000 ? s : null
  }, { tries: 200, everyMs: 100, what: 'the trace waits in the spool for 6 s' })
  t.ok(spooled.lag.clickhouseMs >= spooled.lag.dashboardMs, 'ClickHouse is at least as far behind as the dashboard')

  await page.goto('/usage')
  await banner.waitFor({ state: 'visible' })
  const text = await banner.textContent() ?? ''
  const shown = /^Traces are (\d+) s behind: calls made since then appear here once they are stored\.$/.exec(text)
  t.ok(shown !== null, `the banner says how far (${text})`)
  t.ok(Number(shown?.[1]) >= 6 && Number(shown?.[1]) < 60, 'in seconds, as long as the trace has waited')
  await screenshot(page, 'traces-behind')
  await page.locator('[data-testid=nav-traces]').click()
  await page.waitForURL(/\/traces$/)
  t.ok(await banner.isVisible(), 'and on the next page')

  undo()
  await until(async () => {
    const s = await d.tg.store.call('traceStats')
    return s !== null && s.spoolBytes === 0 && s.lag.dashboardMs === 0
  }, { tries: 300, everyMs: 100, what: 'the spool is replayed' })
  await banner.waitFor({ state: 'hidden', timeout: 15_000 })
  t.pass('the banner goes once the spool is replayed')
  const ready = await fetch(`${d.url}/readyz`)
  t.same(await ready.json(), { status: 'ready', traces_behind_s: { clickhouse: 0, dashboard: 0 } }, '/readyz says nothing waits')
  checkWatched(t, watched)
})
