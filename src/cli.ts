// The `tracegate` command. The only file that calls process.exit.
import { parseArgs } from 'node:util'
import { loadConfig, type Config } from './config.js'
import { ConfigError } from './domain/config-error.js'
import { TracegateError } from './errors.js'
import { readFileSync } from 'node:fs'
import { runAdmin } from './admin/remote.js'
import type { CreatedKey, ListedKey } from './admin/ops.js'
import { accountView, keyView, type AccountView, type KeyView, type LimitsView } from './admin/views.js'
import type { AccountRow, KeyRow } from './domain/accounts.js'
import { repoFile } from './paths.js'
import { createLogger } from './log.js'
import { startMockProvider } from './mock-provider/index.js'
import { Tracegate } from './tracegate.js'
import type { AccountDetection } from './domain/detection-policy.js'
import type { Limits } from './domain/limits.js'

const USAGE = `usage: tracegate <command> [options]

  serve [--mock-providers]              run the proxy (TRACEGATE_* environment variables configure it)
  migrate                               apply the ClickHouse migrations
  account create --name N --plan free|pro|enterprise [--server-side-keys]
  user create --account ID --email E    (password on standard input)
  key create --account ID --scope proxy|read|sql [--name N] [--expires-in 30d] [LIMITS] [--max-body-bytes N]
  key update --id KEY_ID [LIMITS] [--max-body-bytes N]
  key revoke --id KEY_ID
  key list --account ID                 (with each key's limits and last use)
  account update --id ID [LIMITS] [DETECTION]
                                        (limits on all the account's keys together; detection policy)
  account list                          (with each account's limits and detection policy)
  user reset-password --email E         (new password on standard input; the user's sessions end)
  doctor                                check this install and its settings; exit 1 on a problem
  mock-provider [--port N] [--host H] [--ttft-ms N] [--chunks N] [--gap-ms N]

  LIMITS: [--rpm N] [--tpm N] [--budget-day USD] [--budget-month USD] [--models 'gpt-4o*,claude-3-5-haiku']
    requests and tokens (input + output) per minute, spend per UTC day and month, allowed models (* is any
    run of characters); on update, a flag left out keeps its limit and the value none removes it

  DETECTION: [--detection-policy block|monitor|off] [--detection-threshold 0.001-1|none]
    [--detection-data-threshold 0.001-1|none] [--detection-allow 'phrase one,phrase two'|none]
    [--pii-at-rest keep|mask]
    block answers an injection with 403; monitor records the verdict and forwards the call; off skips
    detection. The threshold is the score that blocks (none: the detector's own); the data threshold is
    the one for text the model is handed to read: tool results, documents, pasted text (none: the
    threshold). Allow phrases never
    count as injection (case-insensitive, whole phrase); none clears them. --pii-at-rest mask stores
    prompt and response with e-mails, phone numbers, card numbers, IBANs, SSNs and secrets replaced by
    placeholders ([EMAIL], [PHONE], [CARD], [IBAN], [SSN], [SECRET]); keep stores them as sent. A flag
    left out keeps its value

  --json    print one JSON object (admin commands, doctor)
  --version print the version
`

class UsageError extends Error {}

function fail (message: string, code = 1): never {
  process.stderr.write(`tracegate: ${message}\n`)
  process.exit(code)
}

function intOption (value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined
  if (!/^\d+$/.test(value)) throw new UsageError(`--${name} must be a whole number`)
  return Number(value)
}

async function readPassword (): Promise<string> {
  const stdin = process.stdin
  if (stdin.isTTY) {
    process.stderr.write('Password: ')
    stdin.setRawMode(true)
    return new Promise((resolve) => {
      let text = ''
      const onData = (b: Buffer): void => {
        for (const ch of b.toString('utf8')) {
          if (ch === '\r' || ch === '\n' || ch === '\u0004') {
            stdin.setRawMode(false); stdin.pause(); stdin.off('data', onData)
            process.stderr.write('\n')
            resolve(text)
            return
          }
          if (ch === '\u0003') { stdin.setRawMode(false); process.exit(130) }
          text = ch === '\u007f' ? text.slice(0, -1) : text + ch
        }
      }
      stdin.on('data', onData)
    })
  }
  const chunks: Buffer[] = []
  for await (const chunk of stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '')
}

