// What reaches the provider and what comes back: the provider's parameters byte for byte with
// the service fields cut out, gamma's model and stream moved into the URL, the auth and pass-through
// headers, the provider's answer (body, status, useful headers) unchanged, and the 500s for a provider
// that is down or never answers.
//
// One tracegate for the file, in front of the real mock provider. Beta goes through a TCP relay so the
// last test can take that provider down (connection refused) without a second server. The upstream
// headers timeout is short so `mock-hang` times out quickly; the mock answers everything else at once.
// Runs for every registered provider, the test provider delta included (test-providers.ts).
import '../fixtures/providers/test-providers.js'
import t, { type Test } from 'tap'
import { startServer } from '../helpers/server.js'
import { json, type RawResponse, send } from '../helpers/http.js'
import { bodyFor, DEFAULT_MODELS, ROUTES } from '../helpers/bodies.js'
import { OTHER_PROVIDERS } from '../helpers/native.js'
import { Relay } from '../helpers/raw-call.js'
import type { RecordedRequest } from '../../src/mock-provider/index.js'
import { DIALECTS, PROVIDER_KEY_FIELDS, PROVIDERS } from '../../src/providers/index.js'

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

const relay = new Relay()
await relay.start()
t.teardown(() => relay.close())
const s = await startServer(t, {
  TRACEGATE_BETA_BASE_URL: relay.url,
  TRACEGATE_UPSTREAM_HEADERS_TIMEOUT_MS: '500',
})
relay.target = s.mock.port
const K = s.key

/** The request the mock recorded with this header value (each test uses a unique provider key). */
function recorded (header: string, value: string): RecordedRequest {
  const found = s.mock.requests.filter((r) => r.headers[header] === value)
  if (found.length !== 1) throw new Error(`expected one recorded request with ${header}: ${value}, found ${found.length}`)
  return found[0]!
}

/** The header a test provider's key reaches it in, and its value, as its module writes them. */
function moduleAuth (provider: keyof typeof ROUTES, key: string): [string, string] {
  return Object.entries(DIALECTS[provider].authHeaders(key))[0]!
}

function header (r: RawResponse, name: string): string | undefined {
  const v = r.headers[name]
  return Array.isArray(v) ? v.join(', ') : v
}

interface ByteCase {
  readonly name: string
  readonly provider: keyof typeof ROUTES
  /** The header the provider key arrives in, and the key, to find the recorded request. */
  readonly authHeader: string
  readonly authValue: string
  readonly sent: string
  readonly expected: string
  readonly url: string
}

