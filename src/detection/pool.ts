// The detection pool: piscina workers judge every non-confidential request before it is forwarded, with
// a bounded queue and a deadline per request; piscina replaces a worker that crashes. What happens when
// detection cannot judge is the caller's decision (TRACEGATE_DETECTION_FAILURE_MODE).
// At most one batch per worker is in flight, because each piscina task costs this thread tens of µs:
// requests that arrive while every worker is busy wait here and leave together, in one buffer moved to
// the worker. A request alone leaves at the end of the turn it arrived in.
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { Piscina } from 'piscina'
import { moduleFile } from '../paths.js'
import { FaultEpisodes, type FaultLog } from './fault-episodes.js'
import type { ProviderName } from '../providers/index.js'
import type { DetectTask, Verdict } from './types.js'

export type DetectionFailure = 'error' | 'deadline' | 'queue_full'
export type DetectionOutcome = { readonly ok: true; readonly verdict: Verdict } | { readonly ok: false; readonly failure: DetectionFailure }

/** What the proxy asks of detection: the pool itself, or a front thread's client of it (front/detection.ts). */
export interface Detector {
  check (provider: ProviderName, body: Buffer, allow?: readonly string[] | null): Promise<DetectionOutcome>
}

export const DETECT_WORKER = fileURLToPath(moduleFile('../../workers/detect.js', import.meta.url))

export interface DetectionPoolOptions {
  readonly threads: number
  readonly maxQueue: number
  readonly deadlineMs: number
  /** The worker file (tests pass one that crashes or hangs). */
  readonly filename?: string
  /** Told every answer (or why none came) and how long it took, queueing included (for /metrics). */
  readonly onJudged?: (outcome: DetectionOutcome, ms: number) => void
  /** Where the first failure of an episode (with its cause) and the recovery are logged. */
  readonly onFault?: FaultLog
}

/** A task still running this many deadlines after it started has its worker terminated (piscina replaces it). */
const HARD_LIMIT_FACTOR = 20
const MIB = 1024 * 1024
/** A batch stops growing at this many requests or bytes, so one worker does not get all of a big burst. */
const BATCH_MAX = 64
const BATCH_BYTES = MIB

/** One request waiting for its verdict. */
class QueuedCheck {
  settled = false
  constructor (
    readonly provider: ProviderName,
    readonly body: Buffer,
    /** The account's allow phrases, blanked before injection scoring (null: none). */
    readonly allow: readonly string[] | null,
    readonly started: number,
    readonly due: number,
    readonly resolve: (outcome: DetectionOutcome) => void,
    readonly onJudged: ((outcome: DetectionOutcome, ms: number) => void) | null,
  ) {}

  settle (outcome: DetectionOutcome): void {
    if (this.settled) return
    this.settled = true
    this.onJudged?.(outcome, performance.now() - this.started)
    this.resolve(outcome)
  }
}

/** Requests sent to a worker as one piscina task. */
class WorkerBatch {
  timer: NodeJS.Timeout | null = null
  readonly controller = new AbortController()
  constructor (readonly items: QueuedCheck[], readonly started: number, readonly limit: number) {}
}

const DEADLINE: DetectionOutcome = Object.freeze({ ok: false, failure: 'deadline' })
const ERROR: DetectionOutcome = Object.freeze({ ok: false, failure: 'error' })
const QUEUE_FULL: DetectionOutcome = Object.freeze({ ok: false, failure: 'queue_full' })

/** The pool's onJudged: the caller's, plus the fault log's episodes when there is one. */
function fault (options: DetectionPoolOptions, lastError: () => string): ((outcome: DetectionOutcome, ms: number) => void) | null {
  const onJudged = options.onJudged ?? null
  if (options.onFault === undefined) return onJudged
  const episodes = new FaultEpisodes(options.onFault)
  const cause = (failure: DetectionFailure): string => failure === 'error'
    ? lastError()
    : failure === 'deadline' ? `no answer within the ${options.deadlineMs} ms deadline` : `${options.maxQueue} requests already waiting`
  return (outcome, ms) => {
    onJudged?.(outcome, ms)
    episodes.judged(outcome, () => cause((outcome as { failure: DetectionFailure }).failure))
  }
}