async function serve (config: Config, mockProviders: boolean): Promise<void> {
  const log = createLogger(config.logLevel)
  const tg = await Tracegate.start(config, { mockProviders, log })
  // Standard output carries only the JSON log; what is said to the person who started the server goes
  // to standard error. The first-start block holds a password and a key, shown this once by design: it is
  // written here and never through the logger.
  const first = tg.firstStart
  if (first !== null) {
    process.stderr.write(
      '\nFirst start: created a pro account, an admin user and a proxy key. They are shown this once.\n' +
      `  account:   ${first.accountId}\n` +
      `  sign in:   ${first.email} / ${first.password}\n` +
      `  proxy key: ${first.proxyKey}\n\n`)
  }
  process.stderr.write(`tracegate proxy listening on http://${config.host}:${tg.proxyPort}\n`)
  process.stderr.write(`dashboard on http://${config.host}:${tg.dashboardPort}\n`)
  if (tg.mock !== null) process.stderr.write(`mock providers on ${tg.mock.url}\n`)
  // The first signal begins the shutdown with its delay (Tracegate.shutdown); a second one ends the delay.
  let stopping = false
  const stop = (signal: string): void => {
    if (stopping) {
      if (tg.delaying) log.info({ signal }, 'shutdown delay skipped')
      void tg.shutdown()
      return
    }
    stopping = true
    log.info({ signal, delay_ms: config.shutdownDelayMs }, 'shutting down')
    tg.shutdown().then(() => process.exit(0), (err: unknown) => {
      log.error({ err }, 'shutdown failed')
      process.exit(1)
    })
  }
  process.on('SIGTERM', () => { stop('SIGTERM') })
  process.on('SIGINT', () => { stop('SIGINT') })
  // A fault in one request must not take every other in-flight call down with the process.
  process.on('uncaughtException', (err) => { log.error({ err }, 'uncaught exception') })
  process.on('unhandledRejection', (err) => { log.error({ err }, 'unhandled rejection') })
}

/** The limit flags as admin-operation fields (undefined: not given, so not sent). */
function limitArgs (values: Record<string, string | boolean | undefined>): Record<string, unknown> {
  return {
    rpm: values.rpm,
    tpm: values.tpm,
    budget_day: values['budget-day'],
    budget_month: values['budget-month'],
    models: values.models,
    max_body_bytes: values['max-body-bytes'],
  }
}

/** The detection flags as admin-operation fields (undefined: not given, so not sent). */
function detectionArgs (values: Record<string, string | boolean | undefined>): Record<string, unknown> {
  return {
    detection_policy: values['detection-policy'],
    detection_threshold: values['detection-threshold'],
    detection_data_threshold: values['detection-data-threshold'],
    detection_allow: values['detection-allow'],
    pii_at_rest: values['pii-at-rest'],
  }
}

/** The detection policy in one piece of the text listings: `detection block (threshold 0.4, 2 allow phrases)`. */
function detectionText (d: AccountView['detection']): string {
  const parts = [`threshold ${d.threshold === null ? 'default' : d.threshold}`]
  if (d.data_threshold !== null) parts.push(`data threshold ${d.data_threshold}`)
  if (d.allow_phrases.length > 0) parts.push(`allow ${d.allow_phrases.map((p) => JSON.stringify(p)).join(', ')}`)
  return `detection ${d.policy} (${parts.join(', ')}), PII at rest: ${d.pii_at_rest}`
}

