// The `tracegate` command as operators run it: real processes, real data directories, real signals.
// Admin commands against a stopped server (they open the store themselves) and against a running one
// (they go through its local admin socket, since chDB allows one process per data directory); the
// first start happening once; a graceful stop with a stream in flight; no secret in the server's output.
import t, { type Test } from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { createHash, randomUUID } from 'node:crypto'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { childEnv, cliArgs, oneJson } from '../helpers/cli.js'
import { tempDir } from '../helpers/server.js'
import { ServeChild } from '../helpers/serve.js'
import { json, type RawResponse, send } from '../helpers/http.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { sleep, withTimeout } from '../helpers/wait.js'

const KEY = /^tgk_[A-Za-z0-9_-]{43}$/
const ANY_KEY = /tgk_[A-Za-z0-9_-]{43}/g
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const PROVIDER_KEY = 'sk-x'
const DAY_MS = 86_400_000
// Generous for slow CI machines; the whole file still finishes in well under a minute when healthy.
const CLI_TIMEOUT_MS = 30_000
const STOP_TIMEOUT_MS = 10_000

/** A data directory and every process started on it; both are gone when the test ends. */
interface Scenario {
  readonly dir: string
  readonly children: Set<ChildProcess>
}

function scenario (t: Test): Scenario {
  const sc: Scenario = { dir: tempDir('tracegate-cli-'), children: new Set() }
  t.teardown(async () => {
    for (const child of sc.children) {
      if (child.exitCode !== null || child.signalCode !== null) continue
      const gone = new Promise((resolve) => { child.once('exit', resolve) })
      child.kill('SIGKILL')
      await gone
    }
    rmSync(sc.dir, { recursive: true, force: true })
  })
  return sc
}

// The servers here stop at SIGTERM without the load balancers' delay (shutdown.test.ts tests that delay).
function cliEnv (dataDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return childEnv({
    TRACEGATE_DATA_DIR: dataDir,
    TRACEGATE_PROXY_PORT: '0',
    TRACEGATE_DASHBOARD_PORT: '0',
    TRACEGATE_LOG_LEVEL: 'warn',
    TRACEGATE_SHUTDOWN_DELAY_MS: '0',
    ...extra,
  })
}

interface CliResult {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs one CLI command to its end; stdin gets `stdin` (or nothing) and is closed. */
function runCli (sc: Scenario, args: string[], opts: { stdin?: string; env?: Record<string, string> } = {}): Promise<CliResult> {
  const child = spawn(process.execPath, cliArgs(...args), { env: cliEnv(sc.dir, opts.env), stdio: ['pipe', 'pipe', 'pipe'] })
  sc.children.add(child)
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (s: string) => { stdout += s })
  child.stderr.setEncoding('utf8').on('data', (s: string) => { stderr += s })
  // A command that exits without reading its stdin must not fail the test with EPIPE.
  child.stdin.on('error', () => {})
  child.stdin.end(opts.stdin ?? '')
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`tracegate ${args.join(' ')} did not finish within ${CLI_TIMEOUT_MS} ms\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, CLI_TIMEOUT_MS)
    child.on('error', (err) => { clearTimeout(timer); reject(err) })
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      sc.children.delete(child)
      resolve({ code, signal, stdout, stderr })
    })
  })
}


/** ClickHouse DateTime64 text (`2026-01-02 03:04:05.678`, UTC) or ISO-8601 → ms. */
function parseTime (text: unknown): number {
  if (typeof text !== 'string') return NaN
  const iso = text.includes('T') ? text : text.replace(' ', 'T')
  return Date.parse(/Z$|[+-]\d\d:?\d\d$/.test(iso) ? iso : iso + 'Z')
}

function sha256 (text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

/** `tracegate ...args` on the scenario's data directory, ended with the scenario. */
function serveOn (sc: Scenario, args: string[]): ServeChild {
  const serve = new ServeChild(null, { args, env: cliEnv(sc.dir) })
  sc.children.add(serve.child)
  return serve
}

interface Started {
  readonly serve: ServeChild
  readonly port: number
}

async function startServe (sc: Scenario): Promise<Started> {
  const serve = serveOn(sc, ['serve', '--mock-providers'])
  const m = await serve.waitFor(/tracegate proxy listening on http:\/\/127\.0\.0\.1:(\d+)\n/)
  return { serve, port: Number(m[1]) }
}

function chatBody (key: string, fields: Record<string, unknown> = {}): string {
  return JSON.stringify(bodyFor('alpha', { api_key: key, alpha_api_key: PROVIDER_KEY, ...fields }, 'hi'))
}

function chat (port: number, key: string): Promise<RawResponse> {
  return send(`http://127.0.0.1:${port}${ROUTES.alpha}`, { body: chatBody(key) })
}

