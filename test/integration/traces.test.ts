// Traces: every call past authentication leaves a row in ClickHouse with its ids,
// outcome, bodies (capped, never a key, nothing when confidential), tokens with their source, timings
// and cost; the usage rollups agree with the raw rows; a trace is queryable within seconds.
//
// One tracegate for the file (chDB: one data directory per process) in front of the real mock provider,
// with an operator pricing file written here, a 4096-byte body cap, a short upstream headers timeout (so
// `mock-hang` times out in a second), and gamma behind a TCP relay the outcome test takes down to make
// that provider unreachable (connection refused). Runs for every registered provider, the test provider
// delta included (test-providers.ts).
import '../fixtures/providers/test-providers.js'
import t, { type Test } from 'tap'
import { repoFile } from '../../src/paths.js'
import { randomUUID } from 'node:crypto'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { startServer, tempDir } from '../helpers/server.js'
import { send, type RawResponse, UUID_V7 } from '../helpers/http.js'
import { type BodyOptions, buildBody, DEFAULT_MODELS, type Provider, ROUTES } from '../helpers/bodies.js'
import { sleep } from '../helpers/wait.js'
import { storedTrace } from '../helpers/store.js'
import { Relay } from '../helpers/raw-call.js'
import { chEpochMs, clientText, clientUsage, expectedCost, type Price, quantile } from '../helpers/traces.js'
import { Pricing } from '../../src/pricing/index.js'
import { PROVIDERS } from '../../src/providers/index.js'
import { OTHER_PROVIDERS } from '../helpers/native.js'
import type { TraceRow } from '../../src/store/trace-types.js'
import type { UsageMeasures } from '../../src/store/trace-types.js'

const MAX_BODY = 4096

// The operator's prices: gpt-4o-mini as published, and entries that differ from the library's prices
// (gpt-4o, claude-sonnet-4-5, gemini-2.5-flash) so a cost shows which table won; tg-per-million at 1 USD
// in and 2 USD out for the per-million check.
interface PriceRow extends Price { readonly provider: Provider; readonly model: string; readonly as_of: string }
const OPERATOR_PRICES: readonly PriceRow[] = [
  { provider: 'alpha', model: 'gpt-4o-mini', input_per_mtok: 0.15, cached_input_per_mtok: 0.075, output_per_mtok: 0.6, as_of: '2025-01-01' },
  { provider: 'alpha', model: 'gpt-4o', input_per_mtok: 3, cached_input_per_mtok: 1.5, output_per_mtok: 12, as_of: '2025-01-01' },
  { provider: 'alpha', model: 'tg-per-million', input_per_mtok: 1, cached_input_per_mtok: null, output_per_mtok: 2, as_of: '2025-01-01' },
  { provider: 'beta', model: 'claude-sonnet-4-5', input_per_mtok: 4, cached_input_per_mtok: 0.5, output_per_mtok: 20, as_of: '2025-01-01' },
  { provider: 'gamma', model: 'gemini-2.5-flash', input_per_mtok: 1, cached_input_per_mtok: 0.25, output_per_mtok: 4, as_of: '2025-01-01' },
  // The mock's directive names (`-chunks-2000`) are no model the library knows: the operator prices them as their base.
  { provider: 'alpha', model: 'gpt-4o-mini-chunks-2000', input_per_mtok: 0.15, cached_input_per_mtok: 0.075, output_per_mtok: 0.6, as_of: '2025-01-01' },
  { provider: 'gamma', model: 'gemini-2.5-flash-chunks-2000', input_per_mtok: 1, cached_input_per_mtok: 0.25, output_per_mtok: 4, as_of: '2025-01-01' },
  // A test provider's models, which no library prices.
  ...OTHER_PROVIDERS.flatMap((p) => [DEFAULT_MODELS[p], `${DEFAULT_MODELS[p]}-chunks-2000`].map((model) => (
    { provider: p, model, input_per_mtok: 2, cached_input_per_mtok: 0.5, output_per_mtok: 6, as_of: '2025-01-01' }))),
]
// Published prices (USD per million tokens) of models the operator's file does not name, priced by the library.
const PUBLISHED: Readonly<Record<string, Price>> = {
  'gpt-4.1': { input_per_mtok: 2, cached_input_per_mtok: 0.5, output_per_mtok: 8 },
  'gpt-4o': { input_per_mtok: 2.5, cached_input_per_mtok: 1.25, output_per_mtok: 10 },
}

function operatorPrice (provider: Provider, model: string): PriceRow {
  const p = OPERATOR_PRICES.find((e) => e.provider === provider && e.model === model)
  if (p === undefined) throw new Error(`no operator price for ${provider} ${model}`)
  return p
}

const pricingDir = tempDir('tracegate-pricing-')
t.teardown(() => { rmSync(pricingDir, { recursive: true, force: true }) })
const pricingFile = join(pricingDir, 'operator-prices.json')
writeFileSync(pricingFile, JSON.stringify({ prices: OPERATOR_PRICES }, null, 2))

