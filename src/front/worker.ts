// A front thread (TRACEGATE_THREADS above 1): its own uWS proxy app on the shared port (the kernel spreads
// connections between the threads), with its own upstream pool, key cache, trace sink and calls in flight.
// Traces and key lookups go straight to the store worker over this thread's port; detection, the limits'
// counts, readiness and log lines go to the main thread (hub.ts), which also drops keys from this
// thread's cache and drains it at shutdown.
import { parentPort, workerData } from 'node:worker_threads'
import { KeyCache } from '../auth/cache.js'
import { FrontLimits } from '../limits/front.js'
import { Metrics } from '../metrics.js'
import { Pricing } from '../pricing/index.js'
import { Calls, type CallLog } from '../proxy/calls.js'
import { traceSinkFor } from '../proxy/trace-sink.js'
import { createProxyApp } from '../server/proxy-app.js'
import { listen, uws } from '../server/uws.js'
import { StoreClient } from '../store/client.js'
import { createUpstreamAgent } from '../upstream/client.js'
import { DetectionClient } from './detection.js'
import { Hub } from './hub.js'
import type { FrontSide, FrontWorkerData, LogNote, MainSide } from './protocol.js'

const data = workerData as FrontWorkerData
const config = data.config
const pricing = Pricing.load(config.pricingFile)
const store = new StoreClient(data.store)
const keys = new KeyCache((hash) => store.call('lookupKey', { hash }), config.keyCache)
const upstream = createUpstreamAgent(config)
const sink = traceSinkFor(config, (traces, transfer, handoff) => { store.postTraces(traces, transfer, handoff) }, (msg, fields) => { log.warn(fields, msg) })
const metrics = new Metrics({ traceStats: null, pricing, accountLabels: config.metrics.accountLabels, thread: String(data.index) })
let listenSocket: unknown = null
let drained: Promise<true> | null = null

const hub: Hub<FrontSide, MainSide> = new Hub(parentPort!, {
  invalidate: (a) => { keys.invalidate(a.hash); return true },
  invalidateAccount: (a) => { keys.invalidateAccount(a.accountId); return true },
  metricsJson: () => metrics.registry.getMetricsAsJSON(),
  drain: (a) => (drained ??= drain(a.graceMs)),
}, {})

/** Log lines go to the main thread's logger (its level, its destination). */
function forward (level: LogNote['level']) {
  return (fields: object, msg: string): void => { hub.note('log', { level, fields, msg }) }
}
const log: CallLog = { error: forward('error'), warn: forward('warn'), info: forward('info') }

const calls = new Calls(metrics, sink, log, { accessLog: config.accessLog, inflightCell: { cells: new Int32Array(data.inflight), at: data.index } })
const limiter = new FrontLimits({ admit: (call) => hub.request('admit', call), counted: (note) => { hub.note('counted', note) } })
metrics.attach({ keyCache: keys, upstream: () => upstream.stats, inflight: () => calls.inflight })

/**
 * Stops taking connections (its listen socket first: a thread must not exit while its app listens), lets
 * its calls finish within the grace, and hands every trace to the store worker: the answer to a request
 * sent after them on the same port means the worker took them.
 */
async function drain (graceMs: number): Promise<true> {
  const done = calls.drain(graceMs)
  if (listenSocket !== null) uws.us_listen_socket_close(listenSocket as never)
  listenSocket = null
  await done
  // Kept-alive connections too: a thread that ends with a socket open aborts the process. (uWS 20.30 has
  // TemplatedApp.close, which its typings leave out.)
  ;(app as unknown as { close (): void }).close()
  sink?.close()
  limiter.close()
  await store.call('traceStats').catch(() => null)
  await upstream.destroy().catch(() => {})
  hub.flush()
  return true
}

const app = createProxyApp({
  metrics: config.metrics.token === null
    ? null
    : { render: () => hub.request('metrics', null), contentType: metrics.contentType, token: config.metrics.token },
  config,
  keys,
  upstream,
  captureLimit: config.traces.enabled ? config.traces.maxBodyBytes : null,
  detection: config.detection.enabled ? new DetectionClient((args, moved) => hub.request('detect', args, moved)) : null,
  isClosing: calls.isClosing,
  onStart: calls.started,
  onFinish: calls.finished,
  spans: config.otel !== null,
  limiter,
  ready: async () => {
    const r = await hub.request('ready', null)
    limiter.mode = r.limits
    return r.not
  },
  pricing,
})

/**
 * uWS shares a port between threads only when it asked for a fixed one (it sets SO_REUSEPORT then): for
 * port 0 the first thread learns its port, and listens on it again at once, as the others will.
 */
async function listenShared (): Promise<number> {
  let bound = await listen(app, config.host, data.port)
  if (data.port === 0) {
    uws.us_listen_socket_close(bound.socket as never)
    bound = await listen(app, config.host, bound.port)
  }
  listenSocket = bound.socket
  return bound.port
}

listenShared().then((port) => {
  hub.note('started', { port })
}, (err: unknown) => {
  hub.note('started', { error: err instanceof Error ? err.message : String(err) })
})

// A fault nothing caught must not end this thread while its app listens (that aborts the whole process):
// it stops taking connections, says why, and leaves the port to the other threads.
process.on('uncaughtException', (err) => {
  if (listenSocket !== null) uws.us_listen_socket_close(listenSocket as never)
  listenSocket = null
  log.error({ err: String(err), thread: data.index }, 'front thread stopped serving after an uncaught error')
})