/** One line of limits for the text listings. */
function limitsText (l: LimitsView): string {
  const parts: string[] = []
  if (l.rpm !== null) parts.push(`${l.rpm} rpm`)
  if (l.tpm !== null) parts.push(`${l.tpm} tpm`)
  if (l.budget_day !== null) parts.push(`$${l.budget_day}/day`)
  if (l.budget_month !== null) parts.push(`$${l.budget_month}/month`)
  if (l.models !== null) parts.push(`models ${l.models.join(',')}`)
  if (l.max_body_bytes !== undefined && l.max_body_bytes !== null) parts.push(`body <= ${l.max_body_bytes} bytes`)
  return parts.length === 0 ? 'no limits' : `limits: ${parts.join(', ')}`
}

/** A key's state in the text listing: active (with its expiry when it has one), expired or revoked, with the time. */
function statusText (k: KeyView): string {
  if (k.status === 'revoked') return `revoked ${k.revoked_at ?? ''}`
  if (k.status === 'expired') return `expired ${k.expires_at ?? ''}`
  return k.expires_at === null ? 'active' : `active, expires ${k.expires_at}`
}

/** A key an update or a revoke answered: its last use is not part of that answer, so not shown as null (never). */
function changedKey (row: KeyRow): Omit<KeyView, 'last_used_at'> {
  const { last_used_at: _, ...k } = keyView(row, null)
  return k
}

function print (json: boolean, value: unknown, human: string): void {
  process.stdout.write(json ? JSON.stringify(value) + '\n' : human + '\n')
}

