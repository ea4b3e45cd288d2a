// PII at rest in the dashboard in a real browser: the Account page's stored-text card
// (the current setting, an admin's Save applied at the next call without a restart, a member who reads it
// and gets no way to change it), and the trace detail of a masked call: the note saying it was stored with
// PII masked, placeholders in the conversation and the raw request instead of the values, and the findings
// marked on the placeholders. A call stored before the change keeps its text and has no note.
//
// The key cache keeps entries for ten minutes, so a change seen at the next call is the update dropping
// the account's keys.
import t, { type Test } from 'tap'
import type { Locator } from 'playwright-core'
import { firstStart, startDashboard } from '../helpers/dashboard.js'
import { callProxy, checkWatched, launchBrowser, newPage, screenshot, signIn, type Sent } from '../helpers/browser.js'
import { text } from '../helpers/browser-checks.js'
import { storedTrace } from '../helpers/store.js'

const EMAIL = 'jane.doe@example.com'
const CARD = '4111 1111 1111 1111'
const PROMPT = `Summarise our meeting notes and send them to ${EMAIL}; the card on file is ${CARD}.`

// The browser first: without it the file fails at once, before a server is started.
const browser = await launchBrowser(t)
const d = await startDashboard(t, { TRACEGATE_KEY_CACHE_TTL_MS: '600000', TRACEGATE_DETECTION_DEADLINE_MS: '5000' }, { bootstrap: true, testSeams: true })
const owner = firstStart(d)
const admin = await newPage(browser, d.dashboard)
const page = admin.page

const card = (): Locator => page.locator('[data-testid=account-pii-at-rest]')
const setting = async (): Promise<string | undefined> => (await d.tg.admin.listAccounts()).find((a) => a.id === owner.accountId)?.detection.piiAtRest

async function call (stream: boolean): Promise<Sent> {
  const r = await callProxy(d, 'alpha', PROMPT, { stream })
  await storedTrace(d.tg, owner.accountId, r.traceId)
  return r
}

let before: Sent

t.test('the Account page shows the setting; an admin saves mask and the next call is stored masked', async (t) => {
  before = await call(false)
  t.equal(before.status, 200, 'forwarded')
  await signIn(page, owner.email, owner.password)
  await page.goto('/settings/account')
  const value = card().locator('[data-testid=pii-at-rest-value]')
  await value.filter({ hasText: 'Stored as sent' }).waitFor()
  t.equal(await value.getAttribute('data-value'), 'keep', 'the default: stored as sent')
  t.equal(await card().locator('[data-testid=pii-at-rest-form]').isVisible(), true, 'the admin may change it')
  const select = card().locator('select[name=pii_at_rest]')
  t.equal(await select.inputValue(), 'keep')

  await select.selectOption('mask')
  await card().locator('button[data-testid=pii-at-rest-save]').click()
  await value.filter({ hasText: 'PII and secrets masked' }).waitFor()
  t.match(await text(card()), /replaced by placeholders/, 'with what it does')
  t.equal(await setting(), 'mask', 'stored')
  await screenshot(page, 'account-pii-at-rest')

  await page.reload()
  await value.filter({ hasText: 'PII and secrets masked' }).waitFor()
  t.equal(await select.inputValue(), 'mask', 'after a reload too')
})

t.test('the trace detail of a masked call says so and shows placeholders, with the findings on them', async (t) => {
  for (const stream of [false, true]) {
    const r = await call(stream)
    t.equal(r.status, 200, `${stream ? 'streamed' : 'whole'}: forwarded`)
    await page.goto(`/traces/${r.traceId}`)
    const note = page.locator('[data-testid=pii-masked-note]')
    await note.waitFor()
    const said = await text(note)
    t.match(said, /Stored with PII masked/, `${stream ? 'streamed' : 'whole'}: the note`)
    t.match(said, /1 e-mail, 1 card number in the prompt/, 'what was masked where')
    const convo = await text(page.locator('[data-testid=conversation]'))
    t.ok(convo.includes('[EMAIL]') && convo.includes('[CARD]'), 'placeholders in the conversation')
    t.notOk(convo.includes(EMAIL) || convo.includes(CARD), 'no value in the conversation')
    const raw = await text(page.locator('[data-testid=raw-request]'))
    t.notOk(raw.includes(EMAIL) || raw.includes(CARD), 'no value in the raw request')
    const marked = (await page.locator('[data-testid=conversation] mark[data-testid=finding-span]').allTextContents()).map((s) => s.trim()).sort()
    t.same(marked, ['[CARD]', '[EMAIL]'], 'the findings are marked on their placeholders')
    t.equal(await page.locator('[data-testid=finding]').count(), 2, 'both findings listed')
    if (!stream) await screenshot(page, 'trace-pii-masked')
  }
})

t.test('a call stored before the change keeps its text and has no note', async (t) => {
  await page.goto(`/traces/${before.traceId}`)
  await page.locator('[data-testid=conversation] mark[data-testid=finding-span]').first().waitFor()
  t.equal(await page.locator('[data-testid=pii-masked-note]').count(), 0, 'no note')
  t.ok((await text(page.locator('[data-testid=conversation]'))).includes(EMAIL), 'the text as it was stored')
})

t.test('a member reads the setting and has no way to change it', async (t) => {
  await d.tg.admin.createUser({ account: owner.accountId, email: 'member@pii.example', password: 'correct-horse-member', role: 'member' })
  const member = await newPage(browser, d.dashboard)
  t.teardown(() => member.context.close())
  await signIn(member.page, 'member@pii.example', 'correct-horse-member')
  await member.page.goto('/settings/account')
  const memberCard = member.page.locator('[data-testid=account-pii-at-rest]')
  await memberCard.locator('[data-testid=pii-at-rest-value]').filter({ hasText: 'PII and secrets masked' }).waitFor()
  t.equal(await memberCard.locator('[data-testid=pii-at-rest-form]').isVisible(), false, 'no form')
  t.equal(await memberCard.locator('button[data-testid=pii-at-rest-save]').isVisible(), false, 'no Save button')
  t.match(await text(memberCard), /Only an admin of the account can change it/)
  checkWatched(t, member.watched, 'member')
})

t.test('an admin saves keep and the next call is stored as sent again', async (t) => {
  await page.goto('/settings/account')
  await card().locator('select[name=pii_at_rest]').selectOption('keep')
  await card().locator('button[data-testid=pii-at-rest-save]').click()
  await card().locator('[data-testid=pii-at-rest-value]').filter({ hasText: 'Stored as sent' }).waitFor()
  t.equal(await setting(), 'keep')
  const r = await call(false)
  await page.goto(`/traces/${r.traceId}`)
  await page.locator('[data-testid=conversation] mark[data-testid=finding-span]').first().waitFor()
  t.equal(await page.locator('[data-testid=pii-masked-note]').count(), 0, 'no note')
  t.ok((await text(page.locator('[data-testid=conversation]'))).includes(EMAIL), 'the text as sent')
})

t.test('no dialog, no uncaught error and no CSP violation on any page', async (t: Test) => {
  checkWatched(t, admin.watched, 'admin')
})