export class DetectionPool {
  readonly #pool: Piscina<DetectTask, Verdict[]>
  readonly #deadlineMs: number
  readonly #maxQueue: number
  readonly #threads: number
  readonly #onJudged: ((outcome: DetectionOutcome, ms: number) => void) | null
  #warm = false
  /** Why the last batch failed (a worker's crash, say), for the fault log. */
  #lastError = 'unknown error'
  #warming: Promise<void> | null = null
  /** Requests of this turn, not yet handed to piscina. */
  #pending: QueuedCheck[] = []
  #flushScheduled = false
  #pendingTimer: NodeJS.Timeout | null = null
  /** When #pendingTimer fires (Infinity when it is not set). */
  #pendingDue = Infinity
  /** Batches handed to piscina, in the order they were sent (piscina starts them in that order). */
  readonly #inFlight = new Set<WorkerBatch>()
  readonly #watchdog: NodeJS.Timeout
  readonly #flush = (): void => { this.#flushPending() }

  constructor (options: DetectionPoolOptions) {
    this.#deadlineMs = options.deadlineMs
    this.#maxQueue = options.maxQueue
    this.#threads = options.threads
    this.#onJudged = fault(options, () => this.#lastError)
    this.#pool = new Piscina({
      filename: options.filename ?? DETECT_WORKER,
      minThreads: options.threads,
      maxThreads: options.threads,
      // The request bound is ours (#queued); batches never outnumber requests.
      maxQueue: options.maxQueue,
      idleTimeout: 60_000,
    })
    // A crashed worker rejects its task; piscina starts a new one. Nothing else to do here.
    this.#pool.on('error', () => {})
    // One timer for all batches: aborting one that runs far past its deadline makes piscina terminate
    // its worker and start a new one.
    this.#watchdog = setInterval(() => {
      const now = performance.now()
      for (const batch of this.#inFlight) {
        if (now - batch.started > batch.limit) batch.controller.abort()
      }
    }, Math.max(50, options.deadlineMs))
    this.#watchdog.unref()
  }

  /** Requests waiting for a worker: those held here, plus those in batches behind the ones running. */
  #queued (): number {
    let queued = this.#pending.length
    let running = this.#threads
    for (const batch of this.#inFlight) {
      if (running > 0) running--
      else queued += batch.items.length
    }
    return queued
  }

  check (provider: ProviderName, body: Buffer, allow: readonly string[] | null = null): Promise<DetectionOutcome> {
    if (this.#queued() >= this.#maxQueue) {
      this.#onJudged?.(QUEUE_FULL, 0)
      return Promise.resolve(QUEUE_FULL)
    }
    return new Promise((resolve) => {
      // Detection time grows with the text: a body of several MiB (the default limit is 4) takes
      // far longer than a chat turn, so the deadline grows by one more deadline per MiB.
      const now = performance.now()
      const p = new QueuedCheck(provider, body, allow, now, now + this.#deadlineMs * (1 + Math.floor(body.length / MIB)), resolve, this.#onJudged)
      this.#pending.push(p)
      // A small body behind a big one has the earlier deadline.
      if (p.due < this.#pendingDue) { this.#clearPendingTimer(); this.#armPending(p.due) }
      if (!this.#flushScheduled && this.#inFlight.size < this.#threads) {
        this.#flushScheduled = true
        // After the poll phase: every request of this burst is in the batch.
        setImmediate(this.#flush)
      }
    })
  }

  /** Sends held requests to the threads that are free, within the batch bounds. */
  #flushPending (): void {
    this.#flushScheduled = false
    const free = this.#threads - this.#inFlight.size
    if (free <= 0) return
    const all = this.#pending
    // A request answered by its deadline while it waited here is not judged any more.
    let i = 0
    while (i < all.length && all[i]!.settled) i++
    const left = all.length - i
    if (left === 0) { this.#pending = []; this.#clearPendingTimer(); return }
    const per = Math.min(BATCH_MAX, Math.ceil(left / free))
    for (let sent = 0; sent < free && i < all.length; sent++) {
      const items: QueuedCheck[] = []
      let bytes = 0
      while (i < all.length && items.length < per && (items.length === 0 || bytes + all[i]!.body.length <= BATCH_BYTES)) {
        const p = all[i++]!
        if (p.settled) continue
        bytes += p.body.length
        items.push(p)
      }
      if (items.length > 0) this.#send(items, bytes, true)
    }
    this.#pending = i === all.length ? [] : all.slice(i)
    this.#clearPendingTimer()
    if (this.#pending.length > 0) this.#armPending(this.#earliestDue(this.#pending))
  }

  #earliestDue (items: readonly QueuedCheck[]): number {
    let due = Infinity
    for (const p of items) if (!p.settled && p.due < due) due = p.due
    return due
  }

  /** One timer for the held requests, at the earliest deadline among them. */
  #armPending (due: number): void {
    if (due === Infinity) return
    this.#pendingDue = due
    this.#pendingTimer = setTimeout(() => {
      this.#pendingTimer = null
      this.#pendingDue = Infinity
      const now = performance.now()
      for (const p of this.#pending) if (!p.settled && p.due <= now + 1) p.settle(DEADLINE)
      this.#armPending(this.#earliestDue(this.#pending))
    }, Math.max(0, due - performance.now()))
  }

  #clearPendingTimer (): void {
    if (this.#pendingTimer !== null) clearTimeout(this.#pendingTimer)
    this.#pendingTimer = null
    this.#pendingDue = Infinity
  }

  #send (items: QueuedCheck[], bytes: number, retry: boolean): void {
    const now = performance.now()
    // One copy of every body into one buffer that is moved, not cloned, to the worker.
    const buf = new Uint8Array(bytes)
    const ends: number[] = new Array(items.length)
    const providers: ProviderName[] = new Array(items.length)
    const allow: Array<readonly string[] | null> = new Array(items.length)
    let at = 0
    let due = Infinity
    let last = 0
    for (let k = 0; k < items.length; k++) {
      const p = items[k]!
      buf.set(p.body, at)
      at += p.body.length
      ends[k] = at
      providers[k] = p.provider
      allow[k] = p.allow
      if (p.due < due) due = p.due
      if (p.due > last) last = p.due
    }
    const batch = new WorkerBatch(items, now, (last - now) * HARD_LIMIT_FACTOR)
    this.#arm(batch, due)
    this.#inFlight.add(batch)
    const task: DetectTask = { providers, ends, body: buf, allow }
    this.#pool.run(task, { transferList: [buf.buffer], signal: batch.controller.signal }).then((verdicts) => {
      // A worker that answers has its code and weights loaded, whether or not warm() succeeded.
      this.#warm = true
      this.#done(batch)
      for (let k = 0; k < items.length; k++) {
        const v = verdicts[k]
        items[k]!.settle(v === undefined ? ERROR : { ok: true, verdict: v })
      }
    }, (err: unknown) => {
      this.#done(batch)
      this.#lastError = err instanceof Error ? err.message : String(err)
      const queueFull = err instanceof Error && /queue is at limit/i.test(err.message)
      // A worker that died took the whole batch with it: judge each request again on its own, so only
      // the one that kills a worker fails (and a full queue is answered as such).
      if (!queueFull && retry && items.length > 1) {
        for (const p of items) if (!p.settled) this.#send([p], p.body.length, false)
        return
      }
      for (const p of items) p.settle(queueFull ? QUEUE_FULL : ERROR)
    })
  }

  /** One timer per batch, at its earliest deadline; requests past theirs are answered, the rest re-armed. */
  #arm (batch: WorkerBatch, due: number): void {
    batch.timer = setTimeout(() => {
      batch.timer = null
      const now = performance.now()
      let next = Infinity
      for (const p of batch.items) {
        if (p.settled) continue
        if (p.due <= now + 1) p.settle(DEADLINE)
        else if (p.due < next) next = p.due
      }
      if (next !== Infinity) this.#arm(batch, next)
    }, Math.max(0, due - performance.now()))
  }

  #done (batch: WorkerBatch): void {
    this.#inFlight.delete(batch)
    if (batch.timer !== null) clearTimeout(batch.timer)
    // A thread is free: what waited for it leaves now (this runs in a promise job, after the answer).
    if (this.#pending.length > 0 && !this.#flushScheduled) this.#flushPending()
  }

  /**
   * Loads the worker code and weights on every thread before the proxy listens, so the first
   * requests are not judged by cold workers (which would miss the deadline and fail closed).
   */
  warm (timeoutMs = 60_000): Promise<void> {
    this.#warming ??= this.#warmAll(timeoutMs).then(() => { this.#warm = true }).finally(() => { this.#warming = null })
    return this.#warming
  }

  /** Every thread answered the warm-up, or some request since (readiness waits for this). */
  get warmed (): boolean { return this.#warm }

  async #warmAll (timeoutMs: number): Promise<void> {
    const body = Buffer.from('{"messages":[{"role":"user","content":"warm up"}]}')
    const runs = Array.from({ length: this.#pool.maxThreads }, () => {
      const bytes = new Uint8Array(body)
      return this.#pool.run({ providers: ['alpha'], ends: [bytes.length], body: bytes, allow: [null] }, { transferList: [bytes.buffer], signal: AbortSignal.timeout(timeoutMs) })
    })
    await Promise.all(runs)
  }

  close (): Promise<void> {
    clearInterval(this.#watchdog)
    this.#clearPendingTimer()
    // Requests still held here were never handed to a worker: they are answered now (piscina answers
    // the ones it holds when it is destroyed).
    for (const p of this.#pending) p.settle(ERROR)
    this.#pending = []
    return this.#pool.destroy()
  }
}
