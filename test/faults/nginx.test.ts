// tracegate behind Debian's nginx running the shipped deploy/nginx.conf (production hardening, item 7):
// TLS in front, HTTP/1.1 with keep-alive behind; JSON and streamed answers come back, the stream's
// events as they are produced; nginx answers what uWebSockets.js 20.30 would not (HTTP/1.0, a request
// without Host, two Content-Lengths) and refuses an oversized body with tracegate's own error; the
// dashboard and its live WebSocket work through it; and the sign-in limiter counts the client nginx saw
// only when TRACEGATE_TRUST_PROXY is on. What only the receiving side can see (one kept-alive upstream
// connection, the exact forwarded headers, a body passed on before it is complete) is checked with a
// stand-in HTTP server behind a third nginx.
//
// Two tracegates: one in this process with the setting on, one in a child process with it off (chDB
// allows one data directory per process), each behind its own nginx. Clients come from different
// loopback addresses (127.0.0.2, 127.0.0.3, …), which is what nginx sees and forwards.
import t from 'tap'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import { Agent as HttpsAgent } from 'node:https'
import type { AddressInfo } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { Agent, WebSocket } from 'undici'
import { LiveSocket } from '../helpers/dashboard.js'
import { startServer } from '../helpers/server.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { SseSplitter } from '../helpers/sse.js'
import { https, rawTls, requireNginx, spawnTracegate, startNginx, type HttpsAnswer, type Nginx } from './nginx-helpers.js'
import { withTimeout } from '../helpers/wait.js'
import { MAX_FAILURES } from '../../src/dashboard/signin-limit.js'

requireNginx()
const [s, off] = await Promise.all([
  startServer(t, { TRACEGATE_TRUST_PROXY: 'on' }),
  spawnTracegate(t, { TRACEGATE_TRUST_PROXY: 'off' }),
])
const front = await startNginx(t, { upstreamProxy: s.tg.proxyPort, upstreamDashboard: s.tg.dashboardPort })
const frontOff = await startNginx(t, { upstreamProxy: off.proxyPort, upstreamDashboard: off.dashboardPort })

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const JSON_HEADERS = { 'content-type': 'application/json' }

function call (fields: Record<string, unknown>, onData?: (chunk: Buffer, at: number) => void): Promise<HttpsAnswer> {
  return https(front.proxyUrl + ROUTES.alpha, front.ca, {
    method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(bodyFor('alpha', { api_key: s.key, ...fields })), onData,
  })
}

t.test('a JSON call and a stream pass through nginx over TLS, the stream event by event', async (t) => {
  const r = await call({})
  t.equal(r.status, 200)
  t.equal(r.json?.object, 'chat.completion')
  t.match(r.headers['x-request-id'], UUID, "tracegate's answer")

  // A body sent in chunks without a length passes unbuffered (proxy_request_buffering off), still chunked.
  const body = JSON.stringify(bodyFor('alpha', { api_key: s.key }))
  const chunked = await rawTls(front.proxyPort, front.ca, `POST ${ROUTES.alpha} HTTP/1.1\r\nhost: x\r\n` +
    `content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n` +
    `${Buffer.byteLength(body.slice(0, 20)).toString(16)}\r\n${body.slice(0, 20)}\r\n` +
    `${Buffer.byteLength(body.slice(20)).toString(16)}\r\n${body.slice(20)}\r\n0\r\n\r\n`)
  t.equal(chunked.status, 200, 'a chunked request body')
  t.equal(JSON.parse(chunked.body).object, 'chat.completion')

  // Six chunks 300 ms apart: the provider takes 1.5 s, and each event must arrive when it is produced.
  const sse = new SseSplitter()
  const start = performance.now()
  const stream = await call({ model: 'gpt-4o-mini-chunks-6-gap-300', stream: true }, (c, at) => { sse.push(c, at) })
  const end = performance.now()
  t.equal(stream.status, 200)
  t.match(stream.headers['content-type'], /^text\/event-stream/)
  t.equal(sse.events.at(-1)?.data, '[DONE]', 'the stream ends cleanly')
  const first = sse.events[0]!.at - start
  t.ok(end - start >= 1400, `the provider took its time (${(end - start).toFixed(0)} ms)`)
  t.ok(first < 600, `the first event arrived after ${first.toFixed(0)} ms, not at the end`)
  const arrivals = new Set(sse.events.map((e) => Math.round(e.at / 100)))
  t.ok(arrivals.size >= 5, `events arrived at ${arrivals.size} different times, not in one buffered burst`)
})

