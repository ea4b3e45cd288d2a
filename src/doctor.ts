// `tracegate doctor`: what would stop `tracegate serve` here, found without starting it, each with how to
// fix it. Nothing it does needs a browser, nothing it prints is a secret (the ClickHouse password is
// never printed, even inside an error from the server), and it changes nothing: it never migrates, and
// while a server holds the data directory (chDB allows one process per data directory) it asks that
// server through the admin socket instead of opening the store.
import { constants, accessSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { request } from 'undici'
import { adminStatus } from './admin/remote.js'
import type { AdminStatus } from './admin/ops.js'
import { loadConfig, type Config } from './config.js'
import { repoFile } from './paths.js'
import { Pricing } from './pricing/index.js'
import { PROVIDERS } from './providers/index.js'
import { WEIGHTS_URL, loadModel } from '../workers/detector/model.js'
import { clickhouseVersionProblem, MIN_CLICKHOUSE_VERSION } from './domain/clickhouse-version.js'

export interface Check {
  /** Stable: tests and scripts read this, never the text. */
  readonly id: string
  readonly ok: boolean
  readonly detail: string
  /** How to fix it, when not ok. */
  readonly fix: string | null
}

const ok = (id: string, detail: string): Check => ({ id, ok: true, detail, fix: null })
const problem = (id: string, detail: string, fix: string): Check => ({ id, ok: false, detail, fix })

const STORE_TIMEOUT_MS = 20_000
const PROBE_TIMEOUT_MS = 2_000

function message (err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 300)
}

function checkNode (): Check {
  const pkg = JSON.parse(readFileSync(repoFile('package.json'), 'utf8')) as { engines?: { node?: string } }
  const wanted = pkg.engines?.node ?? '20.x'
  const major = Number(process.versions.node.split('.')[0])
  if (major === 20) return ok('node', `Node ${process.versions.node} (tracegate wants ${wanted})`)
  return problem('node', `Node ${process.versions.node}, but tracegate wants ${wanted}: its native modules (chDB, uWebSockets.js) are built for Node 20`,
    'install Node 20 (for example `nvm install 20`) and run tracegate with it')
}

/** The data directory exists and this user can write in it, or can be made at the first start. */
function checkDataDir (dir: string): Check {
  const where = `${resolve(dir)} (TRACEGATE_DATA_DIR)`
  let isDir: boolean
  try {
    isDir = statSync(dir).isDirectory()
  } catch {
    let parent = resolve(dir)
    while (!existsSync(parent) && dirname(parent) !== parent) parent = dirname(parent)
    try {
      accessSync(parent, constants.W_OK)
      return ok('data_dir', `${where} does not exist yet; the first start creates it`)
    } catch {
      return problem('data_dir', `${where} does not exist and ${parent} is not writable, so it cannot be made`,
        `create it for the user that runs tracegate: mkdir -p ${resolve(dir)} && chown "$USER" ${resolve(dir)}`)
    }
  }
  if (!isDir) return problem('data_dir', `${where} is not a directory`, 'point TRACEGATE_DATA_DIR at a directory, or remove the file')
  try {
    // A real write, not access(): a read-only mount or a full disk passes access() and fails here.
    rmSync(mkdtempSync(join(dir, '.doctor-')), { recursive: true })
  } catch (err) {
    return problem('data_dir', `${where} is not writable: ${message(err)}`,
      `give it to the user that runs tracegate: chown -R "$USER" ${resolve(dir)} (or check the disk and the mount)`)
  }
  return ok('data_dir', `${where} is writable`)
}

function describeStore (url: string | null): string {
  return url === null ? 'embedded ClickHouse (chDB)' : `ClickHouse at ${url} (CLICKHOUSE_URL)`
}

function withTimeout<T> (p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => { reject(new Error(`${what} did not answer within ${ms / 1000} s`)) }, ms) })
  return Promise.race([p, late]).finally(() => { clearTimeout(timer) })
}

