// The usage page's drill-down through the real server: calls sent through the proxy
// with the caller's labels, then the usage answer narrowed to a key, to a user and to both, the busiest
// users by calls and by cost, and time to first token, all checked against the stored rows. Another
// account's calls with the same user label are never counted; a window without calls counts none; bad
// parameters are 400 invalid_parameter naming the parameter.
import t from 'tap'
import { bodyFor, type Provider, ROUTES } from '../helpers/bodies.js'
import { startDashboard, type Tenant, type UiClient, signedIn as signIn } from '../helpers/dashboard.js'
import { send } from '../helpers/http.js'
import { stored } from '../helpers/store.js'

const s = await startDashboard(t, { TRACEGATE_TRACE_FLUSH_MS: '50' }, { testSeams: true })
const a = await s.tenant('acme')
const b = await s.tenant('globex')
const a2 = await s.tg.admin.createKey({ account: a.accountId, scope: 'proxy', name: 'acme second' })
const readA = await s.tg.admin.createKey({ account: a.accountId, scope: 'read' })

interface Sent { readonly traceId: string; readonly status: number }

async function call (key: string, o: { user?: string; provider?: Provider; model?: string; stream?: boolean } = {}): Promise<Sent> {
  const provider = o.provider ?? 'alpha'
  const fields: Record<string, unknown> = { api_key: key }
  if (o.model !== undefined) fields.model = o.model
  if (o.stream === true) fields.stream = true
  const headers: Record<string, string> = {}
  if (o.user !== undefined) headers['x-tracegate-user'] = o.user
  const r = await send(s.url + ROUTES[provider], { body: JSON.stringify(bodyFor(provider, fields)), headers })
  return { traceId: String(r.headers['x-request-id']), status: r.status }
}

const signedIn = (tenant: Tenant): Promise<UiClient> => signIn(s, tenant)

// Account A: alice on the first key (3 plain calls, 2 streamed with a first token after 60 and 120 ms),
// bob on the second key (1 call and 1 the provider fails), and 1 call without a user label.
// Account B: alice too (the same label), 2 calls.
const sentA: Sent[] = []
const alice: Sent[] = []
for (let i = 0; i < 3; i++) alice.push(await call(a.proxyKey, { user: 'alice' }))
alice.push(await call(a.proxyKey, { user: 'alice', stream: true, model: 'gpt-4o-mini-ttft-60' }))
alice.push(await call(a.proxyKey, { user: 'alice', stream: true, model: 'gpt-4o-mini-ttft-120' }))
const bob = [await call(a2.key, { user: 'bob', provider: 'beta' }), await call(a2.key, { user: 'bob', model: 'gpt-4o-mini-error-500' })]
const nobody = [await call(a.proxyKey)]
sentA.push(...alice, ...bob, ...nobody)
const sentB = [await call(b.proxyKey, { user: 'alice' }), await call(b.proxyKey, { user: 'alice', stream: true, model: 'gpt-4o-mini-ttft-300' })]
await stored(s.tg, a.accountId, sentA.map((x) => x.traceId))
await stored(s.tg, b.accountId, sentB.map((x) => x.traceId))

const ca = await signedIn(a)
const cb = await signedIn(b)

interface Row { trace_id: string; user: string; key_id: string; cost: number; ttfb_ms: number | null; streaming: boolean; status: number; outcome: string }
const rows = (await s.tg.store.call('testQuery', {
  query: `SELECT toString(trace_id) AS trace_id, user, toString(key_id) AS key_id, ifNull(cost_usd, 0) AS cost, ttfb_ms, streaming, status, outcome
    FROM traces WHERE account_id = {a:UUID}`,
  params: { a: a.accountId },
})) as unknown as Row[]
const sum = (xs: readonly Row[], f: (r: Row) => number): number => xs.reduce((n, r) => n + f(r), 0)
const close = (x: number, y: number): boolean => Math.abs(x - y) < 1e-9

t.test('the calls were answered as the test expects', async (t) => {
  t.same(sentA.map((x) => x.status), [200, 200, 200, 200, 200, 200, 500, 200])
  t.same(sentB.map((x) => x.status), [200, 200])
  t.equal(rows.length, sentA.length, 'account A holds its calls only')
})