const relay = new Relay()
await relay.start()
t.teardown(() => relay.close())
const s = await startServer(t, {
  TRACEGATE_PRICING_FILE: pricingFile,
  TRACEGATE_TRACE_MAX_BODY_BYTES: String(MAX_BODY),
  TRACEGATE_GAMMA_BASE_URL: relay.url,
  TRACEGATE_UPSTREAM_HEADERS_TIMEOUT_MS: '1000',
  TRACEGATE_METRICS_PORT: '0',
  // The per-million case sends a 4 MB prompt: judged in about 0.3 s, but beside another test file and
  // chromium on 2 cores it has missed the default 2.5 s. Detection deadlines are detection-failure.test's.
  TRACEGATE_DETECTION_DEADLINE_MS: '2000',
}, { testSeams: true })
relay.target = s.mock.port
const port = s.tg.proxyPort
const mainKeyId = (await s.tg.admin.listKeys({ account: s.accountId }))[0]!.id

// ---------------------------------------------------------------------------------------------------

const traceOf = (accountId: string, traceId: string): Promise<TraceRow> => storedTrace(s.tg, accountId, traceId)

function query (q: string, params: Record<string, unknown> = {}): Promise<Array<Record<string, unknown>>> {
  return s.tg.store.call('testQuery', { query: q, params })
}

/** The one request the mock received whose body holds this nonce. */
function received (nonce: string): Buffer {
  const found = s.mock.requests.filter((r) => r.body.includes(nonce))
  if (found.length !== 1) throw new Error(`expected one recorded request with ${nonce}, found ${found.length}`)
  return found[0]!.body
}

function nonce (label: string): string {
  return `${label}-${randomUUID()}`
}

interface Sent extends RawResponse {
  /** Date.now() just before sending. */
  readonly sentWall: number
}

/** One call as the client sends it; `abortWhen` sees the body so far and can make the client leave. */
async function call (provider: Provider, o: Partial<BodyOptions> & { text: string }, abortWhen?: (soFar: string) => boolean): Promise<Sent & { forwarded: string; model: string }> {
  // The alpha bodies carry a system message (beta and gamma keep theirs at the top level, not sent here).
  const built = buildBody(provider, { apiKey: s.key, system: provider === 'alpha', ...o })
  const sentWall = Date.now()
  const r = await send(s.url + ROUTES[provider], { body: built.sent, acceptCut: true, ...(abortWhen === undefined ? {} : { onBody: abortWhen }) })
  return { ...r, sentWall, forwarded: built.forwarded, model: built.model }
}

/** A 500 with `code`, and its row: provider_error with the same code and status. */
async function providerFailed (t: Test, r: Sent, code: string): Promise<TraceRow> {
  t.equal(r.status, 500)
  t.equal(JSON.parse(r.body.toString('utf8')).error.code, code)
  const row = await traceOf(s.accountId, r.requestId)
  t.equal(row.outcome, 'provider_error')
  t.equal(row.error_code, code)
  t.equal(row.status, 500)
  return row
}

/** No tracegate key, no provider key, no service field anywhere in the row (failures name the column). */
function noSecrets (t: Test, row: object, apiKey: string): void {
  const where = (test: (text: string) => boolean): string[] =>
    Object.entries(row).filter(([, v]) => test(typeof v === 'string' ? v : JSON.stringify(v))).map(([k]) => k)
  t.same(where((x) => x.includes(apiKey)), [], 'the tracegate key is in no column')
  t.same(where((x) => x.includes(apiKey.slice(4, 20))), [], 'no part of the tracegate key is in any column')
  t.same(where((x) => x.includes('PROVIDERSECRET')), [], 'no provider key is in any column')
  t.same(where((x) => /api_key/.test(x)), [], 'no api_key field is in any column')
}

const near = (a: number, b: number, eps = 0.02): boolean => Math.abs(a - b) <= eps

/** latency, ttfb, provider time and overhead present and consistent (Float32 columns: small slack). */
function checkTimings (t: Test, row: TraceRow, expectTtft: boolean): void {
  const lat = row.latency_ms
  t.ok(lat > 0, `latency ${lat} > 0`)
  t.ok(row.provider_ms !== null && row.provider_ms >= 0 && row.provider_ms <= lat + 0.02, `provider time ${row.provider_ms} within latency ${lat}`)
  t.ok(row.overhead_ms >= 0, `overhead ${row.overhead_ms} >= 0`)
  t.ok(near(row.overhead_ms, lat - (row.provider_ms ?? 0)), `overhead ${row.overhead_ms} = latency ${lat} - provider ${row.provider_ms}`)
  t.ok(row.ttfb_ms !== null && row.ttfb_ms > 0 && row.ttfb_ms <= lat + 0.02, `ttfb ${row.ttfb_ms} within latency ${lat}`)
  if (expectTtft) t.ok(row.ttft_ms !== null && row.ttft_ms > 0 && row.ttft_ms <= lat + 0.02, `ttft ${row.ttft_ms} within latency ${lat}`)
  else if (!row.streaming) t.equal(row.ttft_ms, null, 'no ttft for a non-streaming call')
}

function checkTime (t: Test, row: TraceRow, r: Sent): void {
  const at = chEpochMs(row.time)
  t.ok(at >= r.sentWall - 5 && at <= Date.now(), `time ${row.time} is when the request arrived`)
}

function sameTokens (t: Test, row: TraceRow, u: { input: number; output: number; cached: number } | null, what: string): void {
  t.ok(u !== null, `the client received usage (${what})`)
  if (u === null) return
  t.equal(row.token_source, 'provider', `${what}: token source is provider`)
  t.equal(row.input_tokens, u.input, `${what}: input tokens = client's usage (${u.input})`)
  t.equal(row.output_tokens, u.output, `${what}: output tokens = client's usage (${u.output})`)
  t.equal(row.cached_input_tokens, u.cached, `${what}: cached input tokens = client's usage (${u.cached})`)
}

