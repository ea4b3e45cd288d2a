// The dashboard's settings and its boundaries in a real browser: a key created in Settings →
// API Keys is shown once (copy button, warning), works against the proxy, and once revoked through the
// confirmation is refused with 401; the account page; a second account sees none of the first one's
// traces in the list, at a detail address, or in usage; signing out returns to the sign-in page. An sql
// key made there reads its account's traces through the SQL port, with the official ClickHouse client.
import t, { type Test } from 'tap'
import { randomUUID } from 'node:crypto'
import type { Page } from 'playwright-core'
import { createClient } from '@clickhouse/client'
import { storedTrace } from '../helpers/store.js'
import { firstStart, startDashboard } from '../helpers/dashboard.js'
import { chatBody, checkWatched, launchBrowser, newPage, nonce, openList, rowOf, said, screenshot, sendBody, signIn, type Watched } from '../helpers/browser.js'
import { shownNumber, text } from '../helpers/browser-checks.js'

// The browser first: without it the file fails at once, before a server is started.
const browser = await launchBrowser(t)
const d = await startDashboard(t, { TRACEGATE_SQL_PORT: '0' }, { bootstrap: true, testSeams: true })
const owner = firstStart(d)
const admin = await newPage(browser, d.dashboard)
const page = admin.page
const accountId = owner.accountId
const watchedPages: Array<[string, Watched]> = [['admin', admin.watched]]

/** The shown key: the text of an element, or the value of an input holding it. */
async function keyValue (p: Page): Promise<string> {
  return await p.locator('[data-testid=created-key-value]').evaluate((el) =>
    (el instanceof HTMLInputElement || el instanceof HTMLTextAreaElement ? el.value : el.textContent ?? '').trim())
}

/** Opens the create-key form on the page shown, fills and submits it, and returns the key it shows once. */
async function createKey (p: Page, name: string, scope: 'proxy' | 'read' | 'sql', expires?: string): Promise<string> {
  await p.locator('button[data-testid=create-key]').click()
  const form = p.locator('form[data-testid=create-key-form]')
  await form.waitFor()
  await form.locator('input[name=name]').fill(name)
  await form.locator('select[name=scope]').selectOption(scope)
  if (expires !== undefined) await form.locator('select[name=expires]').selectOption(expires)
  await p.locator('button[data-testid=create-key-submit]').click()
  await p.locator('[data-testid=created-key]').waitFor()
  return await keyValue(p)
}

async function callWith (apiKey: string, label: string): Promise<{ status: number; traceId: string; code: unknown; nonce: string; said: string }> {
  const n = nonce(label)
  const r = await sendBody(d, 'alpha', chatBody('alpha', apiKey, `Hello ${n}`))
  return { status: r.status, traceId: r.traceId, code: r.body?.error?.code, nonce: n, said: said(r) }
}

// ---------------------------------------------------------------------------------------------------

let createdId = ''
let createdValue = ''
/** Calls made with the created key that were traced (answered after authentication). */
const createdKeyCalls: string[] = []

