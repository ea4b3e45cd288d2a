// Limits in the dashboard's UI API: a key created with limits, the key list with each key's
// limits and its use counted from real proxied calls, a change of one key's limits (absent = unchanged,
// null or '' = removed), bad values refused with 400 invalid_parameter naming the member, another
// account's key answered 404 and left alone, the CSRF and origin checks, the account's limits (admins
// only), and every change applying on the proxy at the next call, without a restart.
//
// The key cache keeps entries for ten minutes here, so a change seen at the next call is the update
// dropping the cache, not an entry expiring. The limits' clock stands in the middle of a minute and is
// moved on by the tests when a window must end.
import t from 'tap'
import { proxyCall, startDashboard, type UiClient, signedIn as signIn } from '../helpers/dashboard.js'
import { until } from '../helpers/wait.js'

let clock = Math.floor(Date.now() / 60_000) * 60_000 + 30_000
const s = await startDashboard(t, { TRACEGATE_KEY_CACHE_TTL_MS: '600000' }, { bootstrap: false, testSeams: true, limitsClock: () => clock })
const a = await s.tenant('acme')
const b = await s.tenant('globex')

const signedIn = (email: string, password: string): Promise<UiClient> => signIn(s, { email, password })
const c = await signedIn(a.email, a.password)

const NONE = { rpm: null, tpm: null, budget_day: null, budget_month: null, models: null, max_body_bytes: null }

/** The key as the list shows it. */
async function listed (client: UiClient, id: string): Promise<any> {
  const r = await client.get('/api/ui/keys')
  if (r.status !== 200) throw new Error(`list: ${r.status} ${r.text}`)
  return r.json.keys.find((k: any) => k.id === id)
}

/** A new minute for the limits: the counts of earlier tests start again from zero. */
function nextMinute (): void {
  clock = Math.floor(clock / 60_000) * 60_000 + 90_000
}

t.test('a key created with limits answers them, stores them, and starts with no use', async (t) => {
  const r = await c.post('/api/ui/keys', {
    name: 'limited', scope: 'proxy', rpm: 60, tpm: '10000', budget_day: 5, budget_month: '100.5', models: 'gpt-4o*, claude-sonnet-4-5', max_body_bytes: 65536,
  })
  t.equal(r.status, 201)
  const k = r.json.key
  t.same(k.limits, { rpm: 60, tpm: 10000, budget_day: 5, budget_month: 100.5, models: ['gpt-4o*', 'claude-sonnet-4-5'], max_body_bytes: 65536 })
  t.match(k.use, { rpm: 0, tpm: 0, budget_day: 0, budget_month: 0 })
  t.ok(k.use.resets_at.minute > clock && k.use.resets_at.minute <= clock + 60_000, 'the minute ends within a minute')
  t.ok(k.use.resets_at.day >= k.use.resets_at.minute && k.use.resets_at.month >= k.use.resets_at.day, 'then the day, then the month')
  const [stored] = (await s.tg.admin.listKeys({ account: a.accountId })).filter((x) => x.id === k.id)
  t.same(stored?.limits, { rpm: 60, tpm: 10000, budgetDayUsd: 5, budgetMonthUsd: 100.5, models: ['gpt-4o*', 'claude-sonnet-4-5'], maxBodyBytes: 65536 }, 'stored')
  t.same((await listed(c, k.id)).limits, k.limits, 'listed')

  const arrayModels = await c.post('/api/ui/keys', { name: 'array', scope: 'proxy', models: ['gpt-4o-mini'], rpm: null, tpm: '' })
  t.same(arrayModels.json.key.limits, { ...NONE, models: ['gpt-4o-mini'] }, 'models as a list; null and empty are no limit')
  const plain = await c.post('/api/ui/keys', { name: 'plain', scope: 'read' })
  t.same(plain.json.key.limits, NONE, 'a key created without limits has none')
})

