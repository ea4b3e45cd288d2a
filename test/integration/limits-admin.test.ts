// Per-key and per-account limits, the storage and admin side: migration 006 on a store with
// rows from before it (they read as no limits; the migration runs twice without harm), the CLI setting,
// changing, removing and refusing limits both through a running server's admin socket and in its own
// process, the listings, lookupKey's KeyInfo, the key cache dropping an account's keys on a change made
// through the socket, and limitUsage against the sums of real traces.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { copyFileSync, readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { AdminOps } from '../../src/admin/ops.js'
import { AdminServer } from '../../src/admin/server.js'
import { limitsView, type LimitsView } from '../../src/admin/views.js'
import { generateKey, hashKey, keyPrefix } from '../../src/auth/keys.js'
import { loadConfig } from '../../src/config.js'
import { startMockProvider } from '../../src/mock-provider/index.js'
import { MIGRATIONS_DIR, StoreClient } from '../../src/store/client.js'
import { Tracegate } from '../../src/tracegate.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { adminCall, cliEnv, oneJson, refused, runTracegate, type CliRun } from '../helpers/cli.js'
import { send } from '../helpers/http.js'
import { tempDir, testConfig } from '../helpers/server.js'
import { stored } from '../helpers/store.js'
import { NO_LIMITS, type Limits } from '../../src/domain/limits.js'

const dataDir = tempDir('tracegate-limits-')
t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })

const OLD_KEY = generateKey()
const OLD_ACCOUNT = '0190b5a4-0000-7000-8000-00000000a001'
const OLD_KEY_ID = '0190b5a4-0000-7000-8000-00000000b001'

// Before the server starts: a store migrated up to 005 with an account and a key written then, as an
// install from before the limits holds them; then 006, and 006 once more under another number. What it
// answered is checked in the first test below (tap's root test ends if it waits idle before its first).
const migrations = tempDir('tracegate-migrations-')
t.teardown(() => { rmSync(migrations, { recursive: true, force: true }) })
const shipped = readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.sql')).sort()
for (const f of shipped.filter((f) => f < '006')) copyFileSync(join(MIGRATIONS_DIR, f), join(migrations, f))
const before = await (async () => {
  const store = new StoreClient({ dataDir, clickhouse: null, traces: { ...loadConfig({}).traces, enabled: false }, pricingFile: null, testSeams: true, migrationsDir: migrations })
  try {
    const upTo005 = await store.call('migrate')
    // The old schema's columns only, as the code before 006 wrote them (the test seam runs the statement).
    await store.call('testQuery', {
      query: `INSERT INTO accounts (id, name, plan, server_side_keys, created_at, updated_at)
        SELECT {a:UUID}, 'before', 'pro', false, now64(3), now64(3)`,
      params: { a: OLD_ACCOUNT },
    })
    await store.call('testQuery', {
      query: `INSERT INTO api_keys (account_id, id, key_hash, prefix, name, scope, created_at, updated_at)
        SELECT {a:UUID}, {k:UUID}, {h:FixedString(64)}, {p:String}, 'old', 'proxy', now64(3), now64(3)`,
      params: { a: OLD_ACCOUNT, k: OLD_KEY_ID, h: hashKey(OLD_KEY), p: keyPrefix(OLD_KEY) },
    })
    copyFileSync(join(MIGRATIONS_DIR, '006_limits.sql'), join(migrations, '006_limits.sql'))
    const first = await store.call('migrate')
    // Under a number no shipped migration takes: the server below starts on this store and must still
    // apply every shipped migration after 006.
    copyFileSync(join(MIGRATIONS_DIR, '006_limits.sql'), join(migrations, '999_limits_again.sql'))
    const again = await store.call('migrate')
    // The reads below are today's code, which reads the columns of the migrations shipped after 006 too.
    for (const f of shipped.filter((f) => f > '006_limits.sql')) copyFileSync(join(MIGRATIONS_DIR, f), join(migrations, f))
    await store.call('migrate')
    return {
      upTo005,
      first,
      again,
      info: await store.call('lookupKey', { hash: hashKey(OLD_KEY) }),
      listed: await store.call('listKeys', { accountId: OLD_ACCOUNT }),
      account: await store.call('getAccount', { id: OLD_ACCOUNT }),
    }
  } finally {
    await store.close()
  }
})()