t.test('Settings → API Keys: a created key is shown once with a copy button and a warning, and works', async (t) => {
  await signIn(page, owner.email, owner.password)
  await page.locator('a[data-testid=nav-keys]').click()
  await page.waitForURL('**/settings/keys')
  await page.locator('table[data-testid=key-list]').waitFor()
  const [first] = await d.tg.admin.listKeys({ account: accountId })
  const firstRow = page.locator(`tr[data-testid=key-row][data-key-id="${first?.id}"]`)
  try { await firstRow.waitFor() } catch { /* the assertion below says it */ }
  t.equal(await firstRow.count(), 1, 'the first-start key is listed')

  createdValue = await createKey(page, 'browser test key', 'proxy', '30')
  t.match(createdValue, /^tgk_[A-Za-z0-9_-]{43}$/, 'the key is shown')
  const warning = (await text(page.locator('[data-testid=created-key-warning]'))).trim()
  t.match(warning, /again|once|not be shown|won.t be shown|cannot be shown/i, `a warning that it is shown once (${JSON.stringify(warning)})`)

  await admin.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: d.dashboard })
  await page.locator('button[data-testid=copy-key]').click()
  await page.waitForTimeout(100)
  t.equal(await page.evaluate(() => navigator.clipboard.readText()), createdValue, 'copy puts the key on the clipboard')
  await screenshot(page, 'keys-created')

  const stored = (await d.tg.admin.listKeys({ account: accountId })).find((k) => k.name === 'browser test key')
  t.ok(stored !== undefined, 'the key is stored')
  createdId = stored?.id ?? ''
  const row = page.locator(`tr[data-testid=key-row][data-key-id="${createdId}"]`)
  await row.waitFor()
  const cell = async (c: string): Promise<string> => (await text(row.locator(`td[data-col=${c}]`))).trim()
  t.equal(await cell('name'), 'browser test key', 'name cell')
  const prefix = await cell('prefix')
  t.ok(prefix.length >= 6 && createdValue.startsWith(prefix.replace(/[.…]+$/, '')), `prefix cell ${JSON.stringify(prefix)} is the start of the key`)
  t.ok(prefix.replace(/[.…]+$/, '').length < createdValue.length, 'the prefix is not the whole key')
  t.equal(await cell('scope'), 'proxy', 'scope cell')
  t.match(await cell('status'), /^active$/i, 'status active')
  t.match(await cell('expires'), /\d/, 'expires cell shows a date')
  const expiresAt = stored?.expires_at === null || stored?.expires_at === undefined ? NaN : Date.parse(stored.expires_at.replace(' ', 'T') + (/[zZ]|[+-]\d\d:?\d\d$/.test(stored.expires_at) ? '' : 'Z'))
  t.ok(Math.abs(expiresAt - (Date.now() + 30 * 86_400_000)) < 10 * 60_000, `stored to expire in 30 days (${stored?.expires_at})`)
  t.not(await cell('created'), '', 'created cell')

  const before = await page.request.get('/api/ui/keys')
  t.notOk((await before.text()).includes(createdValue), 'the key list API does not hold the value')
  await page.reload()
  await page.locator('table[data-testid=key-list]').waitFor()
  await row.waitFor()
  t.equal(await page.locator('[data-testid=created-key]').count(), 0, 'after a reload the key is not shown again')
  t.notOk((await page.content()).includes(createdValue), 'nowhere in the page')
  t.notOk((await page.content()).includes(createdValue.slice(4, 24)), 'not even a part past the prefix')

  const used = await callWith(createdValue, 'new-key')
  t.equal(used.status, 200, `the new key works against the proxy (${used.said})`)
  createdKeyCalls.push(used.traceId)
  await storedTrace(d.tg, accountId, used.traceId)
  let lastUsed = ''
  for (let i = 0; i < 20; i++) {
    await page.reload()
    await row.waitFor()
    lastUsed = await cell('last_used')
    if (/\d/.test(lastUsed)) break
    await page.waitForTimeout(250)
  }
  t.match(lastUsed, /\d/, `last used is shown once the key was used (${JSON.stringify(lastUsed)})`)

  const forged = await page.request.post('/api/ui/keys', { data: { name: 'no csrf', scope: 'proxy' } })
  t.equal(forged.status(), 403, 'creating a key without the CSRF token is refused')
  t.equal((await forged.json().catch(() => null))?.error?.code, 'csrf_failed', 'csrf_failed')
})

