// The usage page's charts and drill-down in a real browser: a handful of calls in one
// busy hour of an otherwise empty day is the sparsest series there is, and every chart must still draw
// it as bars or segments, never as lone dots (read back from the canvas pixels: a dot is a few pixels
// wide, a bar or a bucket-wide segment many). Error rate, p99 and TTFT have their charts; a user or a key
// in the breakdowns narrows the page, with the filter in the address, which reproduces the view. A cost
// over calls of which some had no price shows the priced sum with the no-price mark, never as the whole.
import t, { type Test } from 'tap'
import type { Page } from 'playwright-core'
import { buildBody, CLIENT_KEYS, ROUTES, type Provider } from '../helpers/bodies.js'
import { firstStart, startDashboard } from '../helpers/dashboard.js'
import { checkWatched, launchBrowser, newPage, screenshot, signIn, overflowing } from '../helpers/browser.js'
import { checkCost } from '../helpers/browser-checks.js'
import { send } from '../helpers/http.js'
import { stored } from '../helpers/store.js'

const browser = await launchBrowser(t)
const d = await startDashboard(t, { TRACEGATE_TRACE_FLUSH_MS: '50' }, { bootstrap: true, testSeams: true })
const admin = firstStart(d)
const second = await d.tg.admin.createKey({ account: admin.accountId, scope: 'proxy', name: 'batch jobs' })
const { page, watched } = await newPage(browser, d.dashboard)
const adminKeyId = (await d.tg.store.call('listKeys', { accountId: admin.accountId })).find((k) => k.scope === 'proxy' && k.id !== second.id)!.id

async function call (key: string, user: string, o: { provider?: Provider; model?: string; stream?: boolean } = {}): Promise<{ status: number; traceId: string }> {
  const provider = o.provider ?? 'alpha'
  const body = buildBody(provider, { apiKey: key, text: `usage for ${user}`, providerKey: CLIENT_KEYS[provider], model: o.model, stream: o.stream }).value
  const r = await send(d.url + ROUTES[provider], { body: JSON.stringify(body), headers: { 'x-tracegate-user': user } })
  return { status: r.status, traceId: r.requestId }
}

// alice: 3 calls on the admin's key, one of them streamed; bob: 2 on the second key, one failing.
const sent = [
  await call(admin.proxyKey, 'alice'),
  await call(admin.proxyKey, 'alice', { provider: 'beta' }),
  await call(admin.proxyKey, 'alice', { stream: true, model: 'gpt-4o-mini-ttft-40' }),
  await call(second.key, 'bob'),
  await call(second.key, 'bob', { model: 'gpt-4o-mini-error-500' }),
]
await stored(d.tg, admin.accountId, sent.map((x) => x.traceId))
await signIn(page, admin.email, admin.password)

const total = async (name: string): Promise<string> => (await page.locator(`[data-testid=usage-total-${name}]`).textContent() ?? '').trim()

async function loaded (requests: number): Promise<void> {
  await page.waitForFunction((n) => document.querySelector('[data-testid=usage-total-requests]')?.textContent?.trim() === String(n), requests)
  await page.locator('[data-testid=chart-ttft] canvas').first().waitFor()
}

/**
 * The widest horizontal run of canvas columns in which some pixel has `rgb` (within `tolerance`), in
 * CSS pixels, over the chart's plot. Antialiasing blurs edges, never a dot into a segment.
 */
function widestRun (p: Page, testid: string, rgb: readonly [number, number, number], tolerance = 40): Promise<number> {
  return p.evaluate(({ testid, rgb, tolerance }) => {
    const canvas = document.querySelector<HTMLCanvasElement>(`[data-testid=${testid}] canvas`)
    if (canvas === null) return -1
    const ctx = canvas.getContext('2d')
    if (ctx === null) return -1
    const { width, height } = canvas
    const px = ctx.getImageData(0, 0, width, height).data
    let best = 0
    let run = 0
    for (let x = 0; x < width; x++) {
      let hit = false
      for (let y = 0; y < height && !hit; y++) {
        const i = (y * width + x) * 4
        if (px[i + 3]! > 200 && Math.abs(px[i]! - rgb[0]) <= tolerance && Math.abs(px[i + 1]! - rgb[1]) <= tolerance && Math.abs(px[i + 2]! - rgb[2]) <= tolerance) hit = true
      }
      run = hit ? run + 1 : 0
      if (run > best) best = run
    }
    return best / (window.devicePixelRatio || 1)
  }, { testid, rgb, tolerance })
}

const BLUE = [47, 111, 179] as const
const RED = [194, 65, 59] as const
const AMBER = [183, 121, 31] as const
/** A bar's fill: the colour at 85% over white. */
const bar = (c: readonly [number, number, number]): [number, number, number] => [c[0] * 0.85 + 38, c[1] * 0.85 + 38, c[2] * 0.85 + 38]

/**
 * Each chart's way of drawing, and how wide its sparse series is drawn. `decisive`: buckets are wide
 * enough that a dot (4 to 7 px) cannot pass for a bar or a segment; with narrower buckets the widths
 * are only checked to fill most of a bucket.
 */