t.test('the list shows the use that real proxied calls counted', async (t) => {
  nextMinute()
  const created = await c.post('/api/ui/keys', { name: 'counted', scope: 'proxy', rpm: 10, tpm: 100000, budget_day: 1, budget_month: 10 })
  const k = created.json.key
  for (let i = 0; i < 3; i++) t.equal((await proxyCall(s, k.key)).status, 200, `call ${i + 1}`)
  t.equal((await listed(c, k.id)).use.rpm, 3, 'three requests this minute')
  // Tokens and cost count once the store worker has built the calls' traces.
  const use = await until(async () => {
    await s.tg.store.call('flushTraces')
    const u = (await listed(c, k.id)).use
    return u.tpm > 0 && u.budget_day > 0 ? u : null
  }, { ms: 10_000, everyMs: 50, what: 'tokens and cost counted' })
  const limiter = s.tg.limiter.usage({ keyId: k.id })
  t.same([use.rpm, use.tpm, use.budget_day, use.budget_month], [limiter.minuteRequests, limiter.minuteTokens, limiter.dayUsd, limiter.monthUsd], 'what the limiter counts')
  t.ok(use.budget_month >= use.budget_day, 'the month holds the day')
  const other = await listed(c, a.proxyKeyId)
  t.equal(other.use.rpm, 0, 'another key of the account counts apart')
  nextMinute()
  t.equal((await listed(c, k.id)).use.rpm, 0, 'a new minute starts from zero')
})

t.test('an update changes only the limits it names; null and empty remove them', async (t) => {
  const created = await c.post('/api/ui/keys', { name: 'edited', scope: 'proxy', rpm: 60, tpm: 1000, budget_day: 2, models: 'gpt-4o*', max_body_bytes: 4096 })
  const id = created.json.key.id
  const up = await c.post(`/api/ui/keys/${id}/limits`, { rpm: 5 })
  t.equal(up.status, 200)
  t.same(up.json.key.limits, { rpm: 5, tpm: 1000, budget_day: 2, budget_month: null, models: ['gpt-4o*'], max_body_bytes: 4096 }, 'rpm only')
  t.match(up.json.key, { id, name: 'edited', status: 'active' })
  t.notOk('key' in up.json.key, 'no key value')
  const removed = await c.post(`/api/ui/keys/${id}/limits`, { tpm: null, budget_day: '', models: [], budget_month: 3.25, max_body_bytes: 'none' })
  t.same(removed.json.key.limits, { ...NONE, rpm: 5, budget_month: 3.25 }, 'null, empty, [] and none remove; a new one is set')
  t.same((await listed(c, id)).limits, removed.json.key.limits, 'the list agrees')
  const all = await c.post(`/api/ui/keys/${id.toUpperCase()}/limits`, NONE)
  t.same(all.json.key.limits, NONE, 'all removed (the id in capitals is the same key)')
})

t.test('bad values are 400 invalid_parameter naming the member, and change nothing', async (t) => {
  const created = await c.post('/api/ui/keys', { name: 'strict', scope: 'proxy', rpm: 7 })
  const id = created.json.key.id
  const cases: Array<[Record<string, unknown>, string | null]> = [
    [{ rpm: 0 }, 'rpm'], [{ rpm: 1.5 }, 'rpm'], [{ rpm: -1 }, 'rpm'], [{ rpm: '12abc' }, 'rpm'], [{ rpm: true }, 'rpm'],
    [{ tpm: 'lots' }, 'tpm'], [{ budget_day: 0 }, 'budget_day'], [{ budget_day: -2 }, 'budget_day'],
    [{ budget_month: '0.0000001' }, 'budget_month'], [{ budget_month: 1e12 }, 'budget_month'],
    [{ models: 'gpt 4o' }, 'models'], [{ models: [7] }, 'models'], [{ models: 'a,,b' }, 'models'], [{ models: { x: 1 } }, 'models'],
    [{ max_body_bytes: 0 }, 'max_body_bytes'], [{ rpm: 5, rpn: 5 }, 'rpn'], [{ 'budget-day': 5 }, 'budget-day'], [{}, null],
  ]
  for (const [body, param] of cases) {
    const r = await c.post(`/api/ui/keys/${id}/limits`, body)
    t.same([r.status, r.json?.error?.code, r.json?.error?.param], [400, 'invalid_parameter', param], JSON.stringify(body))
  }
  t.same((await listed(c, id)).limits, { ...NONE, rpm: 7 }, 'unchanged')
  const before = (await c.get('/api/ui/keys')).json.keys.length
  for (const [body, param] of [[{ rpm: 0 }, 'rpm'], [{ models: '<b>x y</b>' }, 'models'], [{ budget_day: 'free' }, 'budget_day']] as const) {
    const r = await c.post('/api/ui/keys', { name: 'bad', scope: 'proxy', ...body })
    t.same([r.status, r.json?.error?.code, r.json?.error?.param], [400, 'invalid_parameter', param], `create ${JSON.stringify(body)}`)
  }
  t.equal((await c.get('/api/ui/keys')).json.keys.length, before, 'no key was created')
  const json = await c.post(`/api/ui/keys/${id}/limits`, '{"rpm":', {})
  t.same([json.status, json.json.error.code], [400, 'invalid_json'])
})