function errorCode (r: RawResponse): unknown {
  try {
    return json(r).error?.code
  } catch {
    return undefined
  }
}

interface StreamCall {
  /** Resolves when the first body bytes arrive. */
  readonly started: Promise<void>
  readonly done: Promise<{ status: number; text: string; complete: boolean }>
  readonly ended: () => boolean
}

/** A streaming chat completion over its own connection. */
function streamChat (port: number, key: string, model: string): StreamCall {
  let ended = false
  let onStart: () => void = () => {}
  let onStartFail: (err: Error) => void = () => {}
  const started = new Promise<void>((resolve, reject) => { onStart = resolve; onStartFail = reject })
  const done = send(`http://127.0.0.1:${port}${ROUTES.alpha}`, {
    body: chatBody(key, { model, stream: true }),
    acceptCut: true,
    onBody: () => { onStart(); return false },
  }).then((r) => {
    ended = true
    onStartFail(new Error(`the stream ended before any body bytes (status ${r.status}): ${r.text}`))
    return { status: r.status, text: r.text, complete: r.complete }
  }, (err: Error) => {
    ended = true
    onStartFail(err)
    throw err
  })
  return { started, done, ended: () => ended }
}

function checkCreatedKey (t: Test, k: any, accountId: string, name: string): void {
  t.match(k.id, UUID, 'the key has an id')
  t.match(k.key, KEY, 'the key value has the tgk_ format')
  t.equal(k.account_id, accountId)
  t.equal(k.scope, 'proxy')
  t.equal(k.name, name)
  t.equal(k.prefix, String(k.key).slice(0, 12), 'the prefix is the first 12 characters')
  t.equal(k.revoked_at, null)
  const ahead = parseTime(k.expires_at) - Date.now()
  t.ok(Math.abs(ahead - 30 * DAY_MS) < 10 * 60_000, `expires_at is about 30 days ahead (got ${String(k.expires_at)})`)
  const text = JSON.stringify(k)
  t.notOk(text.includes(sha256(String(k.key))), 'the hash is not printed')
  t.notOk(Object.keys(k).some((f) => /hash/i.test(f)), 'no hash field')
}

/** `key list --json`: the keys by id, with the checks that hold for every listing. */
function checkListing (t: Test, listing: any, secrets: string[]): Map<string, any> {
  t.ok(Array.isArray(listing.keys), 'key list prints {keys: [...]}')
  const text = JSON.stringify(listing)
  for (const s of secrets) {
    t.notOk(text.includes(s), 'no key value in the listing')
    t.notOk(text.includes(sha256(s)), 'no key hash in the listing')
  }
  t.notMatch(text, /tgk_[A-Za-z0-9_-]{13,}/, 'nothing longer than a prefix')
  t.notMatch(text, /[0-9a-f]{64}/, 'nothing that looks like a SHA-256')
  const byId = new Map<string, any>()
  for (const k of listing.keys as any[]) {
    t.notOk('key' in k, 'no key field')
    t.notOk(Object.keys(k).some((f) => /hash/i.test(f)), 'no hash field')
    byId.set(k.id, k)
  }
  return byId
}

