// One lane of the detection pool: its own piscina workers and a fair queue in front of them. At most one
// batch per worker is in flight, because each piscina task costs this thread tens of µs: requests that
// arrive while every worker is busy wait here, in one line per account, and leave together, taken
// round-robin between accounts, in one buffer moved to the worker. A request alone leaves at the end of
// the turn it arrived in. Each request keeps its own deadline wherever it waits.
import { performance } from 'node:perf_hooks'
import { Piscina } from 'piscina'
import { FairQueue } from './fair-queue.js'
import { DIALECTS, PROVIDERS, type ProviderName } from '../providers/index.js'
import type { DetectTask, Verdict } from './types.js'
import type { DetectionOutcome } from './pool.js'
import type { SharedSlots } from './slots.js'

/** A task still running this many deadlines after it started has its worker terminated (piscina replaces it). */
const HARD_LIMIT_FACTOR = 20

export const DEADLINE: DetectionOutcome = Object.freeze({ ok: false, failure: 'deadline' })
export const ERROR: DetectionOutcome = Object.freeze({ ok: false, failure: 'error' })
export const QUEUE_FULL: DetectionOutcome = Object.freeze({ ok: false, failure: 'queue_full' })

/** One request waiting for its verdict. */
export class QueuedCheck {
  settled = false
  /** True while it waits in a lane's queue (it counts against the pool's bound then). */
  queued = true
  /** The lane it waits in. */
  lane: Lane | null = null
  constructor (
    readonly account: string,
    readonly provider: ProviderName,
    readonly body: Buffer,
    /** The account's allow phrases, blanked before injection scoring (null: none). */
    readonly allow: readonly string[] | null,
    readonly started: number,
    readonly due: number,
    readonly resolve: (outcome: DetectionOutcome) => void,
    /** Told every answer. */
    readonly onJudged: ((outcome: DetectionOutcome, ms: number) => void) | null,
    /** Told when it leaves the queue, for a worker or with its answer (the pool's count of waiting requests). */
    readonly onLeave: (p: QueuedCheck) => void,
  ) {}

  get bytes (): number { return this.body.length }

  /** It leaves the queue for a worker, or with its answer. */
  leave (): void {
    if (!this.queued) return
    this.queued = false
    this.lane?.left()
    this.onLeave(this)
  }

  settle (outcome: DetectionOutcome): void {
    if (this.settled) return
    this.leave()
    this.settled = true
    this.onJudged?.(outcome, performance.now() - this.started)
    this.resolve(outcome)
  }
}

/** Requests sent to a worker as one piscina task. */
class WorkerBatch {
  timer: NodeJS.Timeout | null = null
  readonly controller = new AbortController()
  constructor (readonly items: QueuedCheck[], readonly started: number, readonly limit: number, readonly slotted: boolean) {}
}

/** How often a lane whose requests wait for a shared slot looks again (a large body takes far longer). */
const SLOT_RETRY_MS = 5

export interface LaneOptions {
  readonly filename: string
  readonly threads: number
  readonly maxQueue: number
  /** A batch stops growing at this many requests or bytes (one request always goes, whatever its size). */
  readonly batchMax: number
  readonly batchBytes: number
  /**
   * Work from elsewhere (another lane's queue) for this lane's workers when its own queue is empty and
   * at least two of them are free: one always stays free for this lane's own requests.
   */
  readonly spare?: () => QueuedCheck | null
  /** Why the last batch failed (a worker's crash, say), for the fault log. */
  readonly onError: (message: string) => void
  /** A worker answered: its code and weights are loaded. */
  readonly onAnswer: () => void
  /** Slots shared with other threads' lanes: a batch is sent only with one (null: this lane's workers alone bound it). */
  readonly slots?: SharedSlots | null
}