/** ClickHouse and the migrations: asked of the running server, else of the store opened here. */
async function checkStore (config: Config): Promise<{ clickhouse: Check; migrations: Check | null; server: number | null }> {
  const what = describeStore(config.clickhouse?.url ?? null)
  // With no data directory yet, the embedded engine is tried in a scratch one, removed after.
  const scratch = config.clickhouse === null && !existsSync(config.dataDir) ? mkdtempSync(join(tmpdir(), 'tracegate-doctor-')) : null
  let answer: { status: AdminStatus; server: boolean }
  try {
    answer = await withTimeout(adminStatus(scratch === null ? config : { ...config, dataDir: scratch }), STORE_TIMEOUT_MS, what)
  } catch (err) {
    const fix = config.clickhouse === null
      ? 'reinstall the dependencies with their install scripts (`npm ci`; chdb must be allowed to run its script, see allowScripts in package.json), and check that the data directory is not held by a process that is not tracegate'
      : 'check CLICKHOUSE_URL, CLICKHOUSE_USER, CLICKHOUSE_PASSWORD and CLICKHOUSE_DATABASE, and that the server is up and reachable from here'
    // The store's own messages about a server already name its URL.
    const text = config.clickhouse === null ? `${what}: ${message(err)}` : message(err)
    return { clickhouse: problem('clickhouse', text, fix), migrations: null, server: null }
  } finally {
    if (scratch !== null) rmSync(scratch, { recursive: true, force: true })
  }
  const { status, server } = answer
  const by = server ? `, through the running tracegate (pid ${status.pid}) that holds the data directory` : ''
  const tooOld = clickhouseVersionProblem(status.store.version)
  const clickhouse = tooOld !== null
    ? problem('clickhouse', `${what}: ${tooOld}`, `upgrade the server to ClickHouse ${MIN_CLICKHOUSE_VERSION} or newer`)
    : status.store.url === (config.clickhouse?.url ?? null)
    ? ok('clickhouse', `${what} answers, version ${status.store.version}${by}${scratch === null ? '' : ' (tried in a scratch directory)'}`)
    : problem('clickhouse', `the running tracegate (pid ${status.pid}) uses ${describeStore(status.store.url)}, but these settings say ${what}`,
      'run the doctor with the settings the server runs with (its environment or env file)')
  return { clickhouse, migrations: checkMigrations(status, scratch !== null), server: server ? status.pid : null }
}

function checkMigrations (status: AdminStatus, fresh: boolean): Check {
  const { applied, available } = status.store
  const unknown = applied.filter((m) => !available.includes(m))
  if (unknown.length > 0) {
    return problem('migrations', `the store has migrations this install does not ship (${unknown.join(', ')}): a newer tracegate wrote it`,
      'run the tracegate version that wrote this store, or a newer one')
  }
  const pending = available.filter((m) => !applied.includes(m))
  if (fresh) return ok('migrations', `${available.length} migrations ship with this install; the first start applies them`)
  if (pending.length === 0) return ok('migrations', `all ${available.length} migrations applied`)
  return ok('migrations', `${applied.length} of ${available.length} migrations applied; \`tracegate migrate\` or the next start applies ${pending.join(', ')}`)
}

/** Tries to listen where the server would: the error code, or null when the port is free. */
function tryListen (host: string, port: number): Promise<string | null> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', (err: NodeJS.ErrnoException) => { resolve(err.code ?? 'error') })
    server.listen({ host, port, exclusive: true }, () => { server.close(() => { resolve(null) }) })
  })
}

/** Whether what answers HTTP on the port is tracegate: both its ports answer an unknown path with their error body. */
async function answersAsTracegate (host: string, port: number): Promise<boolean> {
  try {
    const res = await request(`http://${host.includes(':') ? `[${host}]` : host}:${port}/doctor-probe`, { headersTimeout: PROBE_TIMEOUT_MS, bodyTimeout: PROBE_TIMEOUT_MS })
    const body = await res.body.json() as { error?: { code?: unknown } }
    return res.statusCode === 404 && body.error?.code === 'not_found' && res.headers['x-request-id'] !== undefined
  } catch {
    return false
  }
}

/** The SQL port answers /ping as ClickHouse does, naming itself tracegate. */
async function answersAsTracegateSql (host: string, port: number): Promise<boolean> {
  try {
    const res = await request(`http://${host.includes(':') ? `[${host}]` : host}:${port}/ping`, { headersTimeout: PROBE_TIMEOUT_MS, bodyTimeout: PROBE_TIMEOUT_MS })
    const body = await res.body.text()
    return res.statusCode === 200 && body === 'Ok.\n' && res.headers['x-clickhouse-server-display-name'] === 'tracegate'
  } catch {
    return false
  }
}

async function checkPort (id: string, variable: string, host: string, port: number, server: number | null,
  probe: (host: string, port: number) => Promise<boolean> = answersAsTracegate): Promise<Check> {
  const where = `${host}:${port} (${variable})`
  if (port === 0) return ok(id, `${variable}=0: any free port, printed at start`)
  const code = await tryListen(host, port)
  if (code === null) return ok(id, `${where} is free`)
  if (code === 'EADDRINUSE') {
    if (server !== null && await probe(host, port)) return ok(id, `${where} is held by the running tracegate (pid ${server})`)
    return problem(id, `${where} is in use by another program`, `stop that program (\`ss -ltnp 'sport = :${port}'\` names it) or set ${variable} to a free port`)
  }
  if (code === 'EACCES') return problem(id, `${where}: this user may not listen on ports below 1024`, `set ${variable} to a port above 1023 (and put nginx in front, see deploy/nginx.conf)`)
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') return problem(id, `${where}: ${host} is not an address of this machine`, 'set TRACEGATE_HOST to an address of this machine, such as 127.0.0.1')
  return problem(id, `${where} cannot be listened on: ${code}`, `set ${variable} to another port`)
}

