// Trace batching in the store worker: rows are built and written as TabSeparated when they arrive, wait
// in memory as bytes, and are inserted once a batch of rows or FLUSH_BYTES waits and at least every flush
// interval, each batch with its own insert_deduplication_token and, right after it, its usage rollup with
// the same token. Each batch is also a write-ahead segment in the spool directory (spool.ts, SegmentFile):
// its rows are appended there as they arrive, before anything else sees them, and the file goes once the
// batch is inserted, so a process that dies loses no row it took (an operating system crash can: there
// is no fsync); the next start replays the segment under the same token, a no-op for a batch ClickHouse
// already has. A batch ClickHouse refuses goes to the spool (its segment is renamed into it), and while
// the spool holds anything new batches follow it there, so replay keeps their order. A replay loop drains the spool once ClickHouse
// answers again. When memory and spool are both full, rows are dropped, counted and logged: never silently.
// The rows waiting in memory (the queue and the batch being inserted) are what `held()` gives the
// dashboard's queries (recent-traces.ts): a trace shows from the moment its row is built.
import { randomUUID } from 'node:crypto'
import type { ClickHouseClient } from '@clickhouse/client'
import type { Pricing } from '../../pricing/index.js'
import { insertTsv } from './connect.js'
import { buildRecord, encodeRecord, TRACE_COLUMNS } from './rows.js'
import { TraceMetrics } from './trace-metrics.js'
import { SpoolReadError, type SegmentFile, type Spool, type SpooledBatch } from './spool.js'
import { decodeTraces, type EncodedTraces } from '../trace-codec.js'
import type { RawTrace, TraceStats, TraceSummary } from '../trace-types.js'
import { TsvWriter } from './tsv.js'
import { EncodedRow, readSummary } from './tsv-read.js'
import type { HeldRows } from './recent-traces.js'
import { RowUsage, RowUsageBuilder, USAGE_COLUMNS, UsageBatch } from './usage-rollup.js'

export interface TraceWriterOptions {
  readonly flushMs: number
  readonly batchRows: number
  readonly queueRows: number
}

/**
 * ClickHouse error codes that say the rows themselves cannot be read (CANNOT_PARSE_*, TYPE_MISMATCH,
 * INCORRECT_DATA, …): sending the same batch again gets the same answer.
 */
const ROW_ERRORS = new Set(['6', '26', '27', '32', '33', '38', '41', '53', '70', '72', '117', '130', '321', '349', '376', '377', '467'])

function rowsRefused (err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && ROW_ERRORS.has(code)
}

export interface ClientHolder {
  client: ClickHouseClient
}

/** Rows for the live list: those of a message once built, and those of a spooled batch once replayed. */
export type RowsListener = (rows: readonly TraceSummary[]) => void
/** Each record of a batch once its row is built (null: a span-only record, or a row that failed to build). */
export type BuiltListener = (raw: RawTrace, row: TraceSummary | null) => void
export type Warn = (msg: string, fields: Record<string, unknown>) => void

/**
 * An insert carries at most this many bytes whatever the row count (rows can be 2 MiB each with the
 * default caps), so one batch never needs gigabytes of memory.
 */
const MAX_INSERT_BYTES = 64 * 1024 * 1024

/**
 * A batch is also inserted once the queue holds this many bytes. Waiting rows are Buffers, which V8
 * counts as external memory: when more than 64 MB of it lives, V8 collects fully, and the worker then ran
 * full collections every second (bench/RESULTS.md); 8 MB batches keep queue, insert and pool under that.
 */
const FLUSH_BYTES = 8 * 1024 * 1024

/**
 * Synchronous inserts: the batch is already a batch, and the deduplication token is checked against the
 * table's window, not the async-insert queue's (chDB turns async_insert on by default).
 */
function insertSettings (token: string): Record<string, string | number> {
  return { insert_deduplication_token: token, insert_deduplicate: 1, async_insert: 0 }
}

const RETRY_MIN_MS = 250
const RETRY_MAX_MS = 5_000

