// Ordered targets per provider (TRACEGATE_<NAME>_BASE_URL as a list) through the real server: a call moves
// to the next target when one cannot be reached or answers 5xx, 429, or 401/403 to the server-side key;
// a target that answered 429 with retry-after is skipped for that long; a 429 from every target reaches
// the client at once with the provider's headers; a caller's own key refused stays refused; one target
// makes one attempt unless TRACEGATE_UPSTREAM_ATTEMPTS asks for more, with backoff between them. The
// failing targets are real HTTP servers on loopback (and a closed port), the answering one the mock.
import t, { type Test } from 'tap'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { rmSync } from 'node:fs'
import { startMockProvider } from '../../src/mock-provider/index.js'
import { bodyFor, CLIENT_KEYS, DEFAULT_MODELS, type Provider, ROUTES } from '../helpers/bodies.js'
import { send, type RawResponse } from '../helpers/http.js'
import { closedPort, startTracegate, tempDir, type Started } from '../helpers/server.js'
import { capturingLogger } from '../helpers/logs.js'
import { redisUrl } from '../helpers/redis.js'
import { Redis } from 'ioredis'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { CHANNEL } from '../../src/upstream/shared-rests.js'
import { storedTrace } from '../helpers/store.js'
import { until } from '../helpers/wait.js'
import { traceFilter } from '../../src/dashboard/params.js'

const mock = await startMockProvider()
t.teardown(() => mock.close())
// chDB takes one data directory per process: the scenarios run one after the other on this one.
const dataDir = tempDir('tracegate-resilience-')
t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })

interface Failing { readonly url: string; readonly seen: IncomingMessage[] }

/** A target that answers every request with `status`, `headers` and a JSON error body. */
async function failing (status: number, headers: Record<string, string> = {}): Promise<Failing> {
  const seen: IncomingMessage[] = []
  const server: Server = createServer((req, res) => {
    seen.push(req)
    req.resume()
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers })
      res.end(JSON.stringify({ error: { message: `target says ${status}`, type: 'test', code: String(status) } }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => { resolve() }) }))
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen }
}

function call (s: Started, p: Provider, fields: Record<string, unknown> = {}): Promise<RawResponse> {
  return send(s.url + ROUTES[p], { body: JSON.stringify(bodyFor(p, { api_key: s.key, ...fields })) })
}

const mockHits = (): number => mock.requests.length

async function metric (s: Started): Promise<string> {
  return await s.tg.metrics.registry.metrics()
}

function attempts (text: string, provider: string, target: string, result: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`tracegate_upstream_attempts_total{provider="${provider}",target="${target}",result="${result}"}`))
  return line === undefined ? 0 : Number(line.split(' ').pop())
}

t.test('a target down or answering 503: the call moves on and the next target answers, streamed or not', async (t: Test) => {
  const down = `http://127.0.0.1:${await closedPort()}`
  const busy = await failing(503)
  const s = await startTracegate(t, dataDir, mock, { TRACEGATE_ALPHA_BASE_URL: `${down},${busy.url},${mock.url}` })
  const before = mockHits()
  const r = await call(s, 'alpha')
  t.equal(r.status, 200, r.text.slice(0, 200))
  t.match(JSON.parse(r.text), { object: 'chat.completion' }, 'the mock\'s answer, passed on')
  t.equal(busy.seen.length, 1, 'the 503 target was tried once')
  t.equal(mockHits() - before, 1, 'the mock answered once')
  const streamed = await call(s, 'alpha', { stream: true })
  t.equal(streamed.status, 200)
  t.match(streamed.text, /data: \[DONE\]/, 'the stream arrived whole')
  t.equal(busy.seen.length, 2)
  const row = await storedTrace(s.tg, s.accountId, String(r.headers['x-request-id']))
  t.match(row, { status: 200, outcome: 'ok' }, 'the trace holds the answer that reached the client')
  const listed = JSON.parse(row.attempts) as Array<{ target: string; key_id: string; status: number; ms: number; cause: string }>
  t.match(listed, [
    { target: down, key_id: '', status: 0, cause: /^connect_refused: / },
    { target: busy.url, key_id: '', status: 503, cause: 'status 503' },
    { target: mock.url, key_id: '', status: 200, cause: '' },
  ], 'the trace lists each attempt: target, status and why it gave way')
  t.ok(listed.every((a) => typeof a.ms === 'number' && a.ms >= 0), 'with its time')
  // The list's filter: beta has one target, so its call is made directly and lists no attempts.
  const direct = String((await call(s, 'beta')).headers['x-request-id'])
  t.equal((await storedTrace(s.tg, s.accountId, direct)).attempts, '', 'a direct call lists no attempts')
  const list = async (q: string): Promise<string[]> => (await s.tg.store.call('listTraces', traceFilter(s.accountId, new URLSearchParams(q)))).traces.map((x) => x.trace_id)
  const fell = await list('fell_over=true')
  t.ok(fell.includes(row.trace_id) && !fell.includes(direct), 'fell_over=true lists the call that fell over, not the direct one')
  const notFell = await list('fell_over=false')
  t.ok(notFell.includes(direct) && !notFell.includes(row.trace_id), 'fell_over=false the other way round')
  const m = await metric(s)
  t.equal(attempts(m, 'alpha', down, 'fell_over'), 2, 'the unreachable target gave way twice')
  t.equal(attempts(m, 'alpha', busy.url, 'fell_over'), 2, 'the 503 target gave way twice')
  t.equal(attempts(m, 'alpha', mock.url, 'answered'), 2, 'the mock answered both')
  await s.tg.close()
})

