// Shared set-up for tests: a real tracegate on port 0 with its own data directory and the real embedded
// ClickHouse, in front of the real mock provider. chDB allows one data directory per process, and tap
// runs each test file in its own process, so a file starts one server and shares it between its tests.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer as createTcpServer } from 'node:net'
import { loadConfig, type Config } from '../../src/config.js'
import { startMockProvider, type MockProvider } from '../../src/mock-provider/index.js'
import { PROVIDERS } from '../../src/providers/index.js'
import { Tracegate, type ServeOptions } from '../../src/tracegate.js'

export interface TestServer {
  readonly tg: Tracegate
  readonly mock: MockProvider
  readonly dataDir: string
  readonly url: string
  readonly accountId: string
  /** A proxy key on a pro account without server-side keys. */
  readonly key: string
}

interface Tap {
  teardown (fn: () => unknown): void
}

export function tempDir (prefix = 'tracegate-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

export function testConfig (dataDir: string, mock: MockProvider | null, env: Record<string, string> = {}): Config {
  return loadConfig({
    TRACEGATE_PROXY_PORT: '0',
    TRACEGATE_DASHBOARD_PORT: '0',
    TRACEGATE_DATA_DIR: dataDir,
    TRACEGATE_LOG_LEVEL: 'silent',
    // One proxy thread whatever the cores (the default follows them): a test that wants front threads says so.
    TRACEGATE_THREADS: '1',
    // Every registered provider (test providers too) is served by the mock.
    ...(mock === null ? {} : Object.fromEntries(PROVIDERS.map((p) => [`TRACEGATE_${p.toUpperCase()}_BASE_URL`, mock.url]))),
    ...env,
  })
}

export interface Started {
  readonly tg: Tracegate
  readonly url: string
  readonly accountId: string
  /** A proxy key on a pro account without server-side keys. */
  readonly key: string
}

/**
 * A tracegate on `dataDir` in front of `mock` (null: the providers' own URLs), with a pro account and a
 * proxy key; closed when the test ends. The one way the tests start one in their own process.
 */
export async function startTracegate (t: Tap, dataDir: string, mock: MockProvider | null, env: Record<string, string> = {}, options: ServeOptions = {}): Promise<Started> {
  const tg = await Tracegate.start(testConfig(dataDir, mock, env), { bootstrap: false, ...options })
  t.teardown(() => tg.close())
  const account = await tg.admin.createAccount({ name: 'test', plan: 'pro' })
  const key = await tg.admin.createKey({ account: account.id, scope: 'proxy' })
  return { tg, url: `http://127.0.0.1:${tg.proxyPort}`, accountId: account.id, key: key.key }
}

/** Starts the mock and tracegate in front of it on a new data directory; all go when the test ends. */
export async function startServer (t: Tap, env: Record<string, string> = {}, options: ServeOptions = {}): Promise<TestServer> {
  const mock = await startMockProvider()
  t.teardown(() => mock.close())
  const dataDir = tempDir()
  t.teardown(() => { rmSync(dataDir, { recursive: true, force: true }) })
  return { ...await startTracegate(t, dataDir, mock, env, options), mock, dataDir }
}

/**
 * A loopback port nothing listens on right now (bound, then released): connections to it are refused
 * until something takes it, as a server that cannot listen on port 0 can.
 */
export async function closedPort (): Promise<number> {
  const server = createTcpServer()
  await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(0, '127.0.0.1', resolve) })
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => { resolve() }))
  if (address === null || typeof address === 'string') throw new Error('no port')
  return address.port
}
