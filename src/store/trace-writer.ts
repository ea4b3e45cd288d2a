// Trace batching in the store worker: rows collect in memory and are inserted at least every flush
// interval or every batch of rows, each batch with its own insert_deduplication_token. A batch
// ClickHouse refuses goes to the spool, and while the spool holds anything new batches follow it
// there, so replay keeps their order. A replay loop drains the spool once ClickHouse answers again.
// When memory and spool are both full, rows are dropped, counted and logged: never silently.
import { randomUUID } from 'node:crypto'
import type { ClickHouseClient } from '@clickhouse/client'
import type { Pricing } from '../pricing/index.js'
import { insertTsv } from './connect.js'
import { buildRecord, encodeRecord, TRACE_COLUMNS, type TraceRecord } from './rows.js'
import type { Spool } from './spool.js'
import { decodeTraces, type EncodedTraces } from './trace-codec.js'
import type { RawTrace, TraceStats, TraceSummary } from './trace-types.js'
import { TsvWriter } from './tsv.js'

export interface TraceWriterOptions {
  readonly flushMs: number
  readonly batchRows: number
  readonly queueRows: number
}

export interface ClientHolder {
  client: ClickHouseClient
}

export type WrittenListener = (rows: readonly TraceSummary[]) => void
export type Warn = (msg: string, fields: Record<string, unknown>) => void

const summaryOf = (r: TraceRecord): TraceSummary => r.summary

/**
 * An insert carries at most this many bytes of prompts and responses whatever the row count (rows can be
 * 2 MiB each with the default caps), so one batch never needs gigabytes of memory to encode.
 */
const MAX_BATCH_BYTES = 64 * 1024 * 1024
const recordBytes = (r: TraceRecord): number => r.prompt.length + r.response.length + 512

const RETRY_MIN_MS = 250
const RETRY_MAX_MS = 5_000

export class TraceWriter {
  readonly stats: TraceStats = { written: 0, spooled: 0, replayed: 0, dropped: 0, queued: 0, spoolBytes: 0, clickhouseUp: true }
  readonly #ch: ClientHolder
  readonly #spool: Spool
  readonly #pricing: Pricing
  readonly #opts: TraceWriterOptions
  readonly #onWritten: WrittenListener
  readonly #warn: Warn
  #rows: TraceRecord[] = []
  /** The insert batch's buffer, reused: ClickHouse has the bytes once the insert settles. */
  readonly #tsv = new TsvWriter()
  #chain: Promise<void> = Promise.resolve()
  #timer: NodeJS.Timeout
  #retry: NodeJS.Timeout | null = null
  #retryMs = RETRY_MIN_MS
  #closed = false

  constructor (ch: ClientHolder, spool: Spool, pricing: Pricing, opts: TraceWriterOptions, onWritten: WrittenListener, warn: Warn) {
    this.#ch = ch
    this.#spool = spool
    this.#pricing = pricing
    this.#opts = opts
    this.#onWritten = onWritten
    this.#warn = warn
    this.stats.spoolBytes = spool.bytes
    this.#timer = setInterval(() => { void this.flush() }, opts.flushMs)
    // A spool left by an earlier run is replayed first.
    if (spool.batches > 0) this.#scheduleReplay(0)
  }