function sameCost (t: Test, got: number | null, want: number, what: string): void {
  t.ok(got !== null && Math.abs(got - want) < 1e-15, `${what}: cost ${got} = ${want}`)
}

// ---------------------------------------------------------------------------------------------------

t.test('a served call on each dialect, streaming and not, is traced whole', async (t) => {
  for (const p of PROVIDERS) {
    for (const streaming of [false, true]) {
      await t.test(`${p} ${streaming ? 'stream' : 'non-stream'}`, async (t) => {
        const n = nonce(`served-${p}`)
        const r = await call(p, { stream: streaming, includeUsage: p === 'alpha' && streaming, text: `Tell me about ${n}` })
        t.equal(r.status, 200)
        t.ok(r.complete, 'the answer is complete')
        t.match(r.requestId, UUID_V7, 'x-request-id is a UUIDv7')
        t.equal(received(n).toString('utf8'), r.forwarded, 'the provider received the body minus the service fields')
        const row = await traceOf(s.accountId, r.requestId)
        t.equal(row.trace_id, r.requestId, 'trace id = x-request-id')
        t.equal(row.account_id, s.accountId)
        t.equal(row.key_id, mainKeyId)
        t.equal(row.provider, p)
        t.equal(row.model, DEFAULT_MODELS[p])
        t.equal(row.endpoint, ROUTES[p])
        t.equal(row.streaming, streaming)
        t.equal(row.confidential, false)
        t.equal(row.status, 200)
        t.equal(row.outcome, 'ok')
        t.equal(row.error_code, '')
        checkTime(t, row, r)
        t.equal(row.prompt, r.forwarded, 'prompt = the forwarded body')
        t.equal(row.prompt_truncated, false)
        t.equal(row.request_bytes, Buffer.byteLength(r.forwarded))
        t.ok(r.body.length <= MAX_BODY, `the answer (${r.body.length} bytes) fits the cap, so it is stored whole`)
        t.equal(row.response, r.body.toString('utf8'), 'response = what the client received')
        t.equal(row.response_truncated, false)
        t.equal(row.response_bytes, r.body.length)
        noSecrets(t, row, s.key)
        checkTimings(t, row, streaming)
        sameTokens(t, row, clientUsage(p, streaming, r.body.toString('utf8')), `${p} ${streaming ? 'stream' : 'body'}`)
        t.ok(row.input_tokens > 0 && row.output_tokens > 0, 'non-zero token counts')
        t.equal(row.cost_status, 'priced')
        sameCost(t, row.cost_usd, expectedCost(operatorPrice(p, DEFAULT_MODELS[p]), row.input_tokens, row.cached_input_tokens, row.output_tokens), p)
      })
    }
  }
})

t.test('an alpha stream without include_usage: tokens estimated, and no parameter added to get usage', async (t) => {
  const n = nonce('estimated')
  const r = await call('alpha', { stream: true, text: `Estimate the tokens of ${n}, please, in a few sentences.` })
  t.equal(r.status, 200)
  const body = r.body.toString('utf8')
  t.equal(clientUsage('alpha', true, body), null, 'the client received no usage')
  const got = received(n)
  t.equal(got.toString('utf8'), r.forwarded, 'the provider received exactly the forwarded body')
  t.notOk(got.includes('stream_options'), 'no stream_options was added')
  t.notOk(got.includes('include_usage'), 'no include_usage was added')
  const row = await traceOf(s.accountId, r.requestId)
  t.equal(row.outcome, 'ok')
  t.equal(row.token_source, 'estimated')
  t.ok(row.input_tokens > 0, `estimated input tokens ${row.input_tokens} > 0`)
  const words = clientText('alpha', true, body).split(/\s+/).filter((w) => w !== '').length
  t.ok(row.output_tokens >= words / 2 && row.output_tokens <= words * 3, `estimated output tokens ${row.output_tokens} fit an answer of ${words} words`)
  t.equal(row.cost_status, 'priced')
  sameCost(t, row.cost_usd, expectedCost(operatorPrice('alpha', 'gpt-4o-mini'), row.input_tokens, row.cached_input_tokens, row.output_tokens), 'estimated')
  checkTimings(t, row, true)
})

