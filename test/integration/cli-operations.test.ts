// The operator's side of the `tracegate` command: --version and usage errors, `account list`,
// `user reset-password` (which ends the user's dashboard sessions), `key list` with the last use, and
// `tracegate doctor`. Real processes: the commands run against a real tracegate in this process (they
// reach it through its admin socket) or open a data directory of their own (chDB, one per process).
import t, { type Test } from 'tap'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { join } from 'node:path'
import { cliEnv, oneJson, runTracegate, type CliRun } from '../helpers/cli.js'
import { ISO_UTC, proxyCall, startDashboard } from '../helpers/dashboard.js'
import { closedPort, tempDir } from '../helpers/server.js'
import { stored } from '../helpers/store.js'
import { until } from '../helpers/wait.js'
import { repoFile } from '../../src/paths.js'
import { Sessions } from '../../src/dashboard/session.js'
import { NO_LIMITS } from '../../src/domain/limits.js'
import { DEFAULT_DETECTION } from '../../src/domain/detection-policy.js'
import { accountView } from '../../src/admin/views.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const VERSION = (JSON.parse(readFileSync(repoFile('package.json'), 'utf8')) as { version: string }).version
const DOCTOR_CHECKS = ['node', 'config', 'data_dir', 'clickhouse', 'migrations', 'proxy_port', 'dashboard_port', 'pricing', 'detector', 'browser_bundle']

const d = await startDashboard(t, {}, { testSeams: true })

function env (dataDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return cliEnv(dataDir, extra)
}

/** `tracegate ...args` on the running server's data directory (through its admin socket). */
function cli (args: string[], stdin = '', extra: Record<string, string> = {}): Promise<CliRun> {
  return runTracegate(args, env(d.dataDir, extra), stdin)
}


/** The doctor's checks by id, after the checks that hold for every run. */
function doctorChecks (t: Test, r: CliRun): Map<string, { ok: boolean; detail: string; fix: string | null }> {
  const lines = r.stdout.split('\n').filter((l) => l.trim() !== '')
  t.equal(lines.length, 1, 'doctor --json prints one line')
  const body = JSON.parse(lines[0] ?? 'null') as { ok: boolean; checks: Array<{ id: string; ok: boolean; detail: string; fix: string | null }> }
  const byId = new Map(body.checks.map((c) => [c.id, c]))
  for (const c of body.checks) {
    if (!c.ok) t.ok(typeof c.fix === 'string' && c.fix !== '', `${c.id}: a problem comes with a fix`)
  }
  t.equal(body.ok, body.checks.every((c) => c.ok), 'ok is every check ok')
  t.equal(r.code, body.ok ? 0 : 1, `exit ${body.ok ? 0 : 1} (stderr: ${r.stderr.trim()})`)
  return byId
}

t.test('--version, --help, and no command or an unknown one as usage errors', async (t) => {
  const version = await cli(['--version'])
  t.equal(version.code, 0)
  t.equal(version.stdout, `${VERSION}\n`, 'prints the package.json version')

  const none = await cli([])
  t.equal(none.code, 2, 'no command exits 2')
  t.equal(none.stdout, '', 'nothing on stdout')
  t.match(none.stderr, /usage: tracegate/, 'the usage on stderr')

  const unknown = await cli(['frobnicate'])
  t.equal(unknown.code, 2, 'an unknown command exits 2')
  t.equal(unknown.stdout, '')
  t.match(unknown.stderr, /usage: tracegate/, 'the usage on stderr')

  const help = await cli(['--help'])
  t.equal(help.code, 0, '--help exits 0')
  t.match(help.stdout, /usage: tracegate/, 'the usage on stdout')
  t.match(help.stdout, /account list/, 'the usage lists account list')
  t.match(help.stdout, /user reset-password/, 'and user reset-password')
  t.match(help.stdout, /doctor/, 'and doctor')
})