async function main (argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
      'mock-providers': { type: 'boolean', default: false },
      'server-side-keys': { type: 'boolean', default: false },
      name: { type: 'string' },
      plan: { type: 'string' },
      account: { type: 'string' },
      email: { type: 'string' },
      scope: { type: 'string' },
      'expires-in': { type: 'string' },
      id: { type: 'string' },
      rpm: { type: 'string' },
      tpm: { type: 'string' },
      'budget-day': { type: 'string' },
      'budget-month': { type: 'string' },
      models: { type: 'string' },
      'max-body-bytes': { type: 'string' },
      'detection-policy': { type: 'string' },
      'detection-threshold': { type: 'string' },
      'detection-data-threshold': { type: 'string' },
      'detection-allow': { type: 'string' },
      'pii-at-rest': { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      'ttft-ms': { type: 'string' },
      chunks: { type: 'string' },
      'gap-ms': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
      version: { type: 'boolean', default: false },
    },
  })
  const command = positionals.join(' ')
  if (values.version) {
    const pkg = JSON.parse(readFileSync(repoFile('package.json'), 'utf8')) as { version: string }
    process.stdout.write(`${pkg.version}\n`)
    return
  }
  if (values.help) {
    process.stdout.write(USAGE)
    return
  }
  // No command is a usage error, as an unknown one is: a script that forgot it must not see success.
  if (command === '') throw new UsageError(`no command\n\n${USAGE}`)
  if (command === 'doctor') {
    const { formatChecks, runDoctor } = await import('./doctor.js')
    const checks = await runDoctor()
    print(values.json, { ok: checks.every((c) => c.ok), checks }, formatChecks(checks))
    process.exitCode = checks.every((c) => c.ok) ? 0 : 1
    return
  }
  if (command === 'mock-provider') {
    const mock = await startMockProvider({
      host: values.host ?? '127.0.0.1',
      port: intOption(values.port, 'port') ?? 0,
      ttftMs: intOption(values['ttft-ms'], 'ttft-ms'),
      chunks: intOption(values.chunks, 'chunks'),
      gapMs: intOption(values['gap-ms'], 'gap-ms'),
      recordLimit: 0,
    })
    process.stdout.write(`mock provider listening on ${mock.url}\n`)
    const stop = (): void => { void mock.close().then(() => process.exit(0)) }
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
    return
  }
  const config = loadConfig()
  const json = values.json
  switch (command) {
    case 'serve':
      await serve(config, values['mock-providers'])
      return
    case 'migrate': {
      const applied = await runAdmin(config, 'migrate', {}) as string[]
      print(json, { applied }, applied.length === 0 ? 'schema is up to date' : `applied ${applied.join(', ')}`)
      return
    }
    case 'account create': {
      const a = accountView(await runAdmin(config, 'account.create', { name: values.name, plan: values.plan, serverSideKeys: values['server-side-keys'] }) as AccountRow)
      print(json, a, `created account ${a.id} (plan ${a.plan})`)
      return
    }
    case 'user create': {
      const password = await readPassword()
      const u = await runAdmin(config, 'user.create', { account: values.account, email: values.email, password }) as { id: string; email: string }
      print(json, u, `created user ${u.id} <${u.email}>`)
      return
    }
    case 'key create': {
      const created = await runAdmin(config, 'key.create', { account: values.account, scope: values.scope, name: values.name, expiresIn: values['expires-in'], ...limitArgs(values) }) as CreatedKey
      const k = { ...keyView(created, null), key: created.key }
      print(json, k, `created ${k.scope} key ${k.id} (${limitsText(k.limits)})\n${k.key}\n(this is the only time the key is shown)`)
      return
    }
    case 'key update': {
      const k = changedKey(await runAdmin(config, 'key.update', { id: values.id, ...limitArgs(values) }) as KeyRow)
      print(json, k, `updated key ${k.id}: ${limitsText(k.limits)}`)
      return
    }
    case 'account update': {
      const a = accountView(await runAdmin(config, 'account.update', { id: values.id, ...limitArgs(values), ...detectionArgs(values) }) as AccountRow)
      print(json, a, `updated account ${a.id}: ${limitsText(a.limits)}; ${detectionText(a.detection)}`)
      return
    }
    case 'key revoke': {
      const k = changedKey(await runAdmin(config, 'key.revoke', { id: values.id }) as KeyRow)
      print(json, k, `revoked key ${k.id} at ${k.revoked_at}`)
      return
    }
    case 'key list': {
      const listed = await runAdmin(config, 'key.list', { account: values.account }) as ListedKey[]
      const keys = listed.map((k) => keyView(k, k.last_used_at))
      const lines = keys.map((k) => `${k.id}  ${k.prefix}…  ${k.scope}  ${k.name}  ${statusText(k)}  ${limitsText(k.limits)}  ${k.last_used_at === null ? 'never used' : `last used ${k.last_used_at}`}`)
      print(json, { keys }, lines.length === 0 ? 'no keys' : lines.join('\n'))
      return
    }
    case 'account list': {
      const accounts = (await runAdmin(config, 'account.list', {}) as AccountRow[]).map(accountView)
      const lines = accounts.map((a) => `${a.id}  ${a.name}  ${a.plan}  ${a.server_side_keys ? 'server-side keys' : 'own keys only'}  ${limitsText(a.limits)}  ${detectionText(a.detection)}  created ${a.created_at}`)
      print(json, { accounts }, lines.length === 0 ? 'no accounts' : lines.join('\n'))
      return
    }
    case 'user reset-password': {
      const password = await readPassword()
      const u = await runAdmin(config, 'user.reset-password', { email: values.email, password }) as { id: string; email: string }
      print(json, u, `new password for ${u.id} <${u.email}>; their dashboard sessions have ended`)
      return
    }
    default:
      throw new UsageError(`unknown command "${command}"\n\n${USAGE}`)
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof ConfigError) fail(err.message, 2)
  if (err instanceof UsageError) fail(err.message, 2)
  if (err instanceof TracegateError) fail(err.message, 1)
  if (err instanceof Error && 'code' in err && (err as { code: unknown }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') fail(err.message, 2)
  fail(err instanceof Error ? err.message : String(err), 1)
})
