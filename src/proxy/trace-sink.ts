// Hands finished exchanges to the store worker. Records are packed into one transferable buffer per
// batch (store/trace-codec.ts; postMessage moves it without a copy), sent every FLUSH_MS or MAX_HANDOFF_TRACES
// records.
// Batched because a postMessage costs this thread tens of microseconds while the worker is busy.
// With traces stored, the batches are also written ahead to a hand-off file (store/handoff.ts), a frame per
// event-loop turn (write-ahead.ts), before the responses of their calls end. A file takes the batches of
// HANDOFF_FILE_MS; the batch that closes it names it, and the store worker removes it once that batch's
// rows are in its own write-ahead segment (one file per second, not per batch: making and removing a file
// costs more than the writes into it).
import { rmSync } from 'node:fs'
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import type { Config } from '../config.js'
import { HandoffFile, handoffName } from '../store/handoff.js'
import { TraceBatchWriter, type EncodedTraces, type TraceMeta } from '../store/trace-codec.js'
import type { HeldRelease } from '../store/trace-types.js'
import type { Exchange } from './exchange.js'
import { writeAheadEachTurn } from './write-ahead.js'

/**
 * `handoff`: the hand-off file holding the batch's records (null: none could be written); `held`: what
 * the batch's calls held on the request board, per key (null: nothing).
 */
export type TracePoster = (traces: EncodedTraces, transfer: ArrayBuffer[], handoff: string | null, held: HeldRelease[] | null) => void

/** Where a sink writes ahead, and where it says that it cannot (once per failure episode). */
export interface WriteAheadTo {
  readonly dir: string
  warn (msg: string, fields: Record<string, unknown>): void
}

const MAX_HANDOFF_TRACES = 512
/** Big prompts and answers: a batch is also sent once it holds this many bytes. */
const MAX_HANDOFF_BYTES = 8 * 1024 * 1024
const FLUSH_MS = 20
const HANDOFF_FILE_MS = 1000

/**
 * What detection did for the call, with the account's policy that decided it: `blocked` is whether the
 * call was refused, `would_block` whether the verdict at `threshold` says injection (under `monitor` the
 * call went on anyway). '' when the call never reached detection (refused before, confidential,
 * detection off for the whole server).
 */
function detectionJson (x: Exchange): string {
  const p = x.detectionPolicy
  if (p === null) return ''
  const v = x.verdict
  if (v !== null) {
    return JSON.stringify({
      ran: true, policy: p.policy, blocked: v.blocked && p.policy === 'block', would_block: v.blocked, threshold: v.threshold,
      ...(v.dataThreshold !== undefined ? { data_threshold: v.dataThreshold } : {}),
      allow_applied: v.allowApplied, score: v.score, categories: v.categories, ms: v.ms,
    })
  }
  if (x.detectionFailure !== null) return JSON.stringify({ ran: false, policy: p.policy, failure: x.detectionFailure })
  // Not judged: the policy is `off`, or the client left before the verdict.
  return p.policy === 'off' ? JSON.stringify({ ran: false, policy: 'off' }) : ''
}

const round = (ms: number): number => Math.round(ms * 1000) / 1000

function traceMeta (x: Exchange, stored: boolean): TraceMeta {
  const latency = x.endedAt - x.startedAt
  const providerMs = x.upstreamStartAt === 0 ? null : x.endedAt - x.upstreamStartAt
  return {
    traceId: x.requestId,
    accountId: x.accountId ?? '',
    keyId: x.keyId ?? '',
    time: x.startedWall,
    provider: x.dialect.name,
    model: x.model ?? '',
    endpoint: x.endpoint,
    streaming: x.streaming,
    confidential: x.confidential,
    status: x.status,
    outcome: x.outcome ?? 'proxy_error',
    errorCode: x.errorCode ?? '',
    errorCause: x.errorCause ?? '',
    attempts: x.attempts === null ? '' : JSON.stringify(x.attempts),
    ...(x.cache === null ? {} : { cache: x.cache }),
    requestBytes: x.forwardedBytes,
    responseBytes: x.capture?.total ?? 0,
    chunkMarks: x.capture?.marks ?? null,
    latencyMs: round(latency),
    ttfbMs: x.firstWriteAt === 0 ? null : round(x.firstWriteAt - x.startedAt),
    providerMs: providerMs === null ? null : round(providerMs),
    overheadMs: round(Math.max(0, latency - (providerMs ?? 0))),
    detection: detectionJson(x),
    issues: x.verdict === null || x.verdict.issues.length === 0 ? '' : JSON.stringify(x.verdict.issues),
    labels: x.labels,
    maskPii: x.maskPii,
    span: x.span === null || !x.span.sampled ? null : x.span,
    stored,
  }
}

const NONE: readonly Buffer[] = []

/**
 * The sink of a thread that serves the proxy, posting to the store worker (`post`); null when neither
 * traces nor spans are kept. It writes ahead to the spool folder when traces are stored.
 */
export function traceSinkFor (config: Config, post: TracePoster, warn: WriteAheadTo['warn']): TraceSink | null {
  const t = config.traces
  if (!t.enabled && config.otel === null) return null
  return new TraceSink(post, t.maxBodyBytes, t.enabled, t.enabled ? { dir: join(config.dataDir, 'spool'), warn } : null)
}