t.test('cost from the pricing tables', async (t) => {
  t.test('the formula in per-million units, cached tokens included (pricing module)', async (t) => {
    const pricing = Pricing.load(pricingFile)
    t.same(pricing.cost('alpha', 'gpt-4o-mini', { input: 1_000_000, cached: 400_000, output: 1_000_000 }),
      { costUsd: 0.72, status: 'priced' }, '600k·0.15 + 400k·0.075 + 1M·0.6 per million = 0.72 USD')
    t.same(pricing.cost('alpha', 'tg-per-million', { input: 1_000_000, cached: 0, output: 1_000_000 }),
      { costUsd: 3, status: 'priced' }, '1M in at 1 USD + 1M out at 2 USD = 3 USD')
    t.same(pricing.cost('alpha', 'tg-per-million', { input: 1, cached: 0, output: 1 }),
      { costUsd: 0.000003, status: 'priced' }, 'one token each way: 3e-6 USD')
    t.same(pricing.cost('alpha', 'tg-per-million', { input: 1000, cached: 500, output: 0 }),
      { costUsd: 0.001, status: 'priced' }, 'no cached price: cached tokens are charged as input')
    t.same(pricing.cost('alpha', 'mock-unknown-model-xyz', { input: 10, cached: 0, output: 10 }),
      { costUsd: null, status: 'unknown_model' })
  })

  const cases: Array<{ p: Provider; model: string; stream: boolean; price: Price; what: string }> = [
    { p: 'alpha', model: 'gpt-4o-mini', stream: false, price: operatorPrice('alpha', 'gpt-4o-mini'), what: 'alpha gpt-4o-mini (operator)' },
    { p: 'alpha', model: 'gpt-4o', stream: false, price: operatorPrice('alpha', 'gpt-4o'), what: 'alpha gpt-4o (operator entry wins over the library\'s)' },
    { p: 'alpha', model: 'gpt-4o-2024-08-06', stream: false, price: operatorPrice('alpha', 'gpt-4o'), what: 'alpha dated snapshot priced as its base model' },
    { p: 'beta', model: 'claude-sonnet-4-5', stream: true, price: operatorPrice('beta', 'claude-sonnet-4-5'), what: 'beta claude-sonnet-4-5 stream (operator)' },
    { p: 'gamma', model: 'gemini-2.5-flash', stream: false, price: operatorPrice('gamma', 'gemini-2.5-flash'), what: 'gamma gemini-2.5-flash (operator)' },
  ]
  cases.push({ p: 'alpha', model: 'gpt-4.1', stream: false, price: PUBLISHED['gpt-4.1']!, what: 'alpha gpt-4.1 (the library only)' })

  for (const c of cases) {
    await t.test(c.what, async (t) => {
      const n = nonce('cost')
      const r = await call(c.p, { model: c.model, stream: c.stream, text: `Price this ${n}` })
      t.equal(r.status, 200)
      const row = await traceOf(s.accountId, r.requestId)
      sameTokens(t, row, clientUsage(c.p, c.stream, r.body.toString('utf8')), c.what)
      t.equal(row.cost_status, 'priced')
      sameCost(t, row.cost_usd, expectedCost(c.price, row.input_tokens, row.cached_input_tokens, row.output_tokens), c.what)
      if (c.model === 'gpt-4o') {
        t.not(row.cost_usd, expectedCost(PUBLISHED['gpt-4o']!, row.input_tokens, row.cached_input_tokens, row.output_tokens), 'not the library\'s price')
      }
    })
  }

  await t.test('an unknown model: no cost, marked unknown_model', async (t) => {
    const r = await call('alpha', { model: 'mock-unknown-model-xyz', text: `Who prices ${nonce('unknown')}?` })
    t.equal(r.status, 200)
    const row = await traceOf(s.accountId, r.requestId)
    t.equal(row.outcome, 'ok')
    sameTokens(t, row, clientUsage('alpha', false, r.body.toString('utf8')), 'unknown model')
    t.equal(row.cost_usd, null)
    t.equal(row.cost_status, 'unknown_model')
  })

  await t.test('per-million units: exactly 1,000,000 input tokens at 1 USD and 24 output at 2 USD = 1.000048 USD', async (t) => {
    // The mock counts one input token per four body bytes: a 4,000,000-byte forwarded body is 1M tokens.
    const n = nonce('million')
    const base = buildBody('alpha', { system: true, apiKey: s.key, model: 'tg-per-million', text: n }).forwarded.length
    const r = await call('alpha', { model: 'tg-per-million', text: n + 'x'.repeat(4_000_000 - base) })
    t.equal(Buffer.byteLength(r.forwarded), 4_000_000)
    t.equal(r.status, 200)
    t.equal(received(n).length, 4_000_000, 'the provider received 4,000,000 bytes')
    const row = await traceOf(s.accountId, r.requestId)
    t.equal(row.input_tokens, 1_000_000)
    t.equal(row.output_tokens, 24)
    t.equal(row.token_source, 'provider')
    t.equal(row.cost_status, 'priced')
    sameCost(t, row.cost_usd, 1.000048, 'per million')
    t.equal(row.request_bytes, 4_000_000)
    t.equal(row.prompt_truncated, true)
    t.equal(Buffer.byteLength(row.prompt), MAX_BODY)
  })
})

t.test('is_confidential: forwarded, counted, traced with tokens, latency and cost, and no text stored', async (t) => {
  for (const p of PROVIDERS) {
    for (const streaming of [false, true]) {
      await t.test(`${p} ${streaming ? 'stream' : 'non-stream'}`, async (t) => {
        const secret = `ZEBRAQUOKKA${randomUUID().replace(/-/g, '')}`
        const r = await call(p, {
          stream: streaming,
          includeUsage: p === 'alpha' && streaming,
          confidential: true,
          text: `The launch code is ${secret}. Never repeat the launch code.`,
        })
        t.equal(r.status, 200)
        t.equal(received(secret).toString('utf8'), r.forwarded, 'forwarded to the provider without the service fields')
        const body = r.body.toString('utf8')
        const answer = clientText(p, streaming, body)
        t.ok(answer.length > 20, 'the client received an answer')
        const rows = await query('SELECT * FROM traces WHERE account_id = {a:UUID} AND trace_id = {id:UUID}', { a: s.accountId, id: (await traceOf(s.accountId, r.requestId)).trace_id })
        t.equal(rows.length, 1)
        const all = rows[0] ?? {}
        const answerWords = [...new Set(answer.split(/[^A-Za-z]+/).filter((w) => w.length >= 5))]
        t.ok(answerWords.length >= 3, `answer words to look for: ${answerWords.join(' ')}`)
        const columns = Object.entries(all).map(([column, value]) => [column, typeof value === 'string' ? value : JSON.stringify(value)] as const)
        t.ok(columns.length >= 30, `SELECT * gave ${columns.length} columns`)
        t.same(columns.filter(([, text]) => text.includes(secret) || /ZEBRA|QUOKKA|launch code/i.test(text)).map(([c]) => c), [],
          'no column holds anything of the prompt')
        t.same(columns.filter(([, text]) => answerWords.some((w) => text.includes(w))).map(([c]) => c), [],
          'no column holds anything of the answer')
        const row = all as unknown as TraceRow
        t.equal(row.confidential, true)
        t.equal(row.outcome, 'ok')
        t.equal(row.prompt, '')
        t.equal(row.response, '')
        t.equal(row.detection, '')
        t.equal(row.issues, '')
        t.equal(row.prompt_truncated, false)
        t.equal(row.response_truncated, false)
        noSecrets(t, row, s.key)
        sameTokens(t, row, clientUsage(p, streaming, body), 'confidential')
        checkTimings(t, row, streaming)
        t.equal(row.cost_status, 'priced')
        sameCost(t, row.cost_usd, expectedCost(operatorPrice(p, DEFAULT_MODELS[p]), row.input_tokens, row.cached_input_tokens, row.output_tokens), 'confidential')
      })
    }
  }
})