t.test('account list through the running server', async (t) => {
  const other = await d.tg.admin.createAccount({ name: 'listed-enterprise', plan: 'enterprise', serverSideKeys: true })
  const { accounts } = oneJson(t, await cli(['account', 'list', '--json']), 'account list')
  t.ok(Array.isArray(accounts), 'prints {accounts: [...]}')
  const byId = new Map((accounts as any[]).map((a) => [a.id, a]))
  // The dashboard API's members: snake_case limits and detection, times in UTC with their zone.
  t.same(byId.get(d.accountId), {
    id: d.accountId, name: 'test', plan: 'pro', server_side_keys: false, created_at: byId.get(d.accountId)?.created_at,
    limits: { rpm: null, tpm: null, budget_day: null, budget_month: null, models: null },
    detection: { policy: 'block', threshold: null, data_threshold: null, allow_phrases: [], pii_at_rest: 'keep' },
  }, 'the test account')
  t.match(byId.get(d.accountId)?.created_at, ISO_UTC, 'with its creation time, in ISO 8601 with its zone')
  t.same(byId.get(other.id), accountView(other), 'the new account as account create printed it')
  for (const a of accounts as any[]) t.match(a.id, UUID)

  const text = await cli(['account', 'list'])
  t.equal(text.code, 0)
  const line = text.stdout.split('\n').find((l) => l.startsWith(other.id))
  t.ok(line !== undefined, 'the text listing has a line per account, starting with its id')
  t.match(line, /listed-enterprise/, 'with its name')
  t.match(line, /enterprise/, 'and plan')
})

t.test('key list shows when each key was last used', async (t) => {
  const unused = await d.tg.admin.createKey({ account: d.accountId, scope: 'proxy', name: 'never used' })
  const before = Date.now()
  const call = await proxyCall(d, d.key)
  t.equal(call.status, 200, `a call with the test key (${call.text.slice(0, 200)})`)
  await stored(d.tg, d.accountId, [call.traceId])

  const { keys } = oneJson(t, await cli(['key', 'list', '--account', d.accountId, '--json']), 'key list')
  const used = (keys as any[]).find((k) => k.prefix === d.key.slice(0, 12))
  const never = (keys as any[]).find((k) => k.id === unused.id)
  t.ok(used !== undefined && never !== undefined, 'both keys are listed')
  t.equal(never?.last_used_at, null, 'a key never used: null')
  // The rollup keeps minutes: the last use is the minute of the call.
  t.match(used?.last_used_at, ISO_UTC, 'in ISO 8601 with its zone')
  const at = Date.parse(String(used?.last_used_at))
  t.ok(at <= Date.now() && at >= Math.floor(before / 60_000) * 60_000, `the used key's last use is the minute of the call (got ${String(used?.last_used_at)})`)
  t.notOk(JSON.stringify(keys).includes(d.key), 'no key value in the listing')

  const text = await cli(['key', 'list', '--account', d.accountId])
  t.equal(text.code, 0)
  t.match(text.stdout.split('\n').find((l) => l.startsWith(unused.id)), /never used$/, 'the text listing says never used')
  t.match(text.stdout.split('\n').find((l) => l.startsWith(used?.id)), /last used \d{4}-\d\d-\d\d/, 'and when the other was last used')
})

t.test('key list shows an expired key as expired, in the text and the JSON', async (t) => {
  const created = oneJson(t, await cli(['key', 'create', '--account', d.accountId, '--scope', 'proxy', '--name', 'short-lived', '--expires-in', '1s', '--json']), 'key create')
  t.equal(created.status, 'active', 'active when created')
  await until(() => Date.now() > Date.parse(created.expires_at) + 50, { ms: 5_000, everyMs: 50, what: 'the key to expire' })
  t.equal((await proxyCall(d, created.key)).status, 401, 'the proxy refuses it')

  const { keys } = oneJson(t, await cli(['key', 'list', '--account', d.accountId, '--json']), 'key list')
  const listed = (keys as any[]).find((k) => k.id === created.id)
  t.match(listed, { status: 'expired', revoked_at: null, expires_at: created.expires_at }, 'expired in the JSON')
  const line = (await cli(['key', 'list', '--account', d.accountId])).stdout.split('\n').find((l) => l.startsWith(created.id))
  t.match(line, /\sexpired \d{4}-\d\d-\d\dT/, `expired in the text (${String(line)})`)
  t.notMatch(line, /\sactive/, 'not shown as active')

  const revoked = oneJson(t, await cli(['key', 'revoke', '--id', created.id, '--json']), 'key revoke')
  t.match(revoked, { id: created.id, status: 'revoked', revoked_at: ISO_UTC }, 'a revoked key is revoked whatever its expiry')
})