// Every `sent` body carries: an integer beyond 2^53, `\u00e9`-style escapes (either hex case), an escaped
// surrogate pair, raw UTF-8, odd key order, odd spacing and line ends, and 1.50e+10. Each `expected` is the
// sent text with each service field cut out together with the separator that follows it (for the last
// member: the separator before it), every other byte as sent.
const BYTE_CASES: readonly ByteCase[] = [
  {
    name: 'alpha, service fields first',
    provider: 'alpha',
    authHeader: 'authorization',
    authValue: 'Bearer sk-alpha-first',
    sent: `{\r\n  "api_key":"${K}", "alpha_api_key" : "sk-alpha-first",\n  "is_confidential":false,\n "temperature" :1.50e+10,` +
      '"model":"gpt-4o-mini","messages":[{"content":"caf\\u00e9 \\ud83d\\ude00","role":"user"}],\n\t"seed": 12345678901234567890 }',
    expected: '{\r\n  "temperature" :1.50e+10,' +
      '"model":"gpt-4o-mini","messages":[{"content":"caf\\u00e9 \\ud83d\\ude00","role":"user"}],\n\t"seed": 12345678901234567890 }',
    url: '/v1/chat/completions',
  },
  {
    name: 'alpha, service fields in the middle',
    provider: 'alpha',
    authHeader: 'authorization',
    authValue: 'Bearer sk-alpha-middle',
    sent: '{"seed":12345678901234567890 ,"messages" :[ {"role":"user", "content":"caf\\u00e9 \\ud83d\\ude00 and café 😀"} ],\n' +
      `    "api_key" :"${K}" ,\n    "is_confidential": true,\n "metadata":{"api_key":"nested, stays","n":1.50e+10},\n` +
      '\t"alpha_api_key":"sk-alpha-middle",  "model": "gpt-4o-mini"\n,"temperature":0.70}',
    expected: '{"seed":12345678901234567890 ,"messages" :[ {"role":"user", "content":"caf\\u00e9 \\ud83d\\ude00 and café 😀"} ],\n' +
      '    "metadata":{"api_key":"nested, stays","n":1.50e+10},\n' +
      '\t"model": "gpt-4o-mini"\n,"temperature":0.70}',
    url: '/v1/chat/completions',
  },
  {
    name: 'alpha, service fields last',
    provider: 'alpha',
    authHeader: 'authorization',
    authValue: 'Bearer sk-alpha-last',
    sent: '{ "model":"gpt-4o-mini" , "messages":[{"role":"user","content":"\\u00e9t\\u00E9 \\ud83d\\ude00"}], "n" : 1, ' +
      '"seed":12345678901234567890,"logit_bias":{"50256":-1.50e+10} ,\n"is_confidential":false ,\n' +
      `"alpha_api_key":"sk-alpha-last",\n "api_key":"${K}"\n}`,
    expected: '{ "model":"gpt-4o-mini" , "messages":[{"role":"user","content":"\\u00e9t\\u00E9 \\ud83d\\ude00"}], "n" : 1, ' +
      '"seed":12345678901234567890,"logit_bias":{"50256":-1.50e+10}\n}',
    url: '/v1/chat/completions',
  },
  {
    name: 'beta, service fields first',
    provider: 'beta',
    authHeader: 'x-api-key',
    authValue: 'sk-ant-first',
    sent: `{"is_confidential" : false,"beta_api_key":"sk-ant-first" ,  "api_key":"${K}",\n"max_tokens":1024,` +
      '"messages":[{"role":"user","content":[{"type":"text","text":"caf\\u00e9 \\ud83d\\ude00"}]}],\n  "model":"claude-sonnet-4-5",' +
      '"temperature":1.50e+10,"metadata":{"user_id":"12345678901234567890"},"top_k":12345678901234567890}',
    expected: '{"max_tokens":1024,' +
      '"messages":[{"role":"user","content":[{"type":"text","text":"caf\\u00e9 \\ud83d\\ude00"}]}],\n  "model":"claude-sonnet-4-5",' +
      '"temperature":1.50e+10,"metadata":{"user_id":"12345678901234567890"},"top_k":12345678901234567890}',
    url: '/v1/messages',
  },
  {
    name: 'beta, service fields in the middle',
    provider: 'beta',
    authHeader: 'x-api-key',
    authValue: 'sk-ant-middle',
    sent: `{\n\t"model" : "claude-sonnet-4-5",\n\t"api_key" : "${K}",\n\t"messages" : [\n\t\t{ "role" : "user", ` +
      '"content" : "caf\\u00e9 \\ud83d\\ude00 — café" }\n\t],\n\t"beta_api_key" : "sk-ant-middle",\n\t"is_confidential" : true,\n' +
      '\t"max_tokens" : 12345678901234567890,\n\t"temperature" : 1.50e+10\n}',
    expected: '{\n\t"model" : "claude-sonnet-4-5",\n\t"messages" : [\n\t\t{ "role" : "user", ' +
      '"content" : "caf\\u00e9 \\ud83d\\ude00 — café" }\n\t],\n' +
      '\t"max_tokens" : 12345678901234567890,\n\t"temperature" : 1.50e+10\n}',
    url: '/v1/messages',
  },
  {
    name: 'beta, service fields last',
    provider: 'beta',
    authHeader: 'x-api-key',
    authValue: 'sk-ant-last',
    sent: '{"max_tokens":64,"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"\\u00e9\\ud83d\\ude00"}],' +
      '"stop_sequences":["\\n\\nHuman:"],"temperature":1.50e+10,"top_p":0.1000,"metadata":{"n":12345678901234567890}\r\n, ' +
      `"api_key":"${K}" , "is_confidential":false, "beta_api_key":"sk-ant-last"}`,
    expected: '{"max_tokens":64,"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"\\u00e9\\ud83d\\ude00"}],' +
      '"stop_sequences":["\\n\\nHuman:"],"temperature":1.50e+10,"top_p":0.1000,"metadata":{"n":12345678901234567890}}',
    url: '/v1/messages',
  },
  {
    name: 'gamma, service fields first',
    provider: 'gamma',
    authHeader: 'x-goog-api-key',
    authValue: 'AIza-first',
    sent: `{"model":"gemini-2.5-flash","stream":false,"api_key":"${K}","gamma_api_key":"AIza-first",\n` +
      '"contents":[{"role":"user","parts":[{"text":"caf\\u00e9 \\ud83d\\ude00 café 😀"}]}],' +
      '"generationConfig":{"temperature":1.50e+10,"seed":12345678901234567890,"maxOutputTokens":64}}',
    expected: '{"contents":[{"role":"user","parts":[{"text":"caf\\u00e9 \\ud83d\\ude00 café 😀"}]}],' +
      '"generationConfig":{"temperature":1.50e+10,"seed":12345678901234567890,"maxOutputTokens":64}}',
    url: '/v1beta/models/gemini-2.5-flash:generateContent',
  },
  {
    name: 'gamma, service fields in the middle (streaming)',
    provider: 'gamma',
    authHeader: 'x-goog-api-key',
    authValue: 'AIza-middle',
    sent: '{ "contents" : [ { "parts" : [ { "text" : "caf\\u00e9 \\ud83d\\ude00" } ] , "role" : "user" } ] ,\n' +
      `  "model" : "gemini-2.5-flash" ,\n  "api_key" : "${K}" ,\n  "safetySettings" : [] ,\n  "stream" : true ,\n` +
      '  "gamma_api_key" : "AIza-middle" ,\n  "is_confidential" : false ,\n' +
      '  "generationConfig" : { "candidateCount" : 1, "seed" : 12345678901234567890, "temperature" : 1.50e+10 }\n}',
    expected: '{ "contents" : [ { "parts" : [ { "text" : "caf\\u00e9 \\ud83d\\ude00" } ] , "role" : "user" } ] ,\n' +
      '  "safetySettings" : [] ,\n' +
      '  "generationConfig" : { "candidateCount" : 1, "seed" : 12345678901234567890, "temperature" : 1.50e+10 }\n}',
    url: '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
  },
  {
    name: 'gamma, service fields last (streaming)',
    provider: 'gamma',
    authHeader: 'x-goog-api-key',
    authValue: 'AIza-last',
    sent: '{"systemInstruction":{"parts":[{"text":"be brief \\u2014 ok"}]},' +
      '"contents":[{"role":"user","parts":[{"text":"\\ud83d\\ude00 caf\\u00e9"}]}],' +
      '"generationConfig":{"maxOutputTokens":12345678901234567890,"temperature":1.50e+10},\n' +
      `\t"gamma_api_key":"AIza-last",\n\t"is_confidential":true,\n\t"api_key":"${K}",\n\t"stream":true,\n\t"model":"gemini-2.5-flash"\n}`,
    expected: '{"systemInstruction":{"parts":[{"text":"be brief \\u2014 ok"}]},' +
      '"contents":[{"role":"user","parts":[{"text":"\\ud83d\\ude00 caf\\u00e9"}]}],' +
      '"generationConfig":{"maxOutputTokens":12345678901234567890,"temperature":1.50e+10}\n}',
    url: '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
  },
  // A test provider's minimal body with the service fields first and last.
  ...OTHER_PROVIDERS.map((provider): ByteCase => {
    const inner = JSON.stringify({ model: DEFAULT_MODELS[provider], ...DIALECTS[provider].sampleBody('caf\u00e9 \ud83d\ude00 — café') }).slice(1, -1)
    const [authHeader, authValue] = moduleAuth(provider, `${provider}-bytes`)
    return {
      name: `${provider}, service fields first and last`,
      provider,
      authHeader,
      authValue,
      sent: `{"api_key":"${K}" ,\r\n "is_confidential":false,${inner} ,\n"${provider}_api_key" : "${provider}-bytes"}`,
      expected: `{${inner}}`,
      url: DIALECTS[provider].target({ model: DEFAULT_MODELS[provider], stream: false }).path,
    }
  }),
]