t.test('the whole account: TTFT of its streamed calls and its users', async (t) => {
  const r = await ca.get('/api/ui/usage?range=hour')
  t.equal(r.status, 200)
  const u = r.json
  t.equal(u.totals.requests, sentA.length)
  t.equal(u.totals.errors, 1, "bob's failed call")
  t.equal(u.totals.users, 3, "alice, bob and the calls without a user ('')")
  const streams = rows.filter((x) => x.streaming && x.status === 200)
  t.equal(streams.length, 2)
  t.equal(u.totals.streams, 2, 'two streamed calls measured')
  const ttfbs = streams.map((x) => Number(x.ttfb_ms)).sort((p, q) => p - q)
  t.ok(ttfbs[0]! >= 60 && ttfbs[1]! >= 120, `the mock's delays are in the stored times (${ttfbs})`)
  for (const k of ['ttft_p50_ms', 'ttft_p95_ms', 'ttft_p99_ms']) {
    t.ok(u.totals[k] >= ttfbs[0]! - 0.01 && u.totals[k] <= ttfbs[1]! + 0.01, `${k} ${u.totals[k]} within the stored ${ttfbs}`)
  }
  t.ok(u.totals.ttft_p50_ms <= u.totals.ttft_p95_ms && u.totals.ttft_p95_ms <= u.totals.ttft_p99_ms, 'percentiles in order')
  t.ok(u.totals.latency_p99_ms !== null, 'latency p99 from the rollup')
  t.equal(u.series.reduce((n: number, p: any) => n + p.streams, 0), 2, 'the series holds the streamed calls in its buckets')
  const busy = u.series.filter((p: any) => p.streams > 0)
  for (const p of busy) t.ok(p.ttft_p50_ms !== null, `bucket ${p.t} has a TTFT`)
  for (const p of u.series.filter((p: any) => p.streams === 0)) {
    if (p.ttft_p50_ms !== null) t.fail(`bucket ${p.t} without streams has no TTFT`)
  }
  t.same(u.filter, { key: null, user: null })
  t.equal(u.users_by, 'requests')
  const byUser = Object.fromEntries(u.by_user.map((g: any) => [g.group, g]))
  t.same(u.by_user.map((g: any) => g.group), ['alice', 'bob', ''], 'busiest first')
  t.equal(byUser.alice.requests, 5, "B's alice is not counted")
  t.equal(byUser.bob.requests, 2)
  t.equal(byUser.bob.errors, 1)
  t.equal(byUser[''].requests, 1)
  for (const name of ['alice', 'bob', '']) {
    const want = sum(rows.filter((x) => x.user === name), (x) => x.cost)
    t.ok(close(byUser[name].cost_usd, want), `${name || "''"}: cost ${byUser[name].cost_usd} = stored ${want}`)
  }
  t.equal(sum(u.by_user, (g: any) => g.requests), u.totals.requests, 'the users add up to the total')
})

t.test('users by cost', async (t) => {
  const r = await ca.get('/api/ui/usage?range=hour&users_by=cost')
  t.equal(r.status, 200)
  t.equal(r.json.users_by, 'cost')
  const costs = r.json.by_user.map((g: any) => g.cost_usd)
  t.same(costs, [...costs].sort((x: number, y: number) => y - x), 'most expensive first')
  t.ok(costs[0] > 0, 'priced calls')
})

t.test('drill-down to one user: every part of the answer is that user only, of this account only', async (t) => {
  const r = await ca.get('/api/ui/usage?range=hour&user=alice')
  t.equal(r.status, 200)
  const u = r.json
  t.same(u.filter, { key: null, user: 'alice' })
  t.equal(u.totals.requests, 5, "5 of A's calls; B's alice not included")
  t.equal(u.totals.streams, 2)
  t.equal(u.series.reduce((n: number, p: any) => n + p.requests, 0), 5, 'the series adds up')
  t.same(u.by_key.map((g: any) => [g.group, g.requests, g.name]), [[a.proxyKeyId, 5, 'acme proxy']], 'one key, named')
  t.same(u.by_provider.map((g: any) => [g.group, g.requests]), [['alpha', 5]])
  t.same(u.by_user.map((g: any) => [g.group, g.requests]), [['alice', 5]])
  const want = sum(rows.filter((x) => x.user === 'alice'), (x) => x.cost)
  t.ok(close(u.totals.cost_usd, want), `cost ${u.totals.cost_usd} = stored ${want}`)
  t.ok(u.totals.latency_p50_ms > 0 && u.totals.latency_p99_ms >= u.totals.latency_p50_ms, 'latency from the traces')

  const other = await cb.get('/api/ui/usage?range=hour&user=alice')
  t.equal(other.json.totals.requests, 2, "B's alice: B's 2 calls")
  t.equal(other.json.totals.streams, 1)
  t.ok(other.json.totals.ttft_p50_ms >= 300, "B's stream, not A's")
})