t.test('outcomes', async (t) => {
  await t.test('rejected after authentication: traced as rejected with the error code, never with a key', async (t) => {
    const free = await s.tg.admin.createAccount({ name: 'free', plan: 'free' })
    const freeKey = await s.tg.admin.createKey({ account: free.id, scope: 'proxy' })
    const cases: Array<{ what: string; apiKey: string; accountId: string; keyId: string; o: Partial<BodyOptions>; status: number; code: string }> = [
      { what: 'free plan', apiKey: freeKey.key, accountId: free.id, keyId: freeKey.id, o: {}, status: 403, code: 'plan_required' },
      { what: 'no provider key', apiKey: s.key, accountId: s.accountId, keyId: mainKeyId, o: { providerKey: false }, status: 400, code: 'missing_provider_key' },
      { what: 'stream not a boolean', apiKey: s.key, accountId: s.accountId, keyId: mainKeyId, o: { extra: { stream: 'yes' } }, status: 422, code: 'invalid_field' },
    ]
    for (const c of cases) {
      await t.test(c.what, async (t) => {
        const before = s.mock.stats.received
        const r = await call('alpha', { ...c.o, apiKey: c.apiKey, text: `Rejected ${nonce('rejected')}` })
        t.equal(r.status, c.status)
        t.equal(JSON.parse(r.body.toString('utf8')).error.code, c.code)
        t.equal(s.mock.stats.received, before, 'nothing reached the provider')
        const row = await traceOf(c.accountId, r.requestId)
        t.equal(row.key_id, c.keyId)
        t.equal(row.provider, 'alpha')
        t.equal(row.outcome, 'rejected')
        t.equal(row.error_code, c.code)
        t.equal(row.status, c.status)
        t.equal(row.provider_ms, null, 'no time waiting on a provider')
        t.equal(row.input_tokens + row.output_tokens, 0, 'no tokens')
        noSecrets(t, row, c.apiKey)
      })
    }
  })

  /** The refusals before authentication that /metrics counts, by code. */
  async function rejectedBeforeAuth (): Promise<Map<string, number>> {
    const text = await (await fetch(`http://127.0.0.1:${s.tg.metricsPort}/metrics`)).text()
    const counts = new Map<string, number>()
    for (const m of text.matchAll(/^tracegate_requests_rejected_before_auth_total\{code="([a-z_]+)"\} (\d+)$/gm)) counts.set(m[1]!, Number(m[2]))
    return counts
  }

  await t.test('refused before authentication: counted, not traced', async (t) => {
    const before = await rejectedBeforeAuth()
    const unknownKey = 'tgk_' + 'A'.repeat(43)
    const body = buildBody('alpha', { system: true, apiKey: s.key, text: 'x' })
    const sends = [
      { code: 'invalid_api_key', body: buildBody('alpha', { system: true, apiKey: 'not-a-tracegate-key', text: 'x' }).sent },
      { code: 'invalid_api_key', body: buildBody('alpha', { system: true, apiKey: unknownKey, text: 'x' }).sent },
      { code: 'invalid_json', body: '{"api_key": "' + s.key + '", "model": ' },
      { code: 'missing_api_key', body: body.forwarded },
    ]
    const ids: string[] = []
    for (const x of sends) {
      const r = await send(s.url + ROUTES.alpha, { body: x.body, acceptCut: true })
      t.equal(JSON.parse(r.body.toString('utf8')).error.code, x.code, `answered ${x.code}`)
      t.match(r.requestId, UUID_V7)
      ids.push(r.requestId)
    }
    const after = await rejectedBeforeAuth()
    const delta = (code: string): number => (after.get(code) ?? 0) - (before.get(code) ?? 0)
    t.equal(delta('invalid_api_key'), 2, 'two invalid_api_key counted')
    t.equal(delta('invalid_json'), 1, 'one invalid_json counted')
    t.equal(delta('missing_api_key'), 1, 'one missing_api_key counted')
    await sleep(20)
    await s.tg.store.call('flushTraces')
    for (const id of ids) {
      const rows = await query('SELECT count() AS n FROM traces WHERE trace_id = {id:UUID}', { id })
      t.equal(Number(rows[0]?.n), 0, `no trace for ${id}`)
    }
  })

  await t.test('a provider 429 is provider_error with status 429', async (t) => {
    const r = await call('alpha', { model: 'mock-error-429', text: `Rate ${nonce('429')}` })
    t.equal(r.status, 429)
    const row = await traceOf(s.accountId, r.requestId)
    t.equal(row.outcome, 'provider_error')
    t.equal(row.status, 429)
    t.equal(row.response, r.body.toString('utf8'), 'the provider\'s error body as the client received it')
    checkTimings(t, row, false)
    t.comment(`429 row: tokens ${row.input_tokens}/${row.output_tokens} (${row.token_source}), cost ${row.cost_usd} (${row.cost_status})`)
  })

  await t.test('a stream the provider drops is provider_stream_error', async (t) => {
    for (const p of ['alpha', 'beta', ...OTHER_PROVIDERS] as Provider[]) {
      const r = await call(p, { model: 'mock-drop', stream: true, includeUsage: p === 'alpha', text: `Drop ${nonce('drop')}` })
      t.equal(r.status, 200)
      t.notOk(r.complete, `${p}: the client sees the stream cut, not a clean end`)
      const row = await traceOf(s.accountId, r.requestId)
      t.equal(row.outcome, 'provider_stream_error', `${p}: outcome`)
      t.equal(row.streaming, true)
      t.ok(row.input_tokens > 0, `${p}: input tokens ${row.input_tokens} (${row.token_source})`)
      t.ok(row.output_tokens > 0, `${p}: output tokens of the part received ${row.output_tokens}`)
    }
  })

  await t.test('a whole answer the provider cuts: the client gets 500 provider_disconnected, not half a body', async (t) => {
    for (const p of PROVIDERS) {
      const r = await call(p, { model: 'mock-drop', stream: false, text: `Cut ${nonce('cut')}` })
      t.equal(r.status, 500, `${p}: status`)
      const err = JSON.parse(r.body.toString('utf8')) as { error: { code: string; type: string; request_id: string } }
      t.equal(err.error.code, 'provider_disconnected', `${p}: code`)
      t.equal(err.error.type, 'provider_error')
      t.equal(err.error.request_id, r.requestId)
      const row = await traceOf(s.accountId, r.requestId)
      t.equal(row.outcome, 'provider_error', `${p}: outcome`)
      t.equal(row.error_code, 'provider_disconnected')
      t.equal(row.status, 500, `${p}: the status the client got`)
      t.ok(row.response.length > 0, `${p}: the trace keeps what the provider sent before the cut (${row.response.length} bytes)`)
    }
  })

  await t.test('a client that leaves mid-stream is client_aborted, with estimated or partial tokens', async (t) => {
    const firstText = (soFar: string): boolean => /"(content|text)":"[^"]+"/.test(soFar)
    for (const p of ['alpha', 'beta'] as const) {
      const aborted = s.mock.stats.aborted
      const r = await call(p, { model: 'mock-chunks-50-gap-50', stream: true, text: `Leave ${nonce('abort')}` }, firstText)
      t.ok(r.clientLeft, `${p}: the client left after the first text event`)
      await s.mock.waitForAborted(aborted + 1, 3000)
      t.pass(`${p}: the upstream request was aborted`)
      const row = await traceOf(s.accountId, r.requestId)
      t.equal(row.outcome, 'client_aborted', `${p}: outcome`)
      t.ok(row.input_tokens > 0, `${p}: input tokens ${row.input_tokens}`)
      t.ok(row.output_tokens > 0, `${p}: output tokens ${row.output_tokens}`)
      if (p === 'alpha') t.equal(row.token_source, 'estimated', 'alpha sent no usage: estimated')
      else {
        const u = clientUsage('beta', true, r.body.toString('utf8'))
        t.equal(row.input_tokens, u?.input, 'beta: input from message_start, as the client saw it')
        t.ok(['provider', 'estimated'].includes(row.token_source), `beta: token source ${row.token_source}`)
      }
      t.ok(row.latency_ms < 2000, `${p}: latency ${row.latency_ms} ms ends at the abort, not the full 2.5 s answer`)
    }
  })

  await t.test('a provider that refuses connections is provider_error / provider_unreachable', async (t) => {
    await relay.down()
    try {
      const r = await call('gamma', { text: `Down ${nonce('down')}` })
      const row = await providerFailed(t, r, 'provider_unreachable')
      t.equal(row.provider, 'gamma')
      t.comment(`unreachable row: tokens ${row.input_tokens}/${row.output_tokens} (${row.token_source}), cost ${row.cost_usd} (${row.cost_status})`)
    } finally {
      await relay.up()
    }
  })

  await t.test('a provider that never answers is provider_error / provider_timeout', async (t) => {
    const r = await call('alpha', { model: 'mock-hang', text: `Hang ${nonce('hang')}` })
    const row = await providerFailed(t, r, 'provider_timeout')
    t.ok(row.latency_ms >= 900, `latency ${row.latency_ms} covers the 1 s headers timeout`)
    t.ok(row.provider_ms !== null && row.provider_ms >= 900, `provider time ${row.provider_ms}`)
  })
})