t.test('--json prints the API\'s member names', async (t) => {
  const k = oneJson(t, await cli(['key', 'create', '--account', d.accountId, '--scope', 'read', '--budget-day', '2.5', '--max-body-bytes', '4096', '--json']), 'key create')
  t.same(k.limits, { rpm: null, tpm: null, budget_day: 2.5, budget_month: null, models: null, max_body_bytes: 4096 }, 'key create: the limits as the dashboard API names them')
  t.match(k, { scope: 'read', status: 'active', account_id: d.accountId, created_at: ISO_UTC, expires_at: null, revoked_at: null, last_used_at: null })
  const updated = oneJson(t, await cli(['key', 'update', '--id', k.id, '--budget-month', '40', '--json']), 'key update')
  t.same(updated.limits, { ...k.limits, budget_month: 40 }, 'key update too')
  t.notOk('last_used_at' in updated, 'an update does not claim the key was never used')
  const a = oneJson(t, await cli(['account', 'update', '--id', d.accountId, '--rpm', '100', '--detection-threshold', '0.25', '--json']), 'account update')
  t.same(a.limits, { rpm: 100, tpm: null, budget_day: null, budget_month: null, models: null }, 'account update: no body limit member')
  t.same(a.detection, { policy: 'block', threshold: 0.25, data_threshold: null, allow_phrases: [], pii_at_rest: 'keep' })
  oneJson(t, await cli(['account', 'update', '--id', d.accountId, '--rpm', 'none', '--detection-threshold', 'none', '--json']), 'account update back')
})

t.test('user reset-password through the running server ends the user\'s sessions', async (t) => {
  const tenant = await d.tenant('reset')
  const bystander = await d.tenant('bystander')
  const client = d.client()
  t.equal((await client.signIn(tenant.email, tenant.password)).status, 200, 'signed in with the old password')
  const live = await client.live()
  const other = d.client()
  t.equal((await other.signIn(bystander.email, bystander.password)).status, 200, 'another user signed in')

  const newPassword = 'a brand new passphrase'
  const r = oneJson(t, await cli(['user', 'reset-password', '--email', tenant.email.toUpperCase(), '--json'], newPassword + '\n'), 'reset-password')
  t.equal(r.email, tenant.email, 'the user, by its lower-case email')
  t.match(r.id, UUID)
  t.notOk(JSON.stringify(r).includes(newPassword), 'the password is not printed')

  const after = await client.get('/api/ui/session')
  t.equal(after.status, 401, 'the session from before the reset is refused')
  t.equal(after.json?.error?.code, 'unauthenticated')
  t.equal((await client.get('/api/ui/traces')).status, 401, 'on every route')
  await until(() => live.closed, { ms: 5_000, what: 'the live socket of the old session closes' })
  t.pass('the live socket of the old session is closed')
  t.equal((await other.get('/api/ui/session')).status, 200, 'another user\'s session goes on')

  const old = await d.client().signIn(tenant.email, tenant.password)
  t.equal(old.status, 401, 'the old password is refused')
  t.equal(old.json?.error?.code, 'invalid_credentials')
  const fresh = d.client()
  t.equal((await fresh.signIn(tenant.email, newPassword)).status, 200, 'the new password signs in')
  t.equal((await fresh.get('/api/ui/session')).status, 200, 'and its session works')

  const unknown = await cli(['user', 'reset-password', '--email', 'nobody@example.com'], newPassword)
  t.equal(unknown.code, 1, 'an unknown email exits 1')
  t.not(unknown.stderr.trim(), '', 'with a message')
  const short = await cli(['user', 'reset-password', '--email', tenant.email], 'short')
  t.equal(short.code, 1, 'a password under 8 characters exits 1')
  t.equal((await fresh.get('/api/ui/session')).status, 200, 'a refused reset ends nothing')
  const missing = await cli(['user', 'reset-password'], newPassword)
  t.equal(missing.code, 1, 'no --email exits 1')
})

