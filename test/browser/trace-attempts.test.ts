// A call's attempts over its provider's targets in the dashboard: the trace detail lists each attempt
// (target, pooled key id, status, time, why it gave way) as text, the last one the answer's; a call that
// needed one attempt shows no Attempts card; the list's "Fell over" filter keeps the calls that fell over.
// A call the response cache answered says so, with the cost it saved; a miss says miss.
import t from 'tap'
import { adminPage, checkWatched, screenshot } from '../helpers/browser.js'
import { handOver, traceMeta } from '../helpers/handoff.js'
import { storedTrace } from '../helpers/store.js'

const { d, page, watched, owner } = await adminPage(t)

const HTML = '<img src=x onerror="window.__attempted=1">'
const ATTEMPTS = [
  { target: 'http://10.0.0.1:8443', key_id: 'pk_0123456789ab', status: 0, ms: 3.25, cause: `connect_refused: ${HTML}` },
  { target: 'https://eu.example.net/openai', key_id: 'pk_0123456789ab', status: 503, ms: 12.5, cause: 'status 503' },
  { target: 'https://api.example.com', key_id: 'pk_ba9876543210', status: 200, ms: 40, cause: '' },
]
const fell = { ...traceMeta(owner, null), attempts: JSON.stringify(ATTEMPTS) }
const direct = traceMeta(owner, null)
const hit = { ...traceMeta(owner, null), cache: 'hit' as const, providerMs: null }
const miss = { ...traceMeta(owner, null), cache: 'miss' as const }
handOver(d.tg, [fell, direct, hit, miss])
await storedTrace(d.tg, owner.accountId, fell.traceId)
await storedTrace(d.tg, owner.accountId, direct.traceId)

t.test('the detail lists each attempt as text, the last one answered', async (t) => {
  await page.goto(`/traces/${fell.traceId}`)
  await page.locator('[data-testid=attempts]').waitFor()
  t.equal(await page.locator('[data-testid=attempts] h2').textContent(), 'Attempts (3)')
  const rows = page.locator('[data-testid=attempt]')
  t.equal(await rows.count(), 3)
  const cells: string[][] = []
  for (let i = 0; i < 3; i++) cells.push(await rows.nth(i).locator('td').allTextContents())
  t.same(cells.map((c) => [c[1], c[2], c[3], c[5]]), [
    ['http://10.0.0.1:8443', 'pk_0123456789ab', 'no answer', `connect_refused: ${HTML}`],
    ['https://eu.example.net/openai', 'pk_0123456789ab', '503', 'status 503'],
    ['https://api.example.com', 'pk_ba9876543210', '200', 'answered'],
  ], 'target, key id, status and why, in order')
  t.equal(await page.locator('[data-testid=attempts] img').count(), 0, 'markup in a cause is text')
  t.equal(await page.evaluate(() => (window as { __attempted?: number }).__attempted ?? 0), 0, 'and ran nothing')
  await screenshot(page, 'trace-attempts')

  await page.goto(`/traces/${direct.traceId}`)
  await page.locator('[data-testid=trace-detail]').waitFor()
  t.equal(await page.locator('[data-testid=attempts]').count(), 0, 'no Attempts card for a call made directly')
  checkWatched(t, watched)
})

t.test('the list keeps the calls that fell over, or the others', async (t) => {
  const listed = async (): Promise<string[]> => {
    await page.locator('[data-testid=trace-row]').first().waitFor()
    return await page.locator('[data-testid=trace-row]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-trace-id') ?? ''))
  }
  await page.goto('/traces?range=all')
  t.same((await listed()).sort(), [fell.traceId, direct.traceId, hit.traceId, miss.traceId].sort(), 'all of them without the filter')
  await page.locator('[data-testid=more-filters] > summary').click()
  await page.locator('[data-testid=filter-fell_over]').selectOption('true')
  await page.waitForURL(/fell_over=true/)
  await page.waitForFunction((id) => {
    const rows = [...document.querySelectorAll('[data-testid=trace-row]')]
    return rows.length === 1 && rows[0]!.getAttribute('data-trace-id') === id
  }, fell.traceId)
  t.same(await listed(), [fell.traceId], 'Fell over: the call that fell over alone')
  await page.goto('/traces?range=all&fell_over=false')
  t.same((await listed()).sort(), [direct.traceId, hit.traceId, miss.traceId].sort(), 'the other way round from the address')
  t.equal(await page.locator('[data-testid=filter-fell_over]').inputValue(), 'false', 'the filter shows what the address says')
  checkWatched(t, watched)
})

t.test('a call the response cache answered says so, with what it saved', async (t) => {
  const row = await storedTrace(d.tg, owner.accountId, hit.traceId)
  t.match(row, { cache: 'hit', cost_usd: 0 }, 'stored at zero cost')
  t.ok((row.cost_saved_usd ?? 0) > 0, `with the cost it saved (${String(row.cost_saved_usd)})`)
  await page.goto(`/traces/${hit.traceId}`)
  await page.locator('[data-testid=trace-detail]').waitFor()
  t.match(await page.locator('[data-testid=cache]').textContent(), /^hit: answered without the provider saved \$0\.\d+$/, 'the Cache fact says hit and what it saved')
  await storedTrace(d.tg, owner.accountId, miss.traceId)
  await page.goto(`/traces/${miss.traceId}`)
  await page.locator('[data-testid=trace-detail]').waitFor()
  t.equal(await page.locator('[data-testid=cache]').textContent(), 'miss', 'a miss says miss')
  await page.goto(`/traces/${direct.traceId}`)
  await page.locator('[data-testid=trace-detail]').waitFor()
  t.equal(await page.locator('[data-testid=cache]').count(), 0, 'a call that did not ask the cache has no Cache fact')
  checkWatched(t, watched)
})