const mock = await startMockProvider({ recordLimit: 0 })
t.teardown(() => mock.close())
// A long key cache TTL: a change the proxy sees comes from an invalidation, never from an expiry.
const tg = await Tracegate.start(testConfig(dataDir, mock, { TRACEGATE_KEY_CACHE_TTL_MS: '600000' }), { bootstrap: false, testSeams: true })
t.teardown(() => tg.close())
const proxyUrl = `http://127.0.0.1:${tg.proxyPort}${ROUTES.alpha}`

const env = (dir: string): NodeJS.ProcessEnv => cliEnv(dir)

/** `tracegate ...args` on the running server's data directory: through its admin socket. */
function cli (args: string[]): Promise<CliRun> {
  return runTracegate(args, env(dataDir))
}




function limits (l: Partial<Limits>): Limits {
  return { ...NO_LIMITS, ...l }
}

/** A key's limits as the CLI's --json prints them (the dashboard API's members). */
function keyJson (l: Partial<Limits>): LimitsView {
  return limitsView(limits(l))
}

/** An account's limits as the CLI's --json prints them: no body limit member. */
function accountJson (l: Partial<Limits>): LimitsView {
  return limitsView(limits(l), true)
}

async function chat (key: string, model = 'gpt-4o-mini'): Promise<{ status: number; traceId: string }> {
  const r = await send(proxyUrl, { body: JSON.stringify(bodyFor('alpha', { api_key: key, model })) })
  return { status: r.status, traceId: r.requestId }
}

const account = await tg.admin.createAccount({ name: 'limited', plan: 'pro' })

t.test('rows from before migration 006 read as no limits, and the migration runs twice', async (t) => {
  t.ok(shipped.includes('006_limits.sql'), 'migration 006 ships')
  t.notOk(before.upTo005.includes('006_limits.sql'), 'the store was migrated up to 005 first')
  t.same(before.first, ['006_limits.sql'], '006 applied')
  t.same(before.again, ['999_limits_again.sql'], 'its statements ran again without an error')
  t.same(before.info?.limits, NO_LIMITS, 'the old key has no limits')
  t.same(before.info?.accountLimits, NO_LIMITS, 'nor has its account')
  t.same(before.listed[0]?.limits, NO_LIMITS, 'listKeys agrees')
  t.same(before.account?.limits, NO_LIMITS, 'getAccount agrees')
  t.same(await tg.store.call('migrate'), [], 'the server started on it applies nothing more')

  const r = await chat(OLD_KEY)
  t.equal(r.status, 200, 'a call with the key from before 006')
  t.same(tg.keys.peek(hashKey(OLD_KEY))?.limits, NO_LIMITS)
  const { keys } = oneJson(t, await cli(['key', 'list', '--account', OLD_ACCOUNT, '--json']), 'key list')
  t.same(keys[0]?.limits, keyJson({}), 'listed with no limits')
})