t.test('truncation at TRACEGATE_TRACE_MAX_BODY_BYTES', async (t) => {
  await t.test('a prompt over the cap is stored cut at 4096 bytes, request_bytes is the full size', async (t) => {
    const n = nonce('longprompt')
    const r = await call('alpha', { text: `${n} ${'abcdefghij'.repeat(800)}` })
    t.equal(r.status, 200)
    const forwarded = Buffer.from(r.forwarded)
    t.ok(forwarded.length > MAX_BODY)
    t.equal(received(n).toString('utf8'), r.forwarded)
    const row = await traceOf(s.accountId, r.requestId)
    t.equal(row.prompt, forwarded.subarray(0, MAX_BODY).toString('utf8'), 'the first 4096 bytes of the forwarded body')
    t.equal(row.prompt_truncated, true)
    t.equal(row.request_bytes, forwarded.length)
    t.equal(row.response_truncated, false)
    sameTokens(t, row, clientUsage('alpha', false, r.body.toString('utf8')), 'long prompt')
  })

  for (const p of PROVIDERS) {
    await t.test(`${p}: a long streamed answer is stored truncated, its usage still from the provider`, async (t) => {
      const model = `${DEFAULT_MODELS[p]}-chunks-2000`
      const r = await call(p, { model, stream: true, includeUsage: p === 'alpha', text: `Long ${nonce('long')}` })
      t.equal(r.status, 200)
      t.ok(r.complete)
      t.ok(r.body.length > 100_000, `a long answer (${r.body.length} bytes)`)
      const row = await traceOf(s.accountId, r.requestId)
      t.equal(row.outcome, 'ok')
      t.equal(row.response, r.body.subarray(0, MAX_BODY).toString('utf8'), 'the first 4096 bytes of the answer')
      t.equal(row.response_truncated, true)
      t.equal(row.response_bytes, r.body.length)
      const u = clientUsage(p, true, r.body.toString('utf8'))
      t.equal(u?.output, 6000, 'the client saw 6000 output tokens')
      sameTokens(t, row, u, `${p} long stream`)
      checkTimings(t, row, true)
      sameCost(t, row.cost_usd, expectedCost(operatorPrice(p, DEFAULT_MODELS[p]), row.input_tokens, row.cached_input_tokens, row.output_tokens), 'long stream')
    })
  }
})