t.test("another account's key is 404 key_not_found and keeps its limits; so is an unknown id", async (t) => {
  await s.tg.admin.updateKey({ id: b.proxyKeyId, rpm: 1000 })
  for (const id of [b.proxyKeyId, b.proxyKeyId.toUpperCase(), '0192b3c4-0000-7000-8000-000000000000', 'not-a-uuid']) {
    const r = await c.post(`/api/ui/keys/${id}/limits`, { rpm: 1, models: 'nothing-at-all' })
    t.same([r.status, r.json.error.code], [404, 'key_not_found'], id)
  }
  const [theirs] = (await s.tg.admin.listKeys({ account: b.accountId })).filter((k) => k.id === b.proxyKeyId)
  t.same(theirs?.limits, { rpm: 1000, tpm: null, budgetDayUsd: null, budgetMonthUsd: null, models: null, maxBodyBytes: null }, 'unchanged')
  t.equal((await proxyCall(s, b.proxyKey)).status, 200, 'and their key still works')
  t.notOk((await c.get('/api/ui/keys')).json.keys.some((k: any) => k.id === b.proxyKeyId), 'nor is it listed')
})

t.test('changes need the session, its CSRF token and this origin', async (t) => {
  const created = await c.post('/api/ui/keys', { name: 'guarded', scope: 'proxy', rpm: 9 })
  const id = created.json.key.id
  // Another first character: a base64url token starts with any of 64, so a fixed one would match 1 time in 64.
  const wrong = (c.csrf!.startsWith('x') ? 'y' : 'x') + c.csrf!.slice(1)
  const refused = [
    await c.post(`/api/ui/keys/${id}/limits`, { rpm: 1 }, { csrf: false }),
    await c.post(`/api/ui/keys/${id}/limits`, { rpm: 1 }, { csrf: false, headers: { 'x-csrf-token': wrong } }),
    await c.post(`/api/ui/keys/${id}/limits`, { rpm: 1 }, { origin: 'http://evil.example' }),
    await c.post(`/api/ui/keys/${id}/limits`, { rpm: 1 }, { headers: { 'sec-fetch-site': 'cross-site' } }),
    await c.post('/api/ui/account/limits', { rpm: 1 }, { csrf: false }),
    await c.post('/api/ui/account/limits', { rpm: 1 }, { origin: 'http://evil.example' }),
  ]
  t.same(refused.map((r) => [r.status, r.json.error.code]), refused.map(() => [403, 'csrf_failed']))
  const form = await c.post(`/api/ui/keys/${id}/limits`, 'rpm=1', { headers: { 'content-type': 'application/x-www-form-urlencoded' } })
  t.same([form.status, form.json.error.code], [415, 'unsupported_media_type'], 'a form post is refused')
  const anonymous = s.client()
  t.equal((await anonymous.post(`/api/ui/keys/${id}/limits`, { rpm: 1 })).status, 401, 'no session')
  t.equal((await anonymous.get('/api/ui/account/limits')).status, 401, 'no session, no account limits')
  t.same((await listed(c, id)).limits, { ...NONE, rpm: 9 }, 'unchanged')
  t.same((await c.get('/api/ui/account/limits')).json.limits, { rpm: null, tpm: null, budget_day: null, budget_month: null, models: null }, 'the account unchanged')
})