t.test('a stream cut before its first event falls over; one cut after it reaches the client as a cut', async (t: Test) => {
  // Answers 200 as an event stream, then closes the connection: before any event, or after one.
  const cutter = async (events: number): Promise<Failing> => {
    const seen: IncomingMessage[] = []
    const server = createServer((req, res) => {
      seen.push(req)
      req.resume()
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.flushHeaders()
        for (let i = 0; i < events; i++) res.write(`data: {"id":"cut","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"}}]}\n\n`)
        setTimeout(() => { res.socket?.destroy() }, 20)
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => { resolve() }) }))
    return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen }
  }
  const early = await cutter(0)
  const late = await cutter(1)
  const s = await startTracegate(t, dataDir, mock, { TRACEGATE_ALPHA_BASE_URL: `${early.url},${mock.url}`, TRACEGATE_BETA_BASE_URL: `${late.url},${mock.url}` })
  const r = await call(s, 'alpha', { stream: true })
  t.equal(r.status, 200)
  t.match(r.text, /data: \[DONE\]/, 'the next target\'s stream, whole')
  t.notMatch(r.text, /"id":"cut"/, 'nothing of the cut stream')
  t.equal(early.seen.length, 1)
  const row = await storedTrace(s.tg, s.accountId, String(r.headers['x-request-id']))
  t.match(JSON.parse(row.attempts), [{ target: early.url, status: 200, cause: /^stream cut before its first event: / }, { target: mock.url, status: 200, cause: '' }])
  // Once an event reached the client the call is that stream's: the cut reaches the client.
  const cut = await send(s.url + ROUTES.beta, { body: JSON.stringify(bodyFor('beta', { api_key: s.key, stream: true })) }).catch((err: unknown) => err)
  t.equal(late.seen.length, 1)
  const traced = await until(async () => {
    await s.tg.store.call('flushTraces')
    return (await s.tg.store.call('listTraces', traceFilter(s.accountId, new URLSearchParams('provider=beta')))).traces[0]
  }, { ms: 10_000, what: 'the cut call\'s trace' })
  t.equal(traced.outcome, 'provider_stream_error', `the cut stream is the call's (${cut instanceof Error ? cut.message : 'answered'})`)
  t.equal(traced.status, 200)
  await s.tg.close()
})

/** A target that reads each request and then does `what` with its socket: reset it at once, or hold it unanswered. */
async function misbehaving (what: 'reset' | 'silent'): Promise<Failing> {
  const seen: IncomingMessage[] = []
  const server = createServer((req) => {
    seen.push(req)
    req.resume()
    req.on('end', () => { if (what === 'reset') req.socket.destroy() })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => { resolve() }) }))
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen }
}

