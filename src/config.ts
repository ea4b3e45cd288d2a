// Configuration is read from the environment once, validated, and frozen. Every default lives here.
// A bad value stops the start with a message naming the variable (and never echoing a secret).
import { availableParallelism } from 'node:os'
import { resolve } from 'node:path'
import { DIALECTS, PROVIDERS, type ProviderName } from './providers/index.js'
import { ConfigError } from './domain/config-error.js'
import { otelSettings, type OtelSettings } from './otel/settings.js'
import { redisUrlProblem } from './domain/redis-url.js'
import { parseRoutes, RoutesError, type ModelRoutes } from './domain/model-routes.js'
import { readFileSync } from 'node:fs'

// The provider registry lives in src/providers; re-exported for the modules that read configuration.

export interface ProviderConfig {
  /** The ordered targets of one wire format (one or more): a call moves to the next when one fails before answering (upstream/fallover.ts). */
  readonly baseUrls: readonly string[]
  /**
   * The server-side provider keys, used only when the account allows them; none, one, or a pool that calls
   * take in turn (upstream/key-pool.ts). Never logged or returned.
   */
  readonly apiKeys: readonly string[]
}

export interface ClickHouseServerConfig {
  readonly url: string
  readonly username: string
  readonly password: string
  readonly database: string
  /** Trace inserts are sent brotli-compressed: fewer bytes on the wire for more CPU here. */
  readonly compression: boolean
}

/** Where /metrics is served: never openly on the proxy port. */
export interface MetricsConfig {
  /** Its own listener on TRACEGATE_HOST (0: any free port); null: none. */
  readonly port: number | null
  /** A bearer token /metrics asks for wherever it is served; set, /metrics is also served on the proxy port. */
  readonly token: string | null
  /** An `account` label on the request counter (one series per account: off by default). */
  readonly accountLabels: boolean
}

export interface Config {
  readonly host: string
  readonly proxyPort: number
  readonly dashboardPort: number
  /**
   * A reverse proxy sits in front of both ports: believe its x-forwarded-for/-host/-proto headers and a
   * PROXY protocol header. Off, the client address is always the socket's.
   */
  readonly trustProxy: boolean
  /** Span export over OTLP/HTTP (the standard OTEL_* variables); null when not configured. */
  readonly otel: OtelSettings | null
  /** The per-key limits' counters shared through Redis (TRACEGATE_REDIS_URL), or null: each instance counts alone. */
  readonly limits: { readonly redisUrl: string | null }
  readonly dataDir: string
  readonly maxBodyBytes: number
  readonly providers: Readonly<Record<ProviderName, ProviderConfig>>
  readonly upstream: {
    readonly connectTimeoutMs: number
    readonly headersTimeoutMs: number
    readonly bodyTimeoutMs: number
    readonly connections: number
    /** Attempts a call may make over its provider's targets; null: one per target. */
    readonly attempts: number | null
    /** No new attempt starts this long after a call's first. */
    readonly retryDeadlineMs: number
    /** The first backoff before a target is tried again (doubling, full jitter). */
    readonly backoffMs: number
  }
  readonly keyCache: { readonly ttlMs: number; readonly max: number }
  /** Model fallbacks from the routes file (TRACEGATE_ROUTES); null: none. */
  readonly routes: ModelRoutes<ProviderName> | null
  /** The exact response cache (proxy/response-cache.ts); maxBytes 0: off. */
  readonly cache: { readonly maxBytes: number; readonly maxEntryBytes: number; readonly maxTtlS: number }
  readonly traces: TraceConfig
  readonly detection: DetectionConfig
  /** An operator's pricing file (same shape as src/pricing/prices.json) whose entries win. */
  readonly pricingFile: string | null
  readonly shutdownGraceMs: number
  /** After SIGTERM, how long calls are still taken while /readyz says shutting_down (load balancers' time to look). */
  readonly shutdownDelayMs: number
  readonly logLevel: string
  /** One info line per finished call (msg "call"); off by default. */
  readonly accessLog: boolean
  readonly metrics: MetricsConfig
  /** null: embedded chDB in `dataDir`. */
  readonly clickhouse: ClickHouseServerConfig | null
  /** Front threads serving the proxy port (TRACEGATE_THREADS): 1 serves it on the main thread. */
  readonly threads: number
  readonly sql: SqlConfig
}