t.test('revoke asks first: No keeps the key, Yes revokes it and the proxy answers 401 at once', async (t) => {
  const row = page.locator(`tr[data-testid=key-row][data-key-id="${createdId}"]`)
  const status = async (): Promise<string> => (await text(row.locator('td[data-col=status]'))).trim()
  const dialog = page.locator('[data-testid=confirm-revoke]')

  await row.locator('button[data-testid=revoke-key]').click()
  await dialog.waitFor()
  t.equal(await dialog.evaluate((el) => el.tagName), 'DIALOG', 'the confirmation is a <dialog>')
  t.equal(await dialog.evaluate((el) => (el as HTMLDialogElement).open), true, 'open')
  await page.locator('button[data-testid=confirm-revoke-no]').click()
  await dialog.waitFor({ state: 'hidden' })
  t.match(await status(), /^active$/i, 'No: still active')
  const kept = await callWith(createdValue, 'kept')
  t.equal(kept.status, 200, `No: the key still works (${kept.said})`)
  createdKeyCalls.push(kept.traceId)

  await row.locator('button[data-testid=revoke-key]').click()
  await dialog.waitFor()
  await page.locator('button[data-testid=confirm-revoke-yes]').click()
  await dialog.waitFor({ state: 'hidden' })
  await row.locator('td[data-col=status]').filter({ hasText: /revoked/i }).waitFor()
  t.pass('Yes: the row says revoked')
  t.equal(await row.locator('button[data-testid=revoke-key]').count(), 0, 'a revoked key has no revoke button')
  const refused = await callWith(createdValue, 'revoked')
  t.equal(refused.status, 401, 'the proxy answers 401')
  t.equal(refused.code, 'revoked_api_key', 'revoked_api_key')
  await page.reload()
  await row.waitFor()
  t.match(await status(), /^revoked$/i, 'still revoked after a reload')
})

t.test('a key past its expiry is listed as expired, with no revoke button', async (t) => {
  const short = await d.tg.admin.createKey({ account: accountId, scope: 'proxy', name: 'short-lived', expiresIn: '1s' })
  await page.waitForTimeout(1500)
  const refused = await callWith(short.key, 'expired')
  t.equal(refused.code, 'expired_api_key', `the proxy refuses it (${refused.said})`)
  await page.goto('/settings/keys')
  const row = page.locator(`tr[data-testid=key-row][data-key-id="${short.id}"]`)
  await row.waitFor()
  t.match((await text(row.locator('td[data-col=status]'))).trim(), /^expired$/i, 'status expired')
  t.equal(await row.locator('button[data-testid=revoke-key]').count(), 0, 'no revoke button on an expired key')
})

t.test('the key filter lists exactly the calls made with that key', async (t) => {
  await openList(page)
  // The key options are filled once the key list has loaded.
  try {
    await page.waitForFunction(() => document.querySelectorAll('select[data-testid=filter-key] option').length > 1)
  } catch { /* the assertion below says what is offered */ }
  const options = await page.locator('select[data-testid=filter-key] option').evaluateAll((els) =>
    els.map((e) => ({ value: (e as HTMLOptionElement).value, text: e.textContent ?? '' })))
  const option = options.find((o) => o.value === createdId) ?? options.find((o) => o.text.includes('browser test key'))
  t.ok(option !== undefined, `the key is offered (${JSON.stringify(options.map((o) => o.text))})`)
  if (option === undefined) return
  await page.selectOption('select[data-testid=filter-key]', option.value)
  const want = [...createdKeyCalls].sort()
  try {
    await page.waitForFunction((want) => {
      const ids = [...document.querySelectorAll('tr[data-testid=trace-row]')].map((r) => r.getAttribute('data-trace-id')).sort()
      return JSON.stringify(ids) === JSON.stringify(want)
    }, want)
  } catch { /* the assertion below says what is shown */ }
  const ids = await page.locator('tr[data-testid=trace-row]').evaluateAll((els) => els.map((e) => e.getAttribute('data-trace-id')))
  t.same([...ids].sort(), want, 'only that key\'s calls')
})

t.test('a read key made in the dashboard reads through the read API and is refused by the proxy', async (t) => {
  await page.goto('/settings/keys')
  const value = await createKey(page, 'analytics', 'read', 'never')
  t.match(value, /^tgk_[A-Za-z0-9_-]{43}$/, 'the key is shown')
  const stored = (await d.tg.admin.listKeys({ account: accountId })).find((k) => k.name === 'analytics')
  const row = page.locator(`tr[data-testid=key-row][data-key-id="${stored?.id}"]`)
  await row.waitFor()
  t.equal((await text(row.locator('td[data-col=scope]'))).trim(), 'read', 'scope read')
  t.notMatch(await text(row.locator('td[data-col=expires]')), /\d/, 'expires: never, no date')
  t.equal(stored?.expires_at ?? null, null, 'stored without an expiry')

  const res = await fetch(`${d.dashboard}/api/v1/traces?limit=5`, { headers: { authorization: `Bearer ${value}` } })
  t.equal(res.status, 200, 'the read API answers the read key')
  const body = await res.json() as { traces?: Array<{ trace_id: string }> }
  t.ok(Array.isArray(body.traces) && body.traces.length > 0, 'with this account\'s traces')
  const proxied = await callWith(value, 'read-key')
  t.equal(proxied.status, 401, 'the proxy refuses a read key')
  t.equal(proxied.code, 'wrong_key_scope', 'wrong_key_scope')
})