t.test('with no server, reset-password opens the store and the next start refuses the old sessions', async (t) => {
  const dir = tempDir('tracegate-cli-ops-')
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const run = (args: string[], stdin = ''): Promise<CliRun> => runTracegate(args, env(dir), stdin)
  const account = oneJson(t, await run(['account', 'create', '--name', 'offline', '--plan', 'free', '--json']), 'account create')
  const user = oneJson(t, await run(['user', 'create', '--account', account.id, '--email', 'off@example.com', '--json'], 'first password'), 'user create')
  const { accounts } = oneJson(t, await run(['account', 'list', '--json']), 'account list')
  t.same(accounts, [account], 'the one account, as created')

  // Sessions a server issued before the reset (the dashboard's secret is in the data directory).
  const issuedBefore = new Sessions(dir)
  const mine = issuedBefore.issue(user.id, account.id, Date.now() - 1_000)
  const theirs = issuedBefore.issue('0190b5a4-0000-7000-8000-000000000000', account.id, Date.now() - 1_000)

  const reset = oneJson(t, await run(['user', 'reset-password', '--email', 'off@example.com', '--json'], 'second password'), 'reset-password')
  t.equal(reset.id, user.id)

  const nextStart = new Sessions(dir)
  t.equal(nextStart.verify(mine.value), null, 'the user\'s session from before the reset is refused at the next start')
  t.not(nextStart.verify(theirs.value), null, 'another user\'s session is not')
  t.not(nextStart.verify(nextStart.issue(user.id, account.id).value), null, 'a session issued after the reset works')
})

t.test('doctor with the running server', async (t) => {
  const checks = doctorChecks(t, await cli(['doctor', '--json'], '', {
    TRACEGATE_PROXY_PORT: String(d.tg.proxyPort),
    TRACEGATE_DASHBOARD_PORT: String(d.tg.dashboardPort),
  }))
  t.same([...checks.keys()], DOCTOR_CHECKS, 'every check, in order')
  for (const [id, c] of checks) t.ok(c.ok, `${id}: ${c.detail}`)
  t.match(checks.get('clickhouse')?.detail, String(process.pid), 'ClickHouse is asked through the server that holds it (its pid)')
  t.match(checks.get('proxy_port')?.detail, String(process.pid), 'the proxy port is the running tracegate\'s')
  t.match(checks.get('dashboard_port')?.detail, String(process.pid), 'the dashboard port too')

  // A port held by a program that is not tracegate.
  const squatter: Server = createServer((s) => { s.destroy() })
  await new Promise<void>((resolve) => { squatter.listen(0, '127.0.0.1', resolve) })
  t.teardown(() => { squatter.close() })
  const port = (squatter.address() as { port: number }).port
  const busy = doctorChecks(t, await cli(['doctor', '--json'], '', { TRACEGATE_PROXY_PORT: String(port) }))
  t.equal(busy.get('proxy_port')?.ok, false, 'a port another program holds is a problem')
  t.equal(busy.get('dashboard_port')?.ok, true, 'port 0 is fine')

  const text = await cli(['doctor'], '', { TRACEGATE_PROXY_PORT: String(port) })
  t.equal(text.code, 1, 'the text form exits 1 too')
  const lines = text.stdout.split('\n').filter((l) => l !== '')
  t.equal(lines.length, DOCTOR_CHECKS.length, 'one line per check')
  t.equal(lines.filter((l) => l.startsWith('problem ')).length, 1, 'one problem line')
  t.match(lines.find((l) => l.startsWith('problem ')), /proxy_port.*fix: /, 'naming the check and how to fix it')
})

