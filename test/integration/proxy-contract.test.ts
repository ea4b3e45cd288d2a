// The proxy contract over real loopback HTTP: every row of the check order on the
// three endpoints, the order itself, the error body and x-request-id on every response, no secret in
// any error, nothing forwarded for a rejected request, and the key cache's TTL after a revocation made
// behind the server's back. One server for the whole file (chDB: one data directory per process). Runs
// for every registered provider, the test provider delta included (test-providers.ts).
import '../fixtures/providers/test-providers.js'
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { startServer } from '../helpers/server.js'
import { json, postChunked, postHeadersOnly, type RawResponse, send, UUID_V7 } from '../helpers/http.js'
import { bodyFor, CLIENT_KEYS, ROUTES, split, without, withRawMembers } from '../helpers/bodies.js'
import { DIALECTS } from '../../src/providers/index.js'
import { sleep } from '../helpers/wait.js'

type Provider = keyof typeof ROUTES
const PROVIDERS = Object.keys(ROUTES) as Provider[]

// The header each built-in provider gets its key in, as its API documents it; another provider's as its module says.
const AUTH: Readonly<Record<string, (key: string) => [string, string]>> = {
  alpha: (k) => ['authorization', `Bearer ${k}`], beta: (k) => ['x-api-key', k], gamma: (k) => ['x-goog-api-key', k],
}
function auth (p: Provider, key: string): [string, string] {
  return AUTH[p]?.(key) ?? Object.entries(DIALECTS[p].authHeaders(key))[0]!
}

/** A value of another type than the parameter's. */
const WRONG_TYPE = { string: 42, array: 'Hello', number: '64', object: ['x'] } as const
const LIMIT = 2048
// Long enough that a request and a revoke fit inside it on a loaded machine (300 ms did not, under the full
// suite beside other work: test 12 measured 314 ms).
const CACHE_TTL_MS = 1500
const SERVER_ALPHA_KEY = 'sk-server-alpha'

const s = await startServer(t, {
  TRACEGATE_MAX_BODY_BYTES: String(LIMIT),
  TRACEGATE_KEY_CACHE_TTL_MS: String(CACHE_TTL_MS),
  TRACEGATE_ALPHA_API_KEY: SERVER_ALPHA_KEY,
})
const admin = s.tg.admin

async function proxyKey (plan: 'free' | 'pro' | 'enterprise', serverSideKeys = false, scope = 'proxy'): Promise<{ id: string; key: string }> {
  const account = await admin.createAccount({ name: `${plan}-${scope}-${String(serverSideKeys)}`, plan, serverSideKeys })
  const k = await admin.createKey({ account: account.id, scope })
  return { id: k.id, key: k.key }
}

const serverSideKey = (await proxyKey('pro', true)).key
const freeKey = (await proxyKey('free')).key
const freeReadKey = (await proxyKey('free', false, 'read')).key
const enterpriseKey = (await proxyKey('enterprise')).key
const readKey = (await admin.createKey({ account: s.accountId, scope: 'read' })).key
const unknownKey = 'tgk_' + randomBytes(32).toString('base64url')

/** Strings that must never appear in an error response, body or headers. Every test key joins it. */
const SECRETS = new Set<string>([
  s.key, serverSideKey, freeKey, freeReadKey, enterpriseKey, readKey, unknownKey, SERVER_ALPHA_KEY,
  'sk-client', 'sk-ant-client', 'AIza-client',
])

/** Requests the mock should have received: the successes. Compared with its counter at the end. */
let forwarded = 0
const requestIds: string[] = []

function body (p: Provider, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return bodyFor(p, { api_key: s.key, ...fields })
}

function payload (b: string | Buffer | Record<string, unknown>): string | Buffer {
  return typeof b === 'string' || Buffer.isBuffer(b) ? b : JSON.stringify(b)
}

function requestId (t: Test, r: RawResponse): string {
  const id = r.headers['x-request-id']
  t.type(id, 'string', 'x-request-id present')
  t.match(String(id), UUID_V7, 'x-request-id is a UUIDv7')
  requestIds.push(String(id))
  return String(id)
}

