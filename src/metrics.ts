// Process metrics in the Prometheus text format, served at GET /metrics on the metrics port (or behind
// a bearer token; never openly on the proxy port). Counting stays cheap on the hot path: a finished call
// finds its series under one string key and adds to numbers (metrics-series.ts). What other parts count
// (the trace pipeline, tokens and cost in the store worker, the key cache, the upstream pool) is read
// only when scraped, the store worker's numbers in one traceStats call per scrape.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { DetectionOutcome } from './detection/pool.js'
import type { Pricing } from './pricing/index.js'
import type { ProviderName } from './providers/index.js'
import type { Exchange } from './proxy/exchange.js'
import type { TraceStats } from './store/trace-types.js'
import { INSERT_BUCKETS, OTHER_MODEL } from './store/trace-types.js'
import { CounterFamily, HistogramFamily, type CounterSeries, type HistogramSeries } from './metrics-series.js'
import type { LimitsMode } from './domain/limits-mode.js'
import type { BoardStats } from './limits/board.js'
import type { AttemptResult } from './upstream/fallover.js'

/** How often the event loop's delay is sampled for nodejs_eventloop_lag_* (a late sample is as late at any rate). */
const LAG_SAMPLE_MS = 100

/** Seconds: a proxied call takes milliseconds (a mock) to minutes (a long generation). */
const CALL_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300]
/** Seconds: tracegate's own share of a call and a detection verdict are sub-millisecond to a deadline. */
const FAST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

/** Folded model names remembered, so an unpriced name is not looked up again on every call. */
const FOLD_CACHE_MAX = 10_000

export interface MetricsSources {
  /**
   * The store worker's numbers; null on a front thread, whose registry holds only what its calls count
   * and its detection pool judges (the main thread's holds the process and the store, and sums the
   * threads' on scrape).
   */
  readonly traceStats: (() => Promise<TraceStats | null>) | null
  readonly pricing: Pricing
  /** Adds an `account` label to the call metrics (TRACEGATE_METRICS_ACCOUNT_LABELS). */
  readonly accountLabels: boolean
  /**
   * The front thread these metrics count for, as the served-requests counter labels it: '0' by default (the
   * main thread serves the proxy), null on the main thread when front threads serve it (they count).
   */
  readonly thread?: string | null
}

/** What the key cache and the upstream pool tell on scrape; set once they exist. */
export interface LateSources {
  /** Absent on the main thread when front threads serve the proxy (each counts its own). */
  readonly keyCache?: { readonly hits: number; readonly misses: number }
  /** undici's Agent#stats: per origin, connections open and requests running and waiting. Absent as keyCache. */
  readonly upstream?: () => Record<string, { connected: number | boolean; running: number; pending: number }>
  readonly inflight: () => number
  /** How the limits count: each instance alone (no Redis), shared through Redis, or alone because Redis is away. */
  readonly limitsMode?: () => LimitsMode
  /** How full the request board is (front threads judge counted limits on it); null or absent: no board. */
  readonly limitBoard?: () => BoardStats | null
}

/** The series one finished call adds to. */
interface CallSeries {
  readonly requests: CounterSeries
  readonly duration: HistogramSeries
  readonly overhead: HistogramSeries
  readonly ttft: HistogramSeries
}

export type SqlResultLabel = 'ok' | 'refused' | 'error' | 'busy' | 'unauthorized'

const DETECTION_RESULTS = ['clean', 'blocked', 'error', 'deadline', 'queue_full', 'too_large'] as const
type DetectionResult = (typeof DETECTION_RESULTS)[number]

export class Metrics {
  readonly registry = new Registry()
  readonly #rejected: Counter<'code'>
  readonly #pricing: Pricing
  readonly #accountLabels: boolean
  readonly #fold = new Map<string, string>()
  readonly #calls = new Map<string, CallSeries>()
  readonly #requests: CounterFamily
  readonly #duration: HistogramFamily
  readonly #overhead: HistogramFamily
  readonly #ttft: HistogramFamily
  readonly #verdicts: Record<DetectionResult, CounterSeries>
  readonly #inline: CounterSeries
  readonly #detection: HistogramSeries
  readonly #traceStats: (() => Promise<TraceStats | null>) | null
  readonly #served: CounterSeries | null
  /** The store worker's numbers for the scrape under way (one traceStats call per scrape). */
  #snapshot: Promise<TraceStats | null> | null = null
  readonly #attempts: CounterFamily
  readonly #cacheLookups: CounterFamily
  readonly #sqlQueries: Counter<'result'>
  readonly #sqlDuration: Histogram<'result'>
  #late: LateSources | null = null