// ---------------------------------------------------------------------------------------------------

type Measures = Pick<UsageMeasures, 'requests' | 'blocked' | 'errors' | 'input_tokens' | 'output_tokens' | 'cached_input_tokens' | 'cost_usd'>
type RawGroup = Measures & { lat_min: number; lat_max: number }

async function rawGroups (accountId: string, from: number, to: number, groupExpr: string): Promise<Map<string, RawGroup>> {
  const rows = await query(`SELECT toString(${groupExpr}) AS g, count() AS requests, countIf(outcome = 'blocked') AS blocked,
      countIf(outcome IN ('rejected', 'provider_error', 'provider_stream_error', 'proxy_error')) AS errors,
      sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens, sum(cached_input_tokens) AS cached_input_tokens,
      sum(ifNull(cost_usd, 0)) AS cost_usd, min(latency_ms) AS lat_min, max(latency_ms) AS lat_max
    FROM traces
    WHERE account_id = {a:UUID} AND time >= fromUnixTimestamp64Milli({from:Int64}) AND time < fromUnixTimestamp64Milli({to:Int64})
    GROUP BY g ORDER BY g`, { a: accountId, from, to })
  const out = new Map<string, RawGroup>()
  for (const r of rows) {
    out.set(String(r.g), {
      requests: Number(r.requests),
      blocked: Number(r.blocked),
      errors: Number(r.errors),
      input_tokens: Number(r.input_tokens),
      output_tokens: Number(r.output_tokens),
      cached_input_tokens: Number(r.cached_input_tokens),
      cost_usd: Number(r.cost_usd),
      lat_min: Number(r.lat_min),
      lat_max: Number(r.lat_max),
    })
  }
  return out
}

function sameMeasures (t: Test, got: Measures | undefined, want: Measures | undefined, what: string): void {
  if (got === undefined || want === undefined) {
    t.fail(`${what}: missing (rollup ${JSON.stringify(got)}, raw ${JSON.stringify(want)})`)
    return
  }
  const counts = (m: Measures): number[] => [m.requests, m.blocked, m.errors, m.input_tokens, m.output_tokens, m.cached_input_tokens]
  t.same(counts(got), counts(want), `${what}: requests, blocked, errors, input, output, cached = ${JSON.stringify(counts(want))}`)
  t.ok(Math.abs(got.cost_usd - want.cost_usd) < 1e-9, `${what}: cost ${got.cost_usd} = ${want.cost_usd}`)
}

