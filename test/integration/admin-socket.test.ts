// The local admin socket answers every failure with the proxy's error body, the code from the one error
// table and that code's status (it answered 400 to everything and an empty 404 to unknown paths).
import t from 'tap'
import { readFileSync } from 'node:fs'
import { adminFile, type AdminEndpoint } from '../../src/admin/server.js'
import { startServer } from '../helpers/server.js'

const s = await startServer(t)
const endpoint = JSON.parse(readFileSync(adminFile(s.dataDir), 'utf8')) as AdminEndpoint
const base = `http://127.0.0.1:${endpoint.port}`

async function admin (path: string, body: unknown, token = endpoint.token): Promise<{ status: number; json: any }> {
  const res = await fetch(base + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, json: text === '' ? null : JSON.parse(text) }
}

t.test('each refusal has its code and status', async (t) => {
  const cases: Array<[string, string, unknown, number, string, string?]> = [
    ['bad token', '/admin/key.list', { account: s.accountId }, 401, 'unauthorized', 'not-the-token'],
    ['unknown operation', '/admin/nope', {}, 404, 'not_found'],
    ['not JSON', '/admin/key.list', '{', 400, 'invalid_json'],
    ['missing argument', '/admin/account.create', { plan: 'pro' }, 400, 'missing_argument'],
    ['invalid argument', '/admin/account.create', { name: 'x', plan: 'gold' }, 400, 'invalid_argument'],
    ['unknown account', '/admin/user.create', { account: '01890000-0000-7000-8000-000000000000', email: 'a@b.c', password: 'long enough' }, 404, 'unknown_account'],
    ['unknown key', '/admin/key.revoke', { id: '01890000-0000-7000-8000-000000000000' }, 404, 'key_not_found'],
  ]
  for (const [what, path, body, status, code, token] of cases) {
    const r = await admin(path, body, token)
    t.equal(r.status, status, `${what}: ${status}`)
    t.equal(r.json?.error?.code, code, `${what}: ${code}`)
    t.type(r.json?.error?.request_id, 'string', `${what}: the error body has a request id`)
  }
  const first = await admin('/admin/user.create', { account: s.accountId, email: 'dup@example.com', password: 'long enough' })
  t.equal(first.status, 200, 'a user is created')
  const dup = await admin('/admin/user.create', { account: s.accountId, email: 'dup@example.com', password: 'long enough' })
  t.same([dup.status, dup.json?.error?.code], [409, 'email_taken'], 'the same email again: 409 email_taken')
  const other = await fetch(base + '/elsewhere')
  t.equal(other.status, 404, 'any other path: 404')
  t.equal(((await other.json()) as { error?: { code?: string } }).error?.code, 'not_found', 'with a JSON body')
})

t.test('an operation answers its value', async (t) => {
  const r = await admin('/admin/key.list', { account: s.accountId })
  t.equal(r.status, 200)
  t.ok(Array.isArray(r.json?.value), 'the keys')
})