const SERVICE_KEYS = ['api_key', 'is_confidential', ...PROVIDER_KEY_FIELDS]

t.test('the provider gets the exact bytes sent, service fields cut out', async (t) => {
  for (const c of BYTE_CASES) {
    await t.test(c.name, async (t) => {
      const r = await send(s.url + ROUTES[c.provider], { body: c.sent })
      t.equal(r.status, 200, 'the mock answered through the proxy')
      const req = recorded(c.authHeader, c.authValue)
      t.equal(req.url, c.url, 'upstream path')
      t.equal(req.method, 'POST')
      t.equal(req.body.toString('utf8'), c.expected, 'body text at the provider')
      t.ok(req.body.equals(Buffer.from(c.expected, 'utf8')), 'body bytes at the provider')
      t.equal(req.headers['content-length'], String(Buffer.byteLength(c.expected)), 'content-length matches the cut body')
      t.notOk(req.body.includes(K), 'the tracegate key never reaches the provider')
      t.notOk(req.body.includes(c.authValue.replace(/^Bearer /, '')), 'the provider key is in a header, not the body')
      const top = Object.keys(JSON.parse(req.body.toString('utf8')) as object)
      for (const name of SERVICE_KEYS) t.notOk(top.includes(name), `no top-level ${name}`)
      if (c.provider === 'gamma') {
        t.notOk(top.includes('model'), 'gamma: model moved to the URL')
        t.notOk(top.includes('stream'), 'gamma: stream moved to the URL')
      }
      for (const [name, value] of Object.entries(req.headers)) {
        t.notOk(String(value).includes(K), `the tracegate key is not in the ${name} header`)
      }
    })
  }
})

