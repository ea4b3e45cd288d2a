// Per-key limits on the proxy: each limit trips at its number and resets at its window (the
// limits' clock is the test's), the 429 headers the OpenAI SDK reads, budgets from the real costs of the
// mock provider's usage, allowlist patterns, the key's body limit, a key's and its account's limits both
// applying, limits changed while serving taking effect at the next call, refused calls traced as such and
// counted by the metrics, and the counts surviving a restart.
import t from 'tap'
import { rmSync } from 'node:fs'
import OpenAI from 'openai'
import { startMockProvider } from '../../src/mock-provider/index.js'
import { Tracegate } from '../../src/tracegate.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { json, send, type RawResponse } from '../helpers/http.js'
import { checkNativeError, NATIVE, priceOf } from '../helpers/native.js'
import { tempDir, testConfig } from '../helpers/server.js'
import { stored } from '../helpers/store.js'

const mock = await startMockProvider()
t.teardown(() => mock.close())
const dataDir = tempDir('tracegate-limits-proxy-')
t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })

// The limits' clock: the middle of a minute, moved on by the tests when a window must end.
let clock = Math.floor(Date.now() / 60_000) * 60_000 + 30_000
const now = (): number => clock
let tg = await Tracegate.start(testConfig(dataDir, mock), { bootstrap: false, testSeams: true, limitsClock: now })
t.teardown(() => tg.close())
let url = `http://127.0.0.1:${tg.proxyPort}`
const account = await tg.admin.createAccount({ name: 'limits', plan: 'pro' })

function call (key: string, fields: Record<string, unknown> = {}, provider: 'alpha' | 'beta' | 'gamma' = 'alpha'): Promise<RawResponse> {
  return send(url + ROUTES[provider], { body: JSON.stringify(bodyFor(provider, { api_key: key, ...fields })) })
}

/** Waits until the traces of these calls are built and stored, so their tokens and cost are counted. */
async function counted (ids: readonly string[]): Promise<void> {
  await tg.store.call('flushTraces')
  await stored(tg, account.id, ids)
}

t.test('rpm: the limit-th call passes, the next is 429 with the headers the SDKs read, and the next minute passes again', async (t) => {
  const key = await tg.admin.createKey({ account: account.id, scope: 'proxy', rpm: 3 })
  for (let i = 0; i < 3; i++) t.equal((await call(key.key)).status, 200, `call ${i + 1} of 3`)
  const upstream = mock.requests.length
  const r = await call(key.key)
  t.equal(mock.requests.length, upstream, 'the refused call reached nothing')
  t.equal(r.status, 429)
  const e = json(r).error
  t.match(e, { code: 'rate_limited', type: 'rate_limit_error' })
  t.match(e.message, /3 requests per minute/)
  const resetMs = Math.floor(clock / 60_000) * 60_000 + 60_000 - clock
  t.equal(r.headers['x-ratelimit-limit-requests'], '3')
  t.equal(r.headers['x-ratelimit-remaining-requests'], '0')
  t.equal(r.headers['x-ratelimit-reset-requests'], `${resetMs / 1000}s`)
  t.equal(r.headers['retry-after'], String(Math.ceil(resetMs / 1000)))
  t.equal(r.headers['retry-after-ms'], String(resetMs))
  t.notOk('x-ratelimit-limit-tokens' in r.headers, 'no tokens headers without a token limit')
  clock += resetMs
  t.equal((await call(key.key)).status, 200, 'a new minute')
  clock += 30_000
})

t.test('tpm: tokens from the provider\'s usage count once the trace is built; the minute after, calls pass', async (t) => {
  const key = await tg.admin.createKey({ account: account.id, scope: 'proxy', tpm: 5 })
  const first = await call(key.key)
  t.equal(first.status, 200)
  await counted([first.requestId])
  const used = tg.limiter.usage({ keyId: key.id }).minuteTokens
  t.ok(used >= 5, `the first call's tokens (${used}) use the limit up`)
  const r = await call(key.key)
  t.equal(r.status, 429)
  t.equal(json(r).error.code, 'rate_limited')
  t.equal(r.headers['x-ratelimit-limit-tokens'], '5')
  t.equal(r.headers['x-ratelimit-remaining-tokens'], '0')
  t.notOk('x-ratelimit-limit-requests' in r.headers)
  clock = Math.floor(clock / 60_000) * 60_000 + 60_000
  t.equal((await call(key.key)).status, 200)
  clock += 30_000
})

