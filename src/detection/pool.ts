// The detection pool: piscina workers judge every non-confidential request before it is forwarded, with
// a bounded queue and a deadline per request; piscina replaces a worker that crashes. What happens when
// detection cannot judge is the caller's decision (TRACEGATE_DETECTION_FAILURE_MODE).
// No account can starve another: requests wait in one line per account and are taken round-robin
// (fair-queue.ts), a full queue drops the latest request of the account holding the most, bodies over
// SMALL_BYTES are judged by workers of their own (the bulk lane) so a flood of
// large bodies never stands between a chat turn and its worker, and a body over
// TRACEGATE_DETECTION_MAX_BYTES is not judged at all. A small body may be judged in the calling thread
// itself (inline.ts), which saves the round trip to a worker while the thread has time to spare.
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { moduleFile } from '../paths.js'
import { FaultEpisodes, type FaultLog } from './fault-episodes.js'
import { InlineJudge } from './inline.js'
import { Shares } from './fair-queue.js'
import { Lane, QUEUE_FULL, QueuedCheck } from './lane.js'
import type { SharedSlots } from './slots.js'
import type { Config } from '../config.js'
import type { ProviderName } from '../providers/index.js'
import type { Verdict } from './types.js'

export type DetectionFailure = 'error' | 'deadline' | 'queue_full' | 'too_large'
export type DetectionOutcome = { readonly ok: true; readonly verdict: Verdict } | { readonly ok: false; readonly failure: DetectionFailure }

/** What the proxy asks of detection (a DetectionPool; tests give the handler others). */
export interface Detector {
  /** `account`: whose share of the pool the request is counted against. */
  check (provider: ProviderName, body: Buffer, allow?: readonly string[] | null, account?: string): Promise<DetectionOutcome>
}

/**
 * Thread `index`'s share of `n` between `sharedBy` threads: the parts add up to `n` (the first threads
 * take one more each until the remainder is used up), and each is at least 1.
 */
export function shareOf (n: number, sharedBy: number, index: number): number {
  return Math.max(1, Math.floor(n / sharedBy) + (index < n % sharedBy ? 1 : 0))
}

/**
 * The pool of thread `index` of the `sharedBy` that serve the proxy port. With front threads each has its
 * own, so no check waits on another thread: TRACEGATE_DETECTION_THREADS (its chat workers) and
 * TRACEGATE_DETECTION_QUEUE are divided between them (shareOf). Each pool also has its bulk workers (half
 * its chat workers, at least one), which take `bulkSlots`: all threads together judge as many large bodies
 * at once as one pool's bulk lane would (defaultBulkThreads of the setting).
 */
export function detectionPoolFor (settings: DetectionSettings, sharedBy: number, index: number, extra: Pick<DetectionPoolOptions, 'onJudged' | 'onInline' | 'onFault' | 'filename' | 'bulkSlots'>): DetectionPool {
  return new DetectionPool({
    ...extra,
    threads: shareOf(settings.threads, sharedBy, index),
    maxQueue: shareOf(settings.maxQueue, sharedBy, index),
    deadlineMs: settings.deadlineMs,
    maxBytes: settings.maxBytes,
    inlineBytes: settings.inlineBytes,
  })
}

export const DETECT_WORKER = fileURLToPath(moduleFile('../../workers/detect.js', import.meta.url))

type DetectionSettings = Pick<Config['detection'], 'threads' | 'maxQueue' | 'deadlineMs' | 'maxBytes' | 'inlineBytes'>

