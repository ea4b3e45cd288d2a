// The read API: Bearer read-scope keys through the proxy's key cache; 401 with the matching
// code for no key, a malformed, unknown, proxy-scope, revoked or expired key; another account's trace is
// 404; the list pages like the UI's; usage totals equal the requests sent.
import t from 'tap'
import { sleep } from '../helpers/wait.js'
import { stored } from '../helpers/store.js'
import { allPages, type Answer, ISO_UTC, proxyCall, startDashboard, type Tenant } from '../helpers/dashboard.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { send } from '../helpers/http.js'
import { request } from 'undici'
import type { ProviderName } from '../../src/providers/index.js'

const s = await startDashboard(t, {}, { testSeams: true })
const a = await s.tenant('acme')
const b = await s.tenant('globex')
const readA = await s.tg.admin.createKey({ account: a.accountId, scope: 'read', name: 'analytics' })
const readB = await s.tg.admin.createKey({ account: b.accountId, scope: 'read', name: 'analytics' })

async function api (path: string, auth: string | null, headers: Record<string, string> = {}): Promise<Answer> {
  const r = await request(s.dashboard + path, {
    headers: { ...headers, ...(auth === null ? {} : { authorization: auth }) },
    dispatcher: s.dispatcher,
  })
  const text = await r.body.text()
  return { status: r.statusCode, headers: r.headers, text, json: JSON.parse(text) }
}

async function calls (x: Tenant, n: number, provider: ProviderName = 'alpha'): Promise<string[]> {
  const ids: string[] = []
  for (let i = 0; i < n; i++) ids.push((await proxyCall(s, x.proxyKey, provider)).traceId)
  await stored(s.tg, x.accountId, ids)
  return ids
}

const sentA = [...await calls(a, 4), ...await calls(a, 3, 'beta')]
const sentB = await calls(b, 2, 'gamma')

t.test('401 with the code that says what is wrong with the key', async (t) => {
  const expiring = await s.tg.admin.createKey({ account: a.accountId, scope: 'read', expiresIn: '1s' })
  const revoked = await s.tg.admin.createKey({ account: a.accountId, scope: 'read' })
  await s.tg.admin.revokeKey({ id: revoked.id })
  await sleep(1_100)
  const cases: Array<[string, string | null, string]> = [
    ['no header', null, 'unauthorized'],
    ['another scheme', `Basic ${Buffer.from(`x:${readA.key}`).toString('base64')}`, 'unauthorized'],
    ['malformed key', 'Bearer tgk_short', 'invalid_api_key'],
    ['unknown key', `Bearer tgk_${'A'.repeat(43)}`, 'invalid_api_key'],
    ['proxy-scope key', `Bearer ${a.proxyKey}`, 'wrong_key_scope'],
    ['revoked key', `Bearer ${revoked.key}`, 'revoked_api_key'],
    ['expired key', `Bearer ${expiring.key}`, 'expired_api_key'],
  ]
  for (const path of ['/api/v1/traces', `/api/v1/traces/${sentA[0]}`, '/api/v1/usage']) {
    for (const [what, auth, code] of cases) {
      const r = await api(path, auth)
      t.same([r.status, r.json.error.code], [401, code], `${path}: ${what}`)
      t.match(r.headers['www-authenticate'], /^Bearer/)
      t.notOk(r.text.includes('tgk_'), 'no key echoed')
    }
  }
  // A signed-in browser's cookie is not a read key.
  const c = s.client()
  await c.signIn(a.email, a.password)
  t.equal((await api('/api/v1/traces', null, { cookie: c.cookie! })).json.error.code, 'unauthorized')
  const ok = await api('/api/v1/traces', `Bearer ${readA.key}`)
  t.equal(ok.status, 200, 'a read key')
  t.match(ok.headers['content-security-policy'], /default-src 'self'/)
})

t.test('each account reads its own traces only', async (t) => {
  const listA = (await api('/api/v1/traces?limit=200', `Bearer ${readA.key}`)).json
  const listB = (await api('/api/v1/traces?limit=200', `Bearer ${readB.key}`)).json
  t.same(listA.traces.map((x: any) => x.trace_id).sort(), [...sentA].sort())
  t.same(listB.traces.map((x: any) => x.trace_id).sort(), [...sentB].sort())
  t.equal(listA.next_cursor, null)
  t.match(listA.traces[0], { account_id: a.accountId, blocked: false, provider: /^(alpha|beta)$/ })
  const own = await api(`/api/v1/traces/${sentA[0]}`, `Bearer ${readA.key}`)
  t.equal(own.status, 200)
  t.match(own.json, { trace_id: sentA[0], account_id: a.accountId, outcome: 'ok', prompt: /"model"/, blocked: false })
  const foreign = await api(`/api/v1/traces/${sentB[0]}`, `Bearer ${readA.key}`)
  t.same([foreign.status, foreign.json.error.code], [404, 'trace_not_found'], "another account's trace does not exist")
  t.same((await api(`/api/v1/traces/${sentA[0]}`, `Bearer ${readB.key}`)).status, 404)
})

