// The dashboard's roles, through real HTTP: every UI API route acts for a user of the session's account
// who is still there and enabled, on that account only; what changes the account (its limits, detection
// policy and PII at rest) is for its admins. A user's role and state are read at each request, so a
// session outlives neither a demotion nor the user being disabled.
import t from 'tap'
import { proxyCall, signedIn, startDashboard, type Tenant, type UiClient } from '../helpers/dashboard.js'

const s = await startDashboard(t, {}, { testSeams: true })
const a = await s.tenant('roles-a')
const b = await s.tenant('roles-b')

/** A second user of `tenant`'s account with `role`, signed in. */
async function user (tenant: Tenant, role: 'admin' | 'member', name: string): Promise<{ c: UiClient; id: string }> {
  const email = `${name}@${tenant.accountId.slice(0, 8)}.example`
  const password = `pw-${name}-correct-horse`
  const created = await s.tg.admin.createUser({ account: tenant.accountId, email, password, role })
  return { c: await signedIn(s, { email, password }), id: created.id }
}

/** A new version of the user's row, disabled from now (no admin command disables a user yet). */
async function disable (accountId: string, userId: string): Promise<void> {
  await s.tg.store.call('testQuery', {
    query: `INSERT INTO users (account_id, id, email, password_hash, role, created_at, updated_at, disabled_at)
      SELECT account_id, id, email, password_hash, role, created_at, now64(3) + 1, now64(3)
      FROM users FINAL WHERE account_id = {a:UUID} AND id = {u:UUID}`,
    params: { a: accountId, u: userId },
  })
}

async function keyIds (accountId: string): Promise<string[]> {
  return (await s.tg.admin.listKeys({ account: accountId })).map((k) => k.id).sort()
}

t.test('a user of account A can neither create nor revoke nor change a key of account B', async (t) => {
  const c = await signedIn(s, a)
  const before = await keyIds(b.accountId)

  const created = await c.post('/api/ui/keys', { name: 'for b?', scope: 'proxy', account: b.accountId, account_id: b.accountId })
  t.equal(created.status, 201, 'a key is created')
  t.equal(created.json.key.account_id, a.accountId, 'in the caller\'s own account, whatever the body names')
  t.same(await keyIds(b.accountId), before, 'B has no new key')

  const revoke = await c.post(`/api/ui/keys/${b.proxyKeyId}/revoke`)
  t.same([revoke.status, revoke.json.error.code], [404, 'key_not_found'], 'B\'s key is unknown to A')
  const limits = await c.post(`/api/ui/keys/${b.proxyKeyId}/limits`, { rpm: 1 })
  t.same([limits.status, limits.json.error.code], [404, 'key_not_found'])
  t.equal((await proxyCall(s, b.proxyKey)).status, 200, 'B\'s key still works')
  t.equal((await s.tg.admin.listKeys({ account: b.accountId })).find((k) => k.id === b.proxyKeyId)?.limits.rpm, null, 'and has no limit')
})

t.test('a member reads what only an admin changes: the account\'s limits, detection policy and PII at rest', async (t) => {
  const m = (await user(a, 'member', 'member')).c
  const admin = await signedIn(s, a)
  const reads = ['/api/ui/account/limits', '/api/ui/account/detection', '/api/ui/account/pii-at-rest']
  for (const path of reads) {
    const r = await m.get(path)
    t.same([r.status, r.json.editable], [200, false], `${path}: a member reads it, not editable`)
    t.equal((await admin.get(path)).json.editable, true, `${path}: editable for an admin`)
  }
  const changes: Array<[string, Record<string, unknown>]> = [
    ['/api/ui/account/limits', { rpm: 1 }],
    ['/api/ui/account/detection', { policy: 'off' }],
    ['/api/ui/account/pii-at-rest', { pii_at_rest: 'mask' }],
  ]
  for (const [path, body] of changes) {
    const r = await m.post(path, body)
    t.same([r.status, r.json.error.code], [403, 'not_allowed'], `${path}: a member may not change it`)
  }
  const account = (await s.tg.admin.listAccounts()).find((x) => x.id === a.accountId)
  t.same([account?.limits.rpm, account?.detection.policy, account?.detection.piiAtRest], [null, 'block', 'keep'], 'nothing changed')

  // Keys are not reserved for admins: a member manages the account's keys.
  const k = await m.post('/api/ui/keys', { name: 'member key', scope: 'read' })
  t.equal(k.status, 201, 'a member creates a key')
  t.equal((await m.post(`/api/ui/keys/${k.json.key.id}/revoke`)).json.key?.status, 'revoked', 'and revokes it')
})

t.test('a role is read at each request: an admin demoted to member loses the admin changes at once', async (t) => {
  const { c, id } = await user(a, 'admin', 'demoted')
  t.equal((await c.get('/api/ui/account/detection')).json.editable, true, 'an admin first')
  await s.tg.store.call('testQuery', {
    query: `INSERT INTO users (account_id, id, email, password_hash, role, created_at, updated_at)
      SELECT account_id, id, email, password_hash, 'member', created_at, now64(3) + 1
      FROM users FINAL WHERE account_id = {a:UUID} AND id = {u:UUID}`,
    params: { a: a.accountId, u: id },
  })
  t.equal((await c.get('/api/ui/account/detection')).json.editable, false, 'a member now, same session')
  const r = await c.post('/api/ui/account/detection', { policy: 'monitor' })
  t.same([r.status, r.json.error?.code], [403, 'not_allowed'])
})

t.test('a disabled user\'s session can do nothing, keys included', async (t) => {
  const { c, id } = await user(a, 'admin', 'disabled')
  const before = await keyIds(a.accountId)
  await disable(a.accountId, id)
  const answers = {
    'list keys': await c.get('/api/ui/keys'),
    'create a key': await c.post('/api/ui/keys', { name: 'after disable', scope: 'proxy' }),
    'revoke a key': await c.post(`/api/ui/keys/${a.proxyKeyId}/revoke`),
    'change a key\'s limits': await c.post(`/api/ui/keys/${a.proxyKeyId}/limits`, { rpm: 1 }),
    'read the account\'s limits': await c.get('/api/ui/account/limits'),
    'change the account\'s limits': await c.post('/api/ui/account/limits', { rpm: 1 }),
    'read the detection policy': await c.get('/api/ui/account/detection'),
    'change the detection policy': await c.post('/api/ui/account/detection', { policy: 'off' }),
    'change PII at rest': await c.post('/api/ui/account/pii-at-rest', { pii_at_rest: 'mask' }),
    'read the session': await c.get('/api/ui/session'),
  }
  for (const [what, r] of Object.entries(answers)) t.same([r.status, r.json.error?.code], [401, 'unauthenticated'], what)
  t.same(await keyIds(a.accountId), before, 'no key was created')
  t.equal((await proxyCall(s, a.proxyKey)).status, 200, 'the key it tried to revoke still works')
})