t.test('budgets: the day\'s and the month\'s, from the priced usage of real answers', async (t) => {
  const price = priceOf('alpha', 'gpt-4o-mini')
  t.ok(price.input_per_mtok > 0, 'the model is priced')
  for (const period of ['day', 'month'] as const) {
    const key = await tg.admin.createKey({ account: account.id, scope: 'proxy', [`budget_${period}`]: 0.000001 })
    const first = await call(key.key)
    t.equal(first.status, 200)
    await counted([first.requestId])
    const u = tg.limiter.usage({ keyId: key.id })
    const [row] = await tg.store.call('testQuery', { query: 'SELECT cost_usd FROM traces WHERE trace_id = {id:UUID}', params: { id: first.requestId } }) as Array<{ cost_usd: number }>
    t.ok(Math.abs(u.dayUsd - Number(row!.cost_usd)) < 1e-6, `the limiter counted the trace's cost (${row!.cost_usd})`)
    const r = await call(key.key)
    t.equal(r.status, 429, period)
    t.match(json(r).error, { code: 'budget_exceeded', period, limit_usd: 0.000001 })
    t.ok(Number(r.headers['retry-after']) >= 1, 'retry-after: when the period ends')
  }
  // A new UTC day: the day's budget is fresh, the month's is not (unless the month changed too).
  const dayKey = await tg.admin.createKey({ account: account.id, scope: 'proxy', budget_day: 0.000001 })
  const spent = await call(dayKey.key)
  await counted([spent.requestId])
  t.equal((await call(dayKey.key)).status, 429)
  const nextDay = Math.floor(clock / 86_400_000) * 86_400_000 + 86_400_000
  const saved = clock
  clock = nextDay + 30_000
  t.equal((await call(dayKey.key)).status, 200, 'the next day')
  clock = saved
})

t.test('allowlist: exact names and * patterns; 403 model_not_allowed with param model, on native routes in the provider\'s shape', async (t) => {
  const key = await tg.admin.createKey({ account: account.id, scope: 'proxy', models: 'gpt-4o*,claude-sonnet-4-5' })
  t.equal((await call(key.key, { model: 'gpt-4o-mini' })).status, 200, 'gpt-4o* takes gpt-4o-mini')
  t.equal((await call(key.key, {}, 'beta')).status, 200, 'the exact name')
  const before = mock.requests.length
  const r = await call(key.key, { model: 'gpt-4.1' })
  t.equal(r.status, 403)
  t.match(json(r).error, { code: 'model_not_allowed', param: 'model', type: 'permission_error' })
  t.equal((await call(key.key, {}, 'gamma')).status, 403, 'a gamma model is not on the list')
  const n = NATIVE.beta
  const native = await send(url + n.path, { body: n.body('hi'), headers: { ...n.sdkKey(key.key), 'x-tracegate-provider-key': 'sk-b' } })
  checkNativeError(t, 'beta', native, 'model_not_allowed', 'model')
  t.equal(mock.requests.length, before, 'nothing refused reached the provider')
})

t.test('the key\'s body limit: 413 past it, whatever the server-wide limit allows', async (t) => {
  const key = await tg.admin.createKey({ account: account.id, scope: 'proxy', max_body_bytes: 400 })
  t.equal((await call(key.key)).status, 200)
  const r = await send(url + ROUTES.alpha, { body: JSON.stringify(bodyFor('alpha', { api_key: key.key }, 'x'.repeat(500))) })
  t.equal(r.status, 413)
  t.equal(json(r).error.code, 'body_too_large')
  t.match(json(r).error.message, /400 bytes/)
})

t.test('a key\'s and its account\'s limits both apply; a change while serving applies at the next call', async (t) => {
  const other = await tg.admin.createAccount({ name: 'shared budget', plan: 'pro' })
  const a = await tg.admin.createKey({ account: other.id, scope: 'proxy', rpm: 100 })
  const b = await tg.admin.createKey({ account: other.id, scope: 'proxy' })
  await tg.admin.updateAccount({ id: other.id, rpm: 3 })
  t.equal((await call(a.key)).status, 200)
  t.equal((await call(b.key)).status, 200)
  t.equal((await call(a.key)).status, 200)
  const r = await call(b.key)
  t.equal(r.status, 429, 'the account\'s 3 per minute, over two keys')
  t.match(json(r).error.message, /account/)
  await tg.admin.updateAccount({ id: other.id, rpm: 'none' })
  t.equal((await call(b.key)).status, 200, 'removed: passes at once')
  await tg.admin.updateKey({ id: b.id, models: 'claude-*' })
  t.equal((await call(b.key)).status, 403, 'a key\'s new allowlist: at once')
})

