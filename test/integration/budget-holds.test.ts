// Budgets that hold, through the real proxy and the mock provider: the models a budget could not count
// before are priced and charged, a model with no price is refused under a budget (and only there), and
// 300 parallel calls against a budget with no room left pass at most one at a time: each call in flight
// holds its estimate until its trace is built. (With front threads: budget-holds-threads.test.ts.)
import t from 'tap'
import { bodyFor, type Provider } from '../helpers/bodies.js'
import { burst, call, costOf, mock, start } from '../helpers/budgets.js'
import { json, send } from '../helpers/http.js'
import { checkNativeError, NATIVE } from '../helpers/native.js'

const s = await start(t)

t.test('the models a tiny budget let through unpriced are now charged, and the budget stops the next call', async (t) => {
  const models: ReadonlyArray<readonly [Provider, string]> = [
    ['beta', 'claude-opus-4-20250514'], ['beta', 'claude-sonnet-4-20250514'], ['alpha', 'gpt-4'], ['alpha', 'gpt-4-32k'], ['alpha', 'o1-pro'],
  ]
  for (const [provider, model] of models) {
    const key = await s.tg.admin.createKey({ account: s.accountId, scope: 'proxy', budget_day: 0.000001 })
    const first = await call(s.url, key.key, provider, { model })
    t.equal(first.status, 200, `${model}: the first call passes`)
    const row = await costOf(s.tg, s.accountId, first.requestId)
    t.equal(row.cost_status, 'priced', `${model} is priced`)
    t.ok(row.cost_usd !== null && row.cost_usd > 0, `${model} costs ${row.cost_usd} USD`)
    t.ok(s.tg.limiter.usage({ keyId: key.id }).dayUsd > 0, `${model}: the key's day counts the cost`)
    const next = await call(s.url, key.key, provider, { model })
    t.equal(next.status, 429, `${model}: the next call is refused`)
    t.equal(json(next).error.code, 'budget_exceeded')
  }
})

t.test('a model with no price: refused under a budget (key or account), served without one', async (t) => {
  const unpriced = 'mock-unknown-model-xyz'
  const key = await s.tg.admin.createKey({ account: s.accountId, scope: 'proxy', budget_month: 100 })
  const before = mock.requests.length
  const r = await call(s.url, key.key, 'alpha', { model: unpriced })
  t.equal(r.status, 403)
  t.match(json(r).error, { code: 'model_not_priced', param: 'model', type: 'permission_error' })
  const native = NATIVE.alpha
  const viaSdkRoute = await send(s.url + native.path, { body: JSON.stringify({ model: unpriced, messages: [{ role: 'user', content: 'hi' }] }), headers: { ...native.sdkKey(key.key), 'x-tracegate-provider-key': 'sk-a' } })
  checkNativeError(t, 'alpha', viaSdkRoute, 'model_not_priced', 'model')
  t.equal(mock.requests.length, before, 'nothing refused reached the provider')

  const other = await s.tg.admin.createAccount({ name: 'account budget', plan: 'pro' })
  await s.tg.admin.updateAccount({ id: other.id, budget_day: 5 })
  const underAccount = await s.tg.admin.createKey({ account: other.id, scope: 'proxy' })
  t.equal((await call(s.url, underAccount.key, 'alpha', { model: unpriced })).status, 403, 'the account\'s budget refuses it too')

  const free = await s.tg.admin.createKey({ account: s.accountId, scope: 'proxy', rpm: 1000 })
  const served = await call(s.url, free.key, 'alpha', { model: unpriced })
  t.equal(served.status, 200, 'no budget: served, its cost unknown')
  t.equal((await costOf(s.tg, s.accountId, served.requestId)).cost_status, 'unknown_model')
})

t.test('300 parallel calls against a spent budget: at most one passes', async (t) => {
  await burst(t, s, 'one thread')
})

t.test('a hold that fits: calls pass while what they hold and what is spent stay under the budget', async (t) => {
  // gpt-4o-mini at 0.15 USD in and 0.6 USD out per million: a ~250-byte body with max_tokens 16 holds about
  // 47 micro-dollars, so a budget of 200 micro-dollars lets 4 to 5 calls be in flight at once, not 300.
  const key = await s.tg.admin.createKey({ account: s.accountId, scope: 'proxy', budget_day: 0.0002 })
  const answers = await Promise.all(Array.from({ length: 300 }, () => call(s.url, key.key, 'alpha', { max_tokens: 16 })))
  const passed = answers.filter((r) => r.status === 200)
  t.same([...new Set(answers.map((r) => r.status))].filter((x) => x !== 200 && x !== 429), [], 'every call answered 200 or 429: ' + JSON.stringify(answers.filter((r) => r.status !== 200 && r.status !== 429).slice(0, 2).map((r) => r.body.toString())))
  const body = Buffer.byteLength(JSON.stringify(bodyFor('alpha', { api_key: key.key, max_tokens: 16 })))
  const hold = (body * 0.15 + 16 * 0.6) / 1e6
  t.ok(passed.length >= 1 && passed.length <= Math.ceil(0.0002 / hold), `${passed.length} passed, at most ${Math.ceil(0.0002 / hold)} holds of ${hold} USD fit`)
  let spent = 0
  for (const r of passed) spent += (await costOf(s.tg, s.accountId, r.requestId)).cost_usd ?? 0
  t.ok(spent <= 0.0002 + hold, `spent ${spent} USD: at most the budget plus one call's hold`)
})