t.test('nginx answers for uWebSockets.js what it would not: HTTP/1.0, no Host, two Content-Lengths', async (t) => {
  const body = JSON.stringify(bodyFor('alpha', { api_key: s.key }))
  const http10 = await rawTls(front.proxyPort, front.ca,
    `POST ${ROUTES.alpha} HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
  t.equal(http10.status, 200, 'HTTP/1.0 is answered (nginx speaks HTTP/1.1 to tracegate)')
  t.match(http10.headers['x-request-id'], UUID, "tracegate's answer")
  t.equal(JSON.parse(http10.body).object, 'chat.completion')

  const streamBody = JSON.stringify(bodyFor('alpha', { api_key: s.key, stream: true }))
  const stream10 = await rawTls(front.proxyPort, front.ca,
    `POST ${ROUTES.alpha} HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(streamBody)}\r\n\r\n${streamBody}`)
  t.equal(stream10.status, 200)
  t.notOk('transfer-encoding' in stream10.headers, 'no chunked framing to an HTTP/1.0 client')
  t.match(stream10.body, /data: \[DONE\]\n\n$/, 'the whole stream, ended by the connection closing')

  // nginx refuses these itself; an answer without x-request-id never came from tracegate.
  const noHost = await rawTls(front.proxyPort, front.ca, `GET /healthz HTTP/1.1\r\n\r\n`)
  t.equal(noHost.status, 400, 'HTTP/1.1 without Host')
  t.notOk('x-request-id' in noHost.headers)
  const twoLengths = await rawTls(front.proxyPort, front.ca,
    `POST ${ROUTES.alpha} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
    `content-length: 2\r\n\r\n${body}`)
  t.equal(twoLengths.status, 400, 'two Content-Lengths')
  t.notOk('x-request-id' in twoLengths.headers)
})

t.test('client_max_body_size is TRACEGATE_MAX_BODY_BYTES: nginx refuses one byte more, with tracegate\'s error', async (t) => {
  const limit = 4 * 1024 * 1024
  const head = (length: number): string => `POST ${ROUTES.alpha} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\n\r\n`
  // Exactly the limit passes nginx and is read whole by tracegate (an object without api_key).
  const atLimit = `{"pad":"${'x'.repeat(limit - 10)}"}`
  t.equal(Buffer.byteLength(atLimit), limit)
  const passed = await rawTls(front.proxyPort, front.ca, head(limit) + atLimit)
  t.same([passed.status, JSON.parse(passed.body).error.code], [400, 'missing_api_key'])
  t.match(passed.headers['x-request-id'], UUID, 'tracegate answered')

  const over = await rawTls(front.proxyPort, front.ca, head(limit + 1) + '{')
  t.equal(over.status, 413)
  t.match(over.headers['content-type'], /^application\/json/)
  t.equal(JSON.parse(over.body).error.code, 'body_too_large')
  // nginx's $request_id (32 hex digits), not tracegate's UUID: the body never reached tracegate.
  t.match(over.headers['x-request-id'], /^[0-9a-f]{32}$/, 'nginx answered')
  t.equal(JSON.parse(over.body).error.request_id, over.headers['x-request-id'])
})