t.test('a key\'s limit changed in the dashboard applies on the proxy at the next call, without a restart', async (t) => {
  nextMinute()
  const created = await c.post('/api/ui/keys', { name: 'live', scope: 'proxy', rpm: 1 })
  const k = created.json.key
  t.equal((await proxyCall(s, k.key)).status, 200, 'the first call of rpm 1')
  const second = await proxyCall(s, k.key)
  t.same([second.status, JSON.parse(second.text).error.code], [429, 'rate_limited'], 'the second is refused')
  t.equal((await c.post(`/api/ui/keys/${k.id}/limits`, { rpm: 10 })).status, 200)
  t.equal((await proxyCall(s, k.key)).status, 200, 'raised to 10: it passes')
  t.equal((await listed(c, k.id)).use.rpm, 2, 'two calls let through this minute')
  t.equal((await c.post(`/api/ui/keys/${k.id}/limits`, { rpm: 2 })).status, 200)
  t.equal((await proxyCall(s, k.key)).status, 429, 'lowered to 2: refused')
  t.equal((await c.post(`/api/ui/keys/${k.id}/limits`, { rpm: null, models: 'claude-*' })).status, 200)
  const model = await proxyCall(s, k.key)
  t.same([model.status, JSON.parse(model.text).error.code, JSON.parse(model.text).error.param], [403, 'model_not_allowed', 'model'], 'no rate limit; gpt-4o-mini is not claude-*')
  t.equal((await proxyCall(s, k.key, 'beta')).status, 200, 'a claude model passes')
  t.equal((await c.post(`/api/ui/keys/${k.id}/limits`, { max_body_bytes: 10 })).status, 200)
  const big = await proxyCall(s, k.key, 'beta')
  t.same([big.status, JSON.parse(big.text).error.code], [413, 'body_too_large'], 'a body over the key\'s size')
})

t.test("the account's limits: read with their use, changed by an admin, applied at the next call", async (t) => {
  nextMinute()
  const first = await c.get('/api/ui/account/limits')
  t.equal(first.status, 200)
  t.same(first.json.limits, { rpm: null, tpm: null, budget_day: null, budget_month: null, models: null }, 'none yet, and no body size member')
  t.match(first.json.use, { rpm: 0, tpm: 0 })
  t.equal(first.json.editable, true, 'the account\'s users are admins')
  t.equal((await proxyCall(s, a.proxyKey)).status, 200)
  t.equal((await c.get('/api/ui/account/limits')).json.use.rpm, 1, 'the account\'s use counts its keys\' calls')

  const set = await c.post('/api/ui/account/limits', { rpm: 2, budget_month: 50, models: 'gpt-4o*' })
  t.equal(set.status, 200)
  t.same(set.json.limits, { rpm: 2, tpm: null, budget_day: null, budget_month: 50, models: ['gpt-4o*'] })
  t.same((await s.tg.admin.listAccounts()).find((x) => x.id === a.accountId)?.limits,
    { rpm: 2, tpm: null, budgetDayUsd: null, budgetMonthUsd: 50, models: ['gpt-4o*'], maxBodyBytes: null }, 'stored')
  const other = await c.post('/api/ui/keys', { name: 'second key', scope: 'proxy' })
  t.equal((await proxyCall(s, other.json.key.key)).status, 200, 'the account\'s second call this minute, from another key')
  const third = await proxyCall(s, a.proxyKey)
  t.same([third.status, JSON.parse(third.text).error.code], [429, 'rate_limited'], 'the third is over the account\'s rpm')
  t.equal((await proxyCall(s, a.proxyKey, 'beta')).status, 403, 'claude is not on the account\'s list')
  for (const [body, param] of [[{ max_body_bytes: 10 }, 'max_body_bytes'], [{ rpm: 'x' }, 'rpm'], [{ name: 'x' }, 'name'], [{}, null]] as const) {
    const r = await c.post('/api/ui/account/limits', body)
    t.same([r.status, r.json.error.code, r.json.error.param], [400, 'invalid_parameter', param], JSON.stringify(body))
  }
  const lifted = await c.post('/api/ui/account/limits', { rpm: null, models: null })
  t.same(lifted.json.limits, { rpm: null, tpm: null, budget_day: null, budget_month: 50, models: null }, 'removed')
  t.equal((await proxyCall(s, a.proxyKey)).status, 200, 'lifted: it passes at once')
  t.same((await s.tg.admin.listAccounts()).find((x) => x.id === b.accountId)?.limits.rpm, null, 'another account is untouched')
})

t.test('a member may read the account\'s limits but not change them', async (t) => {
  await s.tg.admin.createUser({ account: a.accountId, email: 'member@acme.example', password: 'member-password', role: 'member' })
  const m = await signedIn('member@acme.example', 'member-password')
  const read = await m.get('/api/ui/account/limits')
  t.same([read.status, read.json.editable, read.json.limits.budget_month], [200, false, 50])
  const r = await m.post('/api/ui/account/limits', { budget_month: null })
  t.same([r.status, r.json.error.code], [403, 'not_allowed'])
  t.equal((await c.get('/api/ui/account/limits')).json.limits.budget_month, 50, 'unchanged')
  const removed = await c.post('/api/ui/account/limits', { budget_month: null })
  t.equal(removed.json.limits.budget_month, null, 'an admin removes it')
})