/**
 * Rows that arrived together, already built and written as TabSeparated: their bytes back to back, where
 * each row ends, and each row's share of the usage rollup. Rows are encoded when they arrive rather than
 * at the insert, so what waits for the next flush, seconds of rows, is memory outside the JS heap and no
 * object per row that V8 would promote and trace. Whatever else needs a row (the dashboard, the spool's
 * summaries line) reads it back from the bytes (tsv-read.ts).
 */
class EncodedRows implements HeldRows {
  /** True when another segment shares the memory (after a split): it is then never given back. */
  shared = false
  constructor (readonly tsv: Buffer, readonly ends: number[], readonly usage: RowUsage) {}

  get rows (): number { return this.ends.length }

  /** Bytes of the first `n` rows. */
  bytesOf (n: number): number { return n === 0 ? 0 : this.ends[n - 1]! }

  /** The first `n` rows as their own segment, and the rest. */
  split (n: number): [EncodedRows, EncodedRows] {
    const cut = this.bytesOf(n)
    const [usageHead, usageRest] = this.usage.split(n)
    const head = new EncodedRows(this.tsv.subarray(0, cut), this.ends.slice(0, n), usageHead)
    const rest = new EncodedRows(this.tsv.subarray(cut), this.ends.slice(n).map((e) => e - cut), usageRest)
    head.shared = rest.shared = true
    return [head, rest]
  }

  /** The live list's items of the rows, read back from their bytes. */
  summaries (): TraceSummary[] {
    const r = new EncodedRow()
    return this.ends.map((end, i) => readSummary(r.index(this.tsv, i === 0 ? 0 : this.ends[i - 1]!, end)))
  }
}

/**
 * Row buffer memory, given back once its rows are inserted or spooled and reused by the next messages:
 * fresh buffers make V8 count new external memory per message and collect fully every few of them.
 * Bounded in bytes: an idle proxy holds at most POOL_BYTES here.
 */
class RowBufferPool {
  readonly #free: Buffer[] = []
  #bytes = 0