t.test('drill-down to one key, and to a key and a user', async (t) => {
  const r = await ca.get(`/api/ui/usage?range=hour&key=${a2.id}`)
  t.equal(r.status, 200)
  t.same(r.json.filter, { key: a2.id, user: null })
  t.equal(r.json.totals.requests, 2)
  t.equal(r.json.totals.errors, 1)
  t.same(r.json.by_key.map((g: any) => g.group), [a2.id])
  t.same(r.json.by_user.map((g: any) => [g.group, g.requests]), [['bob', 2]])
  t.same(r.json.by_provider.map((g: any) => [g.group, g.requests]).sort(), [['alpha', 1], ['beta', 1]])
  t.equal(r.json.totals.streams, 0)
  t.equal(r.json.totals.ttft_p50_ms, null, 'no streamed call: no TTFT')

  const both = await ca.get(`/api/ui/usage?range=hour&key=${a2.id}&user=alice`)
  t.equal(both.json.totals.requests, 0, 'alice never used the second key')
  t.same(both.json.by_user, [])
  // Another account's key answers nothing, as an unknown one does.
  const foreign = await ca.get(`/api/ui/usage?range=hour&key=${b.proxyKeyId}`)
  t.equal(foreign.status, 200)
  t.equal(foreign.json.totals.requests, 0)
  t.same(foreign.json.by_user, [])
})

t.test('the window bounds every part: an hour before the calls counts none', async (t) => {
  const now = Date.now()
  const r = await ca.get(`/api/ui/usage?from=${now - 3 * 3_600_000}&to=${now - 2 * 3_600_000}`)
  t.equal(r.status, 200)
  t.equal(r.json.totals.requests, 0)
  t.equal(r.json.totals.streams, 0)
  t.equal(r.json.totals.users, 0)
  t.same(r.json.by_user, [])
  const from = now - 3 * 3_600_000
  const to = now - 2 * 3_600_000
  const user = await ca.get(`/api/ui/usage?from=${from}&to=${to}&user=alice`)
  t.equal(user.json.totals.requests, 0)
  t.equal(user.json.series.length, Math.ceil(to / 60_000) - Math.floor(from / 60_000), 'a point in every minute')
  t.ok(user.json.series.every((p: any) => p.requests === 0 && p.ttft_p50_ms === null))
})

t.test('the read API answers the same drill-down', async (t) => {
  const r = await fetch(`${s.dashboard}/api/v1/usage?range=hour&user=alice`, { headers: { authorization: `Bearer ${readA.key}` } })
  t.equal(r.status, 200)
  const u = await r.json() as any
  t.equal(u.totals.requests, 5)
  t.same(u.by_user.map((g: any) => g.group), ['alice'])
})

t.test('bad parameters are 400 invalid_parameter naming the parameter', async (t) => {
  for (const [q, param] of [
    ['key=nope', 'key'], ['user=' + 'u'.repeat(257), 'user'], ['users_by=tokens', 'users_by'], ['range=year', 'range'],
  ] as const) {
    const r = await ca.get(`/api/ui/usage?${q}`)
    t.equal(r.status, 400, q.slice(0, 30))
    t.equal(r.json.error.code, 'invalid_parameter')
    t.equal(r.json.error.param, param)
  }
  t.equal((await ca.get(`/api/ui/usage?user=${'😀'.repeat(256)}`)).status, 200, 'a user label at its limit is taken')
  const anon = await s.client().get('/api/ui/usage?user=alice')
  t.equal(anon.status, 401)
  t.equal(anon.json.error.code, 'unauthenticated')
})
