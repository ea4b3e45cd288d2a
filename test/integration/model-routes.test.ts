// Model fallbacks from a routes file (TRACEGATE_ROUTES) through the real server: a call for a routed model
// that its first step cannot answer (a real server answering 503) falls back to the next step, which asks
// another model of another target (the mock): in the body (alpha) or the path (gamma), every other byte as
// sent. The trace names the model that answered and lists each attempt's model. An account denied
// fallbacks, and a key whose allowed models leave the other model out, keep the steps of the model they
// asked for. The official OpenAI SDK sees one stream. A model routed as an alias goes to its target model.
import t from 'tap'
import { createServer, type Server } from 'node:http'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import OpenAI from 'openai'
import { startMockProvider } from '../../src/mock-provider/index.js'
import { bodyFor, CLIENT_KEYS, ROUTES } from '../helpers/bodies.js'
import { send, type RawResponse } from '../helpers/http.js'
import { startTracegate, tempDir } from '../helpers/server.js'
import { storedTrace } from '../helpers/store.js'

const mock = await startMockProvider()
t.teardown(() => mock.close())
const dataDir = tempDir('tracegate-model-routes-')
t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })

/** A target that answers 503 to everything, keeping what it was sent. */
const seen: Array<{ url: string; body: string }> = []
const busy: Server = createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    seen.push({ url: req.url ?? '', body: Buffer.concat(chunks).toString('utf8') })
    res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"message":"overloaded","type":"server_error"}}')
  })
})
await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => { busy.closeAllConnections(); busy.close(() => { resolve() }) }))
const busyUrl = `http://127.0.0.1:${(busy.address() as { port: number }).port}`

// A first start makes the accounts the routes file names; the second reads the file.
const first = await startTracegate(t, dataDir, mock)
const denied = await first.tg.admin.createAccount({ name: 'denied', plan: 'pro' })
const deniedKey = await first.tg.admin.createKey({ account: denied.id, scope: 'proxy' })
const narrowKey = await first.tg.admin.createKey({ account: first.accountId, scope: 'proxy', models: 'gpt-4o' })
await first.tg.close()
const routesFile = join(dataDir, 'routes.txt')
writeFileSync(routesFile, `# test routes
alpha gpt-4o -> ${busyUrl} gpt-4o, ${mock.url} gpt-4o-mini
alpha house-model -> * gpt-4o-mini
gamma gemini-2.5-flash -> ${busyUrl} gemini-2.5-flash, * gemini-2.0-flash
fallbacks deny ${denied.id}
`)
const s = await startTracegate(t, dataDir, mock, { TRACEGATE_ROUTES: routesFile })

function call (provider: 'alpha' | 'gamma', key: string, fields: Record<string, unknown>): Promise<RawResponse> {
  return send(s.url + ROUTES[provider], { body: JSON.stringify(bodyFor(provider, { api_key: key, ...fields })) })
}

interface Listed { target: string; model?: string; status: number; cause: string }

t.test('a routed model falls back to another model of another target, in the body', async (t) => {
  const before = mock.requests.length
  const r = await call('alpha', s.key, { model: 'gpt-4o' })
  t.equal(r.status, 200, r.text.slice(0, 200))
  const asked = seen.at(-1)!
  t.match(JSON.parse(asked.body), { model: 'gpt-4o' }, 'the first step was asked the model the call named')
  t.equal(mock.requests.length - before, 1, 'the next step answered')
  const sent = mock.requests.at(-1)!.body.toString('utf8')
  t.equal(sent, asked.body.replace('"model":"gpt-4o"', '"model":"gpt-4o-mini"'), 'asking gpt-4o-mini, every other byte as sent')
  const row = await storedTrace(s.tg, s.accountId, String(r.headers['x-request-id']))
  t.equal(row.model, 'gpt-4o-mini', 'the trace names the model that answered (and is priced as it)')
  const listed = JSON.parse(row.attempts) as Listed[]
  t.match(listed, [
    { target: busyUrl, model: 'gpt-4o', status: 503, cause: 'status 503' },
    { target: mock.url, model: 'gpt-4o-mini', status: 200, cause: '' },
  ], 'each attempt with its target and model')
})

