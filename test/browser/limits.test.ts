// Limits in the dashboard in a real browser: a key created with limits in the form, its limits
// and their use on the keys page after real proxied calls, the Edit limits dialog (current values, the
// server's error beside its field, Save) and the proxy enforcing the new limit at the next call without a
// restart, the account's limits on the Account page, and a hostile models pattern shown as text.
//
// The key cache keeps entries for ten minutes, so a change seen at the next call is the update dropping
// the cache. The limits' clock stands still in the middle of a minute, so a window never ends mid-test.
import t, { type Test } from 'tap'
import type { Locator } from 'playwright-core'
import { firstStart, startDashboard } from '../helpers/dashboard.js'
import { chatBody, checkWatched, launchBrowser, newPage, said, screenshot, sendBody, signIn } from '../helpers/browser.js'
import { roundsTo, shownNumber, text } from '../helpers/browser-checks.js'
import { until } from '../helpers/wait.js'

// The browser first: without it the file fails at once, before a server is started.
const browser = await launchBrowser(t)
const clock = Math.floor(Date.now() / 60_000) * 60_000 + 30_000
const d = await startDashboard(t, { TRACEGATE_KEY_CACHE_TTL_MS: '600000' }, { bootstrap: true, testSeams: true, limitsClock: () => clock })
const owner = firstStart(d)
const admin = await newPage(browser, d.dashboard)
const page = admin.page
const accountId = owner.accountId

async function call (apiKey: string, provider: 'alpha' | 'beta' = 'alpha'): Promise<{ status: number; traceId: string; code: unknown; said: string }> {
  const r = await sendBody(d, provider, chatBody(provider, apiKey, 'Hello'))
  return { status: r.status, traceId: r.traceId, code: r.body?.error?.code, said: said(r) }
}

async function storedLimits (name: string): Promise<unknown> {
  return (await d.tg.admin.listKeys({ account: accountId })).find((k) => k.name === name)?.limits
}

/** The shown line of one limit in a limits cell or list. */
async function limitLine (within: Locator, field: string): Promise<string> {
  const li = within.locator(`li[data-limit=${field}]`)
  return (await li.count()) === 0 ? '' : (await text(li)).trim()
}

const NAME = 'limited key'
let keyId = ''
let keyValue = ''
const row = (): Locator => page.locator(`tr[data-testid=key-row][data-key-id="${keyId}"]`)
const cell = (): Locator => row().locator('td[data-col=limits]')

t.test('the create form takes limits; a bad one is shown beside its field; the keys page shows them', async (t) => {
  await signIn(page, owner.email, owner.password)
  await page.goto('/settings/keys')
  await page.locator('table[data-testid=key-list]').waitFor()
  await page.locator('button[data-testid=create-key]').click()
  const form = page.locator('form[data-testid=create-key-form]')
  await form.waitFor()
  await form.locator('input[name=name]').fill(NAME)
  await form.locator('select[name=scope]').selectOption('proxy')
  const fill = async (field: string, value: string): Promise<void> => { await form.locator(`input[name=${field}]`).fill(value) }
  await fill('rpm', 'two')
  await fill('tpm', '100000')
  await fill('budget_day', '5')
  await fill('budget_month', '50')
  await fill('models', 'gpt-4o*, claude-sonnet-4-5')
  await fill('max_body_bytes', '65536')
  await page.locator('button[data-testid=create-key-submit]').click()
  const rpmError = form.locator('[data-testid=limit-error-rpm]')
  await rpmError.waitFor()
  t.match((await text(rpmError)).trim(), /rpm.*whole number/i, 'the server\'s message, beside the rpm field')
  t.equal(await form.locator('input[name=rpm]').getAttribute('aria-invalid'), 'true', 'the field is marked')
  t.equal(await page.locator('[data-testid=created-key]').count(), 0, 'no key shown')
  t.equal(await storedLimits(NAME), undefined, 'nothing created')

  await fill('rpm', '2')
  await page.locator('button[data-testid=create-key-submit]').click()
  await page.locator('[data-testid=created-key]').waitFor()
  keyValue = (await text(page.locator('[data-testid=created-key-value]'))).trim()
  t.match(keyValue, /^tgk_/, 'created and shown once')
  t.same(await storedLimits(NAME), { rpm: 2, tpm: 100000, budgetDayUsd: 5, budgetMonthUsd: 50, models: ['gpt-4o*', 'claude-sonnet-4-5'], maxBodyBytes: 65536 }, 'stored with its limits')
  keyId = (await d.tg.admin.listKeys({ account: accountId })).find((k) => k.name === NAME)?.id ?? ''
  await row().waitFor()
  t.equal(await limitLine(cell(), 'rpm'), '0 / 2 rpm')
  t.equal(await limitLine(cell(), 'tpm'), '0 / 100,000 tpm')
  t.equal(await limitLine(cell(), 'budget_day'), '$0.00 / $5.00 today')
  t.equal(await limitLine(cell(), 'budget_month'), '$0.00 / $50.00 this month')
  t.equal(await limitLine(cell(), 'models'), 'models: gpt-4o*, claude-sonnet-4-5')
  t.equal(await limitLine(cell(), 'max_body_bytes'), 'body ≤ 64 KiB')
  const firstKey = page.locator(`tr[data-testid=key-row][data-key-id="${(await d.tg.admin.listKeys({ account: accountId })).find((k) => k.name !== NAME)?.id}"]`)
  t.equal((await text(firstKey.locator('td[data-col=limits]'))).trim(), '—', 'a key without limits shows a dash')
})

