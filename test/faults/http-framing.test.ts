// Broken request heads, end to end against a real server on both ports: the ones uWS hands to a route
// are answered 400 malformed_request and closed at once, and nothing pipelined behind them is answered
// (two content-length headers used to be taken, the first winning: request smuggling); the ones uWS 20.30 refuses itself are closed at once or held
// until its idle timer, exactly as docs/deployment.md's limits of the HTTP front end say. Nothing reaches
// the provider, and the process keeps answering.
import t, { type Test } from 'tap'
import { startServer } from '../helpers/server.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { HEAD_CASES, HELD_MAX_MS, HELD_MIN_MS, PROMPT_MS, type HeadCase } from './cases.js'
import { parseResponse, rawRequest, type RawResult } from '../helpers/raw-call.js'

const s = await startServer(t)
const proxy = s.tg.proxyPort
const dashboard = s.tg.dashboardPort
const valid = JSON.stringify(bodyFor('alpha', { api_key: s.key }))
const signin = JSON.stringify({ email: 'a@example.com', password: 'x' })

function expectFate (t: Test, c: HeadCase, r: RawResult, where: string): void {
  const what = `${c.name} (${where})`
  if (c.fate === 'answer') {
    const answer = parseResponse(r.bytes)
    t.equal(answer?.status, 400, `${what}: 400`)
    t.equal(answer === null ? null : JSON.parse(answer.body.toString('utf8')).error.code, 'malformed_request', what)
    t.equal(answer?.headers.get('connection'), 'close', `${what}: says it closes`)
    t.equal(answer?.length, r.bytes.length, `${what}: nothing else was answered`)
    t.ok(r.closedMs !== null && r.closedMs < PROMPT_MS, `${what}: closed at once (${r.closedMs?.toFixed(0)} ms)`)
  } else if (c.fate === 'close') {
    t.equal(r.bytes.length, 0, `${what}: no answer`)
    t.ok(r.closedMs !== null && r.closedMs < PROMPT_MS, `${what}: closed at once (${r.closedMs?.toFixed(0)} ms)`)
  } else {
    t.equal(r.bytes.length, 0, `${what}: no answer`)
    t.ok(r.closedMs !== null && r.closedMs >= HELD_MIN_MS && r.closedMs <= HELD_MAX_MS, `${what}: closed by uWS's idle timer (${r.closedMs?.toFixed(0)} ms)`)
  }
}

t.test('every broken head, on the proxy route and the dashboard, at once', async (t) => {
  const before = s.mock.stats.received
  let healthy = 0
  let unhealthy = 0
  const poll = setInterval(() => {
    fetch(s.url + '/healthz').then((r) => { if (r.status === 200) healthy++; else unhealthy++ }, () => { unhealthy++ })
  }, 250)
  const runs = HEAD_CASES.flatMap((c) => [
    rawRequest(proxy, c.bytes(ROUTES.alpha, valid), HELD_MAX_MS + 4000).then((r) => { expectFate(t, c, r, 'proxy route') }),
    rawRequest(proxy, c.bytes('/healthz', ''), HELD_MAX_MS + 4000).then((r) => { expectFate(t, c, r, 'proxy /healthz') }),
    rawRequest(dashboard, c.bytes('/api/ui/signin', signin), HELD_MAX_MS + 4000).then((r) => { expectFate(t, c, r, 'dashboard sign-in') }),
    rawRequest(dashboard, c.bytes('/nowhere', ''), HELD_MAX_MS + 4000).then((r) => { expectFate(t, c, r, 'dashboard 404') }),
  ])
  await Promise.all(runs)
  clearInterval(poll)
  t.equal(s.mock.stats.received, before, 'nothing reached the provider')
  t.ok(healthy > 20, `/healthz answered throughout (${healthy} times)`)
  t.equal(unhealthy, 0, '/healthz never failed')
})

t.test('a well-formed request on a fresh connection is still forwarded', async (t) => {
  const r = await rawRequest(proxy, `POST ${ROUTES.alpha} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(valid)}\r\n\r\n${valid}`, 5000, true)
  t.equal(parseResponse(r.bytes)?.status, 200)
})

t.test('a request pipelined behind a refused one is not answered: one 400, then the connection closes', async (t) => {
  const before = s.mock.stats.received
  const health = 'GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n'
  const call = `POST ${ROUTES.alpha} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(valid)}\r\n\r\n${valid}`
  const signinCall = `POST /api/ui/signin HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(signin)}\r\n\r\n${signin}`
  const refusedFirst = HEAD_CASES.filter((c) => c.fate === 'answer')
  const runs = refusedFirst.flatMap((c) => [
    ['proxy route, then a call', proxy, c.bytes(ROUTES.alpha, valid) + call],
    ['proxy route, then /healthz', proxy, c.bytes(ROUTES.alpha, valid) + health],
    ['proxy /healthz, then /healthz', proxy, c.bytes('/healthz', '') + health],
    ['dashboard, then a sign-in', dashboard, c.bytes('/api/ui/signin', signin) + signinCall],
  ].map(async ([where, port, bytes]) => {
    const r = await rawRequest(port as number, bytes as string, 3000)
    const what = `${c.name} (${String(where)})`
    const answer = parseResponse(r.bytes)
    t.equal(answer?.status, 400, `${what}: 400`)
    t.equal(answer === null ? null : JSON.parse(answer.body.toString('utf8')).error.code, 'malformed_request', what)
    t.equal(answer?.length, r.bytes.length, `${what}: nothing behind it was answered`)
    t.ok(r.closedMs !== null && r.closedMs < PROMPT_MS, `${what}: closed at once (${r.closedMs?.toFixed(0)} ms)`)
  }))
  await Promise.all(runs)
  t.equal(s.mock.stats.received, before, 'nothing reached the provider')
})

t.test('pipelining: synchronous answers come back in order; behind a proxied call the connection is closed unanswered', async (t) => {
  const health = 'GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n'
  const sync = await rawRequest(proxy, health + health + 'GET /nowhere HTTP/1.1\r\nhost: x\r\n\r\n', 1000)
  const first = parseResponse(sync.bytes)
  const second = first === null ? null : parseResponse(sync.bytes.subarray(first.length))
  const third = first === null || second === null ? null : parseResponse(sync.bytes.subarray(first.length + second.length))
  t.same([first?.status, second?.status, third?.status], [200, 200, 404])
  const before = s.mock.stats.received
  const call = `POST ${ROUTES.alpha} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(valid)}\r\n\r\n${valid}`
  const piped = await rawRequest(proxy, call + health, 3000)
  t.equal(piped.bytes.length, 0, 'uWS 20.30 closes the connection: no answer to either')
  t.ok(piped.closedMs !== null && piped.closedMs < PROMPT_MS, `closed at once (${piped.closedMs?.toFixed(0)} ms)`)
  t.ok(s.mock.stats.received - before <= 1, 'the first call reached the provider at most once')
})
