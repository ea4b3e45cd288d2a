// The front thread's handle on the store worker: typed calls over postMessage, one promise per call.
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { MessagePort, Worker } from 'node:worker_threads'
import type { ClickHouseServerConfig, TraceConfig } from '../config.js'
import type { OtelSettings } from '../otel/settings.js'
import { isErrorCode, TracegateError } from '../errors.js'
import { moduleFile, repoFile } from '../paths.js'
import type { FrontPortsData } from './worker/ports.js'
import type { ExportAck, ExportChunk, LiveMessage, OpName, StoreOps, StoreRequest, StoreResponse, StoreWorkerData, TraceMessage } from './protocol.js'
import type { EncodedTraces } from './trace-codec.js'
import type { AdmittedCount, HeldRelease, LiveBatch, UsageFeedback, UsageReport } from './trace-types.js'

export interface StoreOptions {
  readonly dataDir: string
  readonly clickhouse: ClickHouseServerConfig | null
  readonly traces: TraceConfig
  /** Spans over OTLP, exported by the store worker; absent or null: none. */
  readonly otel?: OtelSettings | null
  readonly pricingFile: string | null
  readonly testSeams?: boolean
  readonly migrationsDir?: string
  /** Where the worker's warnings go. */
  readonly warn?: (msg: string, fields: Record<string, unknown>) => void
  /** One end of each front thread's channel (TRACEGATE_THREADS above 1), moved to the worker (worker/ports.ts). */
  readonly frontPorts?: readonly MessagePort[]
}

type WorkerMessage = StoreResponse | ExportChunk | 'closed' | { log: 'warn'; msg: string; fields: Record<string, unknown> } | { written: LiveBatch[] } | UsageReport

export type LiveListener = (batches: readonly LiveBatch[]) => void
/**
 * The tokens and cost of built rows, the ids of every trace built since the last call, and what their
 * calls held on the request board (to let go after the costs are counted).
 */
export type UsageListener = (entries: readonly UsageFeedback[], settled: readonly string[], released: readonly HeldRelease[], admitted: readonly AdmittedCount[]) => void

export class StoreError extends Error {
  readonly code: string | null
  constructor (message: string, code: string | null) {
    super(message)
    this.name = 'StoreError'
    this.code = code
  }
}

interface PendingCall {
  resolve (value: unknown): void
  reject (err: Error): void
  /** A streamed answer's pieces; resolves once the piece is taken, to false to stop the stream. */
  chunk?: (chunk: string) => Promise<boolean>
}

export const MIGRATIONS_DIR = fileURLToPath(repoFile('clickhouse/'))

/**
 * chDB's native library crashes the process (SIGSEGV) when the last thread that loaded it exits and the
 * addon is unloaded with it. Loading it once on the main thread keeps it mapped for the process's life,
 * so the store worker can stop, be terminated, or outlive a process.exit() safely.
 */
function pinChdb (): void {
  createRequire(import.meta.url)('chdb/connection')
}

export class StoreClient {
  /** The store worker itself, or a front thread's port to it (no live lists, no usage, no close of the worker). */
  readonly #worker: Worker | MessagePort
  readonly #pending = new Map<number, PendingCall>()
  readonly #written = new Set<LiveListener>()
  #usage: UsageListener | null = null
  #nextId = 1
  #closed = false
  #exited: Promise<void>

  /** Starts the store worker; or, given a front thread's port, speaks to the one already running. */
  constructor (options: StoreOptions | MessagePort) {
    if (options instanceof MessagePort) {
      this.#worker = options
      this.#worker.on('message', (msg: StoreResponse) => { this.#answer(msg) })
      this.#exited = new Promise((resolve) => { options.once('close', () => { this.#stopped(); resolve() }) })
      return
    }
    const frontPorts = options.frontPorts ?? []
    const workerData: StoreWorkerData & FrontPortsData = {
      dataDir: options.dataDir,
      clickhouse: options.clickhouse,
      migrationsDir: options.migrationsDir ?? MIGRATIONS_DIR,
      traces: options.traces,
      otel: options.otel ?? null,
      pricingFile: options.pricingFile,
      testSeams: options.testSeams === true,
      ...(frontPorts.length === 0 ? {} : { frontPorts }),
    }
    const warn = options.warn ?? (() => {})
    if (options.clickhouse === null) pinChdb()
    const worker = new Worker(moduleFile('./worker/main.js', import.meta.url), { workerData, transferList: [...frontPorts] })
    this.#worker = worker
    worker.on('message', (msg: WorkerMessage) => {
      if (msg === 'closed') return
      if ('log' in msg) {
        warn(msg.msg, msg.fields)
        return
      }
      if ('usage' in msg) {
        this.#usage?.(msg.usage, msg.settled, msg.released, msg.admitted)
        return
      }
      if ('written' in msg) {
        for (const fn of this.#written) fn(msg.written)
        return
      }
      if ('chunk' in msg) {
        this.#chunk(msg)
        return
      }
      this.#answer(msg)
    })
    this.#exited = new Promise((resolve) => {
      worker.once('exit', () => { this.#stopped(); resolve() })
    })
    worker.on('error', () => { /* the exit handler fails whatever is pending */ })
  }

  #answer (msg: StoreResponse): void {
    const p = this.#pending.get(msg.id)
    if (p === undefined) return
    this.#pending.delete(msg.id)
    if (msg.ok) p.resolve(msg.value)
    else p.reject(isErrorCode(msg.error.code) ? new TracegateError(msg.error.code, { message: msg.error.message }) : new StoreError(msg.error.message, msg.error.code))
  }