t.test('a target that resets the connection and one that sends no headers in time: the call moves on; the official SDKs see one answer and one stream', async (t: Test) => {
  const resets = await misbehaving('reset')
  const silent = await misbehaving('silent')
  const list = `${resets.url},${silent.url},${mock.url}`
  const s = await startTracegate(t, dataDir, mock, { TRACEGATE_ALPHA_BASE_URL: list, TRACEGATE_BETA_BASE_URL: list, TRACEGATE_UPSTREAM_HEADERS_TIMEOUT_MS: '300' })
  const r = await call(s, 'alpha')
  t.equal(r.status, 200, r.text.slice(0, 200))
  const row = await storedTrace(s.tg, s.accountId, String(r.headers['x-request-id']))
  t.match(JSON.parse(row.attempts), [
    { target: resets.url, status: 0, cause: /^(reset|socket_closed): / },
    { target: silent.url, status: 0, cause: /^headers_timeout: / },
    { target: mock.url, status: 200, cause: '' },
  ], 'a reset, then no headers within the timeout, then the answer')

  const before = { resets: resets.seen.length, silent: silent.seen.length }
  const openai = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: s.key, maxRetries: 0, defaultHeaders: { 'x-tracegate-provider-key': CLIENT_KEYS.alpha } })
  const completion = await openai.chat.completions.create({ model: DEFAULT_MODELS.alpha, messages: [{ role: 'user', content: 'Hello after two failures' }] })
  t.ok((completion.choices[0]?.message.content ?? '').length > 0, 'the OpenAI SDK gets one answer')
  const anthropic = new Anthropic({ baseURL: s.url, apiKey: s.key, maxRetries: 0, defaultHeaders: { 'x-tracegate-provider-key': CLIENT_KEYS.beta } })
  const stream = anthropic.messages.stream({ model: DEFAULT_MODELS.beta, max_tokens: 64, messages: [{ role: 'user', content: 'Hello after two failures' }] })
  let starts = 0
  let stops = 0
  for await (const event of stream) {
    if (event.type === 'message_start') starts++
    if (event.type === 'message_stop') stops++
  }
  const text = (await stream.finalMessage()).content.map((b) => (b.type === 'text' ? b.text : '')).join('')
  t.equal(starts, 1, 'the Anthropic SDK\'s stream starts once')
  t.equal(stops, 1, 'and ends once')
  t.ok(text.length > 0, 'with its text')
  t.equal(resets.seen.length - before.resets, 2, 'each SDK call met the reset')
  t.equal(silent.seen.length - before.silent, 2, 'and the silent target')
  await s.tg.close()
})

t.test('429 with retry-after: the target is skipped for that long; 401 moves only with the server-side key', async (t: Test) => {
  const limited = await failing(429, { 'retry-after': '30' })
  const refusing = await failing(401)
  const s = await startTracegate(t, dataDir, mock, {
    TRACEGATE_BETA_BASE_URL: `${limited.url},${mock.url}`,
    TRACEGATE_GAMMA_BASE_URL: `${refusing.url},${mock.url}`,
    TRACEGATE_GAMMA_API_KEY: 'server-side-gamma-key',
  })
  const first = await call(s, 'beta')
  t.equal(first.status, 200, first.text.slice(0, 200))
  t.equal(limited.seen.length, 1)
  const second = await call(s, 'beta')
  t.equal(second.status, 200)
  t.equal(limited.seen.length, 1, 'the limited target is not asked again while its retry-after runs')

  // The caller's own provider key refused: the next target would refuse it too; the client hears it.
  const own = await call(s, 'gamma')
  t.equal(own.status, 401, 'the caller\'s own key refused reaches the client')
  t.equal(refusing.seen.length, 1)
  const account = await s.tg.admin.createAccount({ name: 'shared-keys', plan: 'pro', serverSideKeys: true })
  const key = await s.tg.admin.createKey({ account: account.id, scope: 'proxy' })
  const serverSide = await send(s.url + ROUTES.gamma, { body: JSON.stringify({ ...bodyFor('gamma', { api_key: key.key }), gamma_api_key: undefined }) })
  t.equal(serverSide.status, 200, `the server-side key refused by one target moves to the next: ${serverSide.text.slice(0, 200)}`)
  t.equal(refusing.seen.length, 2)
  t.equal(refusing.seen[1]!.headers['x-goog-api-key'], 'server-side-gamma-key', 'the refused target had the server-side key')
  await s.tg.close()
})