function noSecrets (t: Test, r: RawResponse, extra: readonly string[] = []): void {
  const text = r.body.toString('latin1') + '\n' + JSON.stringify(r.headers)
  for (const secret of [...SECRETS, ...extra]) {
    if (text.includes(secret)) t.fail(`the response carries a secret (${secret.slice(0, 6)}…)`)
  }
}

/** Status, code, param, the exact error shape (with `extra` members), request_id equal to x-request-id, and no secret. */
function expectError (t: Test, r: RawResponse, status: number, code: string, param: string | null = null, extra: readonly string[] = []): void {
  t.equal(r.status, status, `status ${status}`)
  t.match(String(r.headers['content-type']), /^application\/json/, 'JSON content-type')
  let parsed: any
  try {
    parsed = json(r)
  } catch {
    t.fail(`error body is not JSON: ${r.body.toString('utf8').slice(0, 200)}`)
    return
  }
  t.same(Object.keys(parsed), ['error'], 'one top-level key')
  const e = parsed.error ?? {}
  t.same(Object.keys(e).sort(), ['code', 'message', 'param', 'request_id', 'type', ...extra].sort(), 'error keys')
  t.equal(e.code, code, `code ${code}`)
  t.equal(e.param, param, `param ${String(param)}`)
  t.type(e.type, 'string')
  t.type(e.message, 'string')
  const id = requestId(t, r)
  t.equal(e.request_id, id, 'request_id equals x-request-id')
  noSecrets(t, r)
}

/** A rejected POST: the error, and nothing reached the provider. */
async function rejects (
  t: Test, path: string, b: string | Buffer | Record<string, unknown>, status: number, code: string, param: string | null = null,
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  const before = s.mock.stats.received
  const r = await send(s.url + path, { body: payload(b), headers })
  expectError(t, r, status, code, param)
  t.equal(s.mock.stats.received, before, 'nothing reached the provider')
  return r
}

/** A forwarded POST: 200 with a UUIDv7 id; returns what the mock received. */
async function succeeds (t: Test, p: Provider, b: string | Buffer | Record<string, unknown>, headers: Record<string, string> = {}) {
  const before = s.mock.stats.received
  const r = await send(s.url + ROUTES[p], { body: payload(b), headers })
  t.equal(r.status, 200, `${p} forwarded: ${r.status === 200 ? 'ok' : r.body.toString('utf8').slice(0, 300)}`)
  requestId(t, r)
  if (r.status === 200) forwarded++
  t.equal(s.mock.stats.received, before + 1, 'one request reached the provider')
  const got = s.mock.requests.at(-1)
  t.ok(got, 'the mock recorded it')
  const sent = got?.body.toString('utf8') ?? ''
  t.notMatch(sent, /"api_key"/, 'the tracegate key field is cut out')
  for (const secret of [s.key, serverSideKey, enterpriseKey]) t.notOk(sent.includes(secret), 'no tracegate key upstream')
  return { r, got }
}

t.test('1. 413 body_too_large from content-length, decided before reading', async (t) => {
  for (const p of PROVIDERS) {
    for (const length of [LIMIT + 1, 10 * 1024 * 1024]) {
      const before = s.mock.stats.received
      const r = await postHeadersOnly(s.url + ROUTES[p], length)
      expectError(t, r, 413, 'body_too_large')
      t.equal(s.mock.stats.received, before, 'nothing reached the provider')
    }
  }
})

t.test('1. 413 body_too_large for a chunked body without content-length', async (t) => {
  for (const p of PROVIDERS) {
    // A valid request padded with whitespace to four times the limit, sent 512 bytes at a time.
    const big = Buffer.from(JSON.stringify(body(p)) + ' '.repeat(4 * LIMIT))
    const chunks = split(big, 512)
    const before = s.mock.stats.received
    const r = await postChunked(s.url + ROUTES[p], chunks, 15)
    expectError(t, r, 413, 'body_too_large')
    t.ok(r.chunksWritten < chunks.length, `answered before the body ended (${r.chunksWritten}/${chunks.length} chunks)`)
    t.equal(s.mock.stats.received, before, 'nothing reached the provider')
  }
  // Garbage over the limit is still 413, not invalid_json: size is checked first.
  const r = await postChunked(s.url + ROUTES.alpha, split(Buffer.alloc(3 * LIMIT, 'x'), 512), 15)
  expectError(t, r, 413, 'body_too_large')
})