t.test('a relayed call counts one request: refused by rpm and the key\'s body limit, never by tpm or budgets', async (t) => {
  const countTokens = (key: string, content = 'count me'): Promise<RawResponse> => send(`${url}/v1/messages/count_tokens`, {
    body: JSON.stringify({ model: 'claude-sonnet-4-6', messages: [{ role: 'user', content }] }),
    headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'x-tracegate-provider-key': 'sk-ant-relay' },
  })
  const storedResponse = (key: string): Promise<RawResponse> => send(`${url}/v1/responses/resp_0123456789abcdef`, {
    method: 'GET', headers: { authorization: `Bearer ${key}`, 'x-tracegate-provider-key': 'sk-relay' },
  })
  const key = await tg.admin.createKey({ account: account.id, scope: 'proxy', rpm: 3 })
  t.equal((await countTokens(key.key)).status, 200, 'first: token counting')
  t.equal((await storedResponse(key.key)).status, 200, 'second: reading a stored response')
  t.equal((await call(key.key)).status, 200, 'third: a chat call')
  t.equal(tg.limiter.usage({ keyId: key.id }).minuteRequests, 3, 'each counted one request')
  const upstream = mock.requests.length
  const counting = await countTokens(key.key)
  checkNativeError(t, 'beta', counting, 'rate_limited')
  t.match(json(counting).error.message, /3 requests per minute/)
  t.ok(Number(counting.headers['retry-after']) > 0, 'retry-after')
  checkNativeError(t, 'alpha', await storedResponse(key.key), 'rate_limited')
  t.equal((await call(key.key)).status, 429, 'and a chat call')
  t.equal(mock.requests.length, upstream, 'no refused call reached the provider')

  const spent = await tg.admin.createKey({ account: account.id, scope: 'proxy', tpm: 5, budget_day: 0.000001 })
  const first = await call(spent.key)
  t.equal(first.status, 200)
  await counted([first.requestId])
  t.equal((await call(spent.key)).status, 429, 'its tokens and spend used up, a generation is refused')
  t.equal((await countTokens(spent.key)).status, 200, 'a relayed call spends neither: it passes')
  t.equal((await storedResponse(spent.key)).status, 200)

  const small = await tg.admin.createKey({ account: account.id, scope: 'proxy', max_body_bytes: 200 })
  t.equal((await countTokens(small.key)).status, 200, 'under the key\'s body limit')
  const before = mock.requests.length
  checkNativeError(t, 'beta', await countTokens(small.key, 'x'.repeat(300)), 'body_too_large')
  t.equal(mock.requests.length, before, 'over it: never forwarded')
})

t.test('refused calls are traced as limited or rejected and counted by the metrics', async (t) => {
  const key = await tg.admin.createKey({ account: account.id, scope: 'proxy', rpm: 1 })
  const ok = await call(key.key)
  const limited = await call(key.key)
  t.equal(limited.status, 429)
  await counted([ok.requestId, limited.requestId])
  const rows = await tg.store.call('testQuery', { query: 'SELECT outcome, status, error_code FROM traces WHERE trace_id = {id:UUID}', params: { id: limited.requestId } })
  t.same(rows, [{ outcome: 'limited', status: 429, error_code: 'rate_limited' }])
  const text = await tg.metrics.render()
  t.match(text, /tracegate_requests_total\{[^}]*outcome="limited"[^}]*status_class="4xx"[^}]*\} [1-9]/)
  t.match(text, /tracegate_limits_mode\{mode="local"\} 1/)
})

t.test('the OpenAI SDK sees a RateLimitError with the headers', async (t) => {
  const key = await tg.admin.createKey({ account: account.id, scope: 'proxy', rpm: 1 })
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: key.key, defaultHeaders: { 'x-tracegate-provider-key': 'sk-sdk' }, maxRetries: 0 })
  await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
  const err = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e)
  t.ok(err instanceof OpenAI.RateLimitError, 'RateLimitError')
  const e = err as InstanceType<typeof OpenAI.RateLimitError>
  t.equal(e.status, 429)
  t.equal(e.headers.get('x-ratelimit-remaining-requests'), '0')
  t.ok(Number(e.headers.get('retry-after-ms')) > 0)
})

t.test('the counts survive a restart: the minute\'s admitted calls and the day\'s spend', async (t) => {
  // The stored traces carry real times: the clock goes back to the real one, clear of a minute's end.
  if (Date.now() % 60_000 > 50_000) await new Promise((resolve) => setTimeout(resolve, 61_000 - Date.now() % 60_000))
  clock = Date.now()
  const key = await tg.admin.createKey({ account: account.id, scope: 'proxy', rpm: 3, budget_day: 1000 })
  const ids: string[] = []
  for (let i = 0; i < 2; i++) ids.push((await call(key.key)).requestId)
  // A call refused before the limits count it: traced, not counted, before the restart or after.
  t.equal((await call(key.key, { model: 42 })).status, 422)
  await counted(ids)
  const spent = tg.limiter.usage({ keyId: key.id })
  t.equal(spent.minuteRequests, 2)
  await tg.close()
  tg = await Tracegate.start(testConfig(dataDir, mock), { bootstrap: false, testSeams: true, limitsClock: now })
  url = `http://127.0.0.1:${tg.proxyPort}`
  const u = tg.limiter.usage({ keyId: key.id })
  t.equal(u.minuteRequests, 2, 'the two calls of this minute')
  t.ok(u.dayUsd > 0 && Math.abs(u.dayUsd - spent.dayUsd) < 1e-6, 'the day\'s spend')
  t.equal((await call(key.key)).status, 200, 'the third')
  t.equal((await call(key.key)).status, 429, 'the fourth')
})
