// One proxy port's stack: the key cache, the upstream pool, the trace sink, the calls in flight and the
// uWS app, built the same way on the main thread (TRACEGATE_THREADS 1) and on each front thread. What
// differs between the two comes in as links: how key lookups and traces reach the store worker, the
// thread's detection pool, and whether the limits, readiness and the scraped metrics are this thread's own
// or the main thread's behind the hub (front/worker.ts).
import type { Agent } from 'undici'
import { KeyCache, type KeyLookup } from '../auth/cache.js'
import type { Config } from '../config.js'
import type { Detector } from '../detection/pool.js'
import type { Admission } from '../limits/limiter.js'
import type { Metrics } from '../metrics.js'
import type { Pricing } from '../pricing/index.js'
import { createProxyApp, type ReadyState } from '../server/proxy-app.js'
import { listen, uws, type TemplatedApp } from '../server/uws.js'
import { createUpstreamAgent } from '../upstream/client.js'
import { Calls, type CallLog, type CallsOptions } from './calls.js'
import { traceSinkFor, type TracePoster, type TraceSink } from './trace-sink.js'
import { PROVIDERS } from '../providers/index.js'
import { SharedRests } from '../upstream/shared-rests.js'
import { ResponseCache } from './response-cache.js'

/** What the thread that runs a stack gives it: its own parts, or its ways to the parts it does not own. */
export interface StackLinks {
  /** Key lookups on a cache miss: the store worker. */
  readonly lookupKey: KeyLookup
  /** Trace batches: the store worker. */
  readonly postTraces: TracePoster
  readonly limiter: Admission
  /** Null when detection is off. */
  readonly detection: Detector | null
  ready (): Promise<ReadyState>
  /** The whole process's Prometheus text, for /metrics on the proxy port (served only with TRACEGATE_METRICS_TOKEN). */
  render (): Promise<string>
  readonly log: CallLog | null
  /** This thread's registry: the stack's calls, key cache and upstream pool are counted in it. */
  readonly metrics: Metrics
  /** Front threads: the shared cell this thread keeps its calls in flight in. */
  readonly inflightCell?: CallsOptions['inflightCell']
}

export class ProxyStack {
  readonly keys: KeyCache
  readonly upstream: Agent
  /** Null when traces are off and no spans are exported. */
  readonly sink: TraceSink | null
  readonly calls: Calls
  readonly app: TemplatedApp
  readonly #host: string
  #socket: unknown = null
  /** Rests of targets and pooled keys shared through Redis, when it is configured and a provider has several of either. */
  readonly #rests: SharedRests | null
  /** The exact response cache; null when TRACEGATE_CACHE_MAX_BYTES is 0. */
  readonly cache: ResponseCache | null

  constructor (config: Config, pricing: Pricing, links: StackLinks) {
    const { log, metrics, limiter } = links
    this.#host = config.host
    const several = PROVIDERS.some((p) => config.providers[p].baseUrls.length > 1 || config.providers[p].apiKeys.length > 1)
    this.#rests = config.limits.redisUrl !== null && several ? new SharedRests(config.limits.redisUrl) : null
    this.cache = config.cache.maxBytes === 0 ? null : new ResponseCache({ ...config.cache, redisUrl: config.limits.redisUrl })
    this.keys = new KeyCache(links.lookupKey, config.keyCache)
    this.upstream = createUpstreamAgent(config)
    // With traces off the sink still carries spans when they are exported (the store worker builds them).
    this.sink = traceSinkFor(config, links.postTraces, (msg, fields) => { log?.warn(fields, msg) })
    this.calls = new Calls(metrics, this.sink, log, { accessLog: config.accessLog, ...(links.inflightCell === undefined ? {} : { inflightCell: links.inflightCell }) })
    const { keys, upstream, calls } = this
    metrics.attach({ keyCache: keys, upstream: () => upstream.stats, inflight: () => calls.inflight, limitsMode: () => limiter.mode })
    this.app = createProxyApp({
      // Never open on the proxy port: only behind the bearer token.
      metrics: config.metrics.token === null ? null : { render: links.render, contentType: metrics.contentType, token: config.metrics.token },
      config,
      keys,
      upstream,
      captureLimit: config.traces.enabled ? config.traces.maxBodyBytes : null,
      detection: links.detection,
      isClosing: calls.isClosing,
      attempts: metrics,
      cache: this.cache,
      cacheMetrics: metrics,
      warn: (msg, fields) => { log?.warn(fields, msg) },
      onStart: calls.started,
      onFinish: calls.finished,
      spans: config.otel !== null,
      limiter,
      ready: links.ready,
      pricing,
    })
  }

  /**
   * Listens on `port` and resolves the port it got. `shared` (front threads): uWS shares a port between
   * threads only when it asked for a fixed one (it sets SO_REUSEPORT then), so for port 0 it learns its
   * port and listens on it again at once, as the other threads will.
   */
  async listen (port: number, shared = false): Promise<number> {
    let bound = await listen(this.app, this.#host, port)
    if (shared && port === 0) {
      uws.us_listen_socket_close(bound.socket as never)
      bound = await listen(this.app, this.#host, bound.port)
    }
    this.#socket = bound.socket
    return bound.port
  }

  /** Stops taking connections; open ones stay until close(). */
  stopListening (): void {
    if (this.#socket !== null) uws.us_listen_socket_close(this.#socket as never)
    this.#socket = null
  }

  /** Stops listening and lets the calls in flight finish, within `graceMs`; a new call on an open connection gets 503. */
  async drain (graceMs: number): Promise<void> {
    const done = this.calls.drain(graceMs)
    this.stopListening()
    await done
  }

  /**
   * After drain(): closes the open connections (a thread that ends with one open aborts the process), then
   * the upstream pool (a call past the grace ends, traced), then hands the last traces to the store worker.
   */
  async close (): Promise<void> {
    this.stopListening()
    // uWS 20.30 has TemplatedApp.close, which its typings leave out.
    ;(this.app as unknown as { close (): void }).close()
    await this.upstream.destroy().catch(() => {})
    this.sink?.close()
    await this.#rests?.close()
    this.cache?.close()
  }
}