/** The SQL port (TRACEGATE_SQL_*) and the limits every query on it runs under. */
export interface SqlConfig {
  /** null: the SQL port is off. */
  readonly port: number | null
  readonly maxExecutionSeconds: number
  readonly maxMemoryBytes: number
  readonly maxResultRows: number
  readonly maxResultBytes: number
  readonly maxThreads: number
  /** Queries one account may have running at once; more are refused with sql_busy. */
  readonly perAccount: number
  /** ClickHouse connections the queries share, each running one at a time (more than perAccount). */
  readonly connections: number
}

export interface TraceConfig {
  /** Off only for benchmarks that measure what tracing costs. */
  readonly enabled: boolean
  /** Prompt and response are each stored up to this many bytes, with a truncated flag. */
  readonly maxBodyBytes: number
  readonly flushMs: number
  readonly batchRows: number
  /** Rows held in memory while ClickHouse is slow; past this they go to the spool. */
  readonly queueRows: number
  readonly spoolMaxBytes: number
  /** Prompt and response bodies are cleared after this many days (0: kept). */
  readonly bodyTtlDays: number
  /** Rows are deleted after this many days (0: kept). */
  readonly rowTtlDays: number
}

export interface DetectionConfig {
  readonly enabled: boolean
  readonly threads: number
  readonly maxQueue: number
  readonly deadlineMs: number
  /** A forwarded body over this many bytes is not judged: the failure mode applies (failure `too_large`). */
  readonly maxBytes: number
  /** Bodies up to this many bytes may be judged in the thread that serves the call (detection/inline.ts); 0: never. */
  readonly inlineBytes: number
  /** closed: a request detection could not judge gets 503; open: it is forwarded and the trace says so. */
  readonly failureMode: 'closed' | 'open'
}

type Env = Readonly<Record<string, string | undefined>>

function str (env: Env, name: string, fallback: string): string {
  const v = env[name]
  return v === undefined || v === '' ? fallback : v
}

function int (env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got ${JSON.stringify(raw)}`)
  const n = Number(raw.trim())
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`)
  return n
}

function oneOf<T extends string> (env: Env, name: string, values: readonly T[], fallback: T): T {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (!(values as readonly string[]).includes(raw.trim())) throw new ConfigError(name, `must be one of ${values.join(', ')}, got ${JSON.stringify(raw)}`)
  return raw.trim() as T
}

/** TRACEGATE_REDIS_URL, checked here so a bad one stops the start; the message never repeats it (a password). */
function redisUrl (env: Env): string | null {
  const raw = env.TRACEGATE_REDIS_URL?.trim() ?? ''
  if (raw === '') return null
  const problem = redisUrlProblem(raw)
  if (problem !== null) throw new ConfigError('TRACEGATE_REDIS_URL', `${problem}.`)
  return raw
}

function bool (env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const v = raw.trim().toLowerCase()
  if (['1', 'true', 'on', 'yes'].includes(v)) return true
  if (['0', 'false', 'off', 'no'].includes(v)) return false
  throw new ConfigError(name, `must be on or off, got ${JSON.stringify(raw)}`)
}