t.test('the dashboard through nginx: a Secure session cookie and the live WebSocket', async (t) => {
  const account = await s.tg.admin.createAccount({ name: 'behind-nginx', plan: 'pro' })
  const email = 'nginx@example.com'
  const password = 'pw-behind-nginx-correct-horse'
  await s.tg.admin.createUser({ account: account.id, email, password })
  const key = await s.tg.admin.createKey({ account: account.id, scope: 'proxy' })

  const origin = front.dashboardUrl
  const signIn = await https(front.dashboardUrl + '/api/ui/signin', front.ca, {
    method: 'POST', headers: { ...JSON_HEADERS, origin }, body: JSON.stringify({ email, password }),
  })
  t.equal(signIn.status, 200, 'Origin matches the host the browser asked nginx for')
  const cookie = String(signIn.headers['set-cookie'])
  t.match(cookie, /;\s*Secure/i, 'x-forwarded-proto https is believed')
  const session = await https(front.dashboardUrl + '/api/ui/session', front.ca, { headers: { cookie: cookie.split(';')[0]! } })
  t.equal(session.status, 200)

  const dispatcher = new Agent({ connect: { ca: front.ca } })
  t.teardown(() => dispatcher.close())
  const url = `wss://127.0.0.1:${front.dashboardPort}/api/ui/live?csrf=${encodeURIComponent(signIn.json.csrf)}`
  const ws = new WebSocket(url, { dispatcher, headers: { origin, cookie: cookie.split(';')[0]! } } as any)
  const messages: any[] = []
  ws.addEventListener('message', (e) => { messages.push(JSON.parse(String(e.data))) })
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => { resolve() })
    ws.addEventListener('error', () => { reject(new Error('the live socket was refused through nginx')) })
  })
  const live = new LiveSocket(ws, messages)
  t.teardown(() => { live.close() })

  const r = await https(front.proxyUrl + ROUTES.alpha, front.ca, {
    method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(bodyFor('alpha', { api_key: key.key })),
  })
  t.equal(r.status, 200)
  const trace = await live.waitFor(String(r.headers['x-request-id']), 10_000)
  t.equal(trace.outcome, 'ok', 'the call arrived on the live feed through nginx')
})

t.test('what tracegate receives from nginx: HTTP/1.1 on kept-alive connections, the forwarded headers, Upgrade', async (t) => {
  // A stand-in for tracegate that records each request and the connection it came on (tracegate cannot
  // tell its connections apart from the outside).
  const seen: Array<{ version: string; port: number; headers: IncomingHttpHeaders }> = []
  let arrived = (): void => {}
  const upstream = createServer((req, res) => {
    seen.push({ version: req.httpVersion, port: req.socket.remotePort ?? 0, headers: req.headers })
    arrived()
    req.resume()
    req.on('end', () => { res.end('{}') })
  })
  await new Promise<void>((resolve) => { upstream.listen(0, '127.0.0.1', resolve) })
  t.teardown(() => { upstream.closeAllConnections(); upstream.close() })
  const port = (upstream.address() as AddressInfo).port
  const n = await startNginx(t, { upstreamProxy: port, upstreamDashboard: port })

  // One client connection, so one nginx worker and its pool of upstream connections.
  const agent = new HttpsAgent({ keepAlive: true, maxSockets: 1, ca: n.ca, localAddress: '127.0.0.9' })
  t.teardown(() => { agent.destroy() })
  for (let i = 0; i < 10; i++) {
    const r = await https(n.proxyUrl + '/healthz', n.ca, { agent, headers: { 'x-forwarded-for': '192.0.2.1' } })
    t.equal(r.status, 200)
  }
  t.same([...new Set(seen.map((x) => x.version))], ['1.1'], 'HTTP/1.1 upstream')
  t.equal(new Set(seen.map((x) => x.port)).size, 1, '10 requests on one kept-alive upstream connection')
  const h = seen[0]!.headers
  t.equal(h['x-forwarded-for'], '192.0.2.1, 127.0.0.9', "the client's claim, then the address nginx saw")
  t.equal(h['x-real-ip'], '127.0.0.9')
  t.equal(h['x-forwarded-proto'], 'https')
  t.equal(h['x-forwarded-host'], `127.0.0.1:${n.proxyPort}`, 'the host the client asked for, port included')
  t.equal(h.host, `127.0.0.1:${n.proxyPort}`)
  t.equal(h.connection, undefined, 'no Connection: close, so the connection stays alive')

  seen.length = 0
  await https(n.dashboardUrl + '/api/ui/live', n.ca, {
    headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' },
  })
  t.match(seen[0]?.headers, { upgrade: 'websocket', connection: 'upgrade' }, 'a WebSocket handshake keeps its Upgrade')

  // The request reaches tracegate while its body is still arriving (proxy_request_buffering off).
  seen.length = 0
  const reached = new Promise<void>((resolve) => { arrived = resolve })
  const socket = tlsConnect({ port: n.proxyPort, host: '127.0.0.1', ca: n.ca, servername: 'localhost' })
  t.teardown(() => { socket.destroy() })
  const answer = new Promise<string>((resolve) => {
    let text = ''
    socket.setEncoding('utf8').on('data', (c: string) => { text += c; if (text.endsWith('{}')) resolve(text) })
  })
  socket.write(`POST ${ROUTES.alpha} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 4\r\n\r\n{"`)
  await withTimeout(reached, 5_000, 'the request reached the upstream only with its whole body')
  t.pass('the request reached the upstream before its body was complete')
  socket.write('"}')
  t.match(await withTimeout(answer, 5_000, 'no answer'), /^HTTP\/1\.1 200/)
})

