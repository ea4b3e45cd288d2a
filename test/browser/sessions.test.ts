// Sessions in a real browser: calls sent with x-tracegate-session appear on the
// Sessions page; a session opens as one conversation, its calls oldest first with each new message and
// its answer, under the session's totals (checked against the stored rows); a trace's detail links to
// its session; the list's user filter lives in the address. A session whose calls had no price shows
// "—" titled "not priced" for its cost, never $0.00.
import t from 'tap'
import type { Provider } from '../helpers/bodies.js'
import { buildBody, CLIENT_KEYS, ROUTES } from '../helpers/bodies.js'
import { firstStart, startDashboard } from '../helpers/dashboard.js'
import { checkWatched, launchBrowser, newPage, nonce, screenshot, signIn, overflowing } from '../helpers/browser.js'
import { checkCost, shownNumber, text } from '../helpers/browser-checks.js'
import { send } from '../helpers/http.js'
import { stored } from '../helpers/store.js'

const browser = await launchBrowser(t)
const d = await startDashboard(t, { TRACEGATE_TRACE_FLUSH_MS: '50' }, { bootstrap: true, testSeams: true })
const admin = firstStart(d)
const { page, watched } = await newPage(browser, d.dashboard)

async function call (session: string, user: string, said: string, o: { provider?: Provider; stream?: boolean; model?: string } = {}): Promise<{ status: number; traceId: string }> {
  const provider = o.provider ?? 'alpha'
  const body = buildBody(provider, { apiKey: admin.proxyKey, text: said, system: true, providerKey: CLIENT_KEYS[provider], stream: o.stream, model: o.model }).value
  const r = await send(d.url + ROUTES[provider], { body: JSON.stringify(body), headers: { 'x-tracegate-session': session, 'x-tracegate-user': user } })
  return { status: r.status, traceId: r.requestId }
}

const convo = nonce('conv')
const other = nonce('other')
const turns = ['What is a bloom filter?', 'And a skip index?', 'Show <b>me</b> an example.']
const sent = [
  await call(convo, 'carol', turns[0]!),
  await call(convo, 'carol', turns[1]!, { provider: 'beta' }),
  await call(convo, 'carol', turns[2]!, { provider: 'gamma', stream: true }),
]
// The other session's one call is of a model with no price.
const elsewhere = await call(other, 'dave', 'unrelated', { model: 'an-unpriced-model' })
await stored(d.tg, admin.accountId, [...sent, elsewhere].map((x) => x.traceId))
await signIn(page, admin.email, admin.password)

t.test('the calls were answered as the test expects', async (t) => {
  t.same([...sent, elsewhere].map((x) => x.status), [200, 200, 200, 200])
})

t.test('the Sessions page lists the sessions; one opens as a conversation in order, with its totals', async (t) => {
  await page.locator('a[data-testid=nav-sessions]').click()
  await page.waitForURL('**/sessions')
  const row = page.locator(`tr[data-testid=session-row][data-session="${convo}"]`)
  await row.waitFor()
  t.same(await page.locator('tr[data-testid=session-row]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-session'))),
    [other, convo], 'the most recently active first')
  t.equal((await text(row.locator('td[data-col=calls]'))).trim(), '3')
  t.equal((await text(row.locator('td[data-col=user]'))).trim(), 'carol')
  await row.locator('a[data-testid=session-link]').click()
  await page.waitForURL((u) => u.pathname === `/sessions/${encodeURIComponent(convo)}`)
  await page.locator('[data-testid=session-detail]').waitFor()
  t.equal(await text(page.locator('[data-testid=session-id]')), convo)

  const calls = page.locator('li[data-testid=session-call]')
  t.same(await calls.evaluateAll((els) => els.map((e) => e.getAttribute('data-trace-id'))), sent.map((x) => x.traceId), 'calls oldest first')
  const inputs = await page.locator('[data-testid=turn-input]').allTextContents()
  t.equal(inputs.length, 3)
  for (const [i, said] of turns.entries()) t.match(inputs[i], said, `turn ${i + 1} shows what was asked, as text`)
  t.equal(await page.locator('[data-testid=turn-input] b').count(), 0, 'HTML in a prompt is never markup')
  const outputs = await page.locator('[data-testid=turn-output]').allTextContents()
  t.ok(outputs.every((o) => o.trim() !== '' && !/No response was stored/.test(o)), 'each turn shows its answer')

  const rows = await d.tg.store.call('testQuery', {
    query: `SELECT sum(input_tokens) AS i, sum(output_tokens) AS o, sum(ifNull(cost_usd, 0)) AS c FROM traces
      WHERE account_id = {a:UUID} AND session = {s:String}`,
    params: { a: admin.accountId, s: convo },
  })
  const total = (n: string): Promise<string> => text(page.locator(`[data-testid=session-total-${n}]`))
  t.equal((await total('calls')).trim(), '3')
  t.equal(shownNumber(await total('input-tokens'))?.value, Number(rows[0]!.i))
  t.equal(shownNumber(await total('output-tokens'))?.value, Number(rows[0]!.o))
  checkCost(t, await total('cost'), Number(rows[0]!.c), 'session cost')
  t.equal((await text(page.locator('[data-testid=session-user]'))).trim(), 'carol')
  await screenshot(page, 'session')
})

