// One tracegate server: the store worker, the limits and the detection pool, the proxy port (this thread's
// own proxy stack, proxy/stack.ts, or the front threads each running one), the metrics port, the dashboard
// port and the local admin socket, started in that order and closed in the reverse one.
import { randomBytes } from 'node:crypto'
import { AdminOps } from './admin/ops.js'
import type { KeyInfo } from './domain/key-info.js'
import { KeyCache } from './auth/cache.js'
import type { Config, ProviderConfig } from './config.js'
import { PROVIDERS, type ProviderName } from './providers/index.js'
import type { Logger } from './log.js'
import { startMockProvider, type MockProvider } from './mock-provider/index.js'
import { AdminServer } from './admin/server.js'
import { DETECTION_COLD, type NotReady, type ReadyState } from './server/proxy-app.js'
import { secondsBehind } from './store/lag.js'
import { createMetricsApp, type MetricsEndpoint } from './server/metrics-app.js'
import { listen, uws } from './server/uws.js'
import { StoreClient } from './store/client.js'
import { ConfigError } from './domain/config-error.js'
import { Pricing, PricingError } from './pricing/index.js'
import { ProxyStack } from './proxy/stack.js'
import { Metrics } from './metrics.js'
import { detectionPoolFor, type DetectionPool } from './detection/pool.js'
import { DashboardServer } from './dashboard/server.js'
import { SqlServer } from './sql/server.js'
import { recordPasswordReset } from './password-resets.js'
import { RequestBoard } from './limits/board.js'
import { Limiter } from './limits/limiter.js'
import { RedisCounters } from './limits/redis.js'
import { FrontThreads } from './front/threads.js'
import { privateDataDir } from './paths.js'

export interface ServeOptions {
  /** Start the built-in mock provider and point all three providers at it. */
  readonly mockProviders?: boolean
  /** On an empty store, create a pro account, an admin user and a first proxy key. Default true. */
  readonly bootstrap?: boolean
  readonly log?: Logger
  /** Test seams in the store worker (connection switch, raw queries). */
  readonly testSeams?: boolean
  /** Test seam: another detection worker file (one that crashes or hangs), for the main thread's pool and every front thread's. */
  readonly detectionWorker?: string
  /**
   * Test seam: the limits' clock (epoch ms), so a window can end without waiting for it. With front threads
   * it holds too: the request board (whose minutes and days are the system clock's) is then not used, and
   * every counted call asks the main thread.
   */
  readonly limitsClock?: () => number
}

export interface FirstStart {
  readonly accountId: string
  readonly email: string
  readonly password: string
  readonly proxyKey: string
}

/** What serves the proxy port: the front threads, or the main thread's own stack. */
type ProxySide = { readonly fronts: FrontThreads; readonly stack: null } | { readonly fronts: null; readonly stack: ProxyStack }

/** `stopping`: shutdown() began (every /readyz says shutting_down); `closing`: close() began (the dashboard answers 503). */
interface Lifecycle { stopping: boolean; closing: boolean }

function withMock (config: Config, mock: MockProvider): Config {
  const providers = {} as Record<ProviderName, ProviderConfig>
  for (const p of PROVIDERS) {
    // The mock accepts any key; a server-side one lets server-side-key accounts try everything offline.
    const keys = config.providers[p].apiKeys
    providers[p] = Object.freeze({ baseUrls: Object.freeze([mock.url]), apiKeys: keys.length > 0 ? keys : Object.freeze([`mock-${p}-server-key`]) })
  }
  return Object.freeze({ ...config, providers: Object.freeze(providers) })
}

