// Who the dashboard's sign-in limiter counts (production hardening, item 8). uWebSockets.js 20.30 takes
// a PROXY protocol v2 header from any peer, and a client can send any X-Forwarded-For: with
// TRACEGATE_TRUST_PROXY off neither may pick the address the limiter counts, or a client that names a
// new address on every attempt is never refused. With it on (a proxy in front), both are believed.
//
// Raw TCP to the dashboard port, one connection per attempt, from its own loopback address per case
// (127.0.0.2, 127.0.0.3, …: the socket's peer as tracegate sees it). Every attempt uses a new email,
// so the per-email limit never trips: a 429 can only come from the per-address one. Trust off runs in
// this process, trust on in a child process (chDB allows one data directory per process).
import t, { type Test } from 'tap'
import { startServer } from '../helpers.js'
import { rawTcp, spawnTracegate, type RawAnswer } from './nginx-helpers.js'
import { MAX_FAILURES } from '../../src/dashboard/signin-limit.js'

const [s, on] = await Promise.all([
  startServer(t, { TRACEGATE_TRUST_PROXY: 'off' }),
  spawnTracegate(t, { TRACEGATE_TRUST_PROXY: 'on' }),
])
const offPort = s.tg.dashboardPort
const onPort = on.dashboardPort

/** A PROXY protocol v2 header (PROXY command, TCP over IPv4) naming `client` as the connection's source. */
function proxyV2 (client: string, port: number): Buffer {
  const b = Buffer.alloc(16 + 12)
  Buffer.from('\r\n\r\n\0\r\nQUIT\n', 'latin1').copy(b, 0)
  b[12] = 0x21 // version 2, PROXY
  b[13] = 0x11 // AF_INET, STREAM
  b.writeUInt16BE(12, 14)
  client.split('.').forEach((octet, i) => { b[16 + i] = Number(octet) })
  Buffer.from([127, 0, 0, 1]).copy(b, 20)
  b.writeUInt16BE(40_000, 24)
  b.writeUInt16BE(port, 26)
  return b
}

interface Attempt {
  /** The loopback address the connection comes from. */
  readonly from: string
  readonly email: string
  /** A PROXY v2 header naming this client address goes first. */
  readonly proxied?: string
  readonly xff?: string
}

let emails = 0
function email (): string {
  return `attempt-${++emails}@example.com`
}

/** One failed sign-in over its own connection. */
function attempt (port: number, a: Attempt): Promise<RawAnswer> {
  const body = JSON.stringify({ email: a.email, password: 'wrong-password' })
  const head = `POST /api/ui/signin HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\n${a.xff === undefined ? '' : `x-forwarded-for: ${a.xff}\r\n`}\r\n`
  const http = Buffer.from(head + body)
  return rawTcp(port, a.proxied === undefined ? http : Buffer.concat([proxyV2(a.proxied, port), http]), a.from)
}

function code (r: RawAnswer): [number, string | undefined] {
  let c: string | undefined
  try { c = JSON.parse(r.body).error?.code } catch { c = undefined }
  return [r.status, c]
}

/** MAX_FAILURES failed sign-ins at once (the limiter counts each from its start), every one answered 401. */
async function fail (t: Test, port: number, make: (i: number) => Attempt): Promise<void> {
  const answers = await Promise.all(Array.from({ length: MAX_FAILURES }, (_, i) => attempt(port, make(i))))
  t.same(answers.map(code), answers.map(() => [401, 'invalid_credentials']), `${MAX_FAILURES} failures answered`)
}

const REFUSED = [429, 'too_many_attempts']
const FAILED = [401, 'invalid_credentials']

t.test('trust off: a PROXY header naming a new client each time cannot escape the limit', async (t) => {
  await fail(t, offPort, (i) => ({ from: '127.0.0.2', email: email(), proxied: `192.0.2.${i + 1}` }))
  const next = await attempt(offPort, { from: '127.0.0.2', email: email(), proxied: '192.0.2.99' })
  t.same(code(next), REFUSED, 'the socket address 127.0.0.2 is what counts')
  const plain = await attempt(offPort, { from: '127.0.0.2', email: email() })
  t.same(code(plain), REFUSED, 'without the header as well')
  const other = await attempt(offPort, { from: '127.0.0.4', email: email(), proxied: '192.0.2.1' })
  t.same(code(other), FAILED, 'another socket address, naming a refused client, keeps its own limit')
})

t.test('trust off: X-Forwarded-For naming a new client each time cannot escape the limit', async (t) => {
  await fail(t, offPort, (i) => ({ from: '127.0.0.3', email: email(), xff: `198.51.100.${i + 1}` }))
  const next = await attempt(offPort, { from: '127.0.0.3', email: email(), xff: '198.51.100.99' })
  t.same(code(next), REFUSED, 'the socket address 127.0.0.3 is what counts')
  const both = await attempt(offPort, { from: '127.0.0.3', email: email(), xff: '198.51.100.98', proxied: '192.0.2.98' })
  t.same(code(both), REFUSED, 'nor with both headers')
})

t.test('trust on: the PROXY header names the client', async (t) => {
  await fail(t, onPort, () => ({ from: '127.0.0.2', email: email(), proxied: '192.0.2.7' }))
  const same = await attempt(onPort, { from: '127.0.0.2', email: email(), proxied: '192.0.2.7' })
  t.same(code(same), REFUSED, 'the named client is refused')
  const other = await attempt(onPort, { from: '127.0.0.2', email: email(), proxied: '192.0.2.8' })
  t.same(code(other), FAILED, 'another named client through the same proxy is not')
})

t.test('trust on: the last X-Forwarded-For entry (the one the proxy appended) names the client', async (t) => {
  await fail(t, onPort, (i) => ({ from: '127.0.0.3', email: email(), xff: `203.0.113.${i + 1}, 198.51.100.7` }))
  const same = await attempt(onPort, { from: '127.0.0.3', email: email(), xff: '203.0.113.99, 198.51.100.7' })
  t.same(code(same), REFUSED, 'earlier entries are the client\'s own claims and change nothing')
  const other = await attempt(onPort, { from: '127.0.0.3', email: email(), xff: '198.51.100.7, 198.51.100.8' })
  t.same(code(other), FAILED, 'another last entry is another client')
})