  /** A free buffer of at least `n` bytes, or the size of a new one to allocate. */
  take (n: number): Buffer | number {
    for (let i = 0; i < this.#free.length; i++) {
      if (this.#free[i]!.length >= n) return this.#remove(i)
    }
    // None is big enough: the oldest gives way, so small buffers do not hold the budget for ever.
    if (this.#free.length > 0) this.#remove(0)
    return Math.max(n, POOL_MIN_BYTES)
  }

  give (segments: readonly EncodedRows[]): void {
    for (const seg of segments) {
      if (seg.shared) continue
      const whole = Buffer.from(seg.tsv.buffer)
      if (this.#bytes + whole.length > POOL_BYTES) continue
      this.#free.push(whole)
      this.#bytes += whole.length
    }
  }

  #remove (i: number): Buffer {
    const b = this.#free.splice(i, 1)[0]!
    this.#bytes -= b.length
    return b
  }
}
const POOL_MIN_BYTES = 64 * 1024
const POOL_BYTES = 32 * 1024 * 1024

/**
 * One insert's rows, in order, under its deduplication token, and the write-ahead file that holds them
 * until ClickHouse or the spool does (null when it could not be written: the rows are then in memory only).
 */
class InsertBatch {
  readonly segments: EncodedRows[] = []
  rows = 0
  bytes = 0
  /** An insert of it was sent and its answer lost: ClickHouse may hold its rows already. */
  sent = false
  /**
   * `file`: its segment, named after `token`, the token a restart replays it (or its rollup) under.
   * `since`: when its first rows were handed to the store (epoch ms), the age of its oldest trace.
   */
  constructor (readonly token: string, public file: SegmentFile | null, readonly since: number) {}
}

export class TraceWriter {
  readonly stats: TraceStats
  readonly #metrics: TraceMetrics
  readonly #ch: ClientHolder
  readonly #spool: Spool
  readonly #pricing: Pricing
  readonly #opts: TraceWriterOptions
  readonly #onRows: RowsListener
  readonly #onBuilt: BuiltListener | null
  readonly #warn: Warn
  /** Batches waiting for an insert, oldest first, then the one rows are added to; and how many rows all hold. */
  #queue: InsertBatch[] = []
  #open: InsertBatch | null = null
  #queued = 0
  /** The write-ahead segments cannot be written: logged once, until one can again. */
  #walError: string | null = null
  /** The batch an insert is sending now: its rows are not in ClickHouse yet, nor in the queue. */
  #sending: InsertBatch | null = null
  /** Usage rollups of inserted rows that neither ClickHouse nor the spool took (usageAside). */
  readonly #usageWaiting: Array<{ token: string; tsv: Buffer; rows: number }> = []
  readonly #buffers = new RowBufferPool()
  #chain: Promise<void> = Promise.resolve()
  #timer: NodeJS.Timeout
  #retry: NodeJS.Timeout | null = null
  #retryMs = RETRY_MIN_MS
  #closed = false
  /** Rows dropped since the current loss episode began (one log line at its start, one at its end). */
  #episodeDropped = 0

  constructor (ch: ClientHolder, spool: Spool, pricing: Pricing, opts: TraceWriterOptions, onRows: RowsListener, warn: Warn, onBuilt: BuiltListener | null = null) {
    this.#onBuilt = onBuilt
    this.#ch = ch
    this.#spool = spool
    this.#pricing = pricing
    this.#metrics = new TraceMetrics(pricing)
    this.stats = {
      written: 0, spooled: 0, replayed: 0, dropped: 0, spoolRefused: 0, queued: 0, spoolBytes: 0, lag: { clickhouseMs: 0, dashboardMs: 0 },
      clickhouseUp: true, insertError: null, spoolError: null,
      usage: this.#metrics.usage, inserts: this.#metrics.inserts,
    }
    this.#opts = opts
    this.#onRows = onRows
    this.#warn = warn
    this.stats.spoolBytes = spool.bytes
    this.#timer = setInterval(() => { void this.flush().catch(() => { /* logged by flush */ }) }, opts.flushMs)
    // A spool left by an earlier run is replayed first.
    if (spool.batches > 0) this.#scheduleReplay(0)
  }

  /**
   * `skip`: trace ids already held elsewhere (a hand-off file's records already in a segment), left out.
   * `sentAt`: when the batch was handed to the store (epoch ms), from which its rows' lag counts.
   */
  add (batch: EncodedTraces, skip: ReadonlySet<string> | null = null, sentAt = Date.now()): void {
    let raws: RawTrace[]
    try {
      raws = decodeTraces(batch)
    } catch (err) {
      // A batch that does not decode is a bug in the codec; its traces are counted as dropped.
      this.#drop(batch.count, `a trace batch could not be decoded: ${(err as Error).message}`)
      return
    }
    // Escaping adds a little to the bytes the front thread sent; the writer grows if it must.
    const w = new TsvWriter(this.#buffers.take(batch.length + 256 * raws.length))
    const ends: number[] = []
    const summaries: TraceSummary[] = []
    const usage = new RowUsageBuilder(raws.length)
    for (const raw of raws) {
      if (skip?.has(raw.traceId) === true) continue
      if (!raw.stored) {
        this.#onBuilt?.(raw, null)
        continue
      }
      let row: TraceSummary | null = null
      try {
        const record = buildRecord(raw, this.#pricing)
        encodeRecord(w, record)
        ends.push(w.size)
        summaries.push(record.summary)
        usage.add(record.summary)
        row = record.summary
        this.#metrics.row(raw.provider, raw.model, row.input_tokens, row.output_tokens, row.cost_usd)
      } catch (err) {
        w.rewind(ends.length === 0 ? 0 : ends[ends.length - 1]!)
        this.#drop(1, `trace row ${raw.traceId} could not be built: ${(err as Error).message}`)
      }
      this.#onBuilt?.(raw, row)
    }
    let full = false
    if (ends.length > 0) {
      // On disk first, then shown: the rows are held (held()) until ClickHouse has them.
      full = this.#push(new EncodedRows(w.view(), ends, usage.build()), sentAt)
      this.#onRows(summaries)
    }
    // ClickHouse slower than the traffic: past the memory bound, the oldest batches go to the spool, or
    // are dropped when it refuses them (memory is what is full).
    while (this.#queued > this.#opts.queueRows) this.#toSpool(this.#takeBatch())
    if (full) {
      const next = this.#chain.then(() => this.#flushOnce(false, false))
      this.#chain = next.catch((err: unknown) => { this.#fault('flush', err) })
    }
  }

  /**
   * Adds rows to the open batch, and to its write-ahead segment, closing the batch once it holds
   * batchRows rows or FLUSH_BYTES (the rows of a message are split across batches to keep to that).
   * True when a batch was closed: it is inserted now rather than at the next interval.
   */
  #push (rows: EncodedRows, sentAt: number): boolean {
    let closed = false
    let rest: EncodedRows | null = rows
    while (rest !== null) {
      const batch: InsertBatch = this.#open ??= this.#newBatch(sentAt)
      // How many rows fit, by count and by bytes (the first row of a batch always does).
      let n = Math.min(rest.rows, this.#opts.batchRows - batch.rows)
      while (n > 0 && batch.bytes + rest.bytesOf(n) > MAX_INSERT_BYTES && !(batch.rows === 0 && n === 1)) n--
      if (n > 0) {
        let part = rest
        if (n < rest.rows) [part, rest] = rest.split(n)
        else rest = null
        this.#write(batch, part)
        batch.segments.push(part)
        batch.rows += part.rows
        batch.bytes += part.tsv.length
        this.#queued += part.rows
      }
      if (rest !== null || batch.rows >= this.#opts.batchRows || batch.bytes >= FLUSH_BYTES) {
        this.#closeOpen()
        closed = true
      }
    }
    this.stats.queued = this.#queued
    return closed
  }

  /**
   * A new batch and its write-ahead segment, both under one token: a segment a restart finds is replayed
   * under its name's token, so its rows and rollup are the no-op of what this batch inserted.
   */
  #newBatch (since: number): InsertBatch {
    const token = randomUUID()
    return new InsertBatch(token, this.#segment(token), since)
  }

  /** A write-ahead segment for the batch with `token`; null (logged once) when none can be written. */
  #segment (token: string): SegmentFile | null {
    try {
      const seg = this.#spool.openSegment(token)
      if (this.#walError !== null) this.#warn('trace rows are written ahead to disk again', { was: this.#walError })
      this.#walError = null
      return seg
    } catch (err) {
      this.#walFailed(err)
      return null
    }
  }

  /** The rows appended to the batch's segment; when that fails, the batch is held in memory only. */
  #write (batch: InsertBatch, rows: EncodedRows): void {
    if (batch.file === null) return
    try {
      batch.file.append(rows.tsv)
    } catch (err) {
      batch.file.discard()
      batch.file = null
      this.#walFailed(err)
    }
  }

  #walFailed (err: unknown): void {
    if (this.#walError === null) {
      this.#walError = (err as Error).message
      this.#warn('trace rows cannot be written ahead to disk; they wait for their insert in memory only', { err: this.#walError })
    }
  }

  /** The open batch joins the queue: no more rows are added to it. */
  #closeOpen (): void {
    const batch = this.#open
    if (batch === null) return
    this.#open = null
    try {
      batch.file?.close()
    } catch (err) {
      batch.file?.discard()
      batch.file = null
      this.#walFailed(err)
    }
    this.#queue.push(batch)
  }

  /**
   * The rows held in memory, not yet in ClickHouse: the batch being inserted, then the queue, oldest first.
   * Read synchronously: the buffers are given back for reuse only once their rows left both.
   */
  * held (): Iterable<HeldRows> {
    if (this.#sending !== null) yield * this.#sending.segments
    for (const batch of this.#queue) yield * batch.segments
    if (this.#open !== null) yield * this.#open.segments
  }

  /**
   * How far the traces are behind (TraceStats.lag): the age of the oldest one not yet in ClickHouse, and
   * of the oldest one in the spool (rows in memory are shown from there), each at least `inboundMs`, how
   * late the store took its last batch (the batches it has not taken are at least that old). Rows
   * dropped are not waited for.
   */
  lag (now: number, inboundMs: number): TraceStats['lag'] {
    const spooled = this.#spool.oldestTraceSince ?? Infinity
    let held = Infinity
    if (this.#sending !== null) held = this.#sending.since
    if (this.#queue.length > 0) held = Math.min(held, this.#queue[0]!.since)
    if (this.#open !== null && this.#open.rows > 0) held = Math.min(held, this.#open.since)
    const age = (since: number): number => Math.max(inboundMs, since === Infinity ? 0 : now - since)
    return { clickhouseMs: age(Math.min(spooled, held)), dashboardMs: age(spooled) }
  }

  /** The oldest batch off the queue (the open one is closed first if it is the only one). */
  #takeBatch (): InsertBatch {
    if (this.#queue.length === 0) this.#closeOpen()
    const batch = this.#queue.shift()!
    this.#queued -= batch.rows
    this.stats.queued = this.#queued
    return batch
  }

  /** Rows of a batch that are stored (in ClickHouse or the spool) leave memory and its segment. */
  #stored (batch: InsertBatch): void {
    this.#buffers.give(batch.segments)
    try { batch.file?.discard() } catch (err) { this.#fault('removing a write-ahead segment', err) }
    batch.file = null
  }

  /**
   * Sends what is queued: to ClickHouse, or to the spool when it is away. Flushes run one at a time.
   * Every batch taken off the queue ends written, spooled, back in the queue, or dropped and counted; a
   * fault in between is logged here, never swallowed.
   */
  flush (): Promise<void> {
    const next = this.#chain.then(() => this.#flushOnce(false))
    this.#chain = next.catch((err: unknown) => { this.#fault('flush', err) })
    return next
  }

  #fault (what: string, err: unknown): void {
    this.#warn(`trace writer ${what} failed`, { err: (err as Error).message })
  }

  /**
   * `probe`: try ClickHouse even though the last insert failed (the replay loop's attempt). `open`: the
   * batch rows are still added to goes too (a flush), not only the full ones (a batch that filled up).
   */
  async #flushOnce (probe: boolean, open = true): Promise<void> {
    // What waits now goes; rows that arrive meanwhile wait for the next flush.
    if (open) this.#closeOpen()
    while (this.#queue.length > 0) {
      const batch = this.#takeBatch()
      const token = batch.token
      if ((!this.stats.clickhouseUp && !probe) || this.#spool.batches > 0) {
        if (!this.#toSpool(batch)) return
        continue
      }
      probe = false
      const usage = new UsageBatch()
      for (const seg of batch.segments) usage.addRows(seg.usage)
      this.#sending = batch
      try {
        // A batch whose earlier insert lost its answer (back from a spool that refused it) is asked for first.
        if (!batch.sent || !await this.#allStored(batch.segments.flatMap((seg) => seg.summaries()))) await this.#insertRows(token, batch.segments.map((seg) => seg.tsv))
      } catch (err) {
        this.#down(err)
        // Spooled rows leave memory: they show again once replayed into ClickHouse.
        this.#sending = null
        batch.sent = true
        if (!this.#toSpool(batch)) return
        continue
      }
      this.#sending = null
      this.stats.written += batch.rows
      // From now on a restart replays only the batch's rollup from its segment.
      try { batch.file?.markInserted() } catch (err) { this.#fault('marking a write-ahead segment inserted', err) }
      const usageTsv = usage.tsv()
      try {
        await this.#insertUsage(token, usageTsv)
      } catch (err) {
        // The rows are in; their rollup waits in the spool (or memory) and is replayed under the same token.
        // Until it is put aside, the segment still holds the batch: a restart would count it from there.
        this.#down(err)
        this.#usageAside(token, usageTsv, batch.rows)
        this.#stored(batch)
        continue
      }
      this.#stored(batch)
      this.#up()
    }
  }

  /**
   * A batch's rows, then (#insertUsage) its usage rollup, both under the batch's token: a batch sent again
   * (a retry, a replay) is a no-op in both tables, whichever of the two went through before, and a batch
   * whose rows ClickHouse refuses is never counted.
   */
  #insertRows (token: string, tsv: readonly Uint8Array[], columns = TRACE_COLUMNS): Promise<void> {
    return this.#metrics.timed(() => insertTsv(this.#ch.client, 'traces', columns, tsv, insertSettings(token)))
  }

  #insertUsage (token: string, tsv: Uint8Array, columns = USAGE_COLUMNS): Promise<void> {
    return insertTsv(this.#ch.client, 'usage_batches', columns, [tsv], insertSettings(token))
  }

  /**
   * The rollup of rows already inserted, to be inserted later: in the spool, in its place in the order,
   * or when the spool refuses it in memory (a few rows per batch) until the next replay. Lost only if the
   * process ends before ClickHouse takes it again: it is then logged with the rows it counted.
   */
  #usageAside (token: string, tsv: Buffer, rows: number): void {
    try {
      if (this.#spool.appendUsage(token, tsv)) {
        this.stats.spoolBytes = this.#spool.bytes
        this.#scheduleReplay(this.#retryMs)
        return
      }
    } catch { /* kept in memory below */ }
    this.#usageWaiting.push({ token, tsv, rows })
    this.#scheduleReplay(this.#retryMs)
  }

  /** The rollups kept in memory, inserted; false when ClickHouse still refuses (they stay). */
  async #usageReplayed (): Promise<boolean> {
    while (this.#usageWaiting.length > 0) {
      const u = this.#usageWaiting[0]!
      try {
        await this.#insertUsage(u.token, u.tsv)
      } catch (err) {
        this.#down(err)
        return false
      }
      this.#usageWaiting.shift()
    }
    return true
  }

  /**
   * The batch goes to the spool. When the spool refuses it (full, or its files cannot be written) the
   * rows go back to the front of the queue while memory allows and are dropped, counted and logged past
   * that (or at close). False when the spool refused: the caller stops flushing then.
   */
  #toSpool (batch: InsertBatch): boolean {
    const rows = batch.rows
    let refusal: string
    try {
      // A batch with its segment on disk is renamed into the spool; one without is written there.
      const taken = batch.file !== null
        ? this.#spool.adopt(batch.file, rows, batch.since, batch.sent)
        : this.#spool.append(batch.token, batch.segments.flatMap((seg) => seg.summaries()), batch.segments.map((seg) => seg.tsv), batch.since, batch.sent)
      if (taken) {
        batch.file = null
        this.#stored(batch)
        this.stats.spooled += rows
        this.stats.spoolBytes = this.#spool.bytes
        if (this.stats.spoolError !== null) this.#warn('the trace spool takes batches again', { was: this.stats.spoolError })
        this.stats.spoolError = null
        this.#episodeEnds()
        this.#scheduleReplay(this.#retryMs)
        return true
      }
      refusal = `the spool is full (${this.#spool.bytes} of TRACEGATE_SPOOL_MAX_BYTES=${this.#spool.maxBytes} bytes)`
    } catch (err) {
      refusal = `the spool cannot be written: ${(err as Error).message}`
    }
    if (this.stats.spoolError === null) this.#warn('the trace spool refused a batch', { rows, cause: refusal })
    this.stats.spoolError = refusal
    this.stats.spoolRefused++
    // The batch goes back to the front of the queue, whole (it is one segment under one token), while
    // memory allows; past that it is dropped.
    if (!this.#closed && this.#queued + rows <= this.#opts.queueRows) {
      this.#queue.unshift(batch)
      this.#queued += rows
      this.stats.queued = this.#queued
    } else {
      try { batch.file?.discard() } catch { /* its rows are counted as dropped either way */ }
      batch.file = null
      const why = this.#closed ? 'closing' : this.stats.insertError === null
        ? 'ClickHouse inserts slower than traces arrive'
        : `ClickHouse does not take inserts (${this.stats.insertError})`
      this.#drop(rows, `${why}, ${refusal}, and the memory queue is full`)
    }
    this.#scheduleReplay(this.#retryMs)
    return false
  }

  /** Rows lost before they reached the writer (a hand-off file cut short), counted and logged as drops. */
  dropped (rows: number, cause: string): void {
    this.#drop(rows, cause)
  }

  /** Counts dropped rows; the first drop of an episode is logged with its cause. */
  #drop (rows: number, cause: string): void {
    this.stats.dropped += rows
    if (this.#episodeDropped === 0) this.#warn('traces dropped', { dropped: rows, cause, total_dropped: this.stats.dropped })
    this.#episodeDropped += rows
  }

  /** A batch was stored again: a loss episode, if one was going on, ends with its count. */
  #episodeEnds (): void {
    if (this.#episodeDropped === 0) return
    this.#warn('traces are stored again after a loss', { dropped: this.#episodeDropped, total_dropped: this.stats.dropped })
    this.#episodeDropped = 0
  }

  /** Every one of these rows is in ClickHouse already (a killed process inserted them, not their rollup). */
  async #allStored (summaries: readonly TraceSummary[]): Promise<boolean> {
    const ids = summaries.map((s) => s.trace_id)
    const rs = await this.#ch.client.query({
      query: 'SELECT count() AS n FROM traces WHERE trace_id IN {ids:Array(UUID)}',
      query_params: { ids },
      format: 'JSONEachRow',
    })
    const [row] = await rs.json<{ n: string | number }>()
    return Number(row?.n) >= ids.length
  }

  /** ClickHouse answers a query: what failed was the batch, not the connection. */
  async #answers (): Promise<boolean> {
    try {
      await this.#ch.client.command({ query: 'SELECT 1' })
      return true
    } catch {
      return false
    }
  }

  #down (err: unknown): void {
    const cause = (err as Error).message
    if (this.stats.clickhouseUp) this.#warn('ClickHouse refused a trace batch; spooling to disk', { err: cause })
    this.stats.clickhouseUp = false
    this.stats.insertError = cause
    this.#retryMs = Math.min(RETRY_MAX_MS, this.#retryMs * 2)
  }

  #up (): void {
    if (!this.stats.clickhouseUp) this.#warn('ClickHouse takes trace inserts again', { was: this.stats.insertError })
    this.stats.clickhouseUp = true
    this.stats.insertError = null
    // With inserts going through, the spool is not needed; whether it would take a batch is learnt when it is.
    this.stats.spoolError = null
    this.#retryMs = RETRY_MIN_MS
    this.#episodeEnds()
  }