t.test('429 from every target reaches the client at once with its headers; one target makes one attempt', async (t: Test) => {
  const a = await failing(429, { 'retry-after': '20', 'x-ratelimit-remaining-requests': '0' })
  const b = await failing(429, { 'retry-after': '20', 'x-ratelimit-remaining-requests': '0' })
  const only = await failing(503)
  const s = await startTracegate(t, dataDir, mock, { TRACEGATE_ALPHA_BASE_URL: `${a.url},${b.url}`, TRACEGATE_BETA_BASE_URL: only.url })
  const started = Date.now()
  const r = await call(s, 'alpha')
  t.equal(r.status, 429)
  t.equal(r.headers['retry-after'], '20', 'the provider\'s retry-after')
  t.equal(r.headers['x-ratelimit-remaining-requests'], '0', 'and its rate-limit headers')
  t.ok(Date.now() - started < 5_000, 'answered without waiting out the retry-after')
  t.same([a.seen.length, b.seen.length], [1, 1], 'each target asked once')
  const again = await call(s, 'alpha')
  t.equal(again.status, 429, 'both cooling down: the client hears 429 at once')
  t.equal(a.seen.length + b.seen.length, 3, 'one target asked, not both')

  const one = await call(s, 'beta')
  t.equal(one.status, 503, 'a single target\'s 503 reaches the client')
  t.equal(only.seen.length, 1, 'one attempt by default')
  await s.tg.close()
})

t.test('TRACEGATE_UPSTREAM_ATTEMPTS retries one target with backoff, then gives the client its answer', async (t: Test) => {
  const only = await failing(503)
  const s = await startTracegate(t, dataDir, mock, { TRACEGATE_ALPHA_BASE_URL: only.url, TRACEGATE_UPSTREAM_ATTEMPTS: '3', TRACEGATE_UPSTREAM_BACKOFF_MS: '20' })
  const r = await call(s, 'alpha')
  t.equal(r.status, 503)
  t.equal(only.seen.length, 3, 'three attempts on the one target')
  const m = await metric(s)
  t.equal(attempts(m, 'alpha', only.url, 'fell_over'), 2)
  t.equal(attempts(m, 'alpha', only.url, 'answered'), 1, 'the last answer went to the client')
  await s.tg.close()
})

t.test('a pool of server-side keys: a key limited rests, a key refused is set aside and logged once, the caller\'s own key is never swapped', async (t: Test) => {
  // One target that knows three keys: key-a is rate-limited, key-b is revoked, key-c answers.
  const seen: string[] = []
  const server = createServer((req, res) => {
    const key = String(req.headers.authorization ?? '').replace(/^Bearer /, '')
    seen.push(key)
    req.resume()
    req.on('end', () => {
      if (key === 'key-a') { res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '30' }).end('{"error":{"message":"slow down"}}'); return }
      if (key !== 'key-c') { res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"message":"bad key"}}'); return }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
        id: 'chatcmpl-pool', object: 'chat.completion', created: 1, model: 'gpt-4o-mini',
        choices: [{ index: 0, message: { role: 'assistant', content: 'pooled' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
      }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => { resolve() }) }))
  const logs = capturingLogger()
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
  const s = await startTracegate(t, dataDir, mock, { TRACEGATE_ALPHA_BASE_URL: url, TRACEGATE_ALPHA_API_KEY: 'key-a, key-b,key-c' }, { log: logs.log })
  const account = await s.tg.admin.createAccount({ name: 'pooled', plan: 'pro', serverSideKeys: true })
  const key = (await s.tg.admin.createKey({ account: account.id, scope: 'proxy' })).key
  const pooled = (): Promise<RawResponse> => send(s.url + ROUTES.alpha, { body: JSON.stringify({ ...bodyFor('alpha', { api_key: key }), alpha_api_key: undefined }) })

  const first = await pooled()
  t.equal(first.status, 200, first.text.slice(0, 200))
  t.same(seen, ['key-a', 'key-b', 'key-c'], 'the limited key, then the refused one, then the one that answers, on the one target')
  const traced = await storedTrace(s.tg, account.id, String(first.headers['x-request-id']))
  const listed = JSON.parse(traced.attempts) as Array<{ key_id: string; status: number }>
  t.same(listed.map((a) => a.status), [429, 401, 200], 'the trace lists the three attempts')
  t.ok(listed.every((a) => /^pk_[0-9a-f]{12}$/.test(a.key_id)) && new Set(listed.map((a) => a.key_id)).size === 3, 'each by its key\'s id')
  t.notOk(traced.attempts.includes('key-'), 'never by the key')
  const second = await pooled()
  t.equal(second.status, 200)
  t.same(seen.slice(3), ['key-c'], 'the resting and the set-aside keys are not tried again')
  const asides = logs.lines.filter((l) => l.msg === 'provider key set aside')
  t.equal(asides.length, 1, 'the refused key is logged once')
  t.match(asides[0], { provider: 'alpha', status: 401, key_id: /^pk_[0-9a-f]{12}$/ })
  t.notOk(logs.raw.join('\n').includes('key-b'), 'no log line holds a key')

  // The caller's own key, refused, is the caller's answer: no pooled key stands in for it.
  const before = seen.length
  const own = await call(s, 'alpha')
  t.equal(own.status, 401)
  t.equal(seen.length - before, 1, 'one attempt, with the caller\'s key')
  await s.tg.close()
})