t.test('an sql key made in the dashboard reads its account\'s traces through the SQL port, and is refused by the proxy', async (t) => {
  const mine = await callWith(owner.proxyKey, 'for-sql')
  t.equal(mine.status, 200)
  await storedTrace(d.tg, accountId, mine.traceId)
  await page.goto('/settings/keys')
  const value = await createKey(page, 'grafana', 'sql', 'never')
  t.match(value, /^tgk_[A-Za-z0-9_-]{43}$/, 'the key is shown')
  const stored = (await d.tg.admin.listKeys({ account: accountId })).find((k) => k.name === 'grafana')
  const row = page.locator(`tr[data-testid=key-row][data-key-id="${stored?.id}"]`)
  await row.waitFor()
  t.equal((await text(row.locator('td[data-col=scope]'))).trim(), 'sql', 'scope sql')
  const ch = createClient({ url: `http://127.0.0.1:${d.tg.sqlPort!}`, username: 'grafana', password: value })
  t.teardown(() => ch.close())
  const rows = await (await ch.query({ query: 'SELECT trace_id, account_id FROM account.traces WHERE trace_id = {id:UUID}', query_params: { id: mine.traceId }, format: 'JSONEachRow' })).json<{ trace_id: string; account_id: string }>()
  t.same(rows, [{ trace_id: mine.traceId, account_id: accountId }], 'the SQL port answers the sql key with its account\'s trace')
  const proxied = await callWith(value, 'sql-key')
  t.equal(proxied.status, 401, 'the proxy refuses an sql key')
  t.equal(proxied.code, 'wrong_key_scope', 'wrong_key_scope')
})

t.test('a key name holding HTML is shown as text everywhere it appears, and runs nothing', async (t) => {
  const name = '<img src=x onerror="window.__pwned=4;alert(4)">'
  await page.goto('/settings/keys')
  const value = await createKey(page, name, 'proxy')
  const stored = (await d.tg.admin.listKeys({ account: accountId })).find((k) => k.name === name)
  t.ok(stored !== undefined, 'stored with its name as typed')
  const used = await callWith(value, 'html-name')
  t.equal(used.status, 200, `the key works (${used.said})`)
  await storedTrace(d.tg, accountId, used.traceId)

  const nothingRan = async (where: string): Promise<void> => {
    await page.waitForTimeout(200)
    t.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined, `${where}: nothing ran`)
    t.equal(await page.evaluate(() => document.querySelectorAll('img[src="x"]').length), 0, `${where}: no <img src=x> made`)
  }
  await page.reload()
  const row = page.locator(`tr[data-testid=key-row][data-key-id="${stored?.id}"]`)
  await row.waitFor()
  t.equal((await text(row.locator('td[data-col=name]'))).trim(), name, 'the key list shows the name as text')
  await nothingRan('keys')

  await openList(page)
  await page.waitForFunction(() => document.querySelectorAll('select[data-testid=filter-key] option').length > 1)
  await nothingRan('trace list with the key filter')
  await page.goto(`/traces/${used.traceId}`)
  await page.locator('[data-testid=trace-detail]').waitFor()
  await nothingRan('trace detail')
  await page.goto('/usage')
  await page.selectOption('select[data-testid=usage-range]', 'hour')
  await page.locator('table[data-testid=breakdown-key] tr[data-testid=breakdown-row]').filter({ hasText: name }).waitFor()
  t.pass('the usage breakdown by key shows the name as text')
  await nothingRan('usage')
  t.same(admin.watched.dialogs, [], 'no dialog opened')
})