t.test('key create, update, none and list through the running server', async (t) => {
  const created = oneJson(t, await cli(['key', 'create', '--account', account.id, '--scope', 'proxy', '--name', 'capped',
    '--rpm', '60', '--tpm', '10000', '--budget-day', '2.5', '--budget-month', '40.123456', '--models', 'gpt-4o*, claude-3-5-haiku', '--max-body-bytes', '65536', '--json']), 'key create')
  const want = limits({ rpm: 60, tpm: 10_000, budgetDayUsd: 2.5, budgetMonthUsd: 40.123456, models: ['gpt-4o*', 'claude-3-5-haiku'], maxBodyBytes: 65_536 })
  t.same(created.limits, limitsView(want), 'the created key carries its limits')
  t.same((await tg.store.call('lookupKey', { hash: hashKey(created.key) }))?.limits, want, 'lookupKey reads them back')

  const updated = oneJson(t, await cli(['key', 'update', '--id', created.id, '--rpm', '120', '--models', 'none', '--budget-day', 'none', '--json']), 'key update')
  const after = limits({ rpm: 120, tpm: 10_000, budgetMonthUsd: 40.123456, maxBodyBytes: 65_536 })
  t.same(updated.limits, limitsView(after), 'a flag changes its limit, none removes one, the others stay')
  t.equal(updated.id, created.id)
  t.equal(updated.name, 'capped', 'the rest of the row is kept')

  const plain = oneJson(t, await cli(['key', 'create', '--account', account.id, '--scope', 'proxy', '--name', 'plain', '--json']), 'key create without limits')
  t.same(plain.limits, keyJson({}))

  const { keys } = oneJson(t, await cli(['key', 'list', '--account', account.id, '--json']), 'key list')
  const byId = new Map((keys as any[]).map((k) => [k.id, k]))
  t.same(byId.get(created.id)?.limits, limitsView(after), 'key list --json carries the limits')
  t.same(byId.get(plain.id)?.limits, keyJson({}))
  const text = await cli(['key', 'list', '--account', account.id])
  t.equal(text.code, 0)
  const line = (id: string): string => text.stdout.split('\n').find((l) => l.startsWith(id)) ?? ''
  t.match(line(created.id), /limits: 120 rpm, 10000 tpm, \$40\.123456\/month, body <= 65536 bytes/, 'the text listing shows each limit')
  t.match(line(plain.id), /no limits/, 'and says when there is none')

  // A revoke writes a new version of the row: the limits stay on it.
  const revoked = oneJson(t, await cli(['key', 'revoke', '--id', plain.id, '--json']), 'key revoke')
  t.same(revoked.limits, keyJson({}))
  const revokedLimited = await tg.admin.revokeKey({ id: created.id })
  t.same(revokedLimited.limits, after, 'revoking keeps the limits of the row')
})

t.test('account update and account list through the running server', async (t) => {
  const updated = oneJson(t, await cli(['account', 'update', '--id', account.id, '--rpm', '600', '--budget-month', '100', '--models', 'gpt-4o-mini,claude-*', '--json']), 'account update')
  const want = limits({ rpm: 600, budgetMonthUsd: 100, models: ['gpt-4o-mini', 'claude-*'] })
  t.same(updated.limits, limitsView(want, true))
  t.equal(updated.name, 'limited', 'the rest of the row is kept')
  t.equal(updated.plan, 'pro')
  const { accounts } = oneJson(t, await cli(['account', 'list', '--json']), 'account list')
  const listed = (accounts as any[]).find((a) => a.id === account.id)
  t.same(listed?.limits, limitsView(want, true), 'account list --json carries the limits')
  t.same((accounts as any[]).find((a) => a.id === OLD_ACCOUNT)?.limits, accountJson({}))
  const text = await cli(['account', 'list'])
  t.match(text.stdout.split('\n').find((l) => l.startsWith(account.id)), /limits: 600 rpm, \$100\/month, models gpt-4o-mini,claude-\*/)

  const removed = oneJson(t, await cli(['account', 'update', '--id', account.id, '--rpm', 'none', '--json']), 'account update --rpm none')
  const left = limits({ budgetMonthUsd: 100, models: ['gpt-4o-mini', 'claude-*'] })
  t.same(removed.limits, limitsView(left, true))
  const key = await tg.admin.createKey({ account: account.id, scope: 'proxy', tpm: 5 })
  const info = await tg.store.call('lookupKey', { hash: hashKey(key.key) })
  t.same(info?.accountLimits, left, "lookupKey carries the account's limits")
  t.same(info?.limits, limits({ tpm: 5 }), 'next to the key\'s own')
})