function checkPricing (file: string | null): Check {
  try {
    const pricing = Pricing.load(file)
    const models = PROVIDERS.reduce((n, p) => n + pricing.models(p).length, 0)
    return ok('pricing', file === null ? `@pydantic/genai-prices (${models} models); no TRACEGATE_PRICING_FILE` : `${file} (TRACEGATE_PRICING_FILE) is valid (${models} models with it)`)
  } catch (err) {
    const fix = file === null
      ? 'reinstall tracegate: @pydantic/genai-prices ships with it'
      : 'fix the file ({"prices": [{"provider", "model", "input_per_mtok", "output_per_mtok"}]}, see docs/traces.md#an-operators-price-file) or unset TRACEGATE_PRICING_FILE'
    return problem('pricing', message(err), fix)
  }
}

function checkDetector (): Check {
  const file = fileURLToPath(WEIGHTS_URL)
  try {
    loadModel()
    return ok('detector', `detector weights ${file} load`)
  } catch (err) {
    return problem('detector', `detector weights ${file}: ${message(err)}`,
      'restore the file from the repository (`git checkout workers/detector/weights.bin`) or reinstall tracegate')
  }
}

function checkBrowserBundle (): Check {
  const main = fileURLToPath(repoFile('dist/browser/dashboard/ui/main.js'))
  if (existsSync(main)) return ok('browser_bundle', `dashboard bundle ${main} is built`)
  return problem('browser_bundle', `the dashboard bundle is not built (${main} is missing): the dashboard would show "not built"`, 'run `npm run build`')
}

/** Every check, in order; the configuration's own failure stops the checks that need it. */
export async function runDoctor (env: NodeJS.ProcessEnv = process.env): Promise<Check[]> {
  const checks: Check[] = [checkNode()]
  let config: Config | null = null
  try {
    config = loadConfig(env)
    checks.push(ok('config', 'the TRACEGATE_* and CLICKHOUSE_* settings are valid'))
  } catch (err) {
    checks.push(problem('config', message(err), 'fix or unset that variable (docs/configuration.md)'))
  }
  if (config !== null) {
    const data = checkDataDir(config.dataDir)
    checks.push(data)
    const store = data.ok || config.clickhouse !== null ? await checkStore(config) : null
    if (store === null) checks.push(problem('clickhouse', 'not checked: the embedded ClickHouse lives in the data directory', 'fix the data directory first'))
    else checks.push(store.clickhouse, ...(store.migrations === null ? [] : [store.migrations]))
    checks.push(await checkPort('proxy_port', 'TRACEGATE_PROXY_PORT', config.host, config.proxyPort, store?.server ?? null))
    checks.push(await checkPort('dashboard_port', 'TRACEGATE_DASHBOARD_PORT', config.host, config.dashboardPort, store?.server ?? null))
    if (config.sql.port !== null) checks.push(await checkPort('sql_port', 'TRACEGATE_SQL_PORT', config.host, config.sql.port, store?.server ?? null, answersAsTracegateSql))
    checks.push(checkPricing(config.pricingFile))
  }
  checks.push(checkDetector(), checkBrowserBundle())
  const secrets = secretsOf(env)
  return checks.map((c) => ({ ...c, detail: redact(c.detail, secrets), fix: c.fix === null ? null : redact(c.fix, secrets) }))
}

/** The checks as text, one line each. */
export function formatChecks (checks: readonly Check[]): string {
  return checks.map((c) => c.ok ? `ok       ${c.id}: ${c.detail}` : `problem  ${c.id}: ${c.detail} — fix: ${c.fix ?? ''}`).join('\n')
}

/** What must never be printed, even inside an error a server sent back: passwords and provider keys. */
function secretsOf (env: NodeJS.ProcessEnv): string[] {
  const secrets: string[] = []
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && (name === 'CLICKHOUSE_PASSWORD' || /^TRACEGATE_[A-Z]+_API_KEY$/.test(name))) secrets.push(value)
  }
  try {
    const url = new URL(env.CLICKHOUSE_URL ?? '')
    if (url.password !== '') secrets.push(url.password, decodeURIComponent(url.password))
  } catch { /* not a URL: the config check says so */ }
  return secrets
}

function redact (text: string, secrets: readonly string[]): string {
  let out = text
  for (const s of secrets) if (s !== '') out = out.split(s).join('***')
  return out
}