async function checkCharts (t: Test, bucketPx: number, o: { decisive: boolean; errors: boolean }): Promise<void> {
  const draws = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll<HTMLElement>('.chart[data-testid]')]
    .map((el) => [el.dataset.testid, el.dataset.draw])))
  t.same(draws, {
    'chart-requests': 'bars',
    'chart-errors': 'bars',
    'chart-error-rate': 'levels',
    'chart-tokens': 'bars',
    'chart-cost': 'bars',
    'chart-latency': 'levels',
    'chart-ttft': 'levels',
  }, 'counts as bars, percentiles and rates as per-bucket levels')
  const min = o.decisive ? Math.max(12, bucketPx * 0.6) : bucketPx * 0.6
  if (o.decisive) t.ok(bucketPx >= 18, `buckets of ${bucketPx.toFixed(1)} px tell a dot from a bar`)
  const charts: Array<readonly [string, readonly [number, number, number]]> = [
    ['chart-requests', bar(BLUE)], ['chart-error-rate', AMBER], ['chart-latency', RED], ['chart-ttft', RED],
  ]
  if (o.errors) charts.push(['chart-errors', bar(AMBER)])
  for (const [chart, colour] of charts) {
    const w = await widestRun(page, chart, colour)
    t.ok(w >= min, `${chart}: the sparse series is drawn ${w.toFixed(1)} px wide (a bucket is ${bucketPx.toFixed(1)} px), not as a dot`)
    // The calls fall in one bucket, or two when they straddle a boundary: nothing joins them across
    // the empty rest of the range (spanGaps false), and no empty bucket is drawn as a zero.
    if (o.decisive) t.ok(w <= 2 * bucketPx + 3, `${chart}: nothing drawn across the empty buckets (${w.toFixed(1)} px)`)
  }
}

/** Plot width / buckets in the range, for the requests chart. */
async function bucketWidth (buckets: number): Promise<number> {
  const plot = await page.locator('[data-testid=chart-requests] .u-over').boundingBox()
  return (plot?.width ?? 0) / buckets
}

t.test('the calls were answered as the test expects', async (t) => {
  t.same(sent.map((x) => x.status), [200, 200, 200, 200, 500])
})

t.test('a sparse day: every chart draws bars or segments, with error rate, p99 and TTFT', async (t) => {
  await page.goto('/usage')
  await loaded(5)
  t.equal(await total('errors'), '1')
  t.equal(await total('error-rate'), '20%')
  t.not(await total('latency-p99'), '—')
  t.match(await total('ttft-p50'), /^\d[\d.,]* (ms|s)$/, 'TTFT of the streamed call')
  t.equal(await total('users'), '2')
  await checkCharts(t, await bucketWidth(25), { decisive: true, errors: true })
  await screenshot(page, 'usage-sparse-day')
})

t.test('a sparse hour of minute buckets draws the same way', async (t) => {
  await page.goto('/usage?range=hour')
  await loaded(5)
  await checkCharts(t, await bucketWidth(61), { decisive: false, errors: true })
})

t.test('drill-down: a user, then a key, with the filter in the address; the address reproduces the view', async (t) => {
  await page.goto('/usage')
  await loaded(5)
  const users = page.locator('table[data-testid=breakdown-user] tr[data-testid=breakdown-row]')
  t.same(await users.evaluateAll((rows) => rows.map((r) => r.getAttribute('data-group'))), ['alice', 'bob'], 'top users by calls')
  await page.locator('table[data-testid=breakdown-user] a[data-testid=drill-user]').filter({ hasText: 'alice' }).click()
  await page.waitForURL((u) => u.pathname === '/usage' && u.searchParams.get('user') === 'alice')
  await loaded(3)
  t.match(await page.locator('[data-testid=usage-filter-user]').textContent(), /alice/)
  t.same(await page.locator('table[data-testid=breakdown-key] tr[data-testid=breakdown-row]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-group'))),
    [adminKeyId], "only alice's key")
  t.equal(await total('errors'), '0')
  await checkCharts(t, await bucketWidth(25), { decisive: true, errors: false })
  t.equal(await widestRun(page, 'chart-errors', bar(AMBER)), 0, 'no error: no error bar')

  await page.locator('table[data-testid=breakdown-key] a[data-testid=drill-key]').first().click()
  await page.waitForURL((u) => u.searchParams.get('key') === adminKeyId && u.searchParams.get('user') === 'alice')
  await loaded(3)
  const shared = page.url()

  // Bob's key alone, from the address a colleague would be sent.
  await page.goto(`/usage?key=${second.id}`)
  await loaded(2)
  t.match(await page.locator('[data-testid=usage-filter-key]').textContent(), /batch jobs/, 'the key by its name')
  t.equal(await total('error-rate'), '50%')
  t.same(await users.evaluateAll((rows) => rows.map((r) => r.getAttribute('data-group'))), ['bob'])

  await page.goto(shared)
  await loaded(3)
  t.match(await page.locator('[data-testid=usage-filter-user]').textContent(), /alice/, 'the shared address shows the same view')
  await page.locator('[data-testid=usage-clear-user]').click()
  await page.waitForURL((u) => u.searchParams.get('user') === null && u.searchParams.get('key') === adminKeyId)
  await loaded(3)
  await page.locator('[data-testid=usage-clear]').click()
  await page.waitForURL((u) => u.search === '')
  await loaded(5)
})