t.test('refusals: the CLI exits 1, the socket answers with the code', async (t) => {
  const key = await tg.admin.createKey({ account: account.id, scope: 'proxy', rpm: 10 })
  const bad: Array<[string[], string]> = [
    [['--rpm', 'abc'], 'rpm'], [['--rpm', '1.5'], 'rpm'], [['--rpm', '0'], 'rpm'], [['--tpm=-5'], 'tpm'],
    [['--budget-day=-1'], 'budget_day'], [['--budget-month', '0'], 'budget_month'], [['--budget-day', '0.1234567'], 'budget_day'],
    [['--max-body-bytes', 'lots'], 'max_body_bytes'], [['--models', ' , '], 'models'],
  ]
  for (const [flags] of bad) refused(t, await cli(['key', 'update', '--id', key.id, ...flags]), `key update ${flags.join(' ')}`)
  refused(t, await cli(['key', 'create', '--account', account.id, '--scope', 'proxy', '--rpm', '-1']), 'key create --rpm -1')
  refused(t, await cli(['account', 'update', '--id', account.id, '--max-body-bytes', '1000']), 'account update --max-body-bytes')
  refused(t, await cli(['key', 'update', '--id', key.id]), 'key update with no limit')
  refused(t, await cli(['key', 'update', '--id', '0190b5a4-0000-7000-8000-0000000000ff', '--rpm', '5']), 'key update of an unknown id')
  refused(t, await cli(['account', 'update', '--id', '0190b5a4-0000-7000-8000-0000000000ff', '--rpm', '5']), 'account update of an unknown id')

  for (const [flags, field] of bad) {
    const value = (flags[0]!.includes('=') ? flags[0]!.split('=')[1] : flags[1])!
    const r = await adminCall(dataDir, 'key.update', { id: key.id, [field]: value })
    t.equal(r.error?.code, 'invalid_argument', `${field}=${value}: invalid_argument`)
    t.equal(r.error?.param, field, `naming ${field}`)
    t.equal(r.status, 400)
  }
  const body = await adminCall(dataDir, 'account.update', { id: account.id, max_body_bytes: 1000 })
  t.match(body, { status: 400, error: { code: 'invalid_argument', param: 'max_body_bytes' } }, 'max_body_bytes on an account')
  t.match(await adminCall(dataDir, 'key.update', { id: key.id }), { status: 400, error: { code: 'missing_argument' } }, 'an update with no limit')
  t.match(await adminCall(dataDir, 'account.update', { id: account.id, name: 'x' }), { status: 400, error: { code: 'missing_argument' } }, 'fields other than limits are not a change')
  t.match(await adminCall(dataDir, 'key.update', { id: '0190b5a4-0000-7000-8000-0000000000ff', rpm: 5 }), { status: 404, error: { code: 'key_not_found' } })
  t.match(await adminCall(dataDir, 'account.update', { id: '0190b5a4-0000-7000-8000-0000000000ff', rpm: 5 }), { status: 404, error: { code: 'unknown_account' } })
  t.match(await adminCall(dataDir, 'key.update', { id: 'nope', rpm: 5 }), { status: 400, error: { code: 'invalid_argument' } }, 'an id that is not a UUID')
  t.match(await adminCall(dataDir, 'key.create', { account: account.id, scope: 'proxy', rpm: 0 }), { status: 400, error: { code: 'invalid_argument', param: 'rpm' } })
  t.same((await tg.store.call('lookupKey', { hash: hashKey(key.key) }))?.limits, limits({ rpm: 10 }), 'no refused update changed the key')
})

