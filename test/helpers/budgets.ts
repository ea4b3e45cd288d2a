// Budget tests' parts: a tracegate on the shared mock provider, calls on the contract routes, a trace's
// stored cost, and a burst of 300 parallel calls against a budget with no room left.
import { rmSync } from 'node:fs'
import type { Test } from 'tap'
import { startMockProvider } from '../../src/mock-provider/index.js'
import { Tracegate } from '../../src/tracegate.js'
import { bodyFor, ROUTES, type Provider } from './bodies.js'
import { json, send, type RawResponse } from './http.js'
import { tempDir, testConfig } from './server.js'
import { stored } from './store.js'
import { until } from './wait.js'

export const mock = await startMockProvider()

export interface Started { readonly tg: Tracegate; readonly url: string; readonly accountId: string }

export async function start (t: Test, env: Record<string, string> = {}): Promise<Started> {
  t.teardown(() => mock.close())
  const dataDir = tempDir('tracegate-budget-holds-')
  t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })
  // Detection is not what these tests look at: off, so a loaded machine's detection deadline refuses nothing.
  const tg = await Tracegate.start(testConfig(dataDir, mock, { TRACEGATE_DETECTION: 'off', ...env }), { bootstrap: false, testSeams: true })
  t.teardown(() => tg.close())
  const account = await tg.admin.createAccount({ name: 'budgets', plan: 'pro' })
  return { tg, url: `http://127.0.0.1:${tg.proxyPort}`, accountId: account.id }
}

export function call (url: string, key: string, provider: Provider, fields: Record<string, unknown> = {}): Promise<RawResponse> {
  return send(url + ROUTES[provider], { body: JSON.stringify(bodyFor(provider, { api_key: key, ...fields })) })
}

export async function costOf (tg: Tracegate, accountId: string, id: string): Promise<{ cost_usd: number | null; cost_status: string }> {
  await stored(tg, accountId, [id])
  const [row] = await tg.store.call('testQuery', { query: 'SELECT cost_usd, cost_status FROM traces WHERE trace_id = {id:UUID}', params: { id } }) as Array<{ cost_usd: number | null; cost_status: string }>
  return row!
}

/** 300 calls at once on a key whose budget has no room for more than one call's hold. */
export async function burst (t: Test, target: Started, what: string): Promise<void> {
  const key = await target.tg.admin.createKey({ account: target.accountId, scope: 'proxy', budget_day: 0.000001 })
  const upstream = mock.requests.length
  const answers = await Promise.all(Array.from({ length: 300 }, () => call(target.url, key.key, 'alpha', { max_tokens: 16 })))
  const passed = answers.filter((r) => r.status === 200)
  const refused = answers.filter((r) => r.status === 429)
  t.same([...new Set(answers.map((r) => r.status))].filter((x) => x !== 200 && x !== 429), [], `${what}: every call answered 200 or 429 ` + JSON.stringify(answers.filter((r) => r.status !== 200 && r.status !== 429).slice(0, 2).map((r) => [r.status, r.body.toString()])))
  t.equal(passed.length, 1, `${what}: one call passes (the documented bound: the first call's hold fills the budget)`)
  t.ok(refused.every((r) => json(r).error.code === 'budget_exceeded'), `${what}: the others are budget_exceeded`)
  t.equal(mock.requests.length - upstream, passed.length, `${what}: only the calls let through reached the provider`)
  // Settled: once the trace is built the hold ends and the real cost counts; the budget stays spent.
  await costOf(target.tg, target.accountId, passed[0]!.requestId)
  t.equal(target.tg.limiter.holding, 0, `${what}: no hold is left once the traces are built`)
  // With front threads the calls judged on the request board hold there: let go once the main thread has the report.
  await until(() => target.tg.limiter.held({ keyId: key.id }).usd === 0 && target.tg.limiter.held({ accountId: target.accountId }).usd === 0, { ms: 5_000, what: `${what}: the holds on the board let go` })
  t.equal((await call(target.url, key.key, 'alpha')).status, 429, `${what}: still spent after settling`)
}
