// The dashboard's UI API: sign-in with the first-start admin and account users,
// the session cookie and its flags, sign-out, CSRF and origin checks, security headers, static files,
// API keys (shown once, revoked at once on the proxy), and slowed-down then refused repeated failures.
//
// One tracegate for the file (chDB: one data directory per process), started with the first-start
// bootstrap so its admin can sign in, behind "a reverse proxy" (x-forwarded-for is believed) so each
// test's sign-in failures count against its own client address.
import t from 'tap'
import { createHmac } from 'node:crypto'
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { stored } from '../helpers/store.js'
import { ISO_UTC, proxyCall, startDashboard, type UiClient } from '../helpers/dashboard.js'

const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

const s = await startDashboard(t, { TRACEGATE_DASHBOARD_TRUST_PROXY: 'on' }, { bootstrap: true, testSeams: true })
const a = await s.tenant('acme')
const b = await s.tenant('globex')
let address = 0
/** A client from its own address, so the sign-in limiter of one test does not reach another. */
function from (c: UiClient = s.client()): { c: UiClient; xff: Record<string, string> } {
  return { c, xff: { 'x-forwarded-for': `203.0.113.${++address}` } }
}

t.test('every answer carries the security headers; pages get the shell', async (t) => {
  const c = s.client()
  for (const path of ['/', '/signin', '/traces', '/traces/0192b3c4-0000-7000-8000-000000000000', '/usage', '/settings/keys', '/settings/account']) {
    const r = await c.get(path)
    t.equal(r.status, 200, path)
    t.match(r.headers['content-type'], /^text\/html/, path)
    t.match(r.text, /<html/i, path)
  }
  // A browser asking for an unknown page gets the app's own HTML page; under /api/ and /assets/, for a
  // POST, or for a client that does not ask for HTML, it stays JSON.
  const browser = { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' }
  const page = await c.get('/nope', { headers: browser })
  t.equal(page.status, 404, 'an unknown page: 404')
  t.match(page.headers['content-type'], /^text\/html/, 'as HTML')
  t.match(page.text, /href="\/"/, 'with a link home')
  for (const [method, path, headers] of [['GET', '/api/nope', browser], ['GET', '/assets/nope.js', browser], ['POST', '/nope', browser], ['GET', '/nope', {}]] as const) {
    const r = await c.call(method, path, { headers })
    t.same([r.status, r.json?.error?.code], [404, 'not_found'], `${method} ${path}${headers === browser ? '' : ' without Accept: text/html'}: the JSON 404`)
  }
  const answers = [await c.get('/'), await c.get('/api/ui/session'), await c.get('/api/nope'), await c.post('/api/ui/session'), page]
  t.same(answers.slice(0, 4).map((r) => r.status), [200, 401, 404, 405])
  t.same(answers.slice(1, 4).map((r) => r.json.error.code), ['unauthenticated', 'not_found', 'method_not_allowed'])
  for (const r of answers) {
    t.equal(r.headers['content-security-policy'], CSP)
    t.equal(r.headers['x-content-type-options'], 'nosniff')
    t.equal(r.headers['referrer-policy'], 'no-referrer')
    t.equal(r.headers['x-frame-options'], 'DENY')
    t.match(r.headers['x-request-id'], /^[0-9a-f-]{36}$/)
  }
  t.equal(answers[1]!.json.error.request_id, answers[1]!.headers['x-request-id'])
})

t.test('static files come from the allow-list only', async (t) => {
  const c = s.client()
  const js = await c.get('/assets/vendor/uPlot.esm.js')
  t.equal(js.status, 200)
  t.match(js.headers['content-type'], /^text\/javascript/)
  t.equal(js.headers['cache-control'], 'no-cache')
  t.equal(js.headers['content-security-policy'], CSP)
  t.match((await c.get('/assets/vendor/uPlot.min.css')).headers['content-type'], /^text\/css/)
  for (const path of ['/assets/../package.json', '/assets/%2e%2e/%2e%2e/package.json', '/assets/vendor/../../../../package.json',
    '/assets/vendor/uPlot.cjs.js', '/assets/', '/assets/dashboard-secret']) {
    t.equal((await c.get(path)).status, 404, path)
  }
})

t.test('the first-start admin signs in', async (t) => {
  const first = s.tg.firstStart
  if (first === null) throw new Error('no first start')
  const { c, xff } = from()
  const r = await c.signIn(first.email, first.password, { headers: xff })
  t.equal(r.status, 200)
  t.same(r.json.user.email, first.email)
  t.equal(r.json.user.role, 'admin')
  t.same(r.json.account, { id: first.accountId, name: 'default', plan: 'pro', server_side_keys: true })
})

t.test('sign-in: the cookie, the session, and the same answer for a wrong email or password', async (t) => {
  const { c, xff } = from()
  const r = await c.signIn(a.email.toUpperCase(), a.password, { headers: xff })
  t.equal(r.status, 200)
  t.match(r.json, { user: { email: a.email, role: 'admin' }, account: { id: a.accountId, name: 'acme', plan: 'pro', server_side_keys: false } })
  t.type(r.json.csrf, 'string')
  t.notMatch(r.text, /password|scrypt/, 'no hash in the answer')
  const cookie = String(r.headers['set-cookie'])
  t.match(cookie, /^tg_session=[^;]+;/)
  for (const flag of ['HttpOnly', 'SameSite=Strict', 'Path=/', 'Max-Age=43200']) t.ok(cookie.split('; ').includes(flag), flag)
  t.notOk(cookie.includes('Secure'), 'plain http: no Secure flag')
  const session = await c.get('/api/ui/session')
  t.equal(session.status, 200)
  t.same(session.json, r.json)
  t.same((await c.get('/api/ui/account')).json, r.json.account)

  const timed = async (email: string, password: string): Promise<{ ms: number; body: any; status: number }> => {
    const start = performance.now()
    const x = await s.client().post('/api/ui/signin', { email, password }, { headers: from().xff })
    return { ms: performance.now() - start, body: x.json, status: x.status }
  }
  const wrongPassword = await timed(a.email, 'not-the-password')
  const unknownEmail = await timed('nobody@example.com', a.password)
  for (const x of [wrongPassword, unknownEmail]) {
    t.equal(x.status, 401)
    t.same({ ...x.body.error, request_id: '' }, { type: 'authentication_error', code: 'invalid_credentials', message: x.body.error.message, param: null, request_id: '' })
  }
  t.equal(wrongPassword.body.error.message, unknownEmail.body.error.message)
  // Both run one scrypt check; an unknown email must not answer in a fraction of the time.
  t.ok(unknownEmail.ms > wrongPassword.ms / 4, `unknown email ${unknownEmail.ms.toFixed(0)} ms vs wrong password ${wrongPassword.ms.toFixed(0)} ms`)
  t.equal((await s.client().post('/api/ui/signin', { email: a.email }, { headers: from().xff })).json.error.param, 'password')
  t.equal((await s.client().post('/api/ui/signin', '[1]', { headers: from().xff })).json.error.code, 'invalid_json')
})

t.test('sign-out ends the session for good', async (t) => {
  const { c, xff } = from()
  await c.signIn(a.email, a.password, { headers: xff })
  const live = await c.live()
  const old = { cookie: c.cookie, csrf: c.csrf }
  const out = await c.post('/api/ui/signout')
  t.equal(out.status, 204)
  t.match(String(out.headers['set-cookie']), /^tg_session=; .*Max-Age=0/)
  t.equal((await c.get('/api/ui/session')).json.error.code, 'unauthenticated', 'the old cookie is refused')
  t.equal((await c.get('/api/ui/traces')).status, 401)
  t.equal((await c.post('/api/ui/keys', { name: 'x', scope: 'proxy' })).status, 401)
  t.same({ cookie: c.cookie, csrf: c.csrf }, old, 'the client still sends it')
  for (let i = 0; i < 100 && !live.closed; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  t.ok(live.closed, 'its live socket is closed')
  await t.rejects(c.live(), 'and cannot reopen')
})

t.test('a forged, altered or expired cookie is refused', async (t) => {
  const { c, xff } = from()
  await c.signIn(a.email, a.password, { headers: xff })
  const [payload, sig] = c.cookie!.slice('tg_session='.length).split('.') as [string, string]
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString())
  const secretFile = join(s.dataDir, 'dashboard-secret')
  t.equal(statSync(secretFile).mode & 0o777, 0o600, 'the secret is readable by its owner only')
  const secret = Buffer.from(readFileSync(secretFile, 'utf8').trim(), 'hex')
  const sign = (p: string): string => createHmac('sha256', secret).update(p).digest('base64url')
  const other = Buffer.from(JSON.stringify({ ...claims, a: b.accountId })).toString('base64url')
  const expired = Buffer.from(JSON.stringify({ ...claims, e: Date.now() - 1 })).toString('base64url')
  for (const [what, value] of [['other account, old signature', `${other}.${sig}`], ['expired', `${expired}.${sign(expired)}`],
    ['no signature', payload], ['garbage', 'x.y']] as const) {
    const r = await c.get('/api/ui/traces', { headers: { cookie: `tg_session=${value}` }, cookie: false })
    t.equal(r.status, 401, what)
  }
})

t.test('CSRF: state changes need the token and this origin', async (t) => {
  const { c, xff } = from()
  await c.signIn(a.email, a.password, { headers: xff })
  const before = (await c.get('/api/ui/keys')).json.keys.length
  // Another first character: a base64url token starts with any of 64, so a fixed one would match 1 time in 64.
  const wrong = (c.csrf!.startsWith('x') ? 'y' : 'x') + c.csrf!.slice(1)
  const refused = [
    await c.post('/api/ui/keys', { name: 'no token', scope: 'proxy' }, { csrf: false }),
    await c.post('/api/ui/keys', { name: 'wrong token', scope: 'proxy' }, { csrf: false, headers: { 'x-csrf-token': wrong } }),
    await c.post('/api/ui/keys', { name: 'foreign origin', scope: 'proxy' }, { origin: 'http://evil.example' }),
    await c.post('/api/ui/keys', { name: 'cross-site', scope: 'proxy' }, { headers: { 'sec-fetch-site': 'cross-site' } }),
    await c.post('/api/ui/signout', {}, { csrf: false }),
    await s.client().post('/api/ui/signin', { email: a.email, password: a.password }, { origin: 'http://evil.example', headers: from().xff }),
  ]
  t.same(refused.map((r) => [r.status, r.json.error.code]), Array(refused.length).fill([403, 'csrf_failed']))
  const form = await c.post('/api/ui/keys', 'name=x&scope=proxy', { headers: { 'content-type': 'application/x-www-form-urlencoded' } })
  t.same([form.status, form.json.error.code], [415, 'unsupported_media_type'], 'a cross-site form cannot post')
  t.equal((await c.get('/api/ui/keys')).json.keys.length, before, 'nothing was created')
  t.equal((await c.get('/api/ui/session')).status, 200, 'still signed in')
  await t.rejects(c.live('http://evil.example'), 'the live socket checks the origin')
  await t.rejects(c.live(c.base, null), 'and the CSRF token')
  await t.rejects(c.live(c.base, wrong), 'the right one')
  await t.rejects(s.client().live(), 'and needs a session')
  const ok = await c.live()
  ok.close()
})

t.test('keys: created once, listed without the value, work on the proxy, revoked at once', async (t) => {
  const { c, xff } = from()
  await c.signIn(a.email, a.password, { headers: xff })
  const created = await c.post('/api/ui/keys', { name: 'ci', scope: 'proxy', expires_in_days: 30 })
  t.equal(created.status, 201)
  const k = created.json.key
  t.match(k, { name: 'ci', scope: 'proxy', status: 'active', last_used_at: null, revoked_at: null, account_id: a.accountId, expires_at: ISO_UTC, created_at: ISO_UTC, key: /^tgk_[A-Za-z0-9_-]{43}$/ })
  t.equal(k.prefix, k.key.slice(0, 12))
  t.ok(Date.parse(k.expires_at) - Date.now() > 29.9 * 86_400_000)
  const list = await c.get('/api/ui/keys')
  t.notOk(list.text.includes(k.key), 'the list never holds a key value')
  const row = list.json.keys.find((x: any) => x.id === k.id)
  t.same(Object.keys(row).sort(), ['account_id', 'created_at', 'expires_at', 'id', 'last_used_at', 'limits', 'name', 'prefix', 'revoked_at', 'scope', 'status', 'use'])
  t.notOk(list.json.keys.some((x: any) => x.id === b.proxyKeyId), "another account's keys are not listed")

  const call = await proxyCall(s, k.key)
  t.equal(call.status, 200, 'the new key works on the proxy')
  await stored(s.tg, a.accountId, [call.traceId])
  t.match((await c.get('/api/ui/keys')).json.keys.find((x: any) => x.id === k.id).last_used_at, ISO_UTC, 'last used, from the rollup, in UTC with its zone')

  const revoked = await c.post(`/api/ui/keys/${k.id}/revoke`)
  t.equal(revoked.status, 200)
  t.match(revoked.json.key, { id: k.id, status: 'revoked', revoked_at: ISO_UTC })
  t.notOk('key' in revoked.json.key)
  const after = await proxyCall(s, k.key)
  t.equal(after.status, 401, 'the proxy refuses it at once')

  const foreign = await c.post(`/api/ui/keys/${b.proxyKeyId}/revoke`)
  t.same([foreign.status, foreign.json.error.code], [404, 'key_not_found'])
  t.equal((await proxyCall(s, b.proxyKey)).status, 200, "another account's key still works")
  t.equal((await c.post('/api/ui/keys/not-a-uuid/revoke')).status, 404)

  const read = await c.post('/api/ui/keys', { name: '', scope: 'read' })
  t.match(read.json.key, { scope: 'read', expires_at: null, name: 'read key' })
  for (const [body, param] of [[{ scope: 'admin' }, 'scope'], [{ scope: 'read', expires_in_days: 0 }, 'expires_in_days'],
    [{ scope: 'read', expires_in_days: 1.5 }, 'expires_in_days'], [{ scope: 'read', name: 7 }, 'name']] as const) {
    const r = await c.post('/api/ui/keys', body)
    t.same([r.status, r.json.error.code, r.json.error.param], [400, 'invalid_parameter', param], JSON.stringify(body))
  }
})

t.test('repeated failures are slowed down, then refused with 429', async (t) => {
  const { c, xff } = from()
  const durations: number[] = []
  for (let i = 1; i <= 10; i++) {
    const start = performance.now()
    const r = await c.post('/api/ui/signin', { email: b.email, password: `wrong-${i}` }, { headers: xff })
    durations.push(performance.now() - start)
    t.equal(r.json.error.code, 'invalid_credentials', `failure ${i}`)
  }
  t.ok(durations[3]! >= 240, `4th failure waits (${durations[3]!.toFixed(0)} ms)`)
  t.ok(durations[5]! >= 990, `6th failure waits longer (${durations[5]!.toFixed(0)} ms)`)
  t.ok(durations[9]! >= 4990 && durations[9]! < 7000, `the delay is capped at 5 s (${durations[9]!.toFixed(0)} ms)`)
  const locked = await c.post('/api/ui/signin', { email: b.email, password: b.password }, { headers: xff })
  t.same([locked.status, locked.json.error.code], [429, 'too_many_attempts'], 'even the right password')
  const retry = Number(locked.headers['retry-after'])
  t.ok(retry > 0 && retry <= 900, `retry-after ${retry}`)
  const otherAddress = await s.client().post('/api/ui/signin', { email: b.email, password: b.password }, { headers: from().xff })
  t.equal(otherAddress.status, 429, 'per email')
  const otherEmail = await s.client().post('/api/ui/signin', { email: a.email, password: a.password }, { headers: xff })
  t.equal(otherEmail.status, 429, 'per address')
  const elsewhere = await s.client().signIn(a.email, a.password, { headers: from().xff })
  t.equal(elsewhere.status, 200, 'other users elsewhere are not affected')
})