// JSON numbers have no range (RFC 8259 §6); the proxy must not reject what it only passes on.
t.test('integers beyond 64 bits are valid JSON and pass unchanged', async (t) => {
  const numbers = ['-12345678901234567890', '123456789012345678901234567890', '18446744073709551616']
  for (const [i, n] of numbers.entries()) {
    const providerKey = `sk-alpha-bignum-${i}`
    const sent = `{"model":"gpt-4o-mini","seed":${n},"messages":[{"role":"user","content":"Hi"}],"alpha_api_key":"${providerKey}","api_key":"${K}"}`
    const r = await send(s.url + ROUTES.alpha, { body: sent })
    t.equal(r.status, 200, `seed ${n} is accepted`)
    if (r.status !== 200) {
      t.comment(`got ${r.status} ${r.body.toString('utf8')}`)
      continue
    }
    t.equal(recorded('authorization', `Bearer ${providerKey}`).body.toString('utf8'),
      `{"model":"gpt-4o-mini","seed":${n},"messages":[{"role":"user","content":"Hi"}]}`, `seed ${n} reaches the provider as sent`)
  }
})

t.test('gamma moves model and stream into the URL', async (t) => {
  const cases = [
    { fields: { stream: false }, key: 'AIza-url-1', url: '/v1beta/models/gemini-2.5-flash:generateContent' },
    { fields: {}, key: 'AIza-url-2', url: '/v1beta/models/gemini-2.5-flash:generateContent' },
    { fields: { stream: true }, key: 'AIza-url-3', url: '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse' },
    { fields: { stream: true, model: 'gemini-1.5-pro-002' }, key: 'AIza-url-4', url: '/v1beta/models/gemini-1.5-pro-002:streamGenerateContent?alt=sse' },
  ]
  for (const c of cases) {
    const body = { api_key: K, model: 'gemini-2.5-flash', contents: [{ role: 'user', parts: [{ text: 'Hello' }] }], gamma_api_key: c.key, ...c.fields }
    const r = await send(s.url + ROUTES.gamma, { body: JSON.stringify(body) })
    t.equal(r.status, 200)
    const req = recorded('x-goog-api-key', c.key)
    t.equal(req.url, c.url, JSON.stringify(c.fields))
    t.equal(req.body.toString('utf8'), '{"contents":[{"role":"user","parts":[{"text":"Hello"}]}]}')
    if (c.fields.stream === true) t.match(header(r, 'content-type'), /^text\/event-stream/, 'streamed answer')
  }
})