export class TraceSink {
  readonly #post: TracePoster
  readonly #requestLimit: number
  /** False when traces are off: the sink then only carries spans (OpenTelemetry export on). */
  readonly #rows: boolean
  #batch = new TraceBatchWriter()
  /** What the batch's calls held on the request board, per key id and quarter hour. */
  #held: Map<string, [string, string, number, number, number]> | null = null
  #timer: NodeJS.Timeout | null = null
  readonly #flush = (): void => { this.flush() }
  readonly #wal: WriteAheadTo | null
  readonly #walId = randomUUID()
  #walSeq = 0
  /** The hand-off file (a second of batches), opened at its first write; the bytes and records of the current batch in it. */
  #file: HandoffFile | null = null
  #walBytes = 0
  #walCount = 0
  /** A write of this batch failed: it is posted without a file (its records are in memory only). */
  #walBroken = false
  #walError: string | null = null
  /** Closes the hand-off file once it is HANDOFF_FILE_MS old, even when no call came since. */
  #rotateTimer: NodeJS.Timeout | null = null
  #rotate = false
  readonly #stopWriting: () => void

  constructor (post: TracePoster, requestLimit: number, rows = true, wal: WriteAheadTo | null = null) {
    this.#post = post
    this.#requestLimit = requestLimit
    this.#rows = rows
    this.#wal = wal
    this.#stopWriting = wal === null ? () => {} : writeAheadEachTurn(() => { this.writeAhead() })
  }

  /**
   * Appends the records pushed since the last write to the batch's hand-off file, as one frame. A failure
   * is logged once (until a write works again) and the batch goes on in memory only.
   */
  writeAhead (): void {
    const wal = this.#wal
    const batch = this.#batch
    if (wal === null || this.#walBroken || batch.bytes === this.#walBytes) return
    try {
      if (this.#file === null) {
        this.#file = new HandoffFile(wal.dir, handoffName(this.#walId, ++this.#walSeq))
        this.#rotateTimer = setTimeout(() => { this.#rotate = true; this.flush() }, HANDOFF_FILE_MS)
        this.#rotateTimer.unref()
      }
      this.#file.append(batch.view(this.#walBytes), batch.count - this.#walCount)
      this.#walBytes = batch.bytes
      this.#walCount = batch.count
      if (this.#walError !== null) wal.warn('trace records are written ahead again', { was: this.#walError })
      this.#walError = null
    } catch (err) {
      this.#walBroken = true
      this.#dropFile(true)
      if (this.#walError === null) {
        this.#walError = (err as Error).message
        wal.warn('trace records cannot be written ahead to the hand-off file; a process killed now loses the calls of its last moments', { err: this.#walError })
      }
    }
  }

  /** Closes the hand-off file; `remove`: a file whose frames are not all whole goes too. */
  #dropFile (remove: boolean): string | null {
    const file = this.#file
    this.#file = null
    this.#rotate = false
    if (this.#rotateTimer !== null) { clearTimeout(this.#rotateTimer); this.#rotateTimer = null }
    if (file === null) return null
    try { file.close() } catch { /* the name is what matters now */ }
    if (!remove) return file.name
    try { rmSync(join(file.dir, file.name), { force: true }) } catch { /* a start reads its whole frames and drops the cut one */ }
    return null
  }

  /**
   * A finished exchange: its trace row when it has an account, generates or embeds, and traces are on,
   * else only its span (when one is exported); nothing when it has neither. A relayed call generates
   * nothing, so it has no trace row, but its span shows the provider call it made.
   */
  push (x: Exchange): void {
    const stored = this.#rows && x.accountId !== null && x.kind !== 'relay'
    // A hold goes with the next batch whether or not this call has a record in it.
    if (x.heldTokens > 0 || x.heldMicro > 0) this.#hold(x)
    if (!stored) {
      if (x.span === null || !x.span.sampled) {
        if (this.#held !== null) this.#timer ??= setTimeout(this.#flush, FLUSH_MS)
        return
      }
      this.#batch.add(traceMeta(x, false), null, 0, NONE, 0, NONE, 0)
    } else {
      const req = x.forwarded
      const c = x.capture
      this.#batch.add(traceMeta(x, true), req, req === null ? 0 : Math.min(req.length, this.#requestLimit),
        c?.head ?? NONE, c?.headBytes ?? 0, c?.tail ?? NONE, c?.tailBytes ?? 0)
    }
    if (this.#batch.count >= MAX_HANDOFF_TRACES || this.#batch.bytes >= MAX_HANDOFF_BYTES) this.flush()
    else if (this.#timer === null) this.#timer = setTimeout(this.#flush, FLUSH_MS)
  }

  /** The call's hold goes with its trace's batch: the store worker reports it after it built the trace. */
  #hold (x: Exchange): void {
    const held = this.#held ??= new Map()
    const keyId = x.keyId ?? ''
    const at = `${keyId} ${x.heldEpoch}`
    const h = held.get(at)
    if (h === undefined) held.set(at, [keyId, x.accountId ?? '', x.heldEpoch, x.heldTokens, x.heldMicro])
    else { h[3] += x.heldTokens; h[4] += x.heldMicro }
  }

  flush (): void {
    if (this.#timer !== null) { clearTimeout(this.#timer); this.#timer = null }
    // An old file is closed even by an empty batch: the store worker removes it once that batch arrives.
    if (this.#batch.count === 0 && this.#held === null && !(this.#rotate && this.#file !== null)) return
    // Everything posted is on disk first: records pushed since the turn's write go now.
    this.writeAhead()
    // A failed write removed the file (its earlier batches were posted, the rest is in memory only).
    const handoff = this.#walBroken ? this.#dropFile(true) : this.#rotate ? this.#dropFile(false) : null
    this.#walBytes = this.#walCount = 0
    this.#walBroken = false
    const batch = this.#batch.take()
    const held = this.#held === null ? null : [...this.#held.values()]
    this.#held = null
    this.#post(batch, [batch.buffer], handoff, held)
  }

  /** Posts what is left, closing the hand-off file, and stops writing ahead (shutdown). */
  close (): void {
    this.#rotate = true
    this.flush()
    this.#stopWriting()
  }
}