  #stopped (): void {
    this.#closed = true
    for (const p of this.#pending.values()) p.reject(new StoreError('the store worker stopped', 'store_stopped'))
    this.#pending.clear()
  }

  /** Calls one operation of the table (protocol.ts): its arguments and its result are the table's. */
  call<K extends OpName> (op: K, ...args: StoreOps[K]['args']): Promise<StoreOps[K]['result']> {
    return this.#send(op, args, undefined)
  }

  /**
   * A call whose answer comes in pieces before its reply (exportTraces): `onChunk` gets each and the worker
   * sends the next only once it resolves, so a slow receiver holds the worker at one piece; resolving to
   * false (or rejecting) stops the stream, and the call then resolves with what was sent.
   */
  stream<K extends 'exportTraces'> (op: K, args: StoreOps[K]['args'][0], onChunk: (chunk: string) => Promise<boolean>): Promise<StoreOps[K]['result']> {
    return this.#send(op, [args], onChunk)
  }

  #send<K extends OpName> (op: K, args: StoreOps[K]['args'], chunk: PendingCall['chunk']): Promise<StoreOps[K]['result']> {
    if (this.#closed) return Promise.reject(new StoreError('the store is closed', 'store_stopped'))
    const id = this.#nextId++
    return new Promise((resolve, reject) => {
      // The worker answers request `id` with op K's result (the table's), so the reply resolves this promise.
      this.#pending.set(id, chunk === undefined ? { resolve, reject } : { resolve, reject, chunk })
      const msg: StoreRequest<K> = { id, op, args }
      this.#worker.postMessage(msg)
    })
  }

  #chunk (msg: ExportChunk): void {
    const p = this.#pending.get(msg.id)
    const ack = (more: boolean): void => {
      if (this.#closed) return
      const a: ExportAck = { ack: msg.id, more }
      this.#worker.postMessage(a)
    }
    if (p?.chunk === undefined) {
      ack(false)
      return
    }
    p.chunk(msg.chunk).then(ack, () => { ack(false) })
  }

  /**
   * Calls `fn` with the stored traces of the accounts set by `watch`, once their rows are stored (in
   * ClickHouse, or replayed from the spool); returns the unsubscribe.
   */
  /** The tokens and cost of each batch of built rows, per key and minute (the limits' use). */
  onUsage (fn: UsageListener): void {
    this.#usage = fn
  }

  onWritten (fn: LiveListener): () => void {
    this.#written.add(fn)
    return () => { this.#written.delete(fn) }
  }

  /** The accounts whose stored traces `onWritten` listeners get (the rest are not sent over at all). */
  watch (accountIds: Iterable<string>): void {
    if (this.#closed) return
    const msg: LiveMessage = { live: [...accountIds] }
    this.#worker.postMessage(msg)
  }

  /**
   * Hands a batch of finished exchanges to the worker; its buffer moves, not copies. `handoff`: the
   * hand-off file that holds it, which the worker removes once it has the rows (store/handoff.ts).
   * `admitted`: a front thread's requests admitted since its last batch, reported to the main thread with
   * the batch's usage. False when the worker's channel is closed and nothing was sent.
   */
  postTraces (traces: EncodedTraces, transfer: ArrayBuffer[], handoff: string | null = null, held: HeldRelease[] | null = null, admitted: AdmittedCount[] | null = null): boolean {
    if (this.#closed) return false
    const msg: TraceMessage = { traces, sentAt: Date.now(), ...(handoff === null ? {} : { handoff }), ...(held === null ? {} : { held }), ...(admitted === null ? {} : { admitted }) }
    this.#worker.postMessage(msg, transfer)
    return true
  }

  async close (): Promise<void> {
    if (this.#closed) return
    if (this.#worker instanceof MessagePort) {
      // A front thread's port: closing it ends this thread's channel, never the worker.
      this.#worker.close()
      await this.#exited
      return
    }
    const worker = this.#worker
    worker.postMessage('close')
    const timer = setTimeout(() => { void worker.terminate() }, 10_000)
    await this.#exited
    clearTimeout(timer)
  }
}