t.test('every page works as a deep link', async (t) => {
  for (const [path, testid] of [['/traces', 'trace-list'], ['/usage', 'usage-total-requests'], ['/settings/keys', 'key-list'],
    ['/settings/account', 'account-plan'], ['/', 'user-email']] as const) {
    const res = await page.goto(path)
    t.equal(res?.status(), 200, `${path}: 200`)
    await page.locator(`[data-testid=${testid}]`).waitFor()
    t.pass(`${path} shows ${testid}`)
  }
})

t.test('Settings → Account shows the name, id, plan and server-side keys', async (t) => {
  await page.locator('a[data-testid=nav-account]').click()
  await page.waitForURL('**/settings/account')
  await page.locator('[data-testid=account-plan]').waitFor()
  t.equal((await text(page.locator('[data-testid=account-name]'))).trim(), 'default', 'the first-start account')
  t.equal((await text(page.locator('[data-testid=account-plan]'))).trim(), 'pro', 'plan pro')
  t.equal((await text(page.locator('[data-testid=account-id]'))).trim(), accountId, 'the account id, as the CLI takes it')
  t.equal((await text(page.locator('[data-testid=account-server-side-keys]'))).trim(), 'enabled', 'server-side keys enabled')
  await screenshot(page, 'account')
})

t.test('another account sees none of the first account\'s traces: list, live feed, detail address, usage', async (t) => {
  const account = await d.tg.admin.createAccount({ name: 'other', plan: 'pro' })
  const email = 'other@example.com'
  const password = 'other-password-1'
  await d.tg.admin.createUser({ account: account.id, email, password })
  const otherKey = await d.tg.admin.createKey({ account: account.id, scope: 'proxy', name: 'other key' })

  const mine = await callWith(owner.proxyKey, 'first-account')
  t.equal(mine.status, 200, `a call of the first account (${mine.said})`)
  await storedTrace(d.tg, accountId, mine.traceId)

  const other = await newPage(browser, d.dashboard)
  watchedPages.push(['other', other.watched])
  const p2 = other.page
  await signIn(p2, email, password)
  t.equal((await text(p2.locator('[data-testid=user-email]'))).trim(), email, 'signed in as the other account\'s user')

  await openList(page)
  await openList(p2)
  t.equal(await rowOf(p2, mine.traceId).count(), 0, 'the first account\'s trace is not in the other\'s list')
  t.equal(await p2.locator('tr[data-testid=trace-row]').count(), 0, 'the other account has no traces yet')

  const theirs = await callWith(otherKey.key, 'other-account')
  t.equal(theirs.status, 200, `a call of the other account (${theirs.said})`)
  await rowOf(p2, theirs.traceId).waitFor()
  t.pass('the other account\'s own call arrives live in its list')
  // A call of the first account after it: once that one is shown live, the other's would have been too.
  const later = await callWith(owner.proxyKey, 'first-account-later')
  t.equal(later.status, 200, `a later call of the first account (${later.said})`)
  await rowOf(page, later.traceId).waitFor()
  t.equal(await rowOf(page, theirs.traceId).count(), 0, 'the first account\'s live list never shows the other\'s call')
  await p2.waitForTimeout(300)
  t.equal(await rowOf(p2, later.traceId).count(), 0, 'the other\'s live list never shows the first account\'s call')
  const listed = await p2.locator('tr[data-testid=trace-row]').evaluateAll((els) => els.map((e) => e.getAttribute('data-trace-id')))
  t.same(listed, [theirs.traceId], 'the other account lists only its own call')

  await p2.locator('input[data-testid=filter-text]').fill(mine.nonce)
  await p2.waitForFunction(() => document.querySelectorAll('tr[data-testid=trace-row]').length === 0)
  t.pass('searching for the first account\'s prompt text finds nothing')

  await p2.goto(`/traces/${mine.traceId}`)
  await p2.locator('[data-testid=not-found]').waitFor()
  t.equal(await p2.locator('[data-testid=trace-detail]').count(), 0, 'the first account\'s detail address shows not-found')
  t.notOk((await p2.content()).includes(mine.nonce), 'none of its prompt is on the page')
  const api = await p2.request.get(`/api/ui/traces/${mine.traceId}`)
  t.equal(api.status(), 404, 'the API answers 404')
  t.equal((await api.json().catch(() => null))?.error?.code, 'trace_not_found', 'trace_not_found, as if it did not exist')

  await p2.locator('a[data-testid=nav-usage]').click()
  await p2.waitForURL('**/usage')
  await p2.selectOption('select[data-testid=usage-range]', 'hour')
  await storedTrace(d.tg, account.id, theirs.traceId)
  await p2.reload()
  await p2.selectOption('select[data-testid=usage-range]', 'hour')
  try {
    await p2.waitForFunction(() => (document.querySelector('[data-testid=usage-total-requests]')?.textContent ?? '').trim() !== '')
  } catch { /* the assertion below says what is shown */ }
  t.equal(shownNumber(await text(p2.locator('[data-testid=usage-total-requests]')))?.value, 1, 'usage counts only the other account\'s one call')
  const keyRows = await p2.locator('table[data-testid=breakdown-key] tr[data-testid=breakdown-row]').count()
  t.equal(keyRows, 1, 'one key in its usage breakdown')

  await p2.locator('a[data-testid=nav-keys]').click()
  await p2.waitForURL('**/settings/keys')
  await p2.locator('table[data-testid=key-list]').waitFor()
  await p2.locator(`tr[data-testid=key-row][data-key-id="${otherKey.id}"]`).waitFor()
  const keyIds = await p2.locator('tr[data-testid=key-row]').evaluateAll((els) => els.map((e) => e.getAttribute('data-key-id')))
  t.same(keyIds, [otherKey.id], 'the other account lists only its own key')

  await p2.locator('a[data-testid=nav-account]').click()
  await p2.locator('[data-testid=account-plan]').waitFor()
  t.equal((await text(p2.locator('[data-testid=account-name]'))).trim(), 'other', 'its own account')
  t.equal((await text(p2.locator('[data-testid=account-server-side-keys]'))).trim(), 'disabled', 'server-side keys disabled')
  await other.context.close()
})