export interface DetectionPoolOptions {
  readonly threads: number
  /** Workers for bodies over SMALL_BYTES; default: half of `threads`, at least 1. */
  readonly bulkThreads?: number
  readonly maxQueue: number
  readonly deadlineMs: number
  /** A body over this many bytes is not judged: its outcome is `too_large`. Default: no bound. */
  readonly maxBytes?: number
  /** The worker file (tests pass one that crashes or hangs). */
  readonly filename?: string
  /** Told every answer (or why none came) and how long it took, queueing included (for /metrics). */
  readonly onJudged?: (outcome: DetectionOutcome, ms: number) => void
  /** Where the first failure of an episode (with its cause) and the recovery are logged. */
  readonly onFault?: FaultLog
  /** Slots the bulk lane shares with other threads' pools (null or absent: its own workers bound it). */
  readonly bulkSlots?: SharedSlots | null
  /**
   * Bodies up to this many bytes are judged in this thread while it has time to spare (0 or absent: none;
   * none either with a worker file of its own, a test's, which is then the only judge).
   */
  readonly inlineBytes?: number
  /** The share of this thread's time inline checks may take (default INLINE_SHARE; tests set their own). */
  readonly inlineShare?: number
  /** Told each verdict given in this thread (for /metrics). */
  readonly onInline?: () => void
  /** The machine's idle cores since last asked (default: its CPU times; tests pass their own). */
  readonly idleCores?: () => number
}

/** The bulk workers beside `threads` chat workers unless told otherwise: half as many, at least one. */
export function defaultBulkThreads (threads: number): number {
  return Math.max(1, Math.floor(threads / 2))
}

const KIB = 1024
const MIB = 1024 * KIB
/**
 * Bodies up to this size are judged by the chat lane, in batches of at most BATCH_MAX requests and
 * BATCH_BYTES, so a batch holds a worker for a few milliseconds at most; larger ones go to the bulk lane,
 * one body per task.
 */
export const SMALL_BYTES = 32 * KIB
/**
 * Chat workers with nothing of their own to do, two or more of them free, take bulk bodies up to this
 * size (tens of milliseconds at most), so a machine with many cores does not leave them idle while
 * agent calls with long tool results wait for the bulk lane. One chat worker always stays free.
 */
const SPARE_BYTES = 256 * KIB
const BATCH_MAX = 64
const BATCH_BYTES = 64 * KIB

const TOO_LARGE: DetectionOutcome = Object.freeze({ ok: false, failure: 'too_large' })

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
    // A body over the byte bound is the caller's doing, not a fault of detection.
    if (!outcome.ok && outcome.failure === 'too_large') return
    episodes.judged(outcome, () => cause((outcome as { failure: DetectionFailure }).failure))
  }
}

export class DetectionPool {
  readonly #chat: Lane
  readonly #bulk: Lane
  readonly #deadlineMs: number
  readonly #maxQueue: number
  readonly #maxBytes: number
  readonly #onJudged: ((outcome: DetectionOutcome, ms: number) => void) | null
  /** Requests waiting in either lane, per account. */
  readonly #shares = new Shares()
  readonly #leave = (p: QueuedCheck): void => { this.#shares.remove(p.account) }
  #warm = false
  /** Why the last batch failed (a worker's crash, say), for the fault log. */
  #lastError = 'unknown error'
  #warming: Promise<void> | null = null
  readonly #watchdog: NodeJS.Timeout
  readonly #inline: InlineJudge | null
  /** The caller's onJudged alone (#onJudged also feeds the fault log). */
  readonly #onAnswered: ((outcome: DetectionOutcome, ms: number) => void) | null