t.test('doctor without a server', async (t) => {
  const parent = tempDir('tracegate-doctor-')
  t.teardown(() => { rmSync(parent, { recursive: true, force: true }) })
  const fresh = join(parent, 'not-yet')
  const first = doctorChecks(t, await runTracegate(['doctor', '--json'], env(fresh)))
  t.same([...first.keys()], DOCTOR_CHECKS, 'every check, in order')
  for (const [id, c] of first) t.ok(c.ok, `a data directory the first start will make: ${id} ok (${c.detail})`)

  const dir = join(parent, 'data')
  t.equal((await runTracegate(['migrate'], env(dir))).code, 0, 'migrate')
  const migrated = doctorChecks(t, await runTracegate(['doctor', '--json'], env(dir)))
  for (const [id, c] of migrated) t.ok(c.ok, `after migrate: ${id} ok (${c.detail})`)
  t.notMatch(migrated.get('clickhouse')?.detail, /pid/, 'ClickHouse opened by the doctor itself')

  const notDir = join(parent, 'a-file')
  writeFileSync(notDir, 'x')
  const badPricing = join(parent, 'prices.json')
  writeFileSync(badPricing, '{"prices": [{"provider": "alpha"}]}')
  const broken = doctorChecks(t, await runTracegate(['doctor', '--json'], env(notDir, { TRACEGATE_PRICING_FILE: badPricing })))
  t.equal(broken.get('data_dir')?.ok, false, 'a data directory that is a file is a problem')
  t.equal(broken.get('clickhouse')?.ok, false, 'and the embedded ClickHouse is not checked there')
  t.equal(broken.get('pricing')?.ok, false, 'an invalid pricing file is a problem')
  t.equal(broken.get('detector')?.ok, true, 'the rest is still checked')

  const badEnv = doctorChecks(t, await runTracegate(['doctor', '--json'], env(dir, { TRACEGATE_PROXY_PORT: 'abc' })))
  t.equal(badEnv.get('config')?.ok, false, 'a bad setting is a problem of the config check (exit 1, not 2)')
  t.match(badEnv.get('config')?.detail, /TRACEGATE_PROXY_PORT/, 'naming the variable')
  t.equal(badEnv.get('browser_bundle')?.ok, true, 'the install is still checked')
})

t.test('doctor with an unreachable ClickHouse URL never prints its password', async (t) => {
  const dir = tempDir('tracegate-doctor-url-')
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const urlPassword = 'url-pass-9f3a'
  const envPassword = 'env-pass-7c21'
  const port = await closedPort()
  const settings: Array<Record<string, string>> = [
    { CLICKHOUSE_URL: `http://ops:${urlPassword}@127.0.0.1:${port}` },
    { CLICKHOUSE_URL: `http://127.0.0.1:${port}`, CLICKHOUSE_USER: 'ops', CLICKHOUSE_PASSWORD: envPassword },
  ]
  for (const extra of settings) {
    for (const args of [['doctor', '--json'], ['doctor']]) {
      const r = await runTracegate(args, env(dir, extra))
      t.equal(r.code, 1, `${args.join(' ')}: exit 1`)
      const all = r.stdout + r.stderr
      t.notOk(all.includes(urlPassword) || all.includes(envPassword), 'no password in the output')
      t.match(all, new RegExp(`127\\.0\\.0\\.1:${port}`), 'the URL is named')
      if (args.includes('--json')) t.equal(doctorChecks(t, r).get('clickhouse')?.ok, false, 'the ClickHouse check fails')
    }
  }
})