t.test('headers at the provider', async (t) => {
  const hostile = {
    authorization: 'Bearer client-own-token',
    cookie: 'session=client-cookie',
    'x-api-key': 'client-x-api-key',
    'x-goog-api-key': 'client-goog-key',
  }
  const leaked = Object.values(hostile)

  function noLeaks (t: Test, req: RecordedRequest): void {
    t.equal(req.headers.cookie, undefined, 'no cookie')
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i] ?? ''
      const value = req.rawHeaders[i + 1] ?? ''
      t.notOk(leaked.includes(value), `${name} does not carry the client's own credential`)
      t.notOk(value.includes(K), `${name} does not carry the tracegate key`)
    }
  }

  await t.test('alpha', async (t) => {
    const r = await send(s.url + ROUTES.alpha, { body: JSON.stringify({ api_key: K, model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hi' }], alpha_api_key: 'sk-alpha-hdr' }), headers: {
      ...hostile,
      'openai-organization': 'org-client',
      'openai-project': 'proj_client',
    } })
    t.equal(r.status, 200)
    const req = recorded('authorization', 'Bearer sk-alpha-hdr')
    t.equal(req.rawHeaders.filter((_, i) => i % 2 === 0 && req.rawHeaders[i]?.toLowerCase() === 'authorization').length, 1, 'one authorization header')
    t.equal(req.headers['x-api-key'], undefined, 'the client x-api-key does not reach alpha')
    t.equal(req.headers['openai-organization'], 'org-client', 'openai-organization passes on')
    t.equal(req.headers['openai-project'], 'proj_client', 'openai-project passes on')
    t.equal(req.headers['content-type'], 'application/json')
    noLeaks(t, req)
  })

  await t.test('beta without anthropic-version gets the default', async (t) => {
    const r = await send(s.url + ROUTES.beta, { body: JSON.stringify({ api_key: K, model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }], beta_api_key: 'sk-ant-hdr-1' }), headers: {
      ...hostile,
      'anthropic-beta': 'prompt-caching-2024-07-31',
    } })
    t.equal(r.status, 200)
    const req = recorded('x-api-key', 'sk-ant-hdr-1')
    t.equal(req.headers['anthropic-version'], '2023-06-01')
    t.equal(req.headers['anthropic-beta'], 'prompt-caching-2024-07-31', 'anthropic-beta passes on')
    t.equal(req.headers.authorization, undefined, 'the client authorization does not reach beta')
    noLeaks(t, req)
  })

  await t.test('beta keeps the client anthropic-version', async (t) => {
    const r = await send(s.url + ROUTES.beta, { body: JSON.stringify({ api_key: K, model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }], beta_api_key: 'sk-ant-hdr-2' }), headers: {
      'anthropic-version': '2024-10-22',
    } })
    t.equal(r.status, 200)
    const req = recorded('x-api-key', 'sk-ant-hdr-2')
    t.equal(req.headers['anthropic-version'], '2024-10-22', 'the client value, once')
  })

  await t.test('gamma', async (t) => {
    const r = await send(s.url + ROUTES.gamma, { body: JSON.stringify({ api_key: K, model: 'gemini-2.5-flash', contents: [{ role: 'user', parts: [{ text: 'Hi' }] }], gamma_api_key: 'AIza-hdr' }), headers: hostile })
    t.equal(r.status, 200)
    const req = recorded('x-goog-api-key', 'AIza-hdr')
    t.equal(req.headers.authorization, undefined, 'the client authorization does not reach gamma')
    t.equal(req.headers['x-api-key'], undefined)
    noLeaks(t, req)
  })

  for (const p of OTHER_PROVIDERS) {
    await t.test(`${p}: its auth header once, its pass-through headers, its default headers`, async (t) => {
      const d = DIALECTS[p]
      const passed = Object.fromEntries([...d.forwardHeaders].map((name) => [name, `${name}-from-client`]))
      const r = await send(s.url + ROUTES[p], { body: bodyWith(p, DEFAULT_MODELS[p], `${p}-hdr`), headers: { ...hostile, ...passed } })
      t.equal(r.status, 200)
      const [name, value] = moduleAuth(p, `${p}-hdr`)
      const req = recorded(name, value)
      t.equal(req.rawHeaders.filter((_, i) => i % 2 === 0 && req.rawHeaders[i]?.toLowerCase() === name).length, 1, `one ${name} header`)
      for (const [h, v] of Object.entries(passed)) t.equal(req.headers[h], v, `${h} passes on`)
      for (const [h, v] of Object.entries(d.defaultHeaders)) t.equal(req.headers[h], v, `${h} as the module's default`)
      noLeaks(t, req)
    })
  }
})