export class Lane {
  readonly #pool: Piscina<DetectTask, Verdict[]>
  readonly #options: LaneOptions
  readonly #queue = new FairQueue<QueuedCheck>()
  /** Batches handed to piscina. */
  readonly #inFlight = new Set<WorkerBatch>()
  /** Requests waiting in #queue, not answered yet. */
  #count = 0
  #flushScheduled = false
  #pendingTimer: NodeJS.Timeout | null = null
  /** When #pendingTimer fires (Infinity when it is not set). */
  #pendingDue = Infinity
  /** Set while requests wait for a shared slot: the lane looks again when it fires. */
  #slotTimer: NodeJS.Timeout | null = null
  readonly #flush = (): void => { this.#flushPending() }

  constructor (options: LaneOptions) {
    this.#options = options
    this.#pool = new Piscina({
      filename: options.filename,
      minThreads: options.threads,
      maxThreads: options.threads,
      // The request bound is the pool's; batches never outnumber requests.
      maxQueue: options.maxQueue,
      idleTimeout: 60_000,
    })
    // A crashed worker rejects its task; piscina starts a new one. Nothing else to do here.
    this.#pool.on('error', () => {})
  }

  get threads (): number { return this.#options.threads }

  /** The request waits its turn; it leaves at once when a worker is free. */
  enqueue (p: QueuedCheck): void {
    p.lane = this
    this.#count++
    this.#queue.push(p)
    // A small body behind a big one has the earlier deadline.
    if (p.due < this.#pendingDue) { this.#clearPendingTimer(); this.#armPending(p.due) }
    if (!this.#flushScheduled && this.#inFlight.size < this.#options.threads) {
      this.#flushScheduled = true
      // After the poll phase: every request of this burst is in the batch.
      setImmediate(this.#flush)
    }
  }

  /** A free worker looks for work now (another lane has some it may take, see `spare`). */
  poke (): void {
    if (this.#flushScheduled || this.#inFlight.size + 2 > this.#options.threads) return
    this.#flushScheduled = true
    setImmediate(this.#flush)
  }

  /** The next waiting request of at most `bytes`, taken round-robin as for this lane's own workers. */
  takeUpTo (bytes: number): QueuedCheck | null {
    const p = this.#queue.take((q) => q.bytes <= bytes)
    p?.leave()
    return p
  }

  /** One of this lane's requests left its queue. */
  left (): void { this.#count-- }

  /** The latest waiting request of `account` (the one a full pool drops first), or null. */
  newest (account: string): QueuedCheck | null {
    return this.#queue.newest(account)
  }

  /** Aborts batches running far past their deadline: piscina terminates their worker and starts another. */
  watch (now: number): void {
    for (const batch of this.#inFlight) {
      if (now - batch.started > batch.limit) batch.controller.abort()
    }
  }

  /** Sends waiting requests to the threads that are free, round-robin between accounts, within the batch bounds. */
  #flushPending (): void {
    this.#flushScheduled = false
    let free = this.#options.threads - this.#inFlight.size
    // A burst is shared between the free threads rather than piled on the first.
    const per = Math.min(this.#options.batchMax, Math.ceil(this.#count / Math.max(1, free)))
    const slots = this.#options.slots ?? null
    while (free > 0) {
      // A shared slot is taken for a request of this lane's own queue, and given back if none is there.
      const slotted = slots !== null && this.#count > 0
      if (slotted && !slots.take()) {
        this.#slotTimer ??= setTimeout(() => { this.#slotTimer = null; if (!this.#flushScheduled) this.#flushPending() }, SLOT_RETRY_MS)
        break
      }
      const first = this.#queue.take()
      if (first === null && slotted) slots.give()
      if (first === null) {
        const other = free >= 2 ? this.#options.spare?.() ?? null : null
        if (other === null) break
        this.#send([other], other.bytes, true, false)
        free--
        continue
      }
      first.leave()
      const items = [first]
      let bytes = first.bytes
      const fits = (p: QueuedCheck): boolean => bytes + p.bytes <= this.#options.batchBytes
      while (items.length < per) {
        const p = this.#queue.take(fits)
        if (p === null) break
        p.leave()
        bytes += p.bytes
        items.push(p)
      }
      this.#send(items, bytes, true, slotted)
      free--
    }
    // Requests leaving can only make the earliest deadline later: the timer stays, and when it fires
    // early it finds nothing due and waits for the next one.
    if (this.#count === 0) this.#clearPendingTimer()
  }

  #earliestDue (): number {
    let due = Infinity
    for (const p of this.#queue.waiting()) if (p.due < due) due = p.due
    return due
  }

  /** One timer for the waiting requests, at the earliest deadline among them. */
  #armPending (due: number): void {
    if (due === Infinity) return
    this.#pendingDue = due
    this.#pendingTimer = setTimeout(() => {
      this.#pendingTimer = null
      this.#pendingDue = Infinity
      const now = performance.now()
      for (const p of this.#queue.waiting()) if (p.due <= now + 1) p.settle(DEADLINE)
      this.#armPending(this.#earliestDue())
    }, Math.max(0, due - performance.now()))
  }

  #clearPendingTimer (): void {
    if (this.#pendingTimer !== null) clearTimeout(this.#pendingTimer)
    this.#pendingTimer = null
    this.#pendingDue = Infinity
  }

  /** `slotted`: the batch holds a shared slot, given back when it ends. */
  #send (items: QueuedCheck[], bytes: number, retry: boolean, slotted: boolean): void {
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
    const batch = new WorkerBatch(items, now, (last - now) * HARD_LIMIT_FACTOR, slotted)
    this.#arm(batch, due)
    this.#inFlight.add(batch)
    const task: DetectTask = { providers, ends, body: buf, allow }
    this.#pool.run(task, { transferList: [buf.buffer], signal: batch.controller.signal }).then((verdicts) => {
      this.#options.onAnswer()
      this.#done(batch)
      for (let k = 0; k < items.length; k++) {
        const v = verdicts[k]
        items[k]!.settle(v === undefined ? ERROR : { ok: true, verdict: v })
      }
    }, (err: unknown) => {
      this.#done(batch)
      this.#options.onError(err instanceof Error ? err.message : String(err))
      const queueFull = err instanceof Error && /queue is at limit/i.test(err.message)
      // A worker that died took the whole batch with it: judge each request again on its own, so only
      // the one that kills a worker fails (and a full queue is answered as such).
      if (!queueFull && retry && items.length > 1) {
        // Never a slotted batch: the lanes with shared slots (the bulk lanes) send one request at a time.
        for (const p of items) if (!p.settled) this.#send([p], p.body.length, false, false)
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
    if (batch.slotted) this.#options.slots?.give()
    if (batch.timer !== null) clearTimeout(batch.timer)
    // A thread is free: what waited for it leaves now (this runs in a promise job, after the answer).
    if (!this.#flushScheduled) this.#flushPending()
  }

  /** Loads the worker code and weights on every thread of the lane, with a minimal request of the first provider. */
  async warm (timeoutMs: number): Promise<void> {
    const provider = PROVIDERS[0]!
    const body = Buffer.from(JSON.stringify(DIALECTS[provider].sampleBody('warm up')))
    const runs = Array.from({ length: this.#pool.maxThreads }, () => {
      const bytes = new Uint8Array(body)
      return this.#pool.run({ providers: [provider], ends: [bytes.length], body: bytes, allow: [null] }, { transferList: [bytes.buffer], signal: AbortSignal.timeout(timeoutMs) })
    })
    await Promise.all(runs)
  }

  close (): Promise<void> {
    this.#clearPendingTimer()
    if (this.#slotTimer !== null) { clearTimeout(this.#slotTimer); this.#slotTimer = null }
    // Requests still waiting here were never handed to a worker: they are answered now (piscina answers
    // the ones it holds when it is destroyed).
    for (const p of [...this.#queue.waiting()]) p.settle(ERROR)
    this.#queue.clear()
    return this.#pool.destroy()
  }
}