t.test('1. a body of exactly the limit and a chunked body under it are forwarded', async (t) => {
  for (const p of PROVIDERS) {
    const text = JSON.stringify(body(p))
    await succeeds(t, p, text + ' '.repeat(LIMIT - Buffer.byteLength(text)))
    const before = s.mock.stats.received
    const r = await postChunked(s.url + ROUTES[p], split(Buffer.from(text + ' '.repeat(1000)), 300), 5)
    t.equal(r.status, 200, `${p} chunked under the limit`)
    requestId(t, r)
    if (r.status === 200) forwarded++
    t.equal(s.mock.stats.received, before + 1)
  }
})

t.test('2. 400 invalid_json', async (t) => {
  const k = JSON.stringify(s.key)
  const cases: Array<[string, string | Buffer]> = [
    ['empty body', ''],
    ['whitespace only', '  \n '],
    ['not JSON', 'api_key=' + s.key],
    ['a JSON array', `[{"api_key":${k}}]`],
    ['a JSON string', JSON.stringify(s.key)],
    ['a JSON number', '42'],
    ['null', 'null'],
    ['truncated', `{"api_key":${k},"model":"gpt-4o-mini","messages":[{"role":"user"`],
    ['trailing garbage', `{"api_key":${k}}}`],
    ['single quotes', `{'api_key':${k}}`],
    ['invalid UTF-8 inside a string', Buffer.concat([
      Buffer.from(`{"api_key":${k},"model":"gpt`), Buffer.from([0xff, 0xfe]), Buffer.from('","messages":[]}'),
    ])],
    ['truncated UTF-8 sequence inside a string', Buffer.concat([
      Buffer.from(`{"api_key":${k},"messages":[{"role":"user","content":"caf`), Buffer.from([0xc3]), Buffer.from('"}]}'),
    ])],
    ['overlong UTF-8 encoding', Buffer.concat([Buffer.from(`{"api_key":${k},"x":"`), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')])],
  ]
  for (const p of PROVIDERS) {
    for (const [name, b] of cases) {
      await t.test(`${p}: ${name}`, async (t) => { await rejects(t, ROUTES[p], b, 400, 'invalid_json') })
    }
  }
})

t.test('2. 400 duplicate_field for a service field given twice', async (t) => {
  const k = JSON.stringify(s.key)
  for (const p of PROVIDERS) {
    const base = without(body(p), 'api_key')
    const cases: Array<[string, string, string]> = [
      ['api_key twice', `"api_key":${k},"api_key":${k}`, 'api_key'],
      ['api_key and its escaped spelling', `"api_key":${k},"api\\u005fkey":${k}`, 'api_key'],
      ['the escaped spelling twice', `"api\\u005fkey":${k},"api\\u005fkey":${k}`, 'api_key'],
      ['is_confidential twice', `"api_key":${k},"is_confidential":true,"is_confidential":false`, 'is_confidential'],
      ['is_confidential escaped', `"api_key":${k},"is_confidential":true,"is_confidenti\\u0061l":true`, 'is_confidential'],
      ['own provider key twice', `"api_key":${k},"${p}_api_key":"sk-a"`, `${p}_api_key`],
    ]
    for (const [name, raw, param] of cases) {
      await t.test(`${p}: ${name}`, async (t) => { await rejects(t, ROUTES[p], withRawMembers(base, raw), 400, 'duplicate_field', param) })
    }
  }
  const gamma = without(body('gamma'), 'model')
  await t.test('gamma: model twice', async (t) => {
    await rejects(t, ROUTES.gamma, withRawMembers(gamma, '"model":"gemini-2.5-flash","model":"gemini-2.5-pro"'), 400, 'duplicate_field', 'model')
  })
  await t.test('gamma: stream twice', async (t) => {
    await rejects(t, ROUTES.gamma, withRawMembers(body('gamma'), '"stream":false,"stream":true'), 400, 'duplicate_field', 'stream')
  })
})

t.test('3. 400 missing_api_key; 422 invalid_field when api_key is not a string', async (t) => {
  for (const p of PROVIDERS) {
    await t.test(`${p}: no api_key`, async (t) => { await rejects(t, ROUTES[p], bodyFor(p), 400, 'missing_api_key', 'api_key') })
    await t.test(`${p}: empty object`, async (t) => { await rejects(t, ROUTES[p], '{}', 400, 'missing_api_key', 'api_key') })
    for (const value of [12345, null, true, [s.key], { key: s.key }]) {
      await t.test(`${p}: api_key ${JSON.stringify(value).slice(0, 12)}`, async (t) => {
        await rejects(t, ROUTES[p], bodyFor(p, { api_key: value }), 422, 'invalid_field', 'api_key')
      })
    }
  }
})

t.test('4. 401 for unknown, malformed and wrong-scope keys', async (t) => {
  const malformed = ['sk-not-a-tracegate-key', 'tgk_short', '', unknownKey + 'x', ` ${s.key}`, 'TGK_' + s.key.slice(4)]
  for (const p of PROVIDERS) {
    // Twice: the second answer comes from the negative cache.
    for (let i = 0; i < 2; i++) {
      await t.test(`${p}: unknown well-formed key (${i})`, async (t) => {
        await rejects(t, ROUTES[p], body(p, { api_key: unknownKey }), 401, 'invalid_api_key')
      })
    }
    for (const key of malformed) {
      await t.test(`${p}: malformed key ${JSON.stringify(key.slice(0, 8))}`, async (t) => {
        await rejects(t, ROUTES[p], body(p, { api_key: key }), 401, 'invalid_api_key')
      })
    }
    await t.test(`${p}: read-scope key`, async (t) => {
      await rejects(t, ROUTES[p], body(p, { api_key: readKey }), 401, 'wrong_key_scope')
    })
  }
})

t.test('4. 401 expired_api_key', async (t) => {
  const created = Date.now()
  const k = await admin.createKey({ account: s.accountId, scope: 'proxy', expiresIn: '1s' })
  SECRETS.add(k.key)
  await succeeds(t, 'alpha', body('alpha', { api_key: k.key }))
  await sleep(created + 1_200 - Date.now())
  for (const p of PROVIDERS) await rejects(t, ROUTES[p], body(p, { api_key: k.key }), 401, 'expired_api_key')
})

t.test('4. 401 revoked_api_key at once after a revocation in this process', async (t) => {
  const k = await admin.createKey({ account: s.accountId, scope: 'proxy' })
  SECRETS.add(k.key)
  await succeeds(t, 'alpha', body('alpha', { api_key: k.key })) // now cached
  await admin.revokeKey({ id: k.id })
  for (const p of PROVIDERS) await rejects(t, ROUTES[p], body(p, { api_key: k.key }), 401, 'revoked_api_key')
})

t.test('5. 403 plan_required for a free account; pro and enterprise pass', async (t) => {
  for (const p of PROVIDERS) {
    await rejects(t, ROUTES[p], body(p, { api_key: freeKey }), 403, 'plan_required')
    await succeeds(t, p, body(p, { api_key: enterpriseKey }))
    await succeeds(t, p, body(p))
  }
})

t.test('6. 422 invalid_field naming the field', async (t) => {
  for (const p of PROVIDERS) {
    const own = `${p}_api_key`
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['is_confidential a string', body(p, { is_confidential: 'true' }), 'is_confidential'],
      ['is_confidential a number', body(p, { is_confidential: 1 }), 'is_confidential'],
      ['is_confidential null', body(p, { is_confidential: null }), 'is_confidential'],
      [`${own} a number`, body(p, { [own]: 12345 }), own],
      [`${own} null`, body(p, { [own]: null }), own],
      [`${own} an object`, body(p, { [own]: { key: 'sk-x' } }), own],
      ['stream a string', body(p, { stream: 'true' }), 'stream'],
      ['stream a number', body(p, { stream: 1 }), 'stream'],
      ['stream null', body(p, { stream: null }), 'stream'],
      ['model a number', body(p, { model: 42 }), 'model'],
      ['model an array', body(p, { model: ['gpt-4o-mini'] }), 'model'],
    ]
    for (const q of PROVIDERS) {
      if (q === p) continue
      cases.push([`another provider's key field ${q}_api_key`, body(p, { [`${q}_api_key`]: 'sk-other' }), `${q}_api_key`])
    }
    for (const [name, b, param] of cases) {
      await t.test(`${p}: ${name}`, async (t) => { await rejects(t, ROUTES[p], b, 422, 'invalid_field', param) })
    }
  }
  await t.test('gamma: contents not an array', async (t) => {
    await rejects(t, ROUTES.gamma, body('gamma', { contents: { role: 'user' } }), 422, 'invalid_field', 'contents')
  })
  // Each provider's own parameters (alpha's messages, beta's max_tokens, delta's turns), given another type.
  for (const p of PROVIDERS) {
    for (const rule of DIALECTS[p].params) {
      await t.test(`${p}: ${rule.name} not a${rule.type === 'array' || rule.type === 'object' ? 'n' : ''} ${rule.type}`, async (t) => {
        await rejects(t, ROUTES[p], body(p, { [rule.name]: WRONG_TYPE[rule.type] }), 422, 'invalid_field', rule.name)
      })
    }
  }
})

t.test('6. 400 missing_parameter naming the parameter', async (t) => {
  const required: Readonly<Record<string, readonly string[]>> = {
    alpha: ['model', 'messages'],
    beta: ['model', 'messages', 'max_tokens'],
    gamma: ['model', 'contents'],
  }
  for (const p of PROVIDERS) {
    for (const name of required[p] ?? DIALECTS[p].params.filter((r) => r.required).map((r) => r.name)) {
      await t.test(`${p} without ${name}`, async (t) => {
        await rejects(t, ROUTES[p], without(body(p), name), 400, 'missing_parameter', name)
      })
    }
  }
})

t.test('7. provider keys: the caller\'s, the server-side one, or 400 missing_provider_key', async (t) => {
  for (const p of PROVIDERS) {
    await t.test(`${p}: no provider key, account without server-side keys`, async (t) => {
      await rejects(t, ROUTES[p], without(body(p), `${p}_api_key`), 400, 'missing_provider_key', `${p}_api_key`)
    })
  }
  await t.test('alpha: server-side key used for an account that allows it', async (t) => {
    const { got } = await succeeds(t, 'alpha', without(body('alpha', { api_key: serverSideKey }), 'alpha_api_key'))
    t.equal(got?.headers.authorization, `Bearer ${SERVER_ALPHA_KEY}`)
  })
  for (const p of PROVIDERS.filter((q) => q !== 'alpha')) {
    await t.test(`${p}: no server-side key configured`, async (t) => {
      await rejects(t, ROUTES[p], without(body(p, { api_key: serverSideKey }), `${p}_api_key`), 400, 'missing_provider_key', `${p}_api_key`)
    })
  }
  await t.test('alpha: the caller\'s own key wins over the server-side key', async (t) => {
    const { got } = await succeeds(t, 'alpha', body('alpha', { api_key: serverSideKey, alpha_api_key: 'sk-caller-own' }))
    t.equal(got?.headers.authorization, 'Bearer sk-caller-own')
  })
  await t.test('each dialect carries the caller\'s key in its own header', async (t) => {
    for (const p of PROVIDERS) {
      const { got } = await succeeds(t, p, body(p))
      const [name, value] = auth(p, CLIENT_KEYS[p])
      t.equal(got?.headers[name], value, `${p} ${name}`)
      t.notMatch(got?.body.toString('utf8') ?? '', new RegExp(`"${p}_api_key"`), 'provider key field cut out')
    }
  })
})

t.test('7. the keys in x-tracegate-key and x-tracegate-provider-key: one place, or the same tracegate key in both', async (t) => {
  const other = (await proxyKey('pro')).key
  SECRETS.add(other)
  SECRETS.add('sk-header-own')
  for (const p of PROVIDERS) {
    await t.test(`${p}: another account's key in x-tracegate-key beside api_key is 422`, async (t) => {
      await rejects(t, ROUTES[p], body(p), 422, 'invalid_field', 'x-tracegate-key', { 'x-tracegate-key': other })
      await rejects(t, ROUTES[p], body(p, { api_key: other }), 422, 'invalid_field', 'x-tracegate-key', { 'x-tracegate-key': s.key })
    })
    await t.test(`${p}: a provider key in ${p}_api_key and in x-tracegate-provider-key is 422, even the same one`, async (t) => {
      await rejects(t, ROUTES[p], body(p), 422, 'invalid_field', 'x-tracegate-provider-key', { 'x-tracegate-provider-key': 'sk-header-own' })
      const own = String(body(p)[`${p}_api_key`])
      await rejects(t, ROUTES[p], body(p), 422, 'invalid_field', 'x-tracegate-provider-key', { 'x-tracegate-provider-key': own })
    })
    await t.test(`${p}: the same key in api_key and x-tracegate-key is accepted`, async (t) => {
      await succeeds(t, p, body(p), { 'x-tracegate-key': s.key })
    })
    await t.test(`${p}: each header stands in for its absent body field`, async (t) => {
      const headers = { 'x-tracegate-key': s.key, 'x-tracegate-provider-key': 'sk-header-own' }
      const { got } = await succeeds(t, p, without(without(body(p), 'api_key'), `${p}_api_key`), headers)
      const [name, value] = auth(p, 'sk-header-own')
      t.equal(got?.headers[name], value, 'the provider key from the header reached the provider')
      t.notOk(JSON.stringify(got?.headers ?? {}).includes(s.key), 'the tracegate key did not')
    })
  }
  await t.test('a provider key in x-tracegate-provider-key wins over the server-side key', async (t) => {
    const { got } = await succeeds(t, 'alpha', without(body('alpha', { api_key: serverSideKey }), 'alpha_api_key'), { 'x-tracegate-provider-key': 'sk-header-own' })
    t.equal(got?.headers.authorization, 'Bearer sk-header-own')
  })
  await t.test('a provider key header that is not printable ASCII without spaces is 422', async (t) => {
    await rejects(t, ROUTES.alpha, without(body('alpha'), 'alpha_api_key'), 422, 'invalid_field', 'x-tracegate-provider-key', { 'x-tracegate-provider-key': 'sk with space' })
  })
})

t.test('8. the order of checks: the earlier rule wins', async (t) => {
  const k = JSON.stringify(s.key)
  const cases: Array<[string, Provider, string | Record<string, unknown>, number, string, string | null]> = [
    ['invalid_json beats missing api_key (array)', 'alpha', '[1,2,3]', 400, 'invalid_json', null],
    ['invalid_json beats missing api_key (truncated)', 'beta', '{"model":"claude', 400, 'invalid_json', null],
    ['duplicate_field beats missing api_key', 'alpha', '{"is_confidential":true,"is_confidential":true}', 400, 'duplicate_field', 'is_confidential'],
    ['duplicate_field beats an unknown key', 'gamma',
      withRawMembers(without(body('gamma'), 'api_key'), `"api_key":${JSON.stringify(unknownKey)},"api_key":${JSON.stringify(unknownKey)}`),
      400, 'duplicate_field', 'api_key'],
    ['missing api_key beats wrong types', 'alpha', bodyFor('alpha', { model: 42, stream: 'x', is_confidential: 'no' }), 400, 'missing_api_key', 'api_key'],
    ['api_key not a string beats missing parameters', 'beta', { api_key: 7 }, 422, 'invalid_field', 'api_key'],
    ['bad key and missing model: 401', 'alpha', without(body('alpha', { api_key: unknownKey }), 'model'), 401, 'invalid_api_key', null],
    ['malformed key and wrong types: 401', 'gamma', body('gamma', { api_key: 'nope', stream: 'yes' }), 401, 'invalid_api_key', null],
    ['read scope on a free account: 401 before 403', 'alpha', body('alpha', { api_key: freeReadKey }), 401, 'wrong_key_scope', null],
    ['free plan and wrong types: 403', 'alpha', body('alpha', { api_key: freeKey, model: 42, is_confidential: 'x' }), 403, 'plan_required', null],
    ['free plan and missing parameters: 403', 'beta', { api_key: freeKey }, 403, 'plan_required', null],
    ['free plan and no provider key: 403', 'gamma', without(body('gamma', { api_key: freeKey }), 'gamma_api_key'), 403, 'plan_required', null],
    ['wrong type and no provider key: 422', 'alpha', without(body('alpha', { stream: 'x' }), 'alpha_api_key'), 422, 'invalid_field', 'stream'],
    ['another provider\'s key field and no own key: 422', 'alpha',
      without(body('alpha', { beta_api_key: 'sk-ant-x' }), 'alpha_api_key'), 422, 'invalid_field', 'beta_api_key'],
    ['missing parameter and no provider key: 400 missing_parameter', 'beta',
      without(body('beta'), 'max_tokens', 'beta_api_key'), 400, 'missing_parameter', 'max_tokens'],
    ['missing parameter and server-side account: 400 missing_parameter', 'alpha',
      without(body('alpha', { api_key: serverSideKey }), 'messages', 'alpha_api_key'), 400, 'missing_parameter', 'messages'],
    ['empty object with a key field typo: missing api_key', 'alpha', `{"apikey":${k}}`, 400, 'missing_api_key', 'api_key'],
  ]
  for (const [name, p, b, status, code, param] of cases) {
    await t.test(name, async (t) => { await rejects(t, ROUTES[p], b, status, code, param) })
  }
})

t.test('10. 404 and 405 are JSON errors with a UUIDv7 x-request-id', async (t) => {
  for (const [method, path] of [['GET', '/'], ['GET', '/nope'], ['POST', '/api/omega_service/chat_completion'], ['POST', '/api/alpha_service']]) {
    const before = s.mock.stats.received
    const r = await send(s.url + path!, { method: method!, body: method === 'POST' ? JSON.stringify(body('alpha')) : undefined })
    expectError(t, r, 404, 'not_found', null, ['routes'])
    const routes = (json(r).error as { routes?: unknown }).routes
    const native = PROVIDERS.flatMap((q) => [...DIALECTS[q].native.routeNames, `GET ${DIALECTS[q].native.modelsRoute}`])
    for (const route of [...PROVIDERS.map((q) => `POST ${ROUTES[q]}`), ...native, 'POST /v1/chat/completions', 'POST /v1/messages', 'POST /v1beta/models/{model}:generateContent', 'GET /v1/models', 'GET /healthz']) {
      t.ok(Array.isArray(routes) && routes.includes(route), `the 404 lists ${route}`)
    }
    t.equal(s.mock.stats.received, before)
  }
  for (const p of PROVIDERS) {
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
      const before = s.mock.stats.received
      const r = await send(s.url + ROUTES[p], { method, body: method === 'GET' || method === 'DELETE' ? undefined : JSON.stringify(body(p)) })
      expectError(t, r, 405, 'method_not_allowed')
      t.match(String(r.headers.allow), /\bPOST\b/, 'Allow names POST (RFC 9110 §15.5.6)')
      t.equal(s.mock.stats.received, before)
    }
  }
  for (const path of ['/healthz', '/readyz']) {
    const r = await send(s.url + path, { method: 'POST', body: '{}' })
    expectError(t, r, 405, 'method_not_allowed')
  }
})

t.test('11. no secret in any error', async (t) => {
  const providerSecret = 'sk-provider-SECRET-0123456789abcdef'
  SECRETS.add(providerSecret)
  const malformed = 'tgk_SECRET_but_malformed_0123456789'
  SECRETS.add(malformed)
  const sk = JSON.stringify(s.key)
  const cases: Array<[string, Provider, string | Record<string, unknown>, number, string, string | null]> = [
    ['truncated JSON carrying both keys', 'alpha', `{"api_key":${sk},"alpha_api_key":"${providerSecret}","model":`, 400, 'invalid_json', null],
    ['duplicate api_key', 'alpha', withRawMembers(without(body('alpha', { alpha_api_key: providerSecret }), 'api_key'), `"api_key":${sk},"api_key":${sk}`),
      400, 'duplicate_field', 'api_key'],
    ['malformed tracegate key', 'beta', body('beta', { api_key: malformed, beta_api_key: providerSecret }), 401, 'invalid_api_key', null],
    ['read-scope key', 'gamma', body('gamma', { api_key: readKey, gamma_api_key: providerSecret }), 401, 'wrong_key_scope', null],
    ['free plan', 'alpha', body('alpha', { api_key: freeKey, alpha_api_key: providerSecret }), 403, 'plan_required', null],
    ['another provider\'s key field', 'alpha', body('alpha', { beta_api_key: providerSecret }), 422, 'invalid_field', 'beta_api_key'],
    ['provider key with a line break', 'alpha', body('alpha', { alpha_api_key: providerSecret + '\r\nx-evil: 1' }), 422, 'invalid_field', 'alpha_api_key'],
    ['missing parameter', 'beta', without(body('beta', { beta_api_key: providerSecret }), 'model'), 400, 'missing_parameter', 'model'],
    ['missing provider key', 'gamma', without(body('gamma'), 'gamma_api_key'), 400, 'missing_provider_key', 'gamma_api_key'],
  ]
  for (const [name, p, b, status, code, param] of cases) {
    await t.test(name, async (t) => { await rejects(t, ROUTES[p], b, status, code, param) })
  }
  await t.test('405 with a body carrying keys', async (t) => {
    const r = await send(s.url + ROUTES.alpha, { method: 'PUT', body: JSON.stringify(body('alpha', { alpha_api_key: providerSecret })) })
    expectError(t, r, 405, 'method_not_allowed')
  })
})

t.test('12. a key revoked behind the server\'s back works until the cache TTL ends', async (t) => {
  const k = await admin.createKey({ account: s.accountId, scope: 'proxy' })
  SECRETS.add(k.key)
  const cachedAt = Date.now()
  await succeeds(t, 'alpha', body('alpha', { api_key: k.key })) // a store lookup, now cached
  const r = await s.tg.store.call('revokeKey', { id: k.id }) // skips the cache invalidation
  t.ok(r, 'revoked in the store')
  const elapsed = Date.now() - cachedAt
  t.ok(elapsed < CACHE_TTL_MS - 100, `still inside the TTL (${elapsed} ms)`)
  await succeeds(t, 'alpha', body('alpha', { api_key: k.key }))
  await sleep(cachedAt + CACHE_TTL_MS + 200 - Date.now())
  for (const p of PROVIDERS) await rejects(t, ROUTES[p], body(p, { api_key: k.key }), 401, 'revoked_api_key')
})

t.test('13. /healthz and /readyz answer 200 JSON', async (t) => {
  for (const path of ['/healthz', '/readyz']) {
    const r = await send(s.url + path, { method: 'GET' })
    t.equal(r.status, 200, path)
    t.match(String(r.headers['content-type']), /^application\/json/)
    const parsed: unknown = JSON.parse(r.body.toString('utf8'))
    t.type(parsed, 'object')
    t.not(parsed, null)
    requestId(t, r)
  }
})

t.test('9, 10. nothing but the successes reached the provider; every request id is distinct', async (t) => {
  t.equal(s.mock.stats.received, forwarded, `${forwarded} forwarded requests`)
  t.ok(forwarded > 0)
  t.equal(new Set(requestIds).size, requestIds.length, `${requestIds.length} distinct request ids`)
})