/** The answer without the fields a provider makes fresh for every call (ids, creation time). */
function withoutIds (text: string): string {
  return text
    .replace(/"id":"[^"]*"/g, '"id":"*"')
    .replace(/"created":\d+/g, '"created":0')
    .replace(/"responseId":"[^"]*"/g, '"responseId":"*"')
}

const PROVIDER_AUTH: Readonly<Record<string, (key: string) => Record<string, string>>> = {
  alpha: (key) => ({ authorization: `Bearer ${key}` }),
  beta: (key) => ({ 'x-api-key': key, 'anthropic-version': '2023-06-01' }),
  gamma: (key) => ({ 'x-goog-api-key': key }),
}

/** The recorded request that carried this provider key. */
function recordedFor (provider: keyof typeof ROUTES, providerKey: string): RecordedRequest {
  switch (provider) {
    case 'alpha': return recorded('authorization', `Bearer ${providerKey}`)
    case 'beta': return recorded('x-api-key', providerKey)
    case 'gamma': return recorded('x-goog-api-key', providerKey)
    default: return recorded(...moduleAuth(provider, providerKey))
  }
}

function bodyWith (provider: keyof typeof ROUTES, model: string, providerKey: string): string {
  return JSON.stringify(bodyFor(provider, { api_key: K, model, [`${provider}_api_key`]: providerKey }, 'Hello there'))
}

/** The same request straight to the mock, as the proxy forwarded it. */
async function direct (req: RecordedRequest, provider: keyof typeof ROUTES, providerKey: string): Promise<RawResponse> {
  const headers = PROVIDER_AUTH[provider]?.(providerKey) ?? { ...DIALECTS[provider].authHeaders(providerKey), ...DIALECTS[provider].defaultHeaders }
  return send(s.mock.url + req.url, { body: req.body, headers })
}

t.test('a 200 answer passes through unchanged', async (t) => {
  for (const provider of PROVIDERS) {
    await t.test(provider, async (t) => {
      const providerKey = `key-${provider}-200`
      const r = await send(s.url + ROUTES[provider], { body: bodyWith(provider, 'mock-chunks-7', providerKey) })
      t.equal(r.status, 200)
      const req = recordedFor(provider, providerKey)
      const d = await direct(req, provider, providerKey)
      t.equal(d.status, 200)
      const text = r.body.toString('utf8')
      t.equal(JSON.stringify(JSON.parse(text)), text, 'the provider\'s own serialisation (nothing re-encoded)')
      t.equal(withoutIds(text), withoutIds(d.body.toString('utf8')), 'same bytes as the provider sends, ids aside')
      t.same(Object.keys(json(r) as object), Object.keys(JSON.parse(d.body.toString('utf8')) as object), 'same keys in the same order')
      t.equal(header(r, 'content-type'), header(d, 'content-type'), 'content-type passes')
      t.match(header(r, 'x-request-id'), UUID_V7, 'x-request-id is tracegate\'s UUIDv7')
    })
  }
})