export class Tracegate {
  readonly config: Config
  readonly store: StoreClient
  readonly keys: KeyCache
  readonly admin: AdminOps
  readonly proxyPort: number
  readonly dashboardPort: number
  readonly adminPort: number
  /** The metrics port, or null when TRACEGATE_METRICS_PORT is not set. */
  readonly metricsPort: number | null
  /** The SQL port, or null when TRACEGATE_SQL_PORT is not set. */
  readonly sqlPort: number | null
  readonly #sql: SqlServer | null
  readonly mock: MockProvider | null
  readonly firstStart: FirstStart | null
  /** What serves the proxy port: the front threads (TRACEGATE_THREADS above 1), or this thread's own stack. */
  readonly #proxy: ProxySide
  readonly #detection: DetectionPool | null
  readonly metrics: Metrics
  readonly #adminServer: AdminServer
  readonly #dashboard: DashboardServer
  readonly #metricsSocket: unknown
  readonly #log: Logger | null
  /** The per-key and per-account limits: their counts (`usage`) and how they are shared (`mode`). */
  readonly limiter: Limiter
  #closed: Promise<void> | null = null
  /** Whether shutdown began (readiness reads it) and whether close began (the dashboard answers 503). */
  readonly #state: Lifecycle
  #shutdown: Promise<void> | null = null
  #endDelay: (() => void) | null = null

  private constructor (parts: {
    config: Config; store: StoreClient; keys: KeyCache; admin: AdminOps; adminServer: AdminServer; proxy: ProxySide; proxyPort: number
    mock: MockProvider | null; firstStart: FirstStart | null; log: Logger | null; metrics: Metrics; detection: DetectionPool | null
    dashboard: DashboardServer; limiter: Limiter; state: Lifecycle; adminPort: number; metricsListen: { socket: unknown; port: number } | null
    sql: SqlServer | null
  }) {
    this.#sql = parts.sql
    this.sqlPort = parts.sql?.port ?? null
    this.config = parts.config
    this.store = parts.store
    this.keys = parts.keys
    this.admin = parts.admin
    this.#adminServer = parts.adminServer
    this.#dashboard = parts.dashboard
    this.#proxy = parts.proxy
    this.#detection = parts.detection
    this.limiter = parts.limiter
    this.#state = parts.state
    this.metrics = parts.metrics
    this.mock = parts.mock
    this.firstStart = parts.firstStart
    this.#log = parts.log
    this.proxyPort = parts.proxyPort
    this.dashboardPort = parts.dashboard.port
    this.adminPort = parts.adminPort
    this.#metricsSocket = parts.metricsListen?.socket ?? null
    this.metricsPort = parts.metricsListen?.port ?? null
  }

  /** Calls in flight on the thread or threads serving the proxy. */
  get inflight (): number {
    const p = this.#proxy
    return p.fronts !== null ? p.fronts.inflight : p.stack.calls.inflight
  }

  /** The threads serving the proxy port: 1 is the main thread itself. */
  get threads (): number {
    return this.#proxy.fronts?.count ?? 1
  }

