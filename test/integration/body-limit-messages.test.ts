// A 413 says the limit it applied, in bytes, wherever it comes from: the proxy's own limit
// (TRACEGATE_MAX_BODY_BYTES, decided from content-length or while a chunked body streams in), a key's
// body limit, the dashboard's and the admin socket's. The code stays body_too_large.
import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { adminFile } from '../../src/admin/server.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { startDashboard } from '../helpers/dashboard.js'
import { json, postChunked, postHeadersOnly, send, type RawResponse } from '../helpers/http.js'

const LIMIT = 4096
const s = await startDashboard(t, { TRACEGATE_MAX_BODY_BYTES: String(LIMIT) })

function refusal (t: Test, r: RawResponse, what: string): string {
  const error = json(r).error
  t.same([r.status, error?.code], [413, 'body_too_large'], what)
  return String(error?.message)
}

/** A body of `size` bytes for the alpha route, valid JSON, sent with the test key. */
function bigBody (size: number): string {
  const base = JSON.stringify(bodyFor('alpha', { api_key: s.key, user: '' }))
  return base.replace('"user":""', `"user":"${'x'.repeat(size - base.length)}"`)
}

t.test('the proxy\'s limit, from content-length and from a chunked body', async (t) => {
  const sized = await send(s.url + ROUTES.alpha, { body: bigBody(2 * LIMIT) })
  t.match(refusal(t, sized, 'content-length over the limit'), `${LIMIT} bytes`, 'the message states the limit')
  const announced = await postHeadersOnly(s.url + ROUTES.alpha, 10 * LIMIT)
  t.match(refusal(t, announced, 'announced, not sent'), `${LIMIT} bytes`)
  const body = Buffer.from(bigBody(3 * LIMIT))
  const chunks = [body.subarray(0, LIMIT), body.subarray(LIMIT, 2 * LIMIT), body.subarray(2 * LIMIT)]
  const streamed = await postChunked(s.url + ROUTES.alpha, chunks, 5)
  t.match(refusal(t, streamed, 'chunked, passing the limit while it streams in'), `${LIMIT} bytes`)
  t.match(json(sized).error.message, /TRACEGATE_MAX_BODY_BYTES/, 'and the setting that sets it')
})

t.test('a key\'s own body limit', async (t) => {
  const key = await s.tg.admin.createKey({ account: s.accountId, scope: 'proxy', max_body_bytes: 1024 })
  const body = bigBody(2048).replace(s.key, key.key)
  const r = await send(s.url + ROUTES.alpha, { body })
  t.match(refusal(t, r, 'over the key\'s limit'), /key's limit of 1024 bytes/)
})

t.test('the dashboard\'s and the admin socket\'s limits', async (t) => {
  const big = JSON.stringify({ email: 'a@example.com', password: 'x'.repeat(70 * 1024) })
  const dashboard = await send(s.dashboard + '/api/ui/signin', { body: big, headers: { origin: s.dashboard } })
  t.match(refusal(t, dashboard, 'a dashboard body over 64 KiB'), `${64 * 1024} bytes`)
  const endpoint = JSON.parse(readFileSync(adminFile(s.dataDir), 'utf8')) as { port: number; token: string }
  const admin = await send(`http://127.0.0.1:${endpoint.port}/admin/account.list`, { body: big, headers: { authorization: `Bearer ${endpoint.token}` } })
  t.match(refusal(t, admin, 'an admin body over 64 KiB'), `${64 * 1024} bytes`)
})