t.test('filters and keyset pages as the UI list', async (t) => {
  const { ids, pages } = await allPages((c) => api(`/api/v1/traces?limit=2${c === null ? '' : `&cursor=${c}`}`, `Bearer ${readA.key}`))
  t.equal(pages, 4)
  t.same(ids, [...sentA].reverse(), 'every trace once, newest first')
  const beta = (await api('/api/v1/traces?provider=beta', `Bearer ${readA.key}`)).json.traces
  t.equal(beta.length, 3)
  const bad = await api('/api/v1/traces?limit=1000', `Bearer ${readA.key}`)
  t.same([bad.status, bad.json.error.code, bad.json.error.param], [400, 'invalid_parameter', 'limit'])
})

t.test('usage totals equal the requests sent', async (t) => {
  const u = (await api('/api/v1/usage?range=day', `Bearer ${readA.key}`)).json
  const details = await Promise.all(sentA.map(async (id) => (await api(`/api/v1/traces/${id}`, `Bearer ${readA.key}`)).json))
  t.equal(u.totals.requests, sentA.length)
  t.equal(u.totals.input_tokens, details.reduce((n, d) => n + d.input_tokens, 0))
  t.equal(u.totals.output_tokens, details.reduce((n, d) => n + d.output_tokens, 0))
  t.ok(Math.abs(u.totals.cost_usd - details.reduce((n, d) => n + (d.cost_usd ?? 0), 0)) < 1e-9, 'cost')
  t.equal(u.bucket, 'hour')
  t.equal(u.series.reduce((n: number, p: any) => n + p.requests, 0), sentA.length)
  t.same(u.by_provider.map((p: any) => [p.group, p.requests]).sort(), [['alpha', 4], ['beta', 3]])
  t.match(u.by_key, [{ group: a.proxyKeyId, name: 'acme proxy', requests: sentA.length }])
  const custom = (await api(`/api/v1/usage?from=${Date.now() - 3_600_000}&bucket=minute`, `Bearer ${readA.key}`)).json
  t.equal(custom.totals.requests, sentA.length)
  t.equal(custom.bucket, 'minute')
  t.equal((await api('/api/v1/usage?range=hour', `Bearer ${readB.key}`)).json.totals.requests, sentB.length)
})

t.test('a read key revoked in the dashboard is refused at once', async (t) => {
  const key = await s.tg.admin.createKey({ account: a.accountId, scope: 'read' })
  t.equal((await api('/api/v1/usage', `Bearer ${key.key}`)).status, 200, 'cached as valid')
  const c = s.client()
  await c.signIn(a.email, a.password)
  t.equal((await c.post(`/api/ui/keys/${key.id}/revoke`)).status, 200)
  t.equal((await api('/api/v1/usage', `Bearer ${key.key}`)).json.error.code, 'revoked_api_key')
})

t.test('every time it answers is ISO 8601 in UTC with its zone', async (t) => {
  const auth = `Bearer ${readA.key}`
  const session = 'zoned-times'
  const r = await send(s.url + ROUTES.alpha, { body: JSON.stringify(bodyFor('alpha', { api_key: a.proxyKey })), headers: { 'x-tracegate-session': session } })
  t.equal(r.status, 200)
  const id = String(r.headers['x-request-id'])
  await stored(s.tg, a.accountId, [id])

  const listed = (await api('/api/v1/traces?limit=200', auth)).json.traces as any[]
  t.ok(listed.length > 0 && listed.every((x) => ISO_UTC.test(x.time)), `the list's times (${String(listed[0]?.time)})`)
  const one = (await api(`/api/v1/traces/${id}`, auth)).json
  t.match(one.time, ISO_UTC, 'a trace\'s time')
  t.equal(one.time, listed.find((x) => x.trace_id === id)?.time, 'the same instant in the list and the detail')
  t.ok(Math.abs(Date.parse(one.time) - Date.now()) < 10 * 60_000, `and it is now, read as UTC (${String(one.time)})`)
  t.match(one.detection, { ran: true, threshold: Number }, 'detection judged it')
  t.ok(/^\d(\.\d{1,4})?$/.test(String(one.detection?.threshold)), `its threshold rounded to 4 decimals (${String(one.detection?.threshold)})`)
  const series = (await api('/api/v1/usage?range=day', auth)).json.series as any[]
  t.ok(series.length > 0 && series.every((p) => ISO_UTC.test(p.t) && Date.parse(p.t) === p.ts), `the usage series' times, the same instant as ts (${String(series[0]?.t)})`)
  const sessions = (await api('/api/v1/sessions', auth)).json.sessions as any[]
  const mine = sessions.find((x) => x.session === session)
  t.match(mine, { first_time: ISO_UTC, last_time: ISO_UTC }, 'a session\'s first and last call')
  const calls = (await api(`/api/v1/sessions/${session}`, auth)).json
  t.match(calls.totals, { first_time: ISO_UTC, last_time: ISO_UTC }, 'a session\'s totals')
  t.match(calls.calls[0], { trace_id: id, time: one.time }, 'a session\'s calls')
})