t.test('a page of another origin cannot change anything or listen in with the signed-in cookie', async (t) => {
  // The proxy's port is another origin but the same site, so the SameSite=Strict cookie goes along:
  // only the CSRF token and the Origin check stand between such a page and the dashboard.
  const foreign = await admin.context.newPage()
  await foreign.goto(`${d.url}/healthz`)
  const keysBefore = (await d.tg.admin.listKeys({ account: accountId })).length
  const tried = await foreign.evaluate(async (base) => {
    const out: string[] = []
    const simple = { method: 'POST', credentials: 'include', mode: 'no-cors', headers: { 'content-type': 'text/plain' } } as const
    await fetch(`${base}/api/ui/keys`, { ...simple, body: JSON.stringify({ name: 'forged', scope: 'proxy' }) }).then(() => out.push('keys sent'), (e) => out.push(`keys ${e}`))
    await fetch(`${base}/api/ui/signout`, { ...simple, body: '' }).then(() => out.push('signout sent'), (e) => out.push(`signout ${e}`))
    return out
  }, d.dashboard)
  t.comment(JSON.stringify(tried))
  t.equal((await d.tg.admin.listKeys({ account: accountId })).length, keysBefore, 'no key was created by the forged request')
  t.equal((await page.request.get('/api/ui/session')).status(), 200, 'the forged sign-out did not end the session')

  await foreign.evaluate((base) => {
    const events: string[] = []
    ;(window as unknown as { __events: string[] }).__events = events
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/api/ui/live`)
    ws.onopen = () => { events.push('open') }
    ws.onmessage = (e) => { events.push(`message ${String(e.data).slice(0, 80)}`) }
    ws.onclose = () => { events.push('close') }
  }, d.dashboard)
  await foreign.waitForTimeout(1000)
  const during = await callWith(owner.proxyKey, 'foreign-ws')
  t.equal(during.status, 200, `a call while the foreign socket is up (${during.said})`)
  await storedTrace(d.tg, accountId, during.traceId)
  await foreign.waitForTimeout(1500)
  const heard = await foreign.evaluate(() => (window as unknown as { __events: string[] }).__events)
  t.notOk(heard.some((e) => e.startsWith('message')), `the foreign socket heard nothing (${JSON.stringify(heard)})`)
  t.notOk(heard.includes('open') && !heard.includes('close'), 'the foreign socket was refused or closed')
  await foreign.close()
})

t.test('signing out returns to the sign-in page and the session is refused afterwards', async (t) => {
  await page.goto('/traces')
  await page.locator('table[data-testid=trace-list]').waitFor()
  const session = (await admin.context.cookies()).find((c) => c.name === 'tg_session')
  t.ok(session !== undefined, 'signed in with a session cookie')
  // A second tab of the same session, watching the live list.
  const tab = await admin.context.newPage()
  await openList(tab)
  await page.locator('button[data-testid=signout]').click()
  await page.locator('form[data-testid=signin-form]').waitFor()
  const after = await callWith(owner.proxyKey, 'after-signout')
  t.equal(after.status, 200, `a call after sign-out (${after.said})`)
  await storedTrace(d.tg, accountId, after.traceId)
  await tab.locator('form[data-testid=signin-form]').waitFor()
  t.pass('the other tab of the signed-out session shows the sign-in form')
  await tab.waitForTimeout(500)
  t.equal(await rowOf(tab, after.traceId).count(), 0, 'and never received the call made after sign-out')
  await tab.close()
  t.equal(await page.locator('[data-testid=user-email]').count(), 0, 'the sign-in page, no signed-in email')
  for (const path of ['/traces', '/usage', '/settings/keys', '/settings/account', `/traces/${randomUUID()}`]) {
    await page.goto(path)
    await page.locator('form[data-testid=signin-form]').waitFor()
    t.equal(await page.locator('[data-testid=user-email]').count(), 0, `${path} asks to sign in again`)
  }
  t.equal(await page.locator('table[data-testid=trace-list]').count(), 0, 'no trace list')
  t.equal((await page.request.get('/api/ui/session')).status(), 401, 'the session API says signed out')

  // The old cookie, replayed in a fresh context, is refused: sign-out ends the session, not just the cookie.
  const replay = await browser.newContext({ baseURL: d.dashboard })
  if (session !== undefined) await replay.addCookies([session])
  const r = await replay.request.get('/api/ui/session')
  t.equal(r.status(), 401, 'the signed-out session id is refused')
  await replay.close()
})

t.test('after repeated wrong passwords the sign-in form says to wait, even for the right one', async (t) => {
  // Last in the file: the limit also counts per client address, and every sign-in here comes from 127.0.0.1.
  await page.goto('/signin')
  const form = page.locator('form[data-testid=signin-form]')
  await form.waitFor()
  // Ten wrong guesses at once: each is delayed by its own count, so together they take the longest delay.
  const wrong = await Promise.all(Array.from({ length: 10 }, async () =>
    // Ten scrypt checks at once plus up to 5 s of delay: on a busy CI machine that takes more than the
    // default 10 s a request may take here.
    (await page.request.post('/api/ui/signin', { data: { email: owner.email, password: 'wrong-password' }, headers: { origin: d.dashboard }, timeout: 30_000 })).status()))
  t.same([...new Set(wrong)], [401], `ten wrong passwords: 401 each (${JSON.stringify(wrong)})`)
  await form.locator('input[name=email]').fill(owner.email)
  await form.locator('input[name=password]').fill(owner.password)
  const answer = page.waitForResponse((r) => r.url().endsWith('/api/ui/signin'))
  await page.locator('button[data-testid=signin-submit]').click()
  t.equal((await answer).status(), 429, 'the eleventh attempt is refused with 429')
  const error = page.locator('[data-testid=signin-error]')
  await error.filter({ hasText: /\S/ }).waitFor()
  const said = (await text(error)).trim()
  t.match(said, /too many|try again|later|wait|minutes?/i, `the form says to wait (${JSON.stringify(said)})`)
  t.equal(await page.locator('[data-testid=user-email]').count(), 0, 'still signed out')
})

t.test('no dialog, no uncaught error and no CSP violation on any page', async (t: Test) => {
  for (const [who, w] of watchedPages) checkWatched(t, w, who)
})