t.test('provider errors pass through with status, body and retry-after', async (t) => {
  const cases: ReadonlyArray<{ provider: keyof typeof ROUTES, status: number }> = [
    { provider: 'alpha', status: 429 }, { provider: 'alpha', status: 500 }, { provider: 'alpha', status: 503 },
    { provider: 'beta', status: 429 }, { provider: 'beta', status: 500 },
    { provider: 'gamma', status: 429 }, { provider: 'gamma', status: 500 },
    ...OTHER_PROVIDERS.flatMap((provider) => [{ provider, status: 429 }, { provider, status: 500 }]),
  ]
  for (const c of cases) {
    await t.test(`${c.provider} ${c.status}`, async (t) => {
      const providerKey = `key-${c.provider}-${c.status}`
      const r = await send(s.url + ROUTES[c.provider], { body: bodyWith(c.provider, `mock-error-${c.status}`, providerKey) })
      t.equal(r.status, c.status, 'the provider status reaches the client')
      const req = recordedFor(c.provider, providerKey)
      const d = await direct(req, c.provider, providerKey)
      t.equal(d.status, c.status)
      t.equal(r.body.toString('utf8'), d.body.toString('utf8'), 'the provider\'s error body, byte for byte')
      t.ok(typeof json(r) === 'object', 'a JSON body')
      t.equal(header(r, 'content-type'), header(d, 'content-type'), 'content-type passes')
      t.equal(header(r, 'retry-after'), header(d, 'retry-after'), 'retry-after as the provider sent it')
      if (c.status === 429) t.equal(header(r, 'retry-after'), '7', 'a 429 carries retry-after')
      t.match(header(r, 'x-request-id'), UUID_V7)
    })
  }
})

t.test('provider request ids and rate-limit headers', async (t) => {
  await t.test('alpha', async (t) => {
    const body = bodyWith('alpha', 'gpt-4o-mini', 'key-alpha-rl')
    const r = await send(s.url + ROUTES.alpha, { body: body })
    t.equal(r.status, 200)
    t.match(header(r, 'x-request-id'), UUID_V7, 'x-request-id is tracegate\'s own, once')
    t.match(header(r, 'x-upstream-request-id'), /^req_[0-9a-f]{32}$/, 'the provider request id as x-upstream-request-id')
    const req = recorded('authorization', 'Bearer key-alpha-rl')
    const promptTokens = Math.ceil(req.body.length / 4)
    t.equal(header(r, 'x-ratelimit-limit-requests'), '10000')
    t.equal(header(r, 'x-ratelimit-remaining-requests'), '9999')
    t.equal(header(r, 'x-ratelimit-limit-tokens'), '30000000')
    t.equal(header(r, 'x-ratelimit-remaining-tokens'), String(30_000_000 - promptTokens))
    t.equal(header(r, 'x-ratelimit-reset-requests'), '6ms')
    t.equal(header(r, 'x-ratelimit-reset-tokens'), '0s')
    t.equal(header(r, 'openai-version'), '2020-10-01')

    const limited = await send(s.url + ROUTES.alpha, { body: bodyWith('alpha', 'mock-error-429', 'key-alpha-rl-429') })
    t.equal(limited.status, 429)
    t.match(header(limited, 'x-request-id'), UUID_V7, 'an error answer carries tracegate\'s id too')
    t.match(header(limited, 'x-upstream-request-id'), /^req_[0-9a-f]{32}$/, 'and the provider\'s')
  })

  await t.test('beta', async (t) => {
    const r = await send(s.url + ROUTES.beta, { body: bodyWith('beta', 'claude-sonnet-4-5', 'key-beta-rl') })
    t.equal(r.status, 200)
    t.match(header(r, 'x-request-id'), UUID_V7)
    t.equal(header(r, 'request-id'), header(r, 'x-request-id'), 'request-id is tracegate\'s, as the Anthropic SDK reads it')
    t.match(header(r, 'x-upstream-request-id'), /^req_/, 'the provider\'s request-id passes under another name')
    const req = recorded('x-api-key', 'key-beta-rl')
    t.equal(header(r, 'anthropic-ratelimit-requests-limit'), '4000')
    t.equal(header(r, 'anthropic-ratelimit-requests-remaining'), '3999')
    t.equal(header(r, 'anthropic-ratelimit-input-tokens-limit'), '400000')
    t.equal(header(r, 'anthropic-ratelimit-input-tokens-remaining'), String(400_000 - Math.ceil(req.body.length / 4)))
    t.equal(header(r, 'anthropic-ratelimit-output-tokens-limit'), '400000')
    t.equal(header(r, 'anthropic-ratelimit-output-tokens-remaining'), '400000')
  })

  await t.test('gamma', async (t) => {
    const r = await send(s.url + ROUTES.gamma, { body: bodyWith('gamma', 'gemini-2.5-flash', 'key-gamma-rl') })
    t.equal(r.status, 200)
    t.match(header(r, 'x-request-id'), UUID_V7)
    t.match(header(r, 'server-timing'), /^gfet4t7; dur=\d+$/, 'server-timing passes')
  })

  for (const p of OTHER_PROVIDERS) {
    await t.test(`${p}: the headers its module passes, and no other`, async (t) => {
      const r = await send(s.url + ROUTES[p], { body: bodyWith(p, DEFAULT_MODELS[p], `key-${p}-rl`) })
      t.equal(r.status, 200)
      t.match(header(r, 'x-request-id'), UUID_V7)
      const req = recorded(...moduleAuth(p, `key-${p}-rl`))
      const d = await direct(req, p, `key-${p}-rl`)
      // The provider's own headers (not the connection's, which each side writes itself).
      for (const name of Object.keys(d.headers).filter((n) => !['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding'].includes(n))) {
        const as = DIALECTS[p].responseHeader(name)
        if (as === null) t.equal(header(r, name), undefined, `${name} is not passed`)
        else t.type(header(r, as), 'string', `${name} passes as ${as}`)
      }
    })
  }
})