  constructor (options: DetectionPoolOptions) {
    this.#deadlineMs = options.deadlineMs
    this.#maxQueue = options.maxQueue
    this.#maxBytes = options.maxBytes ?? Infinity
    this.#onJudged = fault(options, () => this.#lastError)
    this.#onAnswered = options.onJudged ?? null
    const lane = { filename: options.filename ?? DETECT_WORKER, maxQueue: options.maxQueue, onError: (m: string) => { this.#lastError = m }, onAnswer: () => { this.#warm = true } }
    this.#chat = new Lane({ ...lane, threads: options.threads, batchMax: BATCH_MAX, batchBytes: BATCH_BYTES, spare: () => this.#bulk.takeUpTo(SPARE_BYTES) })
    this.#bulk = new Lane({ ...lane, threads: options.bulkThreads ?? defaultBulkThreads(options.threads), batchMax: 1, batchBytes: 0, slots: options.bulkSlots ?? null })
    // One timer for all batches: aborting one that runs far past its deadline makes piscina terminate
    // its worker and start a new one.
    this.#watchdog = setInterval(() => {
      const now = performance.now()
      this.#chat.watch(now)
      this.#bulk.watch(now)
    }, Math.max(50, options.deadlineMs))
    this.#watchdog.unref()
    const inlineBytes = Math.min(options.inlineBytes ?? 0, SMALL_BYTES)
    this.#inline = inlineBytes > 0 && options.filename === undefined ? new InlineJudge(inlineBytes, options.inlineShare, options.onInline ?? null, options.idleCores) : null
  }

  check (provider: ProviderName, body: Buffer, allow: readonly string[] | null = null, account = ''): Promise<DetectionOutcome> {
    if (body.length > this.#maxBytes) {
      this.#onJudged?.(TOO_LARGE, 0)
      return Promise.resolve(TOO_LARGE)
    }
    const verdict = this.#inline?.judge(provider, body, allow) ?? null
    if (verdict !== null) {
      const outcome: DetectionOutcome = { ok: true, verdict }
      // Told to the caller's count, not the fault log: an answer given here says nothing of the workers.
      this.#onAnswered?.(outcome, verdict.ms)
      return Promise.resolve(outcome)
    }
    if (this.#shares.total >= this.#maxQueue && !this.#makeRoom(account)) {
      this.#onJudged?.(QUEUE_FULL, 0)
      return Promise.resolve(QUEUE_FULL)
    }
    return new Promise((resolve) => {
      // Detection time grows with the text: a body of several MiB (the default limit is 4) takes
      // far longer than a chat turn, so the deadline grows by one more deadline per MiB.
      const now = performance.now()
      const p = new QueuedCheck(account, provider, body, allow, now, now + this.#deadlineMs * (1 + Math.floor(body.length / MIB)), resolve, this.#onJudged, this.#leave)
      this.#shares.add(account)
      if (body.length <= SMALL_BYTES) {
        this.#chat.enqueue(p)
      } else {
        this.#bulk.enqueue(p)
        this.#chat.poke()
      }
    })
  }

  /**
   * The queue is full: the account holding the most waiting requests gives up its latest one when it
   * holds at least two more than `account` does, so every account keeps a share of the bound.
   */
  #makeRoom (account: string): boolean {
    const largest = this.#shares.largest()
    if (largest === null || largest === account || this.#shares.of(largest) < this.#shares.of(account) + 2) return false
    const a = this.#chat.newest(largest)
    const b = this.#bulk.newest(largest)
    const victim = a === null ? b : b === null || a.started >= b.started ? a : b
    if (victim === null) return false
    victim.settle(QUEUE_FULL)
    return true
  }

  /**
   * Loads the worker code and weights on every thread before the proxy listens, so the first
   * requests are not judged by cold workers (which would miss the deadline and fail closed).
   */
  warm (timeoutMs = 60_000): Promise<void> {
    this.#warming ??= Promise.all([this.#chat.warm(timeoutMs), this.#bulk.warm(timeoutMs), this.#inline?.load().catch(() => { /* the workers judge */ })]).then(() => { this.#warm = true }).finally(() => { this.#warming = null })
    return this.#warming
  }

  /** Every thread answered the warm-up, or some request since (readiness waits for this). */
  get warmed (): boolean { return this.#warm }

  /** For readiness: warmed; when not, another warm-up starts (the next check tells how it went). */
  ready (): boolean {
    if (!this.#warm) this.warm().catch(() => { /* told by the next check */ })
    return this.#warm
  }

  close (): Promise<void> {
    clearInterval(this.#watchdog)
    return Promise.all([this.#chat.close(), this.#bulk.close()]).then(() => {})
  }
}