t.test('admin commands against a stopped server', async (t) => {
  const sc = scenario(t)

  const first = oneJson(t, await runCli(sc, ['migrate', '--json']), 'migrate')
  t.ok(Array.isArray(first.applied) && first.applied.length > 0, 'the first migrate applies the migrations')
  t.ok((first.applied as unknown[]).every((m) => typeof m === 'string'), 'applied lists migration names')
  t.same(oneJson(t, await runCli(sc, ['migrate', '--json']), 'migrate again'), { applied: [] }, 'the second migrate applies nothing')

  const account = oneJson(t, await runCli(sc, ['account', 'create', '--name', 'acme', '--plan', 'pro', '--json']), 'account create')
  t.match(account.id, UUID, 'the account has a UUID')
  t.equal(account.plan, 'pro')
  t.equal(account.name, 'acme')

  const gold = await runCli(sc, ['account', 'create', '--name', 'acme', '--plan', 'gold', '--json'])
  t.not(gold.code, 0, '--plan gold exits non-zero')
  t.not(gold.stderr.trim(), '', '--plan gold explains itself on stderr')
  t.equal(gold.stdout, '', '--plan gold prints nothing on stdout')

  const created = await runCli(sc, ['key', 'create', '--account', account.id, '--scope', 'proxy', '--name', 'n', '--expires-in', '30d', '--json'])
  const key = oneJson(t, created, 'key create')
  checkCreatedKey(t, key, account.id, 'n')

  const listed = checkListing(t, oneJson(t, await runCli(sc, ['key', 'list', '--account', account.id, '--json']), 'key list'), [key.key])
  t.equal(listed.size, 1, 'one key')
  t.equal(listed.get(key.id)?.prefix, String(key.key).slice(0, 12), 'the listing shows the prefix')
  t.equal(listed.get(key.id)?.revoked_at, null)

  const revoked = oneJson(t, await runCli(sc, ['key', 'revoke', '--id', key.id, '--json']), 'key revoke')
  t.equal(revoked.id, key.id)
  t.ok(Math.abs(parseTime(revoked.revoked_at) - Date.now()) < 10 * 60_000, `revoked_at is now (got ${String(revoked.revoked_at)})`)
  t.notOk(JSON.stringify(revoked).includes(key.key), 'revoke does not print the key')
  const after = checkListing(t, oneJson(t, await runCli(sc, ['key', 'list', '--account', account.id, '--json']), 'key list after revoke'), [key.key])
  t.equal(after.get(key.id)?.revoked_at, revoked.revoked_at, 'the listing shows the revocation')

  const unknown = await runCli(sc, ['key', 'revoke', '--id', randomUUID(), '--json'])
  t.not(unknown.code, 0, 'revoking an unknown key id exits non-zero')
  t.not(unknown.stderr.trim(), '')

  const password = 'correct horse battery staple'
  const user = oneJson(t, await runCli(sc, ['user', 'create', '--account', account.id, '--email', 'ops@example.com', '--json'], { stdin: password + '\n' }), 'user create')
  t.match(user.id, UUID, 'the user has a UUID')
  t.equal(user.email, 'ops@example.com')
  t.notOk(JSON.stringify(user).includes(password), 'the password is not printed')
  t.notOk(Object.keys(user).some((f) => /password|hash/i.test(f)), 'no password field')

  const again = await runCli(sc, ['user', 'create', '--account', account.id, '--email', 'ops@example.com', '--json'], { stdin: password + '\n' })
  t.not(again.code, 0, 'a second user with the same email fails')
  t.not(again.stderr.trim(), '', 'with a message on stderr')
  t.equal(again.stdout, '')

  const bogus = await runCli(sc, ['frobnicate', '--json'])
  t.equal(bogus.code, 2, 'an unknown command exits 2')
  t.not(bogus.stderr.trim(), '')

  const badEnv = await runCli(sc, ['serve', '--mock-providers'], { env: { TRACEGATE_PROXY_PORT: 'abc' } })
  t.equal(badEnv.code, 2, 'serve with TRACEGATE_PROXY_PORT=abc exits 2')
  t.match(badEnv.stderr, /TRACEGATE_PROXY_PORT/, 'stderr names the variable')
  t.notMatch(badEnv.stdout, /listening/, 'nothing started')
  t.notOk(existsSync(join(sc.dir, 'admin.json')), 'no admin socket was opened')
})

