// A front thread (TRACEGATE_THREADS above 1): its own proxy stack (proxy/stack.ts: uWS app, upstream pool,
// key cache, trace sink, calls in flight) on the shared port, the kernel spreading connections between the
// threads, and its own detection pool (its share of the workers), so a check never waits on another
// thread. Traces and key lookups go straight to the store worker over this thread's port, and with the
// traces the requests the thread admitted, which the worker's usage report gives the main thread's counts;
// calls the main thread must judge, admitted requests no batch carried, readiness and log lines go to the
// main thread (hub.ts), which also drops keys from this thread's cache and drains it at shutdown.
import { parentPort, workerData } from 'node:worker_threads'
import { defaultBulkThreads, detectionPoolFor } from '../detection/pool.js'
import { SharedSlots } from '../detection/slots.js'
import { RequestBoard } from '../limits/board.js'
import { FrontLimits } from '../limits/front.js'
import { Metrics } from '../metrics.js'
import { Pricing } from '../pricing/index.js'
import type { CallLog } from '../proxy/calls.js'
import { ProxyStack } from '../proxy/stack.js'
import { StoreClient } from '../store/client.js'
import { DETECTION_COLD } from '../server/proxy-app.js'
import { Hub } from './hub.js'
import type { FrontSide, FrontWorkerData, LogNote, MainSide } from './protocol.js'

const data = workerData as FrontWorkerData
const config = data.config
const pricing = Pricing.load(config.pricingFile)
const store = new StoreClient(data.store)
const metrics = new Metrics({ traceStats: null, pricing, accountLabels: config.metrics.accountLabels, thread: String(data.index) })
let drained: Promise<true> | null = null

const hub: Hub<FrontSide, MainSide> = new Hub(parentPort!, {
  invalidate: (a) => { stack.keys.invalidate(a.hash); return true },
  invalidateAccount: (a) => { stack.keys.invalidateAccount(a.accountId); return true },
  metricsJson: () => metrics.registry.getMetricsAsJSON(),
  drain: (a) => (drained ??= drain(a.graceMs)),
}, {})

/** Log lines go to the main thread's logger (its level, its destination). */
function forward (level: LogNote['level']) {
  return (fields: object, msg: string): void => { hub.note('log', { level, fields, msg }) }
}
const log: CallLog = { error: forward('error'), warn: forward('warn'), info: forward('info') }

const detection = config.detection.enabled
  ? detectionPoolFor(config.detection, config.threads, data.index, {
    onJudged: metrics.judged,
    onInline: metrics.inline,
    onFault: (msg, fields) => { log.warn({ ...fields, thread: data.index }, msg) },
    ...(data.detectionWorker === null ? {} : { filename: data.detectionWorker }),
    bulkSlots: new SharedSlots(data.bulkSlots, defaultBulkThreads(config.detection.threads)),
  })
  : null

// Priced and held as the main thread's Limiter does (tracegate.ts): holds end when traces are built, so only with traces on.
const limiter = new FrontLimits({ admit: (call) => hub.request('admit', call), counted: (note) => { hub.note('counted', note) } },
  data.requestBoard === null ? null : new RequestBoard(data.requestBoard), Date.now, { pricing, hold: config.traces.enabled })

const stack = new ProxyStack(config, pricing, {
  lookupKey: (hash) => store.call('lookupKey', { hash }),
  // The batch carries the thread's admitted requests: the store worker's report tells the main thread
  // (a note does when the worker's channel is closed).
  postTraces: (traces, transfer, handoff, held) => {
    const admitted = limiter.takeCounted()
    if (!store.postTraces(traces, transfer, handoff, held, admitted) && admitted !== null) hub.note('counted', admitted)
  },
  limiter,
  detection,
  ready: async () => {
    const r = await hub.request('ready', null)
    limiter.mode = r.limits
    // In the main thread's order (tracegate.ts `readiness`): shutting down, then cold workers, then the store.
    if (r.not?.reason !== 'shutting_down' && detection !== null && !detection.ready()) return { not: DETECTION_COLD, tracesBehindS: null }
    return { not: r.not, tracesBehindS: r.tracesBehindS }
  },
  render: () => hub.request('metrics', null),
  log,
  metrics,
  inflightCell: { cells: new Int32Array(data.inflight), at: data.index },
})

/**
 * Stops taking connections (a thread must not exit while its app listens), lets its calls finish within
 * the grace, and hands every trace to the store worker: the answer to a request sent after them on the
 * same port means the worker took them.
 */
async function drain (graceMs: number): Promise<true> {
  await stack.drain(graceMs)
  await stack.close()
  limiter.close()
  // A pool that fails to close must not keep this thread's traces from being handed over.
  await detection?.close().catch(() => {})
  await store.call('traceStats').catch(() => null)
  hub.flush()
  return true
}

// The pool warms before the thread listens, so its first calls are not judged by cold workers; one that
// cannot warm up still serves (its calls follow the failure mode, and /readyz says why).
const warmed = detection === null ? Promise.resolve() : detection.warm().catch((err: unknown) => {
  log.warn({ err: String(err), thread: data.index }, 'detection workers did not warm up')
})
warmed.then(() => stack.listen(data.port, true)).then((port) => {
  hub.note('started', { port })
}, (err: unknown) => {
  hub.note('started', { error: err instanceof Error ? err.message : String(err) })
})

// A fault nothing caught must not end this thread while its app listens (that aborts the whole process):
// it stops taking connections, says why, and leaves the port to the other threads.
process.on('uncaughtException', (err) => {
  stack.stopListening()
  log.error({ err: String(err), thread: data.index }, 'front thread stopped serving after an uncaught error')
})