t.test('limitUsage: the minute, the UTC day and the UTC month containing now', async (t) => {
  const key = await tg.admin.createKey({ account: account.id, scope: 'proxy' })
  const other = await tg.admin.createKey({ account: account.id, scope: 'proxy' })
  const ids: string[] = []
  for (const [k, n] of [[key.key, 4], [other.key, 2]] as const) {
    for (let i = 0; i < n; i++) {
      const r = await chat(k)
      t.equal(r.status, 200)
      ids.push(r.traceId)
    }
  }
  // Refused before the limits count it (the model is not a string): traced, but not one of the minute's requests.
  const refused = await send(proxyUrl, { body: JSON.stringify(bodyFor('alpha', { api_key: key.key, model: 42 })) })
  t.equal(refused.status, 422)
  ids.push(refused.requestId)
  await stored(tg, account.id, ids)
  const now = Date.now()
  const usage = await tg.store.call('limitUsage', { now })
  const minute = Math.floor(now / 60_000) * 60_000
  const day = now - now % 86_400_000
  for (const k of [key, other]) {
    const [sums] = await tg.store.call('testQuery', {
      query: `SELECT countIf(toStartOfMinute(time) = fromUnixTimestamp64Milli({m:Int64}, 'UTC') AND outcome = 'ok') AS requests,
          countIf(toStartOfMinute(time) = fromUnixTimestamp64Milli({m:Int64}, 'UTC')) AS traced,
          sumIf(input_tokens + output_tokens, toStartOfMinute(time) = fromUnixTimestamp64Milli({m:Int64}, 'UTC')) AS tokens,
          sumIf(ifNull(cost_usd, 0), time >= fromUnixTimestamp64Milli({d:Int64}, 'UTC')) AS day_usd,
          sum(ifNull(cost_usd, 0)) AS month_usd
        FROM traces WHERE key_id = {k:UUID} AND toStartOfMonth(time) = toStartOfMonth(fromUnixTimestamp64Milli({m:Int64}, 'UTC'))`,
      params: { k: k.id, m: minute, d: day },
    })
    const row = usage.find((u) => u.keyId === k.id)
    t.equal(row?.accountId, account.id)
    t.equal(row?.minuteRequests, Number(sums?.requests), `minute requests = the traces' admitted calls (${String(sums?.requests)})`)
    t.equal(Number(sums?.traced), k === key ? 5 : 2, 'the refused call is traced')
    t.equal(row?.minuteTokens, Number(sums?.tokens), `minute tokens = the traces' (${String(sums?.tokens)})`)
    t.ok(Number(sums?.month_usd) > 0, 'the mock provider\'s usage has a cost')
    t.ok(Math.abs((row?.dayUsd ?? -1) - Number(sums?.day_usd)) < 1e-9, `day cost = the traces' (${String(sums?.day_usd)})`)
    t.ok(Math.abs((row?.monthUsd ?? -1) - Number(sums?.month_usd)) < 1e-9, `month cost = the traces' (${String(sums?.month_usd)})`)
  }

  // Windows at their edges, on rollup rows of a made-up key in June 2025: now is 2025-06-15 12:30:20 UTC.
  const fake = '0190b5a4-0000-7000-8000-00000000c001'
  const rows: Array<[string, number, number, number]> = [
    ['2025-06-15 12:30:00', 3, 100, 0.5], // this minute
    ['2025-06-15 12:29:00', 5, 200, 0.25], // this day
    ['2025-06-15 00:00:00', 7, 300, 0.125], // the day's first minute
    ['2025-06-14 23:59:00', 11, 400, 1], // this month
    ['2025-06-01 00:00:00', 13, 500, 2], // the month's first minute
    ['2025-05-31 23:59:00', 17, 600, 4], // last month: not counted
    ['2025-06-15 12:31:00', 19, 700, 8], // after now: not counted
  ]
  // Each insert with its own token: the embedded session keeps the trace writer's last
  // insert_deduplication_token, under which a second block in one partition would be dropped as a replay.
  for (const [minuteText, requests, tokens, cost] of rows) {
    await tg.store.call('testQuery', {
      query: `INSERT INTO usage_minute (account_id, minute, key_id, provider, model, requests, input_tokens, output_tokens, cost_usd)
        SELECT {a:UUID}, toDateTime({m:String}, 'UTC'), {k:UUID}, 'alpha', 'gpt-4o-mini', {r:UInt64}, {i:UInt64}, 1, {c:Float64}
        SETTINGS insert_deduplication_token = '${randomUUID()}'`,
      params: { a: account.id, m: minuteText, k: fake, r: requests, i: tokens - 1, c: cost },
    })
  }
  const edge = (await tg.store.call('limitUsage', { now: Date.UTC(2025, 5, 15, 12, 30, 20) })).filter((u) => u.keyId === fake)
  // Requests come from the minute's traces (this made-up key has none), tokens and cost from the rollup.
  t.same(edge, [{ accountId: account.id, keyId: fake, minuteRequests: 0, minuteTokens: 100, dayUsd: 0.875, monthUsd: 3.875 }])
})