/** MAX_FAILURES failed sign-ins at once from one client, each with its own email and its own X-Forwarded-For claim. */
async function failures (n: Nginx, from: string, tag: string): Promise<number[]> {
  const answers = await Promise.all(Array.from({ length: MAX_FAILURES }, (_, i) => signIn(n, from, `${tag}-${i}@example.com`, `198.51.100.${i + 1}`)))
  return answers.map((a) => a.status)
}

function signIn (n: Nginx, from: string, email: string, claim?: string): Promise<HttpsAnswer> {
  return https(n.dashboardUrl + '/api/ui/signin', n.ca, {
    method: 'POST',
    from,
    headers: { ...JSON_HEADERS, ...(claim === undefined ? {} : { 'x-forwarded-for': claim }) },
    body: JSON.stringify({ email, password: 'wrong-password' }),
  })
}

t.test('the sign-in limiter counts the client nginx saw only when TRACEGATE_TRUST_PROXY is on', async (t) => {
  const all401 = Array.from({ length: MAX_FAILURES }, () => 401)
  // Both tracegates at once: each burst waits out the limiter's growing delays.
  const [on, offAnswers] = await Promise.all([failures(front, '127.0.0.2', 'on'), failures(frontOff, '127.0.0.2', 'off')])
  t.same(on, all401, 'trust on: every failure answered')
  t.same(offAnswers, all401, 'trust off: every failure answered')

  // On: the client's own X-Forwarded-For claims did not spread its failures; nginx's entry is what counts.
  const same = await signIn(front, '127.0.0.2', 'on-next@example.com', '198.51.100.200')
  t.same([same.status, same.json?.error?.code], [429, 'too_many_attempts'], 'trust on: the same client is refused')
  const other = await signIn(front, '127.0.0.3', 'on-other@example.com')
  t.same([other.status, other.json?.error?.code], [401, 'invalid_credentials'], 'trust on: another client keeps its own limit')

  // Off: tracegate counts its socket's peer, nginx, so every client behind it shares one limit.
  const offOther = await signIn(frontOff, '127.0.0.3', 'off-other@example.com')
  t.same([offOther.status, offOther.json?.error?.code], [429, 'too_many_attempts'], 'trust off: another client is refused too')
})