t.test('usage rollups equal sums over the raw traces, per account', async (t) => {
  const A = await s.tg.admin.createAccount({ name: 'rollup-a', plan: 'pro' })
  const B = await s.tg.admin.createAccount({ name: 'rollup-b', plan: 'pro' })
  const a1 = await s.tg.admin.createKey({ account: A.id, scope: 'proxy' })
  const a2 = await s.tg.admin.createKey({ account: A.id, scope: 'proxy' })
  const a3 = await s.tg.admin.createKey({ account: A.id, scope: 'proxy' })
  const b1 = await s.tg.admin.createKey({ account: B.id, scope: 'proxy' })
  const plan: Array<[string, Provider, Partial<BodyOptions>]> = [
    [a1.key, 'alpha', {}],
    [a1.key, 'alpha', { stream: true, includeUsage: true }],
    [a1.key, 'beta', { stream: true }],
    [a1.key, 'beta', { model: 'mock-drop', stream: true }],
    [a2.key, 'gamma', {}],
    [a2.key, 'gamma', { stream: true }],
    [a2.key, 'alpha', { model: 'mock-unknown-model-xyz' }],
    [a2.key, 'alpha', { stream: true }],
    [a3.key, 'alpha', { model: 'mock-error-429' }],
    [a3.key, 'alpha', { extra: { stream: 'yes' } }],
    [a3.key, 'alpha', { model: 'gpt-4.1', confidential: true }],
    [a3.key, 'beta', { model: 'mock-error-500' }],
    [b1.key, 'alpha', {}],
    [b1.key, 'alpha', { model: 'b-only-model' }],
    [b1.key, 'beta', { model: 'mock-error-503' }],
    [b1.key, 'gamma', { stream: true }],
  ]
  const sent = await Promise.all(plan.map(([key, p, o]) => call(p, { ...o, apiKey: key, text: `Rollup ${nonce('rollup')}` })))
  const countA = plan.filter(([key]) => key !== b1.key).length
  for (const [i, r] of sent.entries()) await traceOf(plan[i]![0] === b1.key ? B.id : A.id, r.requestId)
  await s.tg.store.call('flushTraces')
  const from = Date.now() - 3_600_000
  const to = Date.now() + 60_000

  for (const [name, acct, keyIds, count] of [['A', A.id, [a1.id, a2.id, a3.id], countA], ['B', B.id, [b1.id], plan.length - countA]] as const) {
    const range = { accountId: acct, from, to }
    const totals = await s.tg.store.call('usageTotals', range)
    const raw = (await rawGroups(acct, from, to, "'all'")).get('all')
    t.equal(raw?.requests, count, `account ${name}: every call has exactly one raw trace`)
    sameMeasures(t, totals, raw, `account ${name} totals`)
    t.ok(totals.errors > 0, `account ${name} has errors to count`)
    if (raw !== undefined) {
      const p50 = totals.latency_p50_ms
      t.ok(p50 !== null && p50 >= raw.lat_min - 0.01 && p50 <= raw.lat_max + 0.01, `account ${name}: latency p50 ${p50} within [${raw.lat_min}, ${raw.lat_max}]`)
    }

    for (const bucket of ['minute', 'hour'] as const) {
      const series = await s.tg.store.call('usageSeries', { ...range, bucket })
      const rawSeries = await rawGroups(acct, from, to, bucket === 'minute' ? 'toUnixTimestamp(toStartOfMinute(time))' : 'toUnixTimestamp(toStartOfHour(time))')
      const got = new Map(series.map((x) => [String(chEpochMs(x.t) / 1000), x]))
      t.same([...got.keys()].sort(), [...rawSeries.keys()].sort(), `account ${name}: the same ${bucket} buckets`)
      for (const [k, want] of rawSeries) sameMeasures(t, got.get(k), want, `account ${name} ${bucket} ${new Date(Number(k) * 1000).toISOString()}`)
    }

    for (const [by, expr] of [['key', 'key_id'], ['model', 'model'], ['provider', 'provider']] as const) {
      const breakdown = await s.tg.store.call('usageBreakdown', { ...range, by })
      const rawBy = await rawGroups(acct, from, to, expr)
      const got = new Map(breakdown.map((x) => [x.group, x]))
      t.same([...got.keys()].sort(), [...rawBy.keys()].sort(), `account ${name}: the same ${by} groups`)
      for (const [k, want] of rawBy) sameMeasures(t, got.get(k), want, `account ${name} by ${by} ${k}`)
      if (by === 'key') t.same([...got.keys()].sort(), [...keyIds].sort(), `account ${name}: only its own keys`)
      if (by === 'model' && name === 'A') t.notOk(got.has('b-only-model'), 'account B\'s model is not in account A\'s breakdown')
      if (by === 'model' && name === 'B') t.ok(got.has('b-only-model'))
    }
  }
})

t.test('a trace is queryable within 2 s of its response ending (no explicit flush)', async (t) => {
  const visible: number[] = []
  const missing: string[] = []
  const worker = async (w: number): Promise<void> => {
    for (let i = 0; i < 10; i++) {
      // A random start, so requests do not all end just after a flush and the spread is realistic.
      await sleep(Math.random() * 1000)
      const r = await call(w % 3 === 0 ? 'beta' : w % 3 === 1 ? 'gamma' : 'alpha', { stream: i % 2 === 0, text: `Visible ${w}-${i}` })
      if (r.status !== 200) { missing.push(`${r.requestId} status ${r.status}`); continue }
      for (;;) {
        const row = await s.tg.store.call('getTrace', { accountId: s.accountId, traceId: r.requestId })
        const waited = performance.now() - r.endedAt
        if (row !== null) { visible.push(waited); break }
        if (waited > 5000) { visible.push(waited); missing.push(r.requestId); break }
        await sleep(50)
      }
    }
  }
  await Promise.all(Array.from({ length: 10 }, (_, w) => worker(w)))
  t.equal(visible.length, 100)
  t.same(missing, [], 'every trace was found')
  const p50 = quantile(visible, 0.5)
  const p99 = quantile(visible, 0.99)
  const max = Math.max(...visible)
  t.comment(`trace visibility after the response ended, 100 requests (10 at a time): p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms, max ${max.toFixed(0)} ms`)
  t.ok(visible.length === 100 && max <= 2000, `every trace visible within 2 s (max ${max.toFixed(0)} ms)`)
})