t.test('an account denied fallbacks, and a key that does not allow the other model, keep to the model they asked for', async (t) => {
  const before = mock.requests.length
  const r = await call('alpha', deniedKey.key, { model: 'gpt-4o' })
  t.equal(r.status, 503, 'the denied account gets the first step\'s answer')
  t.match(JSON.parse(r.text), { error: { message: 'overloaded' } }, 'as the provider sent it')
  const narrow = await call('alpha', narrowKey.key, { model: 'gpt-4o' })
  t.equal(narrow.status, 503, 'a key allowed only gpt-4o is never answered by gpt-4o-mini')
  t.equal(mock.requests.length, before, 'the other step was asked nothing')
  const row = await storedTrace(s.tg, denied.id, String(r.headers['x-request-id']))
  t.match(row, { model: 'gpt-4o', status: 503 })
})

t.test('gamma: the model is in the path', async (t) => {
  const before = mock.requests.length
  const r = await call('gamma', s.key, { model: 'gemini-2.5-flash' })
  t.equal(r.status, 200, r.text.slice(0, 200))
  t.match(seen.at(-1)!.url, /^\/v1beta\/models\/gemini-2\.5-flash:/, 'the first step was asked the model in the call')
  t.equal(mock.requests.length - before, 1)
  t.match(mock.requests.at(-1)!.url, /^\/v1beta\/models\/gemini-2\.0-flash:/, 'the fallback\'s path names its model')
  t.equal(mock.requests.at(-1)!.body.toString('utf8'), seen.at(-1)!.body, 'with the same body')
  const prefixed = await call('gamma', s.key, { model: 'models/gemini-2.5-flash' })
  t.equal(prefixed.status, 200, 'the model named with its models/ prefix takes the same route')
  t.match(mock.requests.at(-1)!.url, /^\/v1beta\/models\/gemini-2\.0-flash:/)
  t.equal(mock.requests.length - before, 2)
})

t.test('a model routed as an alias goes to its target model; a model without a route as before', async (t) => {
  const before = mock.requests.length
  const r = await call('alpha', s.key, { model: 'house-model' })
  t.equal(r.status, 200, r.text.slice(0, 200))
  t.match(JSON.parse(mock.requests.at(-1)!.body.toString('utf8')), { model: 'gpt-4o-mini' })
  const plain = await call('alpha', s.key, { model: 'gpt-4.1' })
  t.equal(plain.status, 200)
  t.match(JSON.parse(mock.requests.at(-1)!.body.toString('utf8')), { model: 'gpt-4.1' }, 'an unrouted model is sent as named')
  t.equal(mock.requests.length - before, 2)
})

t.test('the official OpenAI SDK sees one stream from the fallback', async (t) => {
  const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: s.key, maxRetries: 0, defaultHeaders: { 'x-tracegate-provider-key': CLIENT_KEYS.alpha } })
  const busyBefore = seen.length
  const stream = await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'Hello through a fallback' }], stream: true })
  const ids = new Set<string>()
  let text = ''
  for await (const chunk of stream) {
    ids.add(chunk.id)
    text += chunk.choices[0]?.delta.content ?? ''
  }
  t.equal(seen.length - busyBefore, 1, 'the first step was tried')
  t.equal(ids.size, 1, 'one stream, not two run together')
  t.ok(text.length > 0, 'with its text')
})

t.test('the response cache keeps a routed answer from a key that may not call its model', async (t) => {
  const narrow = await s.tg.admin.createKey({ account: s.accountId, scope: 'proxy', models: 'gpt-4o' })
  const body = (key: string): string => JSON.stringify(bodyFor('alpha', { api_key: key, model: 'gpt-4o' }, 'Hello, cached through a route'))
  const headers = { 'x-tracegate-cache-ttl': '60' }
  const wide = await send(s.url + ROUTES.alpha, { body: body(s.key), headers })
  t.equal(wide.status, 200, 'a key that may call gpt-4o-mini is answered by the fallback')
  t.equal(wide.headers['x-tracegate-cache'], 'miss')
  t.equal((await send(s.url + ROUTES.alpha, { body: body(s.key), headers })).headers['x-tracegate-cache'], 'hit', 'and then from the cache')
  const kept = await send(s.url + ROUTES.alpha, { body: body(narrow.key), headers })
  t.equal(kept.status, 503, 'the same call by a key allowed only gpt-4o is not given the gpt-4o-mini answer')
  t.not(kept.headers['x-tracegate-cache'], 'hit')
})