/** A comma-separated, ordered list of base URLs, each checked as `origin` checks one. */
/** The routes file TRACEGATE_ROUTES names, read and checked now: an error names its line. */
function routesOf (env: Env, providers: Readonly<Record<ProviderName, ProviderConfig>>): ModelRoutes<ProviderName> | null {
  const path = env.TRACEGATE_ROUTES?.trim() ?? ''
  if (path === '') return null
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    throw new ConfigError('TRACEGATE_ROUTES', `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
  }
  const targets = { alpha: providers.alpha.baseUrls, beta: providers.beta.baseUrls, gamma: providers.gamma.baseUrls }
  try {
    return parseRoutes(text, targets, (p, model) => DIALECTS[p].validModel?.(model) ?? true)
  } catch (err) {
    if (err instanceof RoutesError) throw new ConfigError('TRACEGATE_ROUTES', `${path} ${err.message}`)
    throw err
  }
}

function origins (env: Env, name: string, fallback: string): string[] {
  const list = str(env, name, fallback).split(',').map((u) => u.trim())
  if (list.some((u) => u === '')) throw new ConfigError(name, 'must be one base URL or a comma-separated list of them, without empty entries')
  if (list.length > 16) throw new ConfigError(name, 'may list at most 16 base URLs')
  return list.map((u) => originOf(name, u))
}

function originOf (name: string, raw: string): string {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new ConfigError(name, 'must be an absolute http(s) URL such as https://api.openai.com')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(name, 'must use http or https')
  if (url.username !== '' || url.password !== '') throw new ConfigError(name, 'must not carry credentials')
  // The dialect appends its own path; a base with a path prefix (a gateway mounted under /openai, say) keeps it.
  return url.origin + url.pathname.replace(/\/+$/, '')
}

function secret (env: Env, name: string): string | null {
  const v = env[name]
  if (v === undefined || v === '') return null
  return headerSafe(name, v.trim())
}

/** A key as sent in a header: anything but printable ASCII would fail every call that uses it (never echoed here). */
function headerSafe (name: string, key: string): string {
  if (!/^[\x21-\x7e]+$/.test(key)) throw new ConfigError(name, 'must be printable ASCII without spaces or line breaks')
  return key
}

/** A comma-separated pool of secrets (one or more), each checked as `secret` checks one. */
function secrets (env: Env, name: string): string[] {
  const v = env[name]
  if (v === undefined || v.trim() === '') return []
  const keys = v.split(',').map((k) => k.trim())
  if (keys.some((k) => k === '')) throw new ConfigError(name, 'must be one key or a comma-separated list of them, without empty entries')
  if (keys.length > 64) throw new ConfigError(name, 'may list at most 64 keys')
  return keys.map((k) => headerSafe(name, k))
}

function metricsToken (env: Env): string | null {
  const token = secret(env, 'TRACEGATE_METRICS_TOKEN')
  // It guards a port the whole internet may reach: a guessable one is refused at start.
  if (token !== null && token.length < 16) throw new ConfigError('TRACEGATE_METRICS_TOKEN', 'must be at least 16 characters')
  return token
}

/**
 * TRACEGATE_THREADS' default: half the cores, at most 8, and 1 up to 3 cores. A call's CPU is shared by its
 * front thread (HTTP both ways, undici), the detection workers and the one store worker with ClickHouse, so
 * front threads beyond half the cores would take it from those; past 8 the single store worker limits.
 */
export function defaultThreads (cores: number = availableParallelism()): number {
  return cores <= 3 ? 1 : Math.min(8, Math.floor(cores / 2))
}

export function loadConfig (env: Env = process.env): Config {
  const providers = {} as Record<ProviderName, ProviderConfig>
  for (const p of PROVIDERS) {
    const up = p.toUpperCase()
    const baseUrls = Object.freeze(origins(env, `TRACEGATE_${up}_BASE_URL`, DIALECTS[p].defaultBaseUrl))
    const apiKeys = Object.freeze(secrets(env, `TRACEGATE_${up}_API_KEY`))
    providers[p] = Object.freeze({ baseUrls, apiKeys })
  }
  const chUrl = env.CLICKHOUSE_URL
  let clickhouse: ClickHouseServerConfig | null = null
  if (chUrl !== undefined && chUrl !== '') {
    let url: URL
    try {
      url = new URL(chUrl)
    } catch {
      throw new ConfigError('CLICKHOUSE_URL', 'must be a URL such as http://localhost:8123')
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError('CLICKHOUSE_URL', 'must use http or https')
    // Credentials written into the URL become the user and password, so the URL itself can be printed.
    const userInUrl = decodeURIComponent(url.username)
    const passwordInUrl = decodeURIComponent(url.password)
    url.username = ''
    url.password = ''
    clickhouse = Object.freeze({
      url: userInUrl === '' && passwordInUrl === '' ? chUrl : url.toString(),
      username: str(env, 'CLICKHOUSE_USER', userInUrl === '' ? 'default' : userInUrl),
      password: env.CLICKHOUSE_PASSWORD ?? passwordInUrl,
      database: str(env, 'CLICKHOUSE_DATABASE', 'default'),
      compression: bool(env, 'CLICKHOUSE_COMPRESSION', false),
    })
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(clickhouse.database)) throw new ConfigError('CLICKHOUSE_DATABASE', 'must be a plain identifier')
  }
  const logLevel = str(env, 'TRACEGATE_LOG_LEVEL', 'info')
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError('TRACEGATE_LOG_LEVEL', 'must be one of fatal, error, warn, info, debug, trace, silent')
  }
  const sql: SqlConfig = Object.freeze({
    port: env.TRACEGATE_SQL_PORT === undefined || env.TRACEGATE_SQL_PORT.trim() === '' ? null : int(env, 'TRACEGATE_SQL_PORT', 0, 0, 65535),
    maxExecutionSeconds: int(env, 'TRACEGATE_SQL_MAX_EXECUTION_SECONDS', 30, 1, 3600),
    maxMemoryBytes: int(env, 'TRACEGATE_SQL_MAX_MEMORY_BYTES', 1024 * 1024 * 1024, 1024 * 1024, 1024 * 1024 * 1024 * 1024),
    maxResultRows: int(env, 'TRACEGATE_SQL_MAX_RESULT_ROWS', 1_000_000, 1, 1_000_000_000),
    maxResultBytes: int(env, 'TRACEGATE_SQL_MAX_RESULT_BYTES', 100 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    maxThreads: int(env, 'TRACEGATE_SQL_MAX_THREADS', 2, 1, 256),
    perAccount: int(env, 'TRACEGATE_SQL_QUERIES_PER_ACCOUNT', 2, 1, 1000),
    connections: int(env, 'TRACEGATE_SQL_CONNECTIONS', 4, 2, 64),
  })
  // One account's queries never hold every connection, so another's is never queued behind them alone.
  if (sql.perAccount >= sql.connections) throw new ConfigError('TRACEGATE_SQL_QUERIES_PER_ACCOUNT', 'must be less than TRACEGATE_SQL_CONNECTIONS')
  const host = str(env, 'TRACEGATE_HOST', '127.0.0.1')
  if (!/^[A-Za-z0-9.:-]+$/.test(host)) throw new ConfigError('TRACEGATE_HOST', 'must be a host name or IP address')
  return Object.freeze({
    host,
    proxyPort: int(env, 'TRACEGATE_PROXY_PORT', 8080, 0, 65535),
    dashboardPort: int(env, 'TRACEGATE_DASHBOARD_PORT', 8081, 0, 65535),
    // TRACEGATE_DASHBOARD_TRUST_PROXY is the setting's earlier name, from when only the dashboard read it.
    trustProxy: bool(env, 'TRACEGATE_TRUST_PROXY', bool(env, 'TRACEGATE_DASHBOARD_TRUST_PROXY', false)),
    dataDir: resolve(str(env, 'TRACEGATE_DATA_DIR', './data')),
    maxBodyBytes: int(env, 'TRACEGATE_MAX_BODY_BYTES', 4 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    providers: Object.freeze(providers),
    upstream: Object.freeze({
      connectTimeoutMs: int(env, 'TRACEGATE_UPSTREAM_CONNECT_TIMEOUT_MS', 10_000, 1, 600_000),
      // A non-streaming completion can think for minutes before its first byte.
      headersTimeoutMs: int(env, 'TRACEGATE_UPSTREAM_HEADERS_TIMEOUT_MS', 600_000, 1, 3_600_000),
      // Longest silence allowed between two body chunks.
      bodyTimeoutMs: int(env, 'TRACEGATE_UPSTREAM_BODY_TIMEOUT_MS', 300_000, 1, 3_600_000),
      connections: int(env, 'TRACEGATE_UPSTREAM_CONNECTIONS', 256, 1, 65_535),
      attempts: env.TRACEGATE_UPSTREAM_ATTEMPTS === undefined || env.TRACEGATE_UPSTREAM_ATTEMPTS === '' ? null : int(env, 'TRACEGATE_UPSTREAM_ATTEMPTS', 1, 1, 20),
      retryDeadlineMs: int(env, 'TRACEGATE_UPSTREAM_RETRY_DEADLINE_MS', 30_000, 0, 3_600_000),
      backoffMs: int(env, 'TRACEGATE_UPSTREAM_BACKOFF_MS', 200, 0, 60_000),
    }),
    routes: routesOf(env, providers),
    cache: Object.freeze({
      maxBytes: int(env, 'TRACEGATE_CACHE_MAX_BYTES', 64 * 1024 * 1024, 0, 64 * 1024 * 1024 * 1024),
      maxEntryBytes: int(env, 'TRACEGATE_CACHE_MAX_ENTRY_BYTES', 1024 * 1024, 1, 64 * 1024 * 1024),
      maxTtlS: int(env, 'TRACEGATE_CACHE_MAX_TTL_S', 86_400, 1, 30 * 86_400),
    }),
    keyCache: Object.freeze({
      ttlMs: int(env, 'TRACEGATE_KEY_CACHE_TTL_MS', 5_000, 0, 3_600_000),
      max: int(env, 'TRACEGATE_KEY_CACHE_MAX', 10_000, 1, 10_000_000),
    }),
    traces: Object.freeze({
      enabled: bool(env, 'TRACEGATE_TRACES', true),
      maxBodyBytes: int(env, 'TRACEGATE_TRACE_MAX_BODY_BYTES', 1024 * 1024, 0, 64 * 1024 * 1024),
      flushMs: int(env, 'TRACEGATE_TRACE_FLUSH_MS', 5000, 10, 60_000),
      batchRows: int(env, 'TRACEGATE_TRACE_BATCH_ROWS', 5000, 1, 1_000_000),
      queueRows: int(env, 'TRACEGATE_TRACE_QUEUE_ROWS', 100_000, 1, 10_000_000),
      spoolMaxBytes: int(env, 'TRACEGATE_SPOOL_MAX_BYTES', 1024 * 1024 * 1024, 0, 1024 * 1024 * 1024 * 1024),
      bodyTtlDays: int(env, 'TRACEGATE_BODY_TTL_DAYS', 30, 0, 36_500),
      rowTtlDays: int(env, 'TRACEGATE_TRACE_TTL_DAYS', 0, 0, 36_500),
    }),
    detection: Object.freeze({
      enabled: bool(env, 'TRACEGATE_DETECTION', true),
      threads: int(env, 'TRACEGATE_DETECTION_THREADS', Math.max(1, availableParallelism() - 1), 1, 256),
      maxQueue: int(env, 'TRACEGATE_DETECTION_QUEUE', 1024, 1, 1_000_000),
      deadlineMs: int(env, 'TRACEGATE_DETECTION_DEADLINE_MS', 500, 1, 60_000),
      maxBytes: int(env, 'TRACEGATE_DETECTION_MAX_BYTES', 4 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
      inlineBytes: int(env, 'TRACEGATE_DETECTION_INLINE_BYTES', 4096, 0, 32 * 1024),
      failureMode: oneOf(env, 'TRACEGATE_DETECTION_FAILURE_MODE', ['closed', 'open'] as const, 'closed'),
    }),
    pricingFile: env.TRACEGATE_PRICING_FILE === undefined || env.TRACEGATE_PRICING_FILE === '' ? null : resolve(env.TRACEGATE_PRICING_FILE),
    shutdownGraceMs: int(env, 'TRACEGATE_SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    shutdownDelayMs: int(env, 'TRACEGATE_SHUTDOWN_DELAY_MS', 5_000, 0, 600_000),
    logLevel,
    accessLog: bool(env, 'TRACEGATE_ACCESS_LOG', false),
    metrics: Object.freeze({
      port: env.TRACEGATE_METRICS_PORT === undefined || env.TRACEGATE_METRICS_PORT.trim() === '' ? null : int(env, 'TRACEGATE_METRICS_PORT', 0, 0, 65535),
      token: metricsToken(env),
      accountLabels: bool(env, 'TRACEGATE_METRICS_ACCOUNT_LABELS', false),
    }),
    clickhouse,
    otel: otelSettings(env),
    limits: Object.freeze({ redisUrl: redisUrl(env) }),
    threads: int(env, 'TRACEGATE_THREADS', defaultThreads(), 1, 64),
    sql,
  })
}