function errorCode (t: Test, r: RawResponse, code: string): void {
  t.equal(r.status, 500)
  t.match(header(r, 'content-type'), /^application\/json/)
  const id = header(r, 'x-request-id')
  t.match(id, UUID_V7)
  const b = json(r) as { error?: { type?: unknown; code?: unknown; param?: unknown; request_id?: unknown } }
  t.equal(b.error?.code, code)
  t.equal(b.error?.type, 'provider_error')
  t.equal(b.error?.param, null)
  t.equal(b.error?.request_id, id, 'the error body names the request id')
}

t.test('a provider that never answers: 500 provider_timeout', async (t) => {
  const aborted = s.mock.stats.aborted
  const started = performance.now()
  const r = await send(s.url + ROUTES.alpha, { body: bodyWith('alpha', 'mock-hang', 'key-alpha-hang') })
  const elapsed = performance.now() - started
  errorCode(t, r, 'provider_timeout')
  t.ok(elapsed >= 400, `waited for the headers timeout (${Math.round(elapsed)} ms)`)
  t.ok(elapsed < 5000, `and not much longer (${Math.round(elapsed)} ms)`)
  await s.mock.waitForAborted(aborted + 1)
  t.pass('the hanging upstream request was closed')
})

// Last: it takes beta's relay down (and brings it back for good measure).
t.test('a provider that refuses connections: 500 provider_unreachable', async (t) => {
  const before = await send(s.url + ROUTES.beta, { body: bodyWith('beta', 'claude-sonnet-4-5', 'key-beta-before-down') })
  t.equal(before.status, 200, 'beta works through the relay')
  await relay.down()
  const received = s.mock.stats.received
  const r = await send(s.url + ROUTES.beta, { body: bodyWith('beta', 'claude-sonnet-4-5', 'key-beta-down') })
  errorCode(t, r, 'provider_unreachable')
  t.equal(s.mock.stats.received, received, 'nothing reached the provider')
  await relay.up()
  const after = await send(s.url + ROUTES.beta, { body: bodyWith('beta', 'claude-sonnet-4-5', 'key-beta-after-up') })
  t.equal(after.status, 200, 'beta works again once the provider is back')
})