t.test('proxied calls show as use beside each limit, and the limit is enforced', async (t) => {
  for (let i = 0; i < 2; i++) {
    const r = await call(keyValue)
    t.equal(r.status, 200, `call ${i + 1} of rpm 2 (${r.said})`)
  }
  const third = await call(keyValue)
  t.same([third.status, third.code], [429, 'rate_limited'], 'the third is refused')
  // Tokens and cost count once the calls' traces are built: reload until the page shows them.
  await until(async () => {
    await d.tg.store.call('flushTraces')
    await page.reload()
    await row().waitFor()
    return (shownNumber(await limitLine(cell(), 'budget_day'))?.value ?? 0) > 0 && (shownNumber(await limitLine(cell(), 'tpm'))?.value ?? 0) > 0
  }, { ms: 15_000, everyMs: 200, what: 'tokens and cost shown' })
  const use = d.tg.limiter.usage({ keyId })
  t.equal(await limitLine(cell(), 'rpm'), '2 / 2 rpm', 'two requests this minute')
  t.equal(await row().locator('li[data-limit=rpm]').getAttribute('class'), 'reached', 'marked as reached')
  t.equal(await limitLine(cell(), 'tpm'), `${use.minuteTokens.toLocaleString('en-US')} / 100,000 tpm`, 'the tokens the limiter counted')
  const day = shownNumber(await limitLine(cell(), 'budget_day'))
  t.ok(day !== null && roundsTo(day.value, day.decimals, use.dayUsd), `today's spend as counted (${await limitLine(cell(), 'budget_day')} for ${use.dayUsd})`)
  t.match(await limitLine(cell(), 'budget_day'), /^\$[\d.]+ \/ \$5\.00 today$/)
  await screenshot(page, 'keys-limits')
})

t.test('Edit limits: the current values, the server\'s error beside its field, and Save applying at the next call', async (t) => {
  const dialog = page.locator('[data-testid=edit-limits]')
  await row().locator('button[data-testid=edit-limits-open]').click()
  await dialog.waitFor()
  t.equal(await dialog.evaluate((el) => el.tagName), 'DIALOG', 'a <dialog>')
  t.equal(await dialog.evaluate((el) => (el as HTMLDialogElement).open), true, 'open')
  const input = (field: string): Locator => dialog.locator(`input[name=${field}]`)
  const values: Record<string, string> = {}
  for (const f of ['rpm', 'tpm', 'budget_day', 'budget_month', 'models', 'max_body_bytes']) values[f] = await input(f).inputValue()
  t.same(values, { rpm: '2', tpm: '100000', budget_day: '5', budget_month: '50', models: 'gpt-4o*, claude-sonnet-4-5', max_body_bytes: '65536' }, 'the current values')
  t.match(await text(dialog), /2 requests this minute/, 'with the use beside them')

  await input('rpm').fill('10')
  await input('tpm').fill('lots')
  await page.locator('button[data-testid=edit-limits-save]').click()
  const tpmError = dialog.locator('[data-testid=limit-error-tpm]')
  await tpmError.waitFor()
  t.match((await text(tpmError)).trim(), /tpm/, 'the error is beside the tpm field')
  t.equal(await dialog.evaluate((el) => (el as HTMLDialogElement).open), true, 'the dialog stays open')
  await screenshot(page, 'limits-dialog')
  t.match(await storedLimits(NAME), { rpm: 2, tpm: 100000 }, 'nothing changed')
  t.equal((await call(keyValue)).status, 429, 'still refused')

  await input('tpm').fill('')
  await page.locator('button[data-testid=edit-limits-save]').click()
  await dialog.waitFor({ state: 'hidden' })
  t.equal(await tpmError.isVisible(), false, 'the error is gone')
  await cell().locator('li[data-limit=rpm]').filter({ hasText: '2 / 10 rpm' }).waitFor()
  t.pass('the row shows the new limit with the use')
  t.equal(await limitLine(cell(), 'tpm'), '', 'the emptied tpm is removed')
  t.match(await storedLimits(NAME), { rpm: 10, tpm: null, budgetDayUsd: 5 }, 'stored')
  const after = await call(keyValue)
  t.equal(after.status, 200, `the proxy lets the next call through, no restart (${after.said})`)

  await row().locator('button[data-testid=edit-limits-open]').click()
  await dialog.waitFor()
  await input('rpm').fill('3')
  await page.locator('button[data-testid=edit-limits-save]').click()
  await dialog.waitFor({ state: 'hidden' })
  const lowered = await call(keyValue)
  t.same([lowered.status, lowered.code], [429, 'rate_limited'], 'lowered to 3 with 3 used: the next call is refused')
  await row().locator('button[data-testid=edit-limits-open]').click()
  await dialog.waitFor()
  await page.locator('button[data-testid=edit-limits-cancel]').click()
  await dialog.waitFor({ state: 'hidden' })
  t.match(await storedLimits(NAME), { rpm: 3 }, 'Cancel changes nothing')
})

