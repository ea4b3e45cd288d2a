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
import { startServer } from '../helpers/server.js'
import { rawTcp, spawnTracegate, type RawAnswer } from './nginx-helpers.js'
import { MAX_FAILURES } from '../../src/dashboard/signin-limit.js'

const [s, on] = await Promise.all([
  startServer(t, { TRACEGATE_TRUST_PROXY: 'off' }),
  spawnTracegate(t, { TRACEGATE_TRUST_PROXY: 'on' }),
])
const offPort = s.tg.dashboardPort
const onPort = on.dashboardPort

/**
 * A PROXY protocol v2 header (PROXY command, TCP) naming `client` as the connection's source: dotted
 * IPv4, or IPv6 written out in full (eight groups of four hex digits).
 */
function proxyV2 (client: string, port: number): Buffer {
  const v6 = client.includes(':')
  const addr = v6 ? Buffer.from(client.replaceAll(':', ''), 'hex') : Buffer.from(client.split('.').map(Number))
  const dst = v6 ? Buffer.from('00000000000000000000000000000001', 'hex') : Buffer.from([127, 0, 0, 1])
  const ports = Buffer.alloc(4)
  ports.writeUInt16BE(40_000, 0)
  ports.writeUInt16BE(port, 2)
  const head = Buffer.alloc(16)
  Buffer.from('\r\n\r\n\0\r\nQUIT\n', 'latin1').copy(head, 0)
  head[12] = 0x21 // version 2, PROXY
  head[13] = v6 ? 0x21 : 0x11 // AF_INET6 or AF_INET, STREAM
  head.writeUInt16BE(addr.length * 2 + 4, 14)
  return Buffer.concat([head, addr, dst, ports])
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

t.test('trust on: a PROXY header outranks X-Forwarded-For, which a TCP proxy passes from the client untouched', async (t) => {
  await fail(t, onPort, (i) => ({ from: '127.0.0.4', email: email(), proxied: '192.0.2.20', xff: `198.51.100.${101 + i}` }))
  const next = await attempt(onPort, { from: '127.0.0.4', email: email(), proxied: '192.0.2.20', xff: '198.51.100.199' })
  t.same(code(next), REFUSED, 'the client the PROXY header named is refused, whatever it claims')
})

t.test('trust on: an IPv6 client counts with its /64, an IPv4-mapped address as its IPv4 address', async (t) => {
  const prefix = '2001:0db8:0001:0002:0000:0000:0000'
  await Promise.all([
    // Half named by PROXY headers (uWS writes those out in full), half by X-Forwarded-For (compressed).
    fail(t, onPort, (i) => i % 2 === 0
      ? { from: '127.0.0.5', email: email(), proxied: `${prefix}:${(i + 1).toString(16).padStart(4, '0')}` }
      : { from: '127.0.0.5', email: email(), xff: `2001:db8:1:2::${(i + 1).toString(16)}` }),
    fail(t, onPort, (i) => ({ from: '127.0.0.6', email: email(), xff: i % 2 === 0 ? '198.51.100.77' : '::ffff:198.51.100.77' })),
  ])
  const sameBlock = await attempt(onPort, { from: '127.0.0.5', email: email(), xff: '2001:db8:1:2:ffff:ffff:ffff:ffff' })
  t.same(code(sameBlock), REFUSED, 'another address in the same /64 is the same client')
  const otherBlock = await attempt(onPort, { from: '127.0.0.5', email: email(), xff: '2001:db8:1:3::1' })
  t.same(code(otherBlock), FAILED, 'the next /64 is another client')
  const mapped = await attempt(onPort, { from: '127.0.0.6', email: email(), proxied: '0000:0000:0000:0000:0000:ffff:c633:644d' })
  t.same(code(mapped), REFUSED, '198.51.100.77 however it is written')
})