  #scheduleReplay (ms: number): void {
    if (this.#retry !== null || this.#closed) return
    this.#retry = setTimeout(() => {
      this.#retry = null
      const run = this.#chain.then(() => this.#replay())
      this.#chain = run.catch((err: unknown) => {
        // A fault the loop did not foresee: it is logged and the loop goes on.
        this.#fault('replay', err)
        this.#scheduleReplay(this.#retryMs)
      })
    }, ms)
  }

  /**
   * Replays the spool in order, then sends the rows that waited in memory (also when the spool itself
   * refused them). Keeps trying, backing off up to RETRY_MAX_MS, until both are empty.
   */
  async #replay (): Promise<void> {
    if (!await this.#usageReplayed()) {
      this.#scheduleReplay(this.#retryMs)
      return
    }
    for (;;) {
      let batch: SpooledBatch | null
      try {
        batch = this.#spool.oldest()
      } catch (err) {
        if (err instanceof SpoolReadError) {
          this.stats.spoolBytes = this.#spool.bytes
          this.#drop(err.rows, err.message)
          continue
        }
        this.#fault('reading the spool', err)
        this.#scheduleReplay(this.#retryMs)
        return
      }
      if (batch === null) break
      if (batch.cut > 0) this.#drop(1, `the last row of ${batch.file} was not written whole (${batch.cut} bytes left out)`)
      if (batch.summaries.length === 0 && batch.kind === 'traces') {
        this.#spool.remove(batch.file)
        this.stats.spoolBytes = this.#spool.bytes
        continue
      }
      if (batch.kind === 'usage') {
        try {
          await this.#insertUsage(batch.token, batch.tsv, batch.columns)
        } catch (err) {
          this.#down(err)
          this.#scheduleReplay(this.#retryMs)
          return
        }
        this.#spool.remove(batch.file)
        this.stats.spoolBytes = this.#spool.bytes
        this.#up()
        continue
      }
      const usage = UsageBatch.of(batch.summaries)
      if (usage === null) {
        // Its summaries line does not describe rows (the file was damaged): the rollup cannot be counted,
        // so the batch is kept aside as .bad like one whose rows ClickHouse refuses.
        this.#spool.setAside(batch.file)
        this.stats.spoolBytes = this.#spool.bytes
        this.#drop(batch.summaries.length, `the summaries line of ${batch.file} does not describe its rows (kept as ${batch.file}.bad)`)
        continue
      }
      try {
        if (batch.checkStored !== true || !await this.#allStored(batch.summaries)) await this.#insertRows(batch.token, [batch.tsv], batch.columns)
        // Retried with the file if it fails: the rows' insert is then a no-op (the token).
        await this.#insertUsage(batch.token, usage.tsv())
      } catch (err) {
        // ClickHouse is up and refuses these rows as they are: retried, the batch would hold every later
        // one in the spool for good. It is kept aside as .bad and its rows counted as dropped.
        if (rowsRefused(err) && await this.#answers()) {
          this.#spool.setAside(batch.file)
          this.stats.spoolBytes = this.#spool.bytes
          this.#drop(batch.summaries.length, `ClickHouse refused the rows of ${batch.file} (kept as ${batch.file}.bad): ${(err as Error).message}`)
          continue
        }
        // The replay's own insert may have gone through before its answer was lost.
        this.#spool.mayBeStored(batch.file)
        this.#down(err)
        this.#scheduleReplay(this.#retryMs)
        return
      }
      this.#spool.remove(batch.file)
      this.stats.replayed += batch.summaries.length
      this.stats.spoolBytes = this.#spool.bytes
      this.#up()
      // Their rows left memory when they were spooled: a live list that lost them gets them again.
      this.#onRows(batch.summaries)
    }
    if (this.#queued > 0) await this.#flushOnce(true)
    if (this.#queued > 0 || this.#spool.batches > 0 || this.#usageWaiting.length > 0) this.#scheduleReplay(this.#retryMs)
  }

  /** Flushes everything queued (to ClickHouse or the spool) and stops the timers. */
  async close (): Promise<void> {
    clearInterval(this.#timer)
    await this.flush()
    this.#closed = true
    if (this.#retry !== null) clearTimeout(this.#retry)
    this.#retry = null
    await this.#chain
    // Rows the spool refused wait in memory: one more try at ClickHouse, then they have nowhere to go.
    if (this.#queued > 0) await this.#flushOnce(true).catch((err: unknown) => { this.#fault('flush at close', err) })
    if (this.#queued > 0) {
      const rows = this.#queued
      for (const batch of this.#queue) {
        try { batch.file?.discard() } catch { /* counted as dropped below */ }
      }
      this.#queue = []
      this.#queued = 0
      this.stats.queued = 0
      this.#drop(rows, `closing while ${this.stats.spoolError ?? 'the spool refuses batches'}`)
    }
    if (this.#usageWaiting.length > 0 && !await this.#usageReplayed()) {
      const rows = this.#usageWaiting.reduce((n, u) => n + u.rows, 0)
      this.#warn('usage rollup not counted: its rows are stored, but neither ClickHouse nor the spool took their rollup', { rows, cause: this.stats.insertError })
    }
  }
}