  static async start (baseConfig: Config, options: ServeOptions = {}): Promise<Tracegate> {
    // Every file it writes there from now on, the embedded ClickHouse's too, is its user's alone.
    privateDataDir(baseConfig.dataDir)
    const log = options.log ?? null
    let pricing: Pricing
    try {
      // Checked here so a bad operator file stops the start instead of every trace.
      pricing = Pricing.load(baseConfig.pricingFile)
    } catch (err) {
      if (err instanceof PricingError) throw new ConfigError('TRACEGATE_PRICING_FILE', err.message)
      throw err
    }
    // Front threads serve the proxy port (TRACEGATE_THREADS above 1), each with its own channel to the
    // store worker, made before the worker starts; null: the main thread serves it with its own stack.
    const frontPorts = baseConfig.threads > 1 ? FrontThreads.channels(baseConfig.threads) : null
    const store = new StoreClient({
      dataDir: baseConfig.dataDir,
      clickhouse: baseConfig.clickhouse,
      traces: baseConfig.traces,
      otel: baseConfig.otel,
      pricingFile: baseConfig.pricingFile,
      testSeams: options.testSeams === true,
      warn: (msg, fields) => { log?.warn(fields, msg) },
      ...(frontPorts === null ? {} : { frontPorts: frontPorts.worker }),
    })
    let mock: MockProvider | null = null
    let detection: DetectionPool | null = null
    let limiter: Limiter | null = null
    let fronts: FrontThreads | null = null
    let stack: ProxyStack | null = null
    try {
      const applied = await store.call('migrate')
      if (applied.length > 0) log?.info({ applied }, 'migrations applied')
      let config = baseConfig
      if (options.mockProviders === true) {
        mock = await startMockProvider({ recordLimit: 0 })
        config = withMock(baseConfig, mock)
        log?.info({ url: mock.url }, 'mock provider started')
      }
      // The proxy's cache learns of revocations made through this process at once: the main thread's (the
      // read API's, and the proxy's without front threads) and every front thread's, before the change returns.
      let keys: KeyCache | null = null
      // A password reset ends the user's sessions: through the dashboard once it runs, before that in the
      // file the dashboard reads when it starts.
      let endSessions = (userId: string): void => { recordPasswordReset(config.dataDir, userId) }
      // A change of limits drops the account's keys from the cache: the next call reads them anew.
      const admin = new AdminOps(store,
        async (hash) => { keys?.invalidate(hash); await fronts?.invalidate(hash) },
        (userId) => { endSessions(userId) },
        async (accountId) => { keys?.invalidateAccount(accountId); await fronts?.invalidateAccount(accountId) })
      const firstStart = options.bootstrap === false ? null : await bootstrap(store, admin)
      const adminServer = new AdminServer(admin)
      const endpoint = await adminServer.start(config.dataDir)
      const metrics = new Metrics({ traceStats: () => store.call('traceStats'), pricing, accountLabels: config.metrics.accountLabels, thread: frontPorts === null ? '0' : null })
      // The limits count from what is already stored (a restart keeps them), then from each built trace.
      const now = options.limitsClock ?? Date.now
      limiter = new Limiter({
        now,
        shared: config.limits.redisUrl === null ? null : new RedisCounters(config.limits.redisUrl),
        warn: (msg, fields) => { log?.warn(fields, msg) },
        pricing,
        hold: config.traces.enabled,
        // Front threads judge requests per minute on it; with the main thread serving alone it has no use.
        board: frontPorts === null || options.limitsClock !== undefined ? null : new RequestBoard(),
      })
      limiter.seed(await store.call('limitUsage', { now: now() }))
      const limits = limiter
      // A built trace's cost is counted before its call's hold ends, so the two never leave a gap.
      store.onUsage((entries, settled, released, admitted) => {
        for (const e of entries) limits.record(e.keyId, e.accountId, e.tokens, e.costUsd, e.atMs)
        limits.settle(settled)
        // After the costs are counted: a front thread's call held its estimate on the board until now.
        for (const [keyId, accountId, epoch, tok, micro] of released) limits.released(keyId, accountId, epoch, tok, micro)
        for (const [keyId, accountId, n] of admitted) limits.counted(keyId, accountId, n)
      })
      // With front threads each has a pool of its own (front/worker.ts); the main thread judges nothing.
      const detectionWorker = options.detectionWorker ?? null
      detection = config.detection.enabled && frontPorts === null
        ? detectionPoolFor(config.detection, 1, 0, { onJudged: metrics.judged, onInline: metrics.inline, onFault: (msg, fields) => { log?.warn(fields, msg) }, ...(detectionWorker === null ? {} : { filename: detectionWorker }) })
        : null
      const pool = detection
      // Set by shutdown(): from then on every thread's /readyz says shutting_down; set by close(): the dashboard answers 503.
      const state: Lifecycle = { stopping: false, closing: false }
      const ready = (): Promise<ReadyState> => state.stopping ? Promise.resolve({ not: SHUTTING_DOWN, tracesBehindS: null }) : readiness(store, pool)
      // With front threads, a scrape sums the main thread's metrics and every started thread's.
      const render = (): Promise<string> => fronts === null ? metrics.render() : metrics.json().then((json) => fronts!.aggregate(json))
      // A pool that cannot warm up still starts: requests it cannot judge follow the failure mode.
      await detection?.warm().catch((err: unknown) => { log?.warn({ err }, 'detection workers did not warm up') })
      const lookupKey = (hash: string): Promise<KeyInfo | null> => store.call('lookupKey', { hash })
      let proxy: ProxySide
      let proxyPort: number
      if (frontPorts !== null) {
        // The read API's own cache: the threads' proxies each keep theirs.
        keys = new KeyCache(lookupKey, config.keyCache)
        metrics.attach({ inflight: () => 0, limitsMode: () => limits.mode, limitBoard: () => limits.boardStats })
        fronts = await FrontThreads.start(config, frontPorts.threads, {
          detectionWorker, limiter: limits, log, metrics: render,
          ready: async () => ({ ...await ready(), limits: limits.mode }),
        })
        proxy = { fronts, stack: null }
        proxyPort = fronts.port
      } else {
        stack = new ProxyStack(config, pricing, {
          lookupKey,
          postTraces: (traces, transfer, handoff, held) => { store.postTraces(traces, transfer, handoff, held) },
          limiter: limits, detection, ready, render, log, metrics,
        })
        keys = stack.keys
        proxy = { fronts: null, stack }
        proxyPort = await stack.listen(config.proxyPort)
      }
      const scrape: MetricsEndpoint = { render, contentType: metrics.contentType, token: config.metrics.token }
      let dashboard: DashboardServer
      let metricsBound: { socket: unknown; port: number } | null = null
      let sql: SqlServer | null = null
      try {
        if (config.metrics.port !== null) metricsBound = await listen(createMetricsApp(scrape), config.host, config.metrics.port)
        dashboard = await DashboardServer.start({
          store, keys, admin, dataDir: config.dataDir, trustProxy: config.trustProxy, log,
          isClosing: () => state.closing, limiter: limits,
          proxy: { port: proxyPort, serverKeys: PROVIDERS.filter((p) => config.providers[p].apiKeys.length > 0) },
        }, config.host, config.dashboardPort)
        if (config.sql.port !== null) {
          try {
            sql = await SqlServer.start({ store, keys, config: config.sql, metrics }, config.host, config.sql.port)
          } catch (err) {
            dashboard.close()
            throw err
          }
        }
      } catch (err) {
        if (metricsBound !== null) uws.us_listen_socket_close(metricsBound.socket as never)
        adminServer.close()
        throw err
      }
      endSessions = (userId) => { dashboard.endUserSessions(userId) }
      const self = new Tracegate({
        config, store, keys, admin, adminServer, proxy, proxyPort, mock, firstStart, log, metrics, detection, dashboard,
        limiter: limits, state, adminPort: endpoint.port, metricsListen: metricsBound, sql,
      })
      log?.info({ host: config.host, port: proxyPort, threads: self.threads }, 'proxy listening')
      if (metricsBound !== null) log?.info({ host: config.host, port: metricsBound.port }, 'metrics listening')
      log?.info({ host: config.host, port: dashboard.port }, 'dashboard listening')
      if (sql !== null) log?.info({ host: config.host, port: sql.port }, 'sql listening')
      return self
    } catch (err) {
      await fronts?.close(0)
      await stack?.close()
      await detection?.close()
      await limiter?.close()
      await store.close()
      await mock?.close()
      throw err
    }
  }

