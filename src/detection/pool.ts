// The detection pool: piscina worker threads running workers/detect.ts on every non-confidential
// request before it is forwarded. The body is copied once into its own buffer and moved to the
// worker (no structured clone). A bounded queue, a per-request deadline, and a worker that crashes is
// replaced by piscina without taking the process down. What happens when detection cannot judge a
// request is the caller's decision (TRACEGATE_DETECTION_FAILURE_MODE).
import { fileURLToPath } from 'node:url'
import { Piscina } from 'piscina'
import type { ProviderName } from '../config.js'
import type { DetectTask, Verdict } from './types.js'

export type DetectionFailure = 'error' | 'deadline' | 'queue_full'
export type DetectionOutcome = { readonly ok: true; readonly verdict: Verdict } | { readonly ok: false; readonly failure: DetectionFailure }

export const DETECT_WORKER = fileURLToPath(new URL('../../workers/detect.js', import.meta.url))

export interface DetectionPoolOptions {
  readonly threads: number
  readonly maxQueue: number
  readonly deadlineMs: number
  /** The worker file (tests pass one that crashes or hangs). */
  readonly filename?: string
}

/** A task still running this many deadlines after it started has its worker terminated (piscina replaces it). */
const HARD_LIMIT_FACTOR = 20
const MIB = 1024 * 1024

export class DetectionPool {
  readonly #pool: Piscina<DetectTask, Verdict>
  readonly #deadlineMs: number
  readonly #maxQueue: number
  /** Tasks in flight and when they started; one watchdog timer ends the stuck ones. */
  readonly #running = new Map<AbortController, { started: number; limit: number }>()
  readonly #watchdog: NodeJS.Timeout

  constructor (options: DetectionPoolOptions) {
    this.#deadlineMs = options.deadlineMs
    this.#maxQueue = options.maxQueue
    this.#pool = new Piscina({
      filename: options.filename ?? DETECT_WORKER,
      minThreads: options.threads,
      maxThreads: options.threads,
      maxQueue: options.maxQueue,
      idleTimeout: 60_000,
    })
    // A crashed worker rejects its task; piscina starts a new one. Nothing else to do here.
    this.#pool.on('error', () => {})
    // One timer for all tasks (AbortSignal.timeout per task starts a timer per request): aborting a
    // task that runs far past its deadline makes piscina terminate its worker and start a new one.
    this.#watchdog = setInterval(() => {
      const now = performance.now()
      for (const [controller, task] of this.#running) {
        if (now - task.started > task.limit) { this.#running.delete(controller); controller.abort() }
      }
    }, Math.max(50, options.deadlineMs))
    this.#watchdog.unref()
  }

  check (provider: ProviderName, body: Buffer): Promise<DetectionOutcome> {
    if (this.#pool.queueSize >= this.#maxQueue) return Promise.resolve({ ok: false, failure: 'queue_full' })
    const bytes = new Uint8Array(body.length)
    bytes.set(body)
    const task: DetectTask = { provider, body: bytes }
    return new Promise((resolve) => {
      let settled = false
      // Detection time grows with the text: a body of several MiB (the default limit is 4) takes
      // far longer than a chat turn, so the deadline grows by one more deadline per MiB.
      const deadline = this.#deadlineMs * (1 + Math.floor(body.length / MIB))
      const timer = setTimeout(() => {
        settled = true
        resolve({ ok: false, failure: 'deadline' })
      }, deadline)
      // The deadline answers the request; the task itself runs on until the watchdog ends it.
      const controller = new AbortController()
      this.#running.set(controller, { started: performance.now(), limit: deadline * HARD_LIMIT_FACTOR })
      this.#pool.run(task, { transferList: [bytes.buffer], signal: controller.signal }).then((verdict) => {
        this.#running.delete(controller)
        clearTimeout(timer)
        if (!settled) resolve({ ok: true, verdict })
      }, (err: unknown) => {
        this.#running.delete(controller)
        clearTimeout(timer)
        if (settled) return
        const queueFull = err instanceof Error && /queue is at limit/i.test(err.message)
        resolve({ ok: false, failure: queueFull ? 'queue_full' : 'error' })
      })
    })
  }

  /**
   * Loads the worker code and weights on every thread before the proxy listens, so the first
   * requests are not judged by cold workers (which would miss the deadline and fail closed).
   */
  async warm (timeoutMs = 60_000): Promise<void> {
    const body = Buffer.from('{"messages":[{"role":"user","content":"warm up"}]}')
    const runs = Array.from({ length: this.#pool.maxThreads }, () => {
      const bytes = new Uint8Array(body)
      return this.#pool.run({ provider: 'alpha', body: bytes }, { transferList: [bytes.buffer], signal: AbortSignal.timeout(timeoutMs) })
    })
    await Promise.all(runs)
  }

  close (): Promise<void> {
    clearInterval(this.#watchdog)
    return this.#pool.destroy()
  }
}