t.test('users by cost, and the range, are kept in the address', async (t) => {
  await page.goto('/usage?range=hour')
  await loaded(5)
  await page.selectOption('select[data-testid=users-by]', 'cost')
  await page.waitForURL((u) => u.searchParams.get('users_by') === 'cost' && u.searchParams.get('range') === 'hour')
  await loaded(5)
  t.equal(await page.locator('select[data-testid=users-by]').inputValue(), 'cost')
  t.equal(await page.locator('select[data-testid=usage-range]').inputValue(), 'hour')
  const rows = await d.tg.store.call('testQuery', {
    query: 'SELECT user, sum(ifNull(cost_usd, 0)) AS c FROM traces WHERE account_id = {a:UUID} GROUP BY user ORDER BY c DESC',
    params: { a: admin.accountId },
  })
  t.same(await page.locator('table[data-testid=breakdown-user] tr[data-testid=breakdown-row]').evaluateAll((r) => r.map((x) => x.getAttribute('data-group'))),
    rows.map((r) => r.user), 'the most expensive user first, as stored')
})

t.test('at 390 px the usage page does not scroll sideways, filtered or not', async (t) => {
  await page.setViewportSize({ width: 390, height: 844 })
  t.teardown(() => page.setViewportSize({ width: 1280, height: 860 }))
  // The page's own content (the shell's nav is the phone layout's concern).
  const wide = (): Promise<string[]> => overflowing(page)
  await page.goto('/usage')
  await loaded(5)
  t.same(await wide(), [], 'unfiltered')
  await page.goto(`/usage?user=alice&key=${adminKeyId}`)
  await loaded(3)
  t.same(await wide(), [], 'with both filters shown')
  await screenshot(page, 'usage-390-filtered')
})

t.test('unpriced calls: "—" where no call was priced, the priced sum + "—" titled how many where some were not', async (t) => {
  await page.goto('/usage')
  await loaded(5)
  // The streamed call's and the failing call's models have no price; the others do.
  const calls = await d.tg.store.call('testQuery', {
    query: 'SELECT model, user, toString(key_id) AS key, provider, cost_usd FROM traces WHERE account_id = {a:UUID}',
    params: { a: admin.accountId },
  })
  const seen = new Set<string>()
  const check = (shown: { text: string; title: string | null }, of: typeof calls, where: string): void => {
    const unpriced = of.filter((c) => c.cost_usd === null).length
    const cost = of.reduce((n, c) => n + Number(c.cost_usd ?? 0), 0)
    if (unpriced === of.length) {
      seen.add('none priced')
      t.same(shown, { text: '—', title: 'not priced' }, `${where}: no call priced, the no-price mark`)
    } else if (unpriced > 0) {
      seen.add('some priced')
      t.match(shown.text, / \+ —$/, `${where}: the priced sum with the no-price mark (${JSON.stringify(shown.text)})`)
      checkCost(t, shown.text.replace(/ \+ —$/, ''), cost, where)
      t.equal(shown.title, `${unpriced} of ${of.length} calls not priced`, `${where}: the title says how many`)
    } else {
      seen.add('all priced')
      checkCost(t, shown.text, cost, where)
      t.notMatch(shown.text, /—/, `${where}: no mark`)
    }
  }
  const total = page.locator('[data-testid=usage-total-cost]')
  const totalShown = { text: (await total.textContent() ?? '').trim(), title: await total.getAttribute('title') }
  // The totals' title holds the exact amount when every call was priced.
  check(calls.every((c) => c.cost_usd !== null) ? { ...totalShown, title: null } : totalShown, calls, 'totals')
  for (const [table, column] of [['breakdown-key', 'key'], ['breakdown-user', 'user'], ['breakdown-model', 'model'], ['breakdown-provider', 'provider']] as const) {
    const rows = await page.locator(`table[data-testid=${table}] tr[data-testid=breakdown-row]`).evaluateAll((trs) => trs.map((tr) => {
      const td = tr.querySelector('td[data-col=cost]')
      return { group: tr.getAttribute('data-group') ?? '', text: (td?.textContent ?? '').trim(), title: td?.getAttribute('title') ?? null }
    }))
    t.ok(rows.length > 0, `${table}: rows`)
    for (const r of rows) check({ text: r.text, title: r.title }, calls.filter((c) => String(c[column]) === r.group), `${table} ${r.group}`)
  }
  t.same([...seen].sort(), ['all priced', 'none priced', 'some priced'], 'all three cases shown')
})

t.test('nothing the page must not do', async (t) => {
  checkWatched(t, watched)
})