t.test('a models pattern holding HTML is shown as text in the list and the dialog, and runs nothing', async (t) => {
  const hostile = '<img/src=x/onerror=window.__pwned=1>*'
  const script = '<script>window.__pwned=2</script>'
  const dialog = page.locator('[data-testid=edit-limits]')
  await row().locator('button[data-testid=edit-limits-open]').click()
  await dialog.waitFor()
  await dialog.locator('input[name=models]').fill(`${hostile}, ${script}`)
  await page.locator('button[data-testid=edit-limits-save]').click()
  await dialog.waitFor({ state: 'hidden' })
  t.match(await storedLimits(NAME), { models: [hostile, script] }, 'stored as typed')
  await cell().locator('li[data-limit=models]').filter({ hasText: 'img' }).waitFor()
  t.equal(await limitLine(cell(), 'models'), `models: ${hostile}, ${script}`, 'the list shows the text')
  await page.reload()
  await row().waitFor()
  t.equal(await limitLine(cell(), 'models'), `models: ${hostile}, ${script}`, 'after a reload too')
  await row().locator('button[data-testid=edit-limits-open]').click()
  await dialog.waitFor()
  t.equal(await dialog.locator('input[name=models]').inputValue(), `${hostile}, ${script}`, 'the dialog holds it as a value')
  await page.locator('button[data-testid=edit-limits-cancel]').click()
  await page.waitForTimeout(200)
  t.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined, 'nothing ran')
  t.equal(await page.evaluate(() => document.querySelectorAll('img[src="x"], td script').length), 0, 'no element was made from it')
  const refused = await call(keyValue)
  t.same([refused.status, refused.code], [403, 'model_not_allowed'], 'and gpt-4o-mini is not on that list')
})

t.test('the Account page shows the account\'s limits with their use, and edits them', async (t) => {
  await page.locator('a[data-testid=nav-account]').click()
  await page.waitForURL('**/settings/account')
  const card = page.locator('[data-testid=account-limits]')
  await card.waitFor()
  const lines = card.locator('[data-testid=account-limit-lines]')
  await lines.filter({ hasText: '—' }).waitFor()
  t.pass('no account limits yet')
  const edit = card.locator('button[data-testid=edit-account-limits]')
  t.equal(await edit.isVisible(), true, 'the admin may edit them')
  await edit.click()
  const dialog = page.locator('[data-testid=edit-limits]')
  await dialog.waitFor()
  t.equal(await dialog.locator('input[name=max_body_bytes]').count(), 0, 'an account has no body size')
  const used = d.tg.limiter.usage({ accountId }).minuteRequests
  t.equal(used, 3, 'the account\'s calls let through this minute')
  await dialog.locator('input[name=rpm]').fill(String(used + 1))
  await dialog.locator('input[name=budget_month]').fill('-1')
  await page.locator('button[data-testid=edit-limits-save]').click()
  await dialog.locator('[data-testid=limit-error-budget_month]').waitFor()
  t.pass('a bad budget is shown beside its field')
  t.equal((await d.tg.admin.listAccounts()).find((a) => a.id === accountId)?.limits.rpm, null, 'nothing changed')
  await dialog.locator('input[name=budget_month]').fill('20')
  await page.locator('button[data-testid=edit-limits-save]').click()
  await dialog.waitFor({ state: 'hidden' })
  await lines.locator('li[data-limit=rpm]').filter({ hasText: `${used} / ${used + 1} rpm` }).waitFor()
  t.match(await limitLine(lines, 'budget_month'), /^\$[\d.]+ \/ \$20\.00 this month$/, 'the month\'s budget with its use')
  await screenshot(page, 'account-limits')

  const ok = await call(owner.proxyKey)
  t.equal(ok.status, 200, `one more call of the account fits (${ok.said})`)
  const over = await call(owner.proxyKey)
  t.same([over.status, over.code], [429, 'rate_limited'], 'the next is over the account\'s rpm, from a key without limits of its own')
  await page.reload()
  await lines.locator('li[data-limit=rpm]').filter({ hasText: `${used + 1} / ${used + 1} rpm` }).waitFor()
  t.equal(await lines.locator('li[data-limit=rpm]').getAttribute('class'), 'reached', 'shown as reached')

  await card.locator('button[data-testid=edit-account-limits]').click()
  await dialog.waitFor()
  await dialog.locator('input[name=rpm]').fill('')
  await page.locator('button[data-testid=edit-limits-save]').click()
  await dialog.waitFor({ state: 'hidden' })
  await lines.locator('li[data-limit=rpm]').waitFor({ state: 'detached' })
  const lifted = await call(owner.proxyKey)
  t.equal(lifted.status, 200, `removed: the next call passes (${lifted.said})`)
})

t.test('no dialog, no uncaught error and no CSP violation on any page', async (t: Test) => {
  checkWatched(t, admin.watched, 'admin')
})