  /**
   * Shutdown for load balancers: /readyz answers 503 shutting_down at once, while calls are still taken
   * for TRACEGATE_SHUTDOWN_DELAY_MS, long enough for a balancer to see it and stop sending; then close().
   * Called again during the delay, it ends the delay there and then.
   */
  shutdown (): Promise<void> {
    if (this.#shutdown !== null) {
      this.#endDelay?.()
      return this.#shutdown
    }
    this.#state.stopping = true
    const delay = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.config.shutdownDelayMs)
      this.#endDelay = () => { clearTimeout(timer); resolve() }
    })
    this.#shutdown = delay.then(() => {
      this.#endDelay = null
      return this.close()
    })
    return this.#shutdown
  }

  /** True from shutdown() until its delay ends. */
  get delaying (): boolean {
    return this.#endDelay !== null
  }

  /** Stop accepting (503), let in-flight calls finish within the grace period, then close the rest. */
  close (): Promise<void> {
    this.#state.stopping = true
    this.#state.closing = true
    this.#closed ??= (async () => {
      const { fronts, stack } = this.#proxy
      const grace = this.config.shutdownGraceMs
      // Every thread serving the port stops listening at once, finishes its calls and hands over its traces.
      await (fronts !== null ? fronts.close(grace) : stack.drain(grace))
      this.#adminServer.close()
      this.#dashboard.close()
      await this.#sql?.close()
      if (this.#metricsSocket !== null) uws.us_listen_socket_close(this.#metricsSocket as never)
      await this.#detection?.close().catch(() => {})
      // Every finished exchange reaches the store worker before it flushes and closes.
      await stack?.close()
      // The store worker's report of every batch handed over (their costs, the threads' admitted
      // requests) reaches the limits before their last Redis sync.
      await this.store.call('flushTraces').catch(() => {})
      await this.limiter.close()
      await this.store.close()
      await this.mock?.close()
      this.#log?.info('closed')
    })()
    return this.#closed
  }
}