t.test('a bad list of base URLs or keys stops the start, naming the variable', async (t: Test) => {
  for (const value of ['http://a.example,,http://b.example', 'http://a.example,ftp://b.example', 'http://u:p@a.example']) {
    await t.rejects(startTracegate(t, dataDir, mock, { TRACEGATE_ALPHA_BASE_URL: value }), /TRACEGATE_ALPHA_BASE_URL/, value)
  }
  for (const value of ['key-a,,key-b', 'key-a,key b']) {
    await t.rejects(startTracegate(t, dataDir, mock, { TRACEGATE_BETA_API_KEY: value }), /TRACEGATE_BETA_API_KEY/, 'a bad pool')
  }
})

t.test('with Redis, a target\'s rest is published, and a rest published elsewhere is kept', async (t: Test) => {
  const url = await redisUrl(t)
  const limited = await failing(429, { 'retry-after': '30' })
  const elsewhere = await failing(503)
  const s = await startTracegate(t, dataDir, mock, {
    TRACEGATE_REDIS_URL: url,
    TRACEGATE_ALPHA_BASE_URL: `${limited.url},${mock.url}`,
    TRACEGATE_BETA_BASE_URL: `${elsewhere.url},${mock.url}`,
  })
  const listener = new Redis(url)
  const pub = new Redis(url)
  t.teardown(() => { listener.disconnect(); pub.disconnect() })
  const heard: Array<Record<string, unknown>> = []
  await listener.subscribe(CHANNEL)
  listener.on('message', (_c: string, text: string) => { heard.push(JSON.parse(text) as Record<string, unknown>) })
  // The proxy's own connections come up in the background.
  await until(async () => Number((await pub.pubsub('NUMSUB', CHANNEL))[1]) >= 2 || undefined, { ms: 10_000, what: 'the proxy subscribed' })

  const started = Date.now()
  t.equal((await call(s, 'alpha')).status, 200)
  const rest = await until(() => heard.find((m) => m.kind === 'target'), { ms: 5_000, what: 'the published rest' })
  t.match(rest, { kind: 'target', provider: 'alpha', id: limited.url })
  t.ok(Number(rest.until) >= started + 29_000, 'until the retry-after ends')
  t.notOk(JSON.stringify(heard).includes('mock-alpha'), 'no key in a message')

  // Another instance says beta's first target rests: this one skips it.
  await pub.publish(CHANNEL, JSON.stringify({ kind: 'target', provider: 'beta', id: elsewhere.url, until: Date.now() + 30_000, origin: 'another-instance' }))
  await until(async () => {
    const before = elsewhere.seen.length
    const r = await call(s, 'beta')
    return r.status === 200 && elsewhere.seen.length === before ? true : undefined
  }, { ms: 5_000, what: 'a beta call that skips the resting target' })
  const seenNow = elsewhere.seen.length
  t.equal((await call(s, 'beta')).status, 200)
  t.equal(elsewhere.seen.length, seenNow, 'the target resting elsewhere is not asked')
  await s.tg.close()
})