// Last: the socket below takes over admin.json from the server's own.
t.test('an update through the admin socket reaches the key cache at once', async (t) => {
  // The wiring src/tracegate.ts gives its AdminOps: a change of limits drops the account's cached keys.
  const admin = new AdminOps(tg.store, (hash) => { tg.keys.invalidate(hash) }, undefined, (accountId) => { tg.keys.invalidateAccount(accountId) })
  const socket = new AdminServer(admin)
  await socket.start(dataDir)
  t.teardown(() => { socket.close() })

  const other = await tg.admin.createAccount({ name: 'bystander', plan: 'pro' })
  const a = await tg.admin.createKey({ account: account.id, scope: 'proxy', rpm: 50 })
  const b = await tg.admin.createKey({ account: account.id, scope: 'proxy' })
  const c = await tg.admin.createKey({ account: other.id, scope: 'proxy' })
  const cached = (k: { key: string }): ReturnType<typeof tg.keys.peek> => tg.keys.peek(hashKey(k.key))
  const cacheAll = async (): Promise<void> => {
    for (const k of [a, b, c]) t.equal((await chat(k.key)).status, 200, 'a call caches the key')
    t.ok(cached(a) !== undefined && cached(b) !== undefined && cached(c) !== undefined, 'the keys are cached')
  }
  await cacheAll()
  t.equal(cached(a)?.limits.rpm, 50, 'the cached KeyInfo has the key\'s rpm')

  oneJson(t, await cli(['key', 'update', '--id', a.id, '--rpm', '7', '--json']), 'key update through the socket')
  t.equal(cached(a), undefined, 'the updated key left the cache (with the rest of its account\'s)')
  t.ok(cached(c) !== undefined, "another account's key stays")
  await cacheAll()
  t.equal(cached(a)?.limits.rpm, 7, 'the next call caches the new limit')

  oneJson(t, await cli(['account', 'update', '--id', account.id, '--tpm', '900000', '--json']), 'account update through the socket')
  t.equal(cached(a), undefined, "every key of the account left the cache")
  t.equal(cached(b), undefined)
  t.ok(cached(c) !== undefined, "another account's key stays")
  t.equal((await chat(b.key)).status, 200)
  t.equal(cached(b)?.accountLimits.tpm, 900_000, 'the next call sees the account\'s new limit')
})

t.test('with no server, the CLI opens the store itself', async (t) => {
  const dir = tempDir('tracegate-limits-cli-')
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const run = (args: string[]): Promise<CliRun> => runTracegate(args, env(dir))
  const acct = oneJson(t, await run(['account', 'create', '--name', 'offline', '--plan', 'pro', '--json']), 'account create')
  t.same(acct.limits, accountJson({}))
  const key = oneJson(t, await run(['key', 'create', '--account', acct.id, '--scope', 'proxy', '--rpm', '30', '--models', 'gpt-4o*', '--json']), 'key create')
  t.same(key.limits, keyJson({ rpm: 30, models: ['gpt-4o*'] }))
  const updated = oneJson(t, await run(['key', 'update', '--id', key.id, '--rpm', 'none', '--budget-day', '1.25', '--json']), 'key update')
  t.same(updated.limits, keyJson({ budgetDayUsd: 1.25, models: ['gpt-4o*'] }))
  const a2 = oneJson(t, await run(['account', 'update', '--id', acct.id, '--tpm', '5000', '--json']), 'account update')
  t.same(a2.limits, accountJson({ tpm: 5000 }))
  refused(t, await run(['account', 'update', '--id', acct.id, '--max-body-bytes', '10']), 'account update --max-body-bytes')
  const { keys } = oneJson(t, await run(['key', 'list', '--account', acct.id, '--json']), 'key list')
  t.same(keys.map((k: any) => k.limits), [updated.limits])
  const { accounts } = oneJson(t, await run(['account', 'list', '--json']), 'account list')
  t.same(accounts.map((a: any) => a.limits), [a2.limits])
})