/**
 * Ready while the store answers and traces can be kept: written to ClickHouse, or at least taken by the
 * spool. While inserts fail the instance says so (a load balancer can move traffic to one that stores).
 * Not ready either while the detection workers are cold (their warm-up failed at start): with the
 * default failure mode every call would be refused. Each such check tries the warm-up again. A ready
 * instance also says how far its stored traces are behind (an instance whose store lags still keeps them).
 */
const SHUTTING_DOWN: NotReady = Object.freeze({ reason: 'shutting_down', message: 'The server is shutting down: it takes calls a little longer, then stops listening.' })

async function readiness (store: StoreClient, detection: DetectionPool | null): Promise<ReadyState> {
  const not = (reason: NotReady['reason'], message: string): ReadyState => ({ not: { reason, message }, tracesBehindS: null })
  if (detection !== null && !detection.ready()) return { not: DETECTION_COLD, tracesBehindS: null }
  try {
    if (!await withTimeout(store.call('ping'), 2_000)) return not('store_unreachable', 'ClickHouse does not answer.')
    const s = await withTimeout(store.call('traceStats'), 2_000)
    if (s?.insertError == null) return { not: null, tracesBehindS: s === null ? null : { clickhouse: secondsBehind(s.lag.clickhouseMs), dashboard: secondsBehind(s.lag.dashboardMs) } }
    if (s.spoolError !== null) return not('spool_refusing', `Traces cannot be written to ClickHouse (${s.insertError}) or the spool (${s.spoolError}).`)
    return not('trace_inserts_failing', `Trace inserts fail (the spool keeps them): ${s.insertError}`)
  } catch (err) {
    return not('store_unreachable', `The store does not answer: ${(err as Error).message}`)
  }
}

function withTimeout<T> (p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { reject(new Error('timed out')) }, ms)
    p.then((v) => { clearTimeout(timer); resolve(v) }, (e: unknown) => { clearTimeout(timer); reject(e) })
  })
}

async function bootstrap (store: StoreClient, admin: AdminOps): Promise<FirstStart | null> {
  if (await store.call('countAccounts') > 0) return null
  // The first account belongs to the operator: it may use the server-side provider keys they configure.
  const account = await admin.createAccount({ name: 'default', plan: 'pro', serverSideKeys: true })
  const email = 'admin@localhost'
  const password = randomBytes(12).toString('base64url')
  await admin.createUser({ account: account.id, email, password })
  const key = await admin.createKey({ account: account.id, scope: 'proxy', name: 'first key' })
  return { accountId: account.id, email, password, proxyKey: key.key }
}