t.test('a session of unpriced calls: its cost is "—" titled "not priced", in the list and in its totals', async (t) => {
  const cost = async (el: ReturnType<typeof page.locator>): Promise<{ text: string; title: string | null }> =>
    ({ text: (await text(el)).trim(), title: await el.getAttribute('title') })
  await page.goto('/sessions')
  const row = (id: string): ReturnType<typeof page.locator> => page.locator(`tr[data-testid=session-row][data-session="${id}"] td[data-col=cost]`)
  await row(other).waitFor()
  t.same(await cost(row(other)), { text: '—', title: 'not priced' }, 'the list row: no call priced')
  const priced = await cost(row(convo))
  t.match(priced.text, /^\$[\d.]+$/, `the list row of priced calls: a sum, unmarked (${priced.text})`)
  t.equal(priced.title, null, 'and untitled')
  await page.goto(`/sessions/${encodeURIComponent(other)}`)
  await page.locator('[data-testid=session-detail]').waitFor()
  t.same(await cost(page.locator('[data-testid=session-total-cost]')), { text: '—', title: 'not priced' }, "the session's totals")
})

t.test("a trace's detail links to its session", async (t) => {
  await page.goto(`/traces/${sent[1]!.traceId}`)
  const link = page.locator('[data-testid=label-session] a[data-testid=session-link]')
  t.equal(await text(link), convo)
  await link.click()
  await page.waitForURL((u) => u.pathname === `/sessions/${encodeURIComponent(convo)}`)
  await page.locator('li[data-testid=session-call]').first().waitFor()
  t.equal(await page.locator('li[data-testid=session-call]').count(), 3)
  await page.locator(`li[data-trace-id="${sent[2]!.traceId}"] a[data-testid=call-trace-link]`).click()
  await page.waitForURL(`**/traces/${sent[2]!.traceId}`)
  await page.locator('[data-testid=trace-detail]').waitFor()
  t.pass('a call opens its trace')
})

t.test('the user filter is in the address; an unknown session says so', async (t) => {
  await page.goto('/sessions')
  await page.locator('tr[data-testid=session-row]').first().waitFor()
  await page.fill('input[data-testid=sessions-user]', 'dave')
  await page.locator('form[data-testid=sessions-filters] button[type=submit]').click()
  await page.waitForURL((u) => u.pathname === '/sessions' && u.searchParams.get('user') === 'dave')
  await page.waitForFunction(() => document.querySelectorAll('tr[data-testid=session-row]').length === 1)
  t.equal(await page.locator('tr[data-testid=session-row]').getAttribute('data-session'), other)
  await page.reload()
  await page.locator('tr[data-testid=session-row]').first().waitFor()
  t.same(await page.locator('tr[data-testid=session-row]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-session'))), [other], 'the address reproduces the view')

  await page.goto(`/sessions/${encodeURIComponent('no-such-session')}`)
  await page.locator('[data-testid=not-found]').waitFor()
  t.match(await text(page.locator('[data-testid=not-found]')), /Session not found/)
})

t.test('at 390 px the session pages do not scroll sideways', async (t) => {
  await page.setViewportSize({ width: 390, height: 844 })
  t.teardown(() => page.setViewportSize({ width: 1280, height: 860 }))
  // The page's own content (the shell's nav is the phone layout's concern).
  const wide = (): Promise<string[]> => overflowing(page)
  await page.goto('/sessions')
  await page.locator('tr[data-testid=session-row]').first().waitFor()
  t.same(await wide(), [], 'the list')
  await page.goto(`/sessions/${encodeURIComponent(convo)}`)
  await page.locator('li[data-testid=session-call]').first().waitFor()
  t.same(await wide(), [], 'a session')
  await screenshot(page, 'session-390')
})

t.test('nothing the page must not do', async (t) => {
  checkWatched(t, watched)
})