  constructor (sources: MetricsSources) {
    const registers = [this.registry]
    this.#pricing = sources.pricing
    this.#accountLabels = sources.accountLabels
    this.#traceStats = sources.traceStats
    const front = sources.traceStats === null
    // The standard names (process_cpu_user_seconds_total, nodejs_eventloop_lag_seconds, …) that
    // dashboards made for any Node process expect: the process's, counted once on the main thread. The
    // event loop's delay is sampled every LAG_SAMPLE_MS: prom-client's default (10 ms) is a timer that
    // wakes the main thread 100 times a second, most of what it did beside front threads at 1,000 calls/s.
    if (!front) collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: LAG_SAMPLE_MS })

    const callLabels = 'provider, model (price table id or other), route, outcome and status class (2xx…5xx, none when nothing was answered)'
    this.#requests = new CounterFamily('tracegate_requests_total', `Proxied calls that got past authentication (each one is traced), by ${callLabels}.`).register(this.registry)
    this.#duration = new HistogramFamily('tracegate_request_duration_seconds', `End-to-end time of a proxied call, from its request to its last byte, by ${callLabels}.`, CALL_BUCKETS).register(this.registry)
    this.#overhead = new HistogramFamily('tracegate_proxy_overhead_seconds', `Time of a call spent in tracegate (end to end minus the provider's time), for calls that reached the provider, by ${callLabels}.`, FAST_BUCKETS).register(this.registry)
    this.#ttft = new HistogramFamily('tracegate_time_to_first_token_seconds', `Time from a streamed call's request to its first answer bytes reaching the client (2xx streams), by ${callLabels}.`, CALL_BUCKETS).register(this.registry)
    this.#rejected = new Counter({
      name: 'tracegate_requests_rejected_before_auth_total',
      help: 'Requests refused before authentication (not traced), by error code.',
      labelNames: ['code'],
      registers,
    })

    const verdicts = new CounterFamily('tracegate_detection_verdicts_total', 'Detection answers: clean, blocked, or why none came (error, deadline, queue_full, too_large).').register(this.registry)
    this.#verdicts = Object.fromEntries(DETECTION_RESULTS.map((r) => [r, verdicts.series(r, { verdict: r })])) as Record<DetectionResult, CounterSeries>
    this.#inline = new CounterFamily('tracegate_detection_inline_total', 'Detection answers given by the thread that serves the call itself (bodies up to TRACEGATE_DETECTION_INLINE_BYTES, while it has time to spare); the others came from the detection workers.')
      .register(this.registry).series('', {})
    this.#detection = new HistogramFamily('tracegate_detection_duration_seconds', 'Time from a request entering detection to its verdict (queueing included).', FAST_BUCKETS)
      .register(this.registry).series('', {})

    this.#attempts = new CounterFamily('tracegate_upstream_attempts_total', 'Requests to providers\' targets when a provider has several or retries are on, by provider, target (its base URL) and result: answered (passed to the client), fell_over (another target took the call), failed (the last attempt, unanswered).').register(this.registry)

    this.#cacheLookups = new CounterFamily('tracegate_cache_lookups_total', 'Calls that asked the response cache (x-tracegate-cache-ttl), by provider and result: hit (answered from the cache, the provider not called) or miss.').register(this.registry)

    const served = new CounterFamily('tracegate_thread_requests_total', 'Requests the proxy routes took, by the front thread that served them (0 alone when TRACEGATE_THREADS is 1).').register(this.registry)
    const thread = sources.thread === undefined ? '0' : sources.thread
    this.#served = thread === null ? null : served.series('', { thread })

    // The SQL port runs on the main thread; front threads register these in their own registry, unread.
    this.#sqlQueries = new Counter({
      name: 'tracegate_sql_queries_total',
      help: 'Queries of the SQL port: ok, refused (sql_not_allowed), error (ClickHouse refused it), busy (sql_busy), unauthorized.',
      labelNames: ['result'],
      registers: front ? [] : registers,
    })
    this.#sqlDuration = new Histogram({
      name: 'tracegate_sql_query_duration_seconds',
      help: 'Time of a SQL port query from its request to its answer, by result.',
      labelNames: ['result'],
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300],
      registers: front ? [] : registers,
    })

    if (!front) this.#storeMetrics(registers)
    this.#lateMetrics(registers, front)
  }

  /** One query of the SQL port, with how it ended. */
  sqlQuery (result: SqlResultLabel, seconds: number): void {
    this.#sqlQueries.inc({ result })
    this.#sqlDuration.observe({ result }, seconds)
  }

  /** One attempt over a provider's targets (upstream/fallover.ts). */
  attempt (provider: string, target: string, result: AttemptResult): void {
    this.#attempts.series(provider + '\n' + target + '\n' + result, { provider, target, result }).value++
  }

  /** One call that asked the response cache (proxy/response-cache.ts): answered from it, or not. */
  cacheLookup (provider: string, result: 'hit' | 'miss'): void {
    this.#cacheLookups.series(provider + '\n' + result, { provider, result }).value++
  }

  /** Once per request the proxy routes take, when it begins. */
  started (): void {
    if (this.#served !== null) this.#served.value++
  }

  /** The key cache, upstream pool and in-flight count, once they exist (they are made after this). */
  attach (late: LateSources): void {
    this.#late = late
  }

  #stats (): Promise<TraceStats | null> {
    const read = this.#traceStats
    if (read === null) return Promise.resolve(null)
    this.#snapshot ??= read().catch(() => null)
    return this.#snapshot
  }

  #storeMetrics (registers: Registry[]): void {
    const stats = (): Promise<TraceStats | null> => this.#stats()
    new Counter({
      name: 'tracegate_traces_total',
      help: 'Trace rows since start: written to ClickHouse, spooled to disk, replayed from the spool, dropped.',
      labelNames: ['event'],
      registers,
      async collect () {
        const s = await stats()
        if (s === null) return
        this.reset()
        for (const event of ['written', 'spooled', 'replayed', 'dropped'] as const) this.inc({ event }, s[event])
      },
    })
    new Counter({
      name: 'tracegate_otel_spans_dropped_total',
      help: 'Call spans not exported over OTLP: the export queue was full, or the receiver refused or did not answer.',
      labelNames: ['reason'],
      registers,
      async collect () {
        const d = (await stats())?.spanDrops ?? null
        if (d === null) return
        this.reset()
        this.inc({ reason: 'queue_full' }, d.queue_full)
        this.inc({ reason: 'export_failed' }, d.export_failed)
      },
    })
    counterOf(registers, 'tracegate_trace_spool_refused_total', 'Trace batches the spool refused (full or unwritable).', stats, (s) => s.spoolRefused)
    gaugeOf(registers, 'tracegate_trace_queue_rows', 'Trace rows waiting in memory for an insert.', stats, (s) => s.queued)
    gaugeOf(registers, 'tracegate_trace_spool_bytes', 'Bytes in the trace spool.', stats, (s) => s.spoolBytes)
    new Gauge({
      name: 'tracegate_trace_lag_seconds',
      help: 'Age of the oldest trace not yet in ClickHouse (view="clickhouse": in memory, the spool, or not yet taken by the store) and of the oldest the dashboard cannot show yet (view="dashboard": in the spool or not yet taken); 0 when none waits.',
      labelNames: ['view'],
      registers,
      async collect () {
        const s = await stats()
        if (s === null) return
        this.set({ view: 'clickhouse' }, s.lag.clickhouseMs / 1000)
        this.set({ view: 'dashboard' }, s.lag.dashboardMs / 1000)
      },
    })
    gaugeOf(registers, 'tracegate_clickhouse_up', '1 while the last trace insert succeeded, else 0.', stats, (s) => s.clickhouseUp ? 1 : 0)
    gaugeOf(registers, 'tracegate_trace_spool_ok', '1 while the spool takes batches, else 0.', stats, (s) => s.spoolError === null ? 1 : 0)
    const inserts = new HistogramFamily('tracegate_trace_insert_duration_seconds', 'Time of each trace insert into ClickHouse (batches and spool replays, failed ones too).', INSERT_BUCKETS, async () => {
      const s = await stats()
      if (s === null) return
      const h = inserts.series('', {})
      h.counts.set(s.inserts.counts)
      h.sum = s.inserts.sum
      h.count = s.inserts.count
    }).register(this.registry)
    new Counter({
      name: 'tracegate_tokens_total',
      help: 'Tokens of traced calls (from the provider\'s usage, else estimated), by provider, model (price table id or other) and direction (input, output).',
      labelNames: ['provider', 'model', 'direction'],
      registers,
      async collect () {
        const s = await stats()
        if (s === null) return
        this.reset()
        for (const u of s.usage) {
          this.inc({ provider: u.provider, model: u.model, direction: 'input' }, u.input)
          this.inc({ provider: u.provider, model: u.model, direction: 'output' }, u.output)
        }
      },
    })
    new Counter({
      name: 'tracegate_cost_usd_total',
      help: 'Cost in USD of traced calls at the price table\'s prices, by provider and model (unpriced models count 0 under other).',
      labelNames: ['provider', 'model'],
      registers,
      async collect () {
        const s = await stats()
        if (s === null) return
        this.reset()
        for (const u of s.usage) this.inc({ provider: u.provider, model: u.model }, u.costUsd)
      },
    })
  }

  #lateMetrics (registers: Registry[], front: boolean): void {
    const late = (): LateSources | null => this.#late
    new Counter({
      name: 'tracegate_key_cache_lookups_total',
      help: 'Proxy key lookups in the front thread\'s cache: hit (answered from it) or miss (asked the store).',
      labelNames: ['result'],
      registers,
      collect: refill(() => late()?.keyCache, (metric, cache) => {
        metric.inc({ result: 'hit' }, cache.hits)
        metric.inc({ result: 'miss' }, cache.misses)
      }),
    })
    const origins = (): ReturnType<NonNullable<LateSources['upstream']>> | undefined => late()?.upstream?.()
    new Gauge({
      name: 'tracegate_upstream_connections',
      help: 'Connections to each provider origin: open, and busy (a request running on it).',
      labelNames: ['origin', 'state'],
      registers,
      collect: refill(origins, (metric, all) => {
        for (const [origin, s] of Object.entries(all)) {
          metric.set({ origin, state: 'open' }, Number(s.connected))
          metric.set({ origin, state: 'busy' }, s.running)
        }
      }),
    })
    new Gauge({
      name: 'tracegate_upstream_requests_pending',
      help: 'Requests waiting for a connection to each provider origin.',
      labelNames: ['origin'],
      registers,
      collect: refill(origins, (metric, all) => {
        for (const [origin, s] of Object.entries(all)) metric.set({ origin }, s.pending)
      }),
    })
    // The limits are the main thread's: counted there only, or the threads' sum would say `local` N times.
    if (!front) {
      new Gauge({
        name: 'tracegate_limits_mode',
        help: 'How the per-key limits count, 1 for the current mode: local (no Redis configured), shared (through Redis), fallback (Redis configured but away: each instance counts alone).',
        labelNames: ['mode'],
        registers,
        collect () {
          const mode = late()?.limitsMode?.() ?? 'local'
          for (const m of ['local', 'shared', 'fallback'] as const) this.set({ mode: m }, m === mode ? 1 : 0)
        },
      })
      const board = (): BoardStats | null => late()?.limitBoard?.() ?? null
      new Gauge({
        name: 'tracegate_limit_board_subjects',
        help: 'Keys and accounts on the request board, where front threads judge counted limits without the main thread; a slot is kept for the life of the process.',
        labelNames: ['kind'],
        registers,
        collect () {
          const b = board()
          if (b === null) return
          this.set({ kind: 'key' }, b.keys)
          this.set({ kind: 'account' }, b.accounts)
        },
      })
      gaugeOf(registers, 'tracegate_limit_board_slots', 'Slots of the request board per kind (keys and accounts each have this many).', board, (b) => b.slots)
      counterOf(registers, 'tracegate_limit_board_no_room_total', 'Calls whose key or account found no free slot within reach on the request board (the table full, or crowded where the id falls): the main thread judged their limits.', board, (b) => b.noRoomCalls)
    }
    new Gauge({
      name: 'tracegate_requests_in_flight',
      help: 'Proxied calls started and not finished.',
      registers,
      collect () { this.set(late()?.inflight() ?? 0) },
    })
  }

  /** The price table's id for a model, or `other`: label values stay as few as the table's rows. */
  #model (provider: ProviderName, model: string | null): string {
    if (model === null) return OTHER_MODEL
    const key = provider + '\n' + model
    let folded = this.#fold.get(key)
    if (folded === undefined) {
      folded = this.#pricing.find(provider, model)?.model ?? OTHER_MODEL
      if (this.#fold.size < FOLD_CACHE_MAX) this.#fold.set(key, folded)
    }
    return folded
  }

  /** Once per traced call (past authentication), from Calls.finished. */
  finished (x: Exchange): void {
    const provider = x.dialect.name
    const model = this.#model(provider, x.model)
    const outcome = x.outcome ?? 'proxy_error'
    const status = x.status === 0 ? 'none' : `${Math.floor(x.status / 100)}xx`
    const account = this.#accountLabels ? x.accountId ?? '' : null
    const key = provider + '\n' + model + '\n' + x.endpoint + '\n' + outcome + '\n' + status + (account === null ? '' : '\n' + account)
    let s = this.#calls.get(key)
    if (s === undefined) {
      const labels: Record<string, string> = { provider, model, route: x.endpoint, outcome, status_class: status }
      if (account !== null) labels.account = account
      s = {
        requests: this.#requests.series(key, labels),
        duration: this.#duration.series(key, labels),
        overhead: this.#overhead.series(key, labels),
        ttft: this.#ttft.series(key, labels),
      }
      this.#calls.set(key, s)
    }
    s.requests.value++
    const total = x.endedAt - x.startedAt
    s.duration.observe(total / 1000)
    if (x.upstreamStartAt !== 0) s.overhead.observe(Math.max(0, x.upstreamStartAt - x.startedAt) / 1000)
    if (x.streaming && x.firstWriteAt !== 0 && x.status >= 200 && x.status < 300) s.ttft.observe((x.firstWriteAt - x.startedAt) / 1000)
  }

  rejectedBeforeAuth (code: string): void {
    this.#rejected.inc({ code })
  }

  /** A detection answer (or why none came) and how long it took, from the detection pool. */
  readonly judged = (outcome: DetectionOutcome, ms: number): void => {
    this.#verdicts[outcome.ok ? (outcome.verdict.blocked ? 'blocked' : 'clean') : outcome.failure].value++
    this.#detection.observe(ms / 1000)
  }

  /** A detection answer given in the serving thread (it is also told to `judged`). */
  readonly inline = (): void => { this.#inline.value++ }

  async render (): Promise<string> {
    try {
      return await this.registry.metrics()
    } finally {
      this.#snapshot = null
    }
  }

  /** The same as prom-client's JSON, for summing with the front threads' (front/threads.ts). */
  async json (): Promise<object> {
    try {
      return await this.registry.getMetricsAsJSON()
    } finally {
      this.#snapshot = null
    }
  }

  get contentType (): string { return this.registry.contentType }
}

/**
 * A scrape's collect() for what a late source (LateSources) tells: the metric is emptied and filled anew
 * from it, and left as it was while the source does not exist on this thread.
 */
function refill<M extends { reset (): void }, S> (read: () => S | undefined, fill: (metric: M, source: S) => void): (this: M) => void {
  return function (this: M) {
    const source = read()
    if (source === undefined) return
    this.reset()
    fill(this, source)
  }
}

/** A counter set on scrape from `stats` (none yet: no sample is written). */
function counterOf<S> (registers: Registry[], name: string, help: string, stats: () => Promise<S | null> | S | null, read: (s: S) => number): void {
  new Counter({
    name, help, registers,
    async collect () {
      const s = await stats()
      if (s === null) return
      this.reset()
      this.inc(read(s))
    },
  })
}

/** A gauge set on scrape from `stats`, as counterOf. */
function gaugeOf<S> (registers: Registry[], name: string, help: string, stats: () => Promise<S | null> | S | null, read: (s: S) => number): void {
  new Gauge({
    name, help, registers,
    async collect () {
      const s = await stats()
      if (s !== null) this.set(read(s))
    },
  })
}