t.test('against a running server', async (t) => {
  const sc = scenario(t)
  const runs: ServeChild[] = []
  let port = 0
  let firstAccount = ''
  let firstKey = ''
  const cliKeys: string[] = []
  let kept: { id: string; key: string } | null = null
  let revokedKey: { id: string; key: string } | null = null
  let otherAccount = ''

  await t.test('first start prints the account and a proxy key once', async (t) => {
    const started = await startServe(sc)
    runs.push(started.serve)
    port = started.port
    const account = await started.serve.waitFor(/^ {2}account: +(\S+)$/m)
    const key = await started.serve.waitFor(/^ {2}proxy key: +(\S+)$/m)
    firstAccount = account[1] ?? ''
    firstKey = key[1] ?? ''
    t.match(firstAccount, UUID, 'account: <uuid>')
    t.match(firstKey, KEY, 'proxy key: tgk_...')
    t.equal(started.serve.stderr.match(/First start/g)?.length, 1, 'one First start block')
    const endpoint = JSON.parse(readFileSync(join(sc.dir, 'admin.json'), 'utf8')) as { pid: number }
    t.equal(endpoint.pid, started.serve.child.pid, 'admin.json names the server process')

    const r = await chat(port, firstKey)
    t.equal(r.status, 200, `the first-start key works (${r.body.toString('utf8')})`)
  })

  await t.test('admin commands go through the server', async (t) => {
    t.same(oneJson(t, await runCli(sc, ['migrate', '--json']), 'migrate'), { applied: [] }, 'the server already migrated')

    const account = oneJson(t, await runCli(sc, ['account', 'create', '--name', 'beta-corp', '--plan', 'enterprise', '--json']), 'account create')
    t.match(account.id, UUID)
    t.equal(account.plan, 'enterprise')
    otherAccount = account.id

    const gold = await runCli(sc, ['account', 'create', '--name', 'x', '--plan', 'gold', '--json'])
    t.not(gold.code, 0, '--plan gold exits non-zero through the server too')
    t.not(gold.stderr.trim(), '')

    const k1 = oneJson(t, await runCli(sc, ['key', 'create', '--account', firstAccount, '--scope', 'proxy', '--name', 'kept', '--expires-in', '30d', '--json']), 'key create')
    checkCreatedKey(t, k1, firstAccount, 'kept')
    const k2 = oneJson(t, await runCli(sc, ['key', 'create', '--account', otherAccount, '--scope', 'proxy', '--name', 'doomed', '--expires-in', '30d', '--json']), 'key create')
    checkCreatedKey(t, k2, otherAccount, 'doomed')
    kept = { id: k1.id, key: k1.key }
    revokedKey = { id: k2.id, key: k2.key }
    cliKeys.push(k1.key, k2.key)

    const listing = checkListing(t, oneJson(t, await runCli(sc, ['key', 'list', '--account', firstAccount, '--json']), 'key list'), [firstKey, k1.key])
    t.equal(listing.size, 2, 'the first-start key and the new one')
    t.equal(listing.get(k1.id)?.prefix, String(k1.key).slice(0, 12))
    t.ok([...listing.values()].some((k) => k.prefix === firstKey.slice(0, 12)), 'the first-start key is listed by its prefix')

    const password = 'another long password'
    const user = oneJson(t, await runCli(sc, ['user', 'create', '--account', otherAccount, '--email', 'dev@example.com', '--json'], { stdin: password }), 'user create')
    t.match(user.id, UUID)
    t.equal(user.email, 'dev@example.com')
    const dup = await runCli(sc, ['user', 'create', '--account', otherAccount, '--email', 'dev@example.com', '--json'], { stdin: password })
    t.not(dup.code, 0, 'a second user with the same email fails through the server too')
    t.not(dup.stderr.trim(), '')
  })

  await t.test('a key created by the CLI works at once, and is refused at once after revoke', async (t) => {
    if (kept === null || revokedKey === null) throw new Error('no keys from the previous test')
    const ok1 = await chat(port, kept.key)
    t.equal(ok1.status, 200, `the new key on the first account works (${ok1.body.toString('utf8')})`)
    // This answer also puts the key in the server's cache, so the refusal below cannot come from a miss.
    const ok2 = await chat(port, revokedKey.key)
    t.equal(ok2.status, 200, `the new key on the enterprise account works (${ok2.body.toString('utf8')})`)

    const revoked = oneJson(t, await runCli(sc, ['key', 'revoke', '--id', revokedKey.id, '--json']), 'key revoke')
    t.equal(revoked.id, revokedKey.id)
    t.ok(Number.isFinite(parseTime(revoked.revoked_at)), `revoked_at is set (got ${String(revoked.revoked_at)})`)

    const refused = await chat(port, revokedKey.key)
    t.equal(refused.status, 401, 'the revoked key is refused at once')
    t.equal(errorCode(refused), 'revoked_api_key')

    const listing = checkListing(t, oneJson(t, await runCli(sc, ['key', 'list', '--account', otherAccount, '--json']), 'key list'), [revokedKey.key])
    t.equal(listing.get(revokedKey.id)?.revoked_at, revoked.revoked_at, 'the listing shows the revocation')
  })

  await t.test('the first start happens once; data persists across a restart', async (t) => {
    if (kept === null || revokedKey === null) throw new Error('no keys from the previous tests')
    const first = runs[0]
    if (first === undefined) throw new Error('no server from the first test')
    const exit = await first.stop(STOP_TIMEOUT_MS)
    t.same(exit, { code: 0, signal: null }, 'SIGTERM: exit 0')
    t.notOk(existsSync(join(sc.dir, 'admin.json')), 'admin.json is removed')

    // With no server, the CLI opens the store itself and sees what the server wrote.
    const offline = checkListing(t, oneJson(t, await runCli(sc, ['key', 'list', '--account', firstAccount, '--json']), 'key list (stopped)'), [firstKey, kept.key])
    t.ok(offline.has(kept.id), 'the CLI key is in the store')

    const started = await startServe(sc)
    runs.push(started.serve)
    port = started.port
    t.notMatch(started.serve.stderr, /First start/, 'no second First start block')
    t.notMatch(started.serve.stderr, /proxy key:/, 'no proxy key printed')

    const ok = await chat(port, kept.key)
    t.equal(ok.status, 200, `the CLI key still works (${ok.body.toString('utf8')})`)
    const okFirst = await chat(port, firstKey)
    t.equal(okFirst.status, 200, 'the first-start key still works')
    const refused = await chat(port, revokedKey.key)
    t.equal(refused.status, 401, 'the revoked key stays revoked')
    t.equal(errorCode(refused), 'revoked_api_key')

    const mine = checkListing(t, oneJson(t, await runCli(sc, ['key', 'list', '--account', firstAccount, '--json']), 'key list'), [firstKey, kept.key])
    t.equal(mine.size, 2, 'both keys of the first account are still listed')
    t.ok(mine.has(kept.id))
    const theirs = checkListing(t, oneJson(t, await runCli(sc, ['key', 'list', '--account', otherAccount, '--json']), 'key list'), [revokedKey.key])
    t.equal(typeof theirs.get(revokedKey.id)?.revoked_at, 'string', 'the revoked key is listed as revoked')
  })

  await t.test('SIGTERM lets an in-flight stream finish and refuses new requests', async (t) => {
    if (kept === null) throw new Error('no key from the previous tests')
    const serve = runs[1]
    if (serve === undefined) throw new Error('no restarted server')
    // 10 chunks 200 ms apart: about two seconds in flight.
    const call = streamChat(port, kept.key, 'mock-chunks-10-gap-200')
    await call.started
    serve.child.kill('SIGTERM')
    // Let the signal reach the server before asking again (a request that beats it is still served).
    await sleep(500)

    let refusal = ''
    try {
      const r = await send(`http://127.0.0.1:${port}${ROUTES.alpha}`, { body: chatBody(kept.key) })
      refusal = `${r.status} ${String(errorCode(r))}`
    } catch (err) {
      refusal = String((err as NodeJS.ErrnoException).code)
    }
    t.ok(!call.ended(), 'the stream was still in flight when the new request came')
    t.ok(refusal === 'ECONNREFUSED' || refusal === '503 service_unavailable',
      `a new connection is refused or gets 503 (got ${refusal})`)

    const answer = await call.done
    t.equal(answer.status, 200)
    t.ok(answer.complete, 'the in-flight response ended cleanly')
    t.match(answer.text, /data: \[DONE\]\s*$/, 'the in-flight response ends with data: [DONE]')

    const exit = await withTimeout(serve.exit, 15_000, 'serve did not exit after the stream finished')
    t.same(exit, { code: 0, signal: null }, 'exit 0')
    t.notOk(existsSync(join(sc.dir, 'admin.json')), 'admin.json is removed')
  })

  await t.test('no secret in the server output', async (t) => {
    t.equal(runs.length, 2, 'two server runs')
    const first = runs[0]
    if (first === undefined || firstKey === '') throw new Error('no first run')
    const block = /^First start:.*\n(?: {2}.*\n)+/m.exec(first.stderr)
    t.ok(block !== null && block[0].includes(firstKey), 'the first-start key is in the First start block')
    const outside = [
      block === null ? first.stderr : first.stderr.replace(block[0], ''),
      ...runs.map((r) => r.stdout),
      ...runs.slice(1).map((r) => r.stderr),
    ].join('\n')
    t.same(outside.match(ANY_KEY) ?? [], [], 'no tracegate key anywhere else')
    for (const k of [firstKey, ...cliKeys]) t.notOk(outside.includes(k), 'a known key is not printed')
    for (const k of cliKeys) t.notOk(first.stderr.includes(k), 'a CLI key is not in the first run either')
    const everything = runs.map((r) => r.stdout + '\n' + r.stderr).join('\n')
    t.notOk(everything.includes(PROVIDER_KEY), `the provider key ${PROVIDER_KEY} never appears`)
  })
})
