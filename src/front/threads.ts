// The main thread's side of the front threads (TRACEGATE_THREADS above 1): it starts them on the proxy
// port, serves what they ask of it (the limits' counts, readiness, the summed metrics), tells every one
// of them when a key changes and waits for all to have dropped it, sums their calls in flight, and drains
// them at shutdown.
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads'
import { AggregatorRegistry } from 'prom-client'
import type { Config } from '../config.js'
import type { Limiter } from '../limits/limiter.js'
import type { Logger } from '../log.js'
import { SharedSlots } from '../detection/slots.js'
import { moduleFile } from '../paths.js'
import { Hub } from './hub.js'
import type { FrontSide, FrontWorkerData, MainSide, Readiness, Started } from './protocol.js'

export interface FrontServices {
  /** The detection worker file each thread's pool runs (tests give one that crashes or hangs); null: the real one. */
  readonly detectionWorker: string | null
  readonly limiter: Limiter
  readonly ready: () => Promise<Readiness>
  /** The Prometheus text of the whole process (the main thread's metrics and every thread's, summed). */
  readonly metrics: () => Promise<string>
  readonly log: Logger | null
}

class FrontThread {
  readonly worker: Worker
  readonly hub: Hub<MainSide, FrontSide>
  readonly exited: Promise<void>
  readonly started: Promise<Started>

  constructor (data: FrontWorkerData, services: FrontServices) {
    this.worker = new Worker(moduleFile('./worker.js', import.meta.url), { workerData: data, transferList: [data.store] })
    let started: (s: Started) => void = () => {}
    this.started = new Promise((resolve) => { started = resolve })
    const { limiter, log } = services
    this.hub = new Hub(this.worker, {
      admit: (call) => limiter.count(call),
      ready: () => services.ready(),
      metrics: () => services.metrics(),
    }, {
      counted: (note) => { for (const [keyId, accountId, n] of note) limiter.counted(keyId, accountId, n) },
      log: (l) => { log?.[l.level](l.fields, l.msg) },
      started: (s) => { started(s) },
    })
    this.exited = new Promise((resolve) => {
      this.worker.once('exit', (code) => {
        this.hub.gone(`front thread ${data.index} stopped (exit code ${code})`)
        started({ error: `the thread stopped before it listened (exit code ${code})` })
        resolve()
      })
    })
    this.worker.on('error', (err) => { log?.error({ err, thread: data.index }, 'front thread failed') })
  }
}

export class FrontThreads {
  readonly #threads: FrontThread[]
  readonly #inflight: Int32Array
  /** The port every thread listens on. */
  readonly port: number
  #closed: Promise<void> | null = null

  private constructor (threads: FrontThread[], inflight: Int32Array, port: number) {
    this.#threads = threads
    this.#inflight = inflight
    this.port = port
  }

  /** One channel per thread to the store worker: `worker` ends go to StoreClient, `threads` ends to start(). */
  static channels (n: number): { worker: MessagePort[]; threads: MessagePort[] } {
    const worker: MessagePort[] = []
    const threads: MessagePort[] = []
    for (let i = 0; i < n; i++) {
      const c = new MessageChannel()
      worker.push(c.port1)
      threads.push(c.port2)
    }
    return { worker, threads }
  }

  /**
   * Starts a thread per store port (its end of channels()), the first alone so that with port 0 the others
   * listen on the port it got. Rejects (with every started thread stopped) when one cannot listen.
   */
  static async start (config: Config, storePorts: readonly MessagePort[], services: FrontServices): Promise<FrontThreads> {
    const shared = new SharedArrayBuffer(4 * storePorts.length)
    const bulkSlots = SharedSlots.buffer()
    const threads: FrontThread[] = []
    const make = (index: number, port: number): FrontThread => {
      const t = new FrontThread({ index, config, port, store: storePorts[index]!, inflight: shared, detectionWorker: services.detectionWorker, bulkSlots, requestBoard: services.limiter.boardBuffer }, services)
      threads.push(t)
      return t
    }
    // A thread must stop listening before it ends.
    const stopAll = (): Promise<void> => new FrontThreads(threads, new Int32Array(shared), 0).close(0)
    const first = await make(0, config.proxyPort).started
    // The thread's error already names the address (uws.ts `listen`).
    if ('error' in first) { await stopAll(); throw new Error(first.error) }
    const rest = await Promise.all(storePorts.slice(1).map((_, i) => make(i + 1, first.port).started))
    const failed = rest.find((s): s is { error: string } => 'error' in s)
    if (failed !== undefined) { await stopAll(); throw new Error(failed.error) }
    return new FrontThreads(threads, new Int32Array(shared), first.port)
  }

  get count (): number { return this.#threads.length }

  /** Calls in flight on every thread (each keeps its own count in a shared cell). */
  get inflight (): number {
    let n = 0
    for (let i = 0; i < this.#inflight.length; i++) n += Atomics.load(this.#inflight, i)
    return n
  }

  /** Resolves once every running thread's key cache has dropped the key. */
  invalidate (hash: string): Promise<void> {
    return this.#all('invalidate', { hash })
  }

  /** Resolves once every running thread's key cache has dropped the account's keys. */
  invalidateAccount (accountId: string): Promise<void> {
    return this.#all('invalidateAccount', { accountId })
  }

  /** Every thread's metrics, one prom-client JSON array per thread, for AggregatorRegistry.aggregate. */
  metricsJson (): Promise<object[][]> {
    return Promise.all(this.#threads.map((t) => t.hub.request('metricsJson', null).catch(() => [])))
  }

  /** The main thread's registry and every thread's, summed series by series. */
  async aggregate (main: object): Promise<string> {
    const all = [main, ...await this.metricsJson()]
    return await AggregatorRegistry.aggregate(all).metrics()
  }

  /**
   * Stops every thread taking connections, waits for their calls to finish (within `graceMs`) and their
   * traces to reach the store worker, then ends the threads.
   */
  close (graceMs: number): Promise<void> {
    this.#closed ??= (async () => {
      await Promise.all(this.#threads.map((t) => t.hub.request('drain', { graceMs }).catch(() => {})))
      // Each listen socket is closed and its calls are over: ending the thread cannot abort the process.
      await Promise.all(this.#threads.map(async (t) => { await t.worker.terminate(); await t.exited }))
    })()
    return this.#closed
  }

  async #all<K extends 'invalidate' | 'invalidateAccount'> (op: K, args: FrontSide['serves'][K]['args']): Promise<void> {
    // A thread that stopped has no cache left to clear.
    await Promise.all(this.#threads.map((t) => t.hub.request(op, args).catch(() => {})))
  }
}