  add (batch: EncodedTraces): void {
    let raws: RawTrace[]
    try {
      raws = decodeTraces(batch)
    } catch (err) {
      // A batch that does not decode is a bug in the codec; its traces are counted as dropped.
      this.stats.dropped += batch.count
      this.#warn('a trace batch could not be decoded', { traces: batch.count, err: (err as Error).message })
      return
    }
    for (const raw of raws) {
      try {
        this.#rows.push(buildRecord(raw, this.#pricing))
      } catch (err) {
        this.stats.dropped++
        this.#warn('trace row could not be built', { trace_id: raw.traceId, err: (err as Error).message })
      }
    }
    // ClickHouse slower than the traffic: past the memory bound, the oldest rows go to the spool.
    while (this.#rows.length > this.#opts.queueRows) this.#toSpool(randomUUID(), this.#takeBatch())
    this.stats.queued = this.#rows.length
    if (this.#rows.length >= this.#opts.batchRows) void this.flush()
  }

  /** The oldest queued rows, up to the batch's row count and byte size (at least one row). */
  #takeBatch (): TraceRecord[] {
    let n = 0
    let bytes = 0
    const max = Math.min(this.#opts.batchRows, this.#rows.length)
    while (n < max) {
      bytes += recordBytes(this.#rows[n]!)
      if (n > 0 && bytes > MAX_BATCH_BYTES) break
      n++
    }
    return this.#rows.splice(0, n)
  }

  /** Sends what is queued: to ClickHouse, or to the spool when it is away. Flushes run one at a time. */
  flush (): Promise<void> {
    const next = this.#chain.then(() => this.#flushOnce())
    this.#chain = next.catch(() => {})
    return next
  }

  async #flushOnce (): Promise<void> {
    while (this.#rows.length > 0) {
      const rows = this.#takeBatch()
      this.stats.queued = this.#rows.length
      const token = randomUUID()
      if (!this.stats.clickhouseUp || this.#spool.batches > 0) {
        if (!this.#toSpool(token, rows)) return
        continue
      }
      try {
        await this.#insert(token, this.#encode(rows, this.#tsv))
        this.stats.written += rows.length
        this.#onWritten(rows.map(summaryOf))
      } catch (err) {
        this.#down(err)
        if (!this.#toSpool(token, rows)) return
      }
    }
  }

  /** The batch as TabSeparated bytes, in `w`'s memory. */
  #encode (rows: readonly TraceRecord[], w: TsvWriter): Buffer {
    w.reset()
    for (const r of rows) encodeRecord(w, r)
    return w.view()
  }

  #insert (token: string, tsv: Uint8Array): Promise<void> {
    return insertTsv(this.#ch.client, 'traces', TRACE_COLUMNS, tsv,
      // A synchronous insert: the batch is already a batch, and the deduplication token is checked against
      // the table's window, not the async-insert queue's (chDB turns async_insert on by default).
      { insert_deduplication_token: token, insert_deduplicate: 1, async_insert: 0 })
  }

  /** False when the spool was full and the rows went back to memory (the caller stops flushing then). */
  #toSpool (token: string, rows: TraceRecord[]): boolean {
    // Its own buffer: an insert may still be reading the reused one (add() spools while a flush waits).
    if (this.#spool.append(token, rows.map(summaryOf), this.#encode(rows, new TsvWriter(rows.length * 4096)))) {
      this.stats.spooled += rows.length
      this.stats.spoolBytes = this.#spool.bytes
      this.#scheduleReplay(this.#retryMs)
      return true
    }
    // The spool is full. Keep the rows in memory while there is room, else drop them, loudly.
    const room = this.#opts.queueRows - this.#rows.length
    if (room > 0 && !this.#closed) {
      this.#rows.unshift(...rows.slice(0, room))
      this.stats.queued = this.#rows.length
    }
    const kept = this.#closed ? 0 : Math.max(0, Math.min(room, rows.length))
    const dropped = rows.length - kept
    if (dropped > 0) {
      this.stats.dropped += dropped
      this.#warn('traces dropped: ClickHouse is unreachable and the spool and memory queue are full', { dropped, total_dropped: this.stats.dropped })
    }
    this.#scheduleReplay(this.#retryMs)
    return kept === 0
  }

  #down (err: unknown): void {
    if (this.stats.clickhouseUp) this.#warn('ClickHouse refused a trace batch; spooling to disk', { err: (err as Error).message })
    this.stats.clickhouseUp = false
  }

  #scheduleReplay (ms: number): void {
    if (this.#retry !== null || this.#closed) return
    this.#retry = setTimeout(() => {
      this.#retry = null
      const run = this.#chain.then(() => this.#replay())
      this.#chain = run.catch(() => {})
    }, ms)
  }

  async #replay (): Promise<void> {
    for (let batch = this.#spool.oldest(); batch !== null; batch = this.#spool.oldest()) {
      try {
        await this.#insert(batch.token, batch.tsv)
      } catch (err) {
        this.#down(err)
        this.#retryMs = Math.min(RETRY_MAX_MS, this.#retryMs * 2)
        this.#scheduleReplay(this.#retryMs)
        return
      }
      this.#spool.remove(batch.file)
      this.stats.replayed += batch.summaries.length
      this.stats.spoolBytes = this.#spool.bytes
      this.#onWritten(batch.summaries)
    }
    if (!this.stats.clickhouseUp) this.#warn('ClickHouse is back; the spool is replayed', { replayed: this.stats.replayed })
    this.stats.clickhouseUp = true
    this.#retryMs = RETRY_MIN_MS
    // Rows queued meanwhile go out now rather than at the next tick.
    if (this.#rows.length > 0) await this.#flushOnce()
  }

  /** Flushes everything queued (to ClickHouse or the spool) and stops the timers. */
  async close (): Promise<void> {
    clearInterval(this.#timer)
    await this.flush()
    this.#closed = true
    if (this.#retry !== null) clearTimeout(this.#retry)
    this.#retry = null
    await this.#chain
  }
}
