// A 413 every client reads. A body over TRACEGATE_MAX_BODY_BYTES used to be answered and the socket closed
// while the client still sent: the kernel then resets the connection, and a client writing its body saw
// EPIPE (10 of 10 raw uploads of 50 MiB against a 1 MiB limit). Now the rest of the body is read and
// dropped: from content-length, by uWS until its idle timer (10-14 s); while streaming, by body.ts up to
// DRAIN_BYTES, DRAIN_IDLE_MS of silence or DRAIN_MS.
import t, { type Test } from 'tap'
import { DRAIN_IDLE_MS, DRAIN_MS } from '../../src/server/body.js'
import { startServer } from '../helpers/server.js'
import { ROUTES } from '../helpers/bodies.js'
import { parseResponse, upload, type RawResult } from '../helpers/raw-call.js'

const LIMIT = 1024 * 1024
const s = await startServer(t, { TRACEGATE_MAX_BODY_BYTES: String(LIMIT) })
const proxy = s.tg.proxyPort
const dashboard = s.tg.dashboardPort

function head (path: string, framing: string): string {
  return `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n${framing}\r\n\r\n`
}
const HEALTH = 'GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n'
const chunked = (n: number): Buffer => Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), Buffer.alloc(n, 0x20), Buffer.from('\r\n')])

/** The first answer is a JSON 413 body_too_large; returns what follows it. */
function expect413 (t: Test, r: RawResult, what: string): Buffer {
  const first = parseResponse(r.bytes)
  t.ok(first, `${what}: a whole answer arrived`)
  if (first === null) return Buffer.alloc(0)
  t.equal(first.status, 413, what)
  t.equal(first.headers.get('content-type'), 'application/json')
  t.equal(JSON.parse(first.body.toString('utf8')).error.code, 'body_too_large')
  return r.bytes.subarray(first.length)
}

/** Each upload (checked by `first`) got its 413 and the request after it on the same connection was answered; nothing reached the provider. */
function keptAfter413 (t: Test, results: readonly RawResult[], what: string, before: number, first: (r: RawResult) => void): void {
  for (const r of results) {
    first(r)
    const rest = expect413(t, r, what)
    t.equal(parseResponse(rest)?.status, 200, 'the next request on the connection is answered')
  }
  t.equal(s.mock.stats.received, before, 'nothing reached the provider')
}

t.test('a client that sends all of a 50 MiB body with content-length reads the 413, then the connection is reused', async (t) => {
  const before = s.mock.stats.received
  const size = 50 * 1024 * 1024
  const results: RawResult[] = []
  // Ten tries, two at a time.
  for (let i = 0; i < 5; i++) {
    results.push(...await Promise.all([0, 1].map(() =>
      upload(proxy, head(ROUTES.alpha, `content-length: ${size}`), size, 10_000, { after: HEALTH, answers: 2 }))))
  }
  const errors = results.filter((r) => r.error !== null).map((r) => r.error)
  t.same(errors, [], 'no client saw EPIPE or ECONNRESET')
  keptAfter413(t, results, '50 MiB upload', before, (r) => { t.equal(r.sent, size, 'the whole body was written') })
})

t.test('fetch with a body of twice the limit and of 50 MiB reads the 413', async (t) => {
  for (const size of [2 * LIMIT, 2 * LIMIT, 2 * LIMIT, 50 * 1024 * 1024, 50 * 1024 * 1024]) {
    const r = await fetch(s.url + ROUTES.beta, { method: 'POST', body: Buffer.alloc(size, 0x20), headers: { 'content-type': 'application/json' } })
    t.equal(r.status, 413)
    t.equal((await r.json() as { error: { code: string } }).error.code, 'body_too_large')
  }
})

t.test('a chunked body that passes the limit: answered at once, the rest read to its end, the connection kept', async (t) => {
  const before = s.mock.stats.received
  const size = 8 * 1024 * 1024
  const results = await Promise.all([0, 1, 2, 3].map(() => upload(proxy, head(ROUTES.gamma, 'transfer-encoding: chunked'), size, 10_000, {
    piece: chunked,
    after: '0\r\n\r\n' + HEALTH,
    answers: 2,
  })))
  keptAfter413(t, results, 'chunked upload', before, (r) => { t.equal(r.error, null, 'no EPIPE or ECONNRESET') })
})

t.test('the drain is bounded: endless uploads get the 413 and are closed', async (t) => {
  const forever = 999_999_999
  const [fromLength, streaming, stopped] = await Promise.all([
    // Announced length: uWS drops the body until its idle timer (10 s, checked every 4 s).
    upload(proxy, head(ROUTES.alpha, `content-length: ${forever}`), forever, 30_000),
    // Chunked: body.ts stops after DRAIN_MS (or DRAIN_BYTES, whichever comes first).
    upload(proxy, head(ROUTES.alpha, 'transfer-encoding: chunked'), forever, 30_000, { piece: chunked }),
    // Chunked, and the client stops sending after the limit: the answer ends after DRAIN_IDLE_MS.
    upload(proxy, head(ROUTES.alpha, 'transfer-encoding: chunked'), 2 * LIMIT, 30_000, { piece: chunked, answers: 1 }),
  ])
  expect413(t, fromLength, 'endless content-length upload')
  t.ok(fromLength.closedMs !== null && fromLength.closedMs < 16_000, `closed by uWS's idle timer (${fromLength.closedMs?.toFixed(0)} ms)`)
  // Cut at the bound: the status and the error body arrived, the chunked answer's end did not.
  t.match(streaming.bytes.toString('latin1'), /^HTTP\/1\.1 413 [^]*"code":"body_too_large"/, 'endless chunked upload: the 413 and its body arrived')
  t.ok(streaming.closedMs !== null && streaming.closedMs < DRAIN_MS + 1500, `closed by the drain bound (${streaming.closedMs?.toFixed(0)} ms)`)
  t.equal(parseResponse(stopped.bytes)?.status, 413, 'a client that stopped reads the whole 413')
  t.ok(stopped.answeredMs !== null && stopped.answeredMs > DRAIN_IDLE_MS - 100 && stopped.answeredMs < DRAIN_IDLE_MS + 1500,
    `whole once the client was silent for DRAIN_IDLE_MS (${stopped.answeredMs?.toFixed(0)} ms)`)
  t.equal(stopped.error, null, 'without a reset')
})

t.test('the dashboard port: its 64 KiB limit, both ways, read by the client', async (t) => {
  const size = 4 * 1024 * 1024
  const sized = await upload(dashboard, head('/api/ui/signin', `content-length: ${size}`), size, 10_000, { after: HEALTH, answers: 2 })
  t.equal(sized.error, null, 'no EPIPE or ECONNRESET')
  expect413(t, sized, 'dashboard, content-length')
  const streamed = await upload(dashboard, head('/api/ui/signin', 'transfer-encoding: chunked'), size, 10_000, { piece: chunked, after: '0\r\n\r\n' + HEALTH, answers: 2 })
  t.equal(streamed.error, null, 'no EPIPE or ECONNRESET')
  const first = parseResponse(streamed.bytes)
  expect413(t, streamed, 'dashboard, chunked')
  t.equal(first?.headers.get('x-frame-options'), 'DENY', 'with the security headers')
})
