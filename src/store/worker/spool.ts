// The disk spool: trace batches ClickHouse did not take, one file per batch named so that a directory
// listing is their order, each carrying the batch's deduplication token in its name so a replay that
// ClickHouse already took once is a no-op. Written to a temporary name and renamed, so a crash never
// leaves half a batch behind. Bounded in bytes. A file is the batch's summaries (for the live list, as
// one JSON line), its columns (one JSON line), then the batch itself, as the TabSeparated bytes that are
// inserted naming those columns.
// Files written before the caller's labels (migration 005) have no columns line and no `.v2` in their
// name: their rows hold TRACE_COLUMNS_BEFORE_LABELS and replay as that. The tag in the name keeps an
// older tracegate, whose pattern does not match it, from inserting a columns line as a row.
// A `.usage.tsv` file holds only a batch's usage rollup (usage-rollup.ts): its rows were inserted, the
// rollup right after them was not. Its summaries line is empty (it holds no trace row) and its columns are
// USAGE_COLUMNS (or, written before migration 013, USAGE_COLUMNS_BEFORE_UNPRICED); it replays into
// usage_batches under its batch's token, in its place in the order.
// A `.rows.tsv` file is a write-ahead segment (SegmentFile) the spool took over: its columns line, then
// the rows exactly as they were appended when they arrived, with no summaries line (they are read back from
// the rows). Segments still being written are `wal-<seq>-<token>.tsv`; they count against the byte bound
// only once taken over (the memory queue's row bound limits them before that). One left by a process that
// ended without inserting it is taken over at start, so its rows are replayed under their batch's token.
// Every I/O failure is thrown to the caller (the trace writer decides what becomes of the rows); a folder
// removed under a running process is made again.
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs'
import { join } from 'node:path'

import type { TraceSummary } from '../trace-types.js'
import { TRACE_COLUMNS, TRACE_COLUMNS_BEFORE_LABELS } from './rows.js'
import { USAGE_COLUMNS, USAGE_COLUMNS_BEFORE_UNPRICED, UsageBatch } from './usage-rollup.js'
import { EncodedRow, readSummary } from './tsv-read.js'

export interface SpooledBatch {
  readonly file: string
  /** `usage`: only the usage rollup of a batch whose rows are already in ClickHouse. */
  readonly kind: 'traces' | 'usage'
  readonly token: string
  /** The columns of the batch's rows, in their order. */
  readonly columns: readonly string[]
  readonly summaries: TraceSummary[]
  readonly tsv: Buffer
  /** Bytes after the last whole row of a segment (a write the process did not finish): not inserted. */
  readonly cut: number
  /**
   * Its rows may be in ClickHouse already: an insert of them was sent and its answer lost (ClickHouse
   * killed or cut off mid-insert), or the file is an earlier run's (a segment a killed process left, a
   * batch a replay may have inserted before a crash). Whether ClickHouse has them is asked before they
   * are inserted, so a replay does not rest on the deduplication token alone (ClickHouse keeps the last
   * 10,000, and a kill in the middle of an insert may leave its rows without their token).
   */
  readonly checkStored?: boolean
}

/** A spool file that could not be read back: gone, or not a batch. Its rows are lost. */
export class SpoolReadError extends Error {
  constructor (readonly file: string, readonly rows: number, cause: unknown) {
    super(`spool file ${file} cannot be read: ${(cause as Error).message}`, { cause })
    this.name = 'SpoolReadError'
  }
}

const NAME = /^(\d{16})-([0-9a-f-]{36})(\.v2|\.usage|\.rows)?\.tsv$/
const SEGMENT = /^wal-(\d{16})-([0-9a-f-]{36})(\.in)?\.tsv$/

/** The spool holds prompts and answers: its user's alone, whatever the process's umask. */
export const PRIVATE_FILE = 0o600
export const PRIVATE_DIR = { recursive: true, mode: 0o700 } as const

function isMissing (err: unknown): boolean {
  return (err as { code?: unknown }).code === 'ENOENT'
}

export class Spool {
  readonly #dir: string
  readonly #maxBytes: number
  #bytes = 0
  #seq = 0
  /**
   * Batch files, oldest first, with their sizes, (for files written by this run) row counts, and when
   * their oldest trace reached the store (epoch ms; a file found at start: its modification time; a
   * usage file, which holds no trace: Infinity), and whether ClickHouse may hold its rows already (`check`:
   * an insert of them was sent and its answer lost, or the file is an earlier run's).
   */
  #files: Array<{ name: string; size: number; rows: number; since: number; check: boolean }> = []
  /** Segments a process that ended left here, as this start named them in the spool. */
  readonly #takenAtStart: string[] = []
  /** The trace id of a segment's half-written last row, and the segment; those a hand-off file held too. */
  readonly #cutIds = new Map<string, string>()
  readonly #cutRecovered = new Set<string>()

  constructor (dir: string, maxBytes: number) {
    this.#dir = dir
    this.#maxBytes = maxBytes
    mkdirSync(dir, PRIVATE_DIR)
    const segments: string[] = []
    for (const f of readdirSync(dir)) {
      if (f.endsWith('.tmp')) { rmSync(join(dir, f), { force: true }); continue }
      if (SEGMENT.test(f)) { segments.push(f); continue }
      const m = NAME.exec(f)
      if (m === null) continue
      const st = statSync(join(dir, f))
      this.#files.push({ name: f, size: st.size, rows: 0, since: m[3] === '.usage' ? Infinity : st.mtimeMs, check: true })
      this.#bytes += st.size
      this.#seq = Math.max(this.#seq, Number(m[1]))
    }
    this.#files.sort((a, b) => (a.name < b.name ? -1 : 1))
    // Segments of a process that ended before inserting them hold rows it had taken: they are replayed
    // after the spool, oldest first, whatever the byte bound (they are on disk already).
    for (const f of segments.sort()) {
      const m = SEGMENT.exec(f)!
      if (m[3] === '.in' && this.#usageOfInserted(join(dir, f), m[2]!)) continue
      this.#takenAtStart.push(this.#takeOver(join(dir, f), m[2]!, 0, null, true))
    }
  }

  /**
   * A segment whose rows ClickHouse has (marked `.in` right after their insert) but whose rollup may not
   * be in: only the rollup is replayed, as a usage file in its place. False when that cannot be done: the
   * segment is then replayed whole (its rows checked against ClickHouse first).
   */
  #usageOfInserted (path: string, token: string): boolean {
    try {
      const usage = UsageBatch.of(segmentBatch(path, token, readFileSync(path)).summaries)
      if (usage === null || !this.appendUsage(token, usage.tsv())) return false
    } catch {
      return false
    }
    rmSync(path, { force: true })
    return true
  }

  /**
   * The trace ids in the segments taken over at start: a hand-off file left beside them may hold some of
   * the same records (the process died between writing a segment and removing the hand-off file).
   */
  segmentTraceIds (): Set<string> {
    const ids = new Set<string>()
    for (const name of this.#takenAtStart) {
      let batch: SpooledBatch
      let bytes: Buffer
      try {
        bytes = readFileSync(join(this.#dir, name))
        batch = segmentBatch(name, '', bytes)
      } catch {
        continue
      }
      for (const s of batch.summaries) ids.add(s.trace_id)
      const cutId = batch.cut > 0 ? cutTraceId(bytes.subarray(bytes.length - batch.cut)) : null
      if (cutId !== null) this.#cutIds.set(cutId, name)
    }
    return ids
  }

  /**
   * A record replayed from a hand-off file: when it is the row a segment's cut left half written, that
   * row is not lost after all, and the segment's replay does not count it as dropped.
   */
  recovered (traceId: string): void {
    const name = this.#cutIds.get(traceId)
    if (name !== undefined) this.#cutRecovered.add(name)
  }

  /**
   * A new write-ahead segment for the batch with this token, named after it. Throws when it cannot be
   * created.
   */
  openSegment (token: string): SegmentFile {
    const name = `wal-${String(++segmentSeq).padStart(16, '0')}-${token}.tsv`
    let fd: number
    try {
      fd = openSync(join(this.#dir, name), 'wx', PRIVATE_FILE)
    } catch (err) {
      if (!isMissing(err)) throw err
      mkdirSync(this.#dir, PRIVATE_DIR)
      fd = openSync(join(this.#dir, name), 'wx', PRIVATE_FILE)
    }
    const seg = new SegmentFile(join(this.#dir, name), token, fd)
    try {
      seg.append(SEGMENT_HEAD)
    } catch (err) {
      seg.discard()
      throw err
    }
    return seg
  }

  /**
   * Takes over a closed segment as a spool batch (a rename: its bytes are not written again). False when
   * it does not fit under the byte limit; throws when it cannot be renamed.
   */
  adopt (seg: SegmentFile, rows: number, since: number, check: boolean): boolean {
    seg.close()
    if (this.#bytes + seg.bytes > this.#maxBytes) return false
    this.#takeOver(seg.path, seg.token, rows, since, check)
    return true
  }

  /** `since` null: a segment an ended process left, as old as its last write. */
  #takeOver (path: string, token: string, rows: number, since: number | null, check: boolean): string {
    const name = `${String(this.#seq + 1).padStart(16, '0')}-${token}.rows.tsv`
    const st = statSync(path)
    renameSync(path, join(this.#dir, name))
    this.#seq++
    this.#files.push({ name, size: st.size, rows, since: since ?? st.mtimeMs, check })
    this.#bytes += st.size
    return name
  }

  get bytes (): number { return this.#bytes }
  get batches (): number { return this.#files.length }
  get maxBytes (): number { return this.#maxBytes }

  /** When the oldest trace in the spool reached the store (epoch ms), or null when it holds none. */
  get oldestTraceSince (): number | null {
    let since = Infinity
    for (const f of this.#files) if (f.since < since) since = f.since
    return since === Infinity ? null : since
  }

  /**
   * A batch of rows in TRACE_COLUMNS. False when the batch does not fit under the byte limit; throws when
   * it cannot be written.
   */
  append (token: string, summaries: readonly TraceSummary[], parts: readonly Uint8Array[], since: number, check: boolean): boolean {
    return this.#write(`${token}.v2.tsv`, summaries, TRACE_COLUMNS, parts, since, check)
  }

  /** A batch's usage rollup alone (rows in USAGE_COLUMNS); false and throws as `append`. */
  appendUsage (token: string, tsv: Uint8Array): boolean {
    return this.#write(`${token}.usage.tsv`, [], USAGE_COLUMNS, [tsv], Infinity, false)
  }

  #write (suffix: string, summaries: readonly TraceSummary[], columns: readonly string[], parts: readonly Uint8Array[], since: number, check: boolean): boolean {
    const head = Buffer.from(JSON.stringify(summaries) + '\n' + JSON.stringify(columns) + '\n')
    const size = parts.reduce((n, p) => n + p.length, head.length)
    if (this.#bytes + size > this.#maxBytes) return false
    const name = `${String(this.#seq + 1).padStart(16, '0')}-${suffix}`
    const tmp = join(this.#dir, name + '.tmp')
    const bytes = Buffer.concat([head, ...parts], size)
    try {
      writeFileSync(tmp, bytes, { mode: PRIVATE_FILE })
    } catch (err) {
      if (!isMissing(err)) throw err
      mkdirSync(this.#dir, PRIVATE_DIR)
      writeFileSync(tmp, bytes, { mode: PRIVATE_FILE })
    }
    try {
      renameSync(tmp, join(this.#dir, name))
    } catch (err) {
      rmSync(tmp, { force: true })
      throw err
    }
    this.#seq++
    this.#files.push({ name, size, rows: summaries.length, since, check })
    this.#bytes += size
    return true
  }

  /**
   * The oldest batch, or null when the spool is empty. A file that is gone or is not a batch is taken off
   * the list (SpoolReadError; one that is not a batch is kept aside as .bad); any other read error is
   * thrown as it is and the file stays, to be tried again.
   */
  oldest (): SpooledBatch | null {
    const f = this.#files[0]
    if (f === undefined) return null
    const path = join(this.#dir, f.name)
    let bytes: Buffer
    try {
      bytes = readFileSync(path)
    } catch (err) {
      if (!isMissing(err)) throw err
      this.#forget(0)
      throw new SpoolReadError(f.name, f.rows, err)
    }
    try {
      const m = NAME.exec(f.name)!
      if (m[3] === '.rows') {
        const batch = segmentBatch(f.name, m[2]!, bytes)
        return { ...batch, cut: this.#cutRecovered.has(f.name) ? 0 : batch.cut, checkStored: f.check }
      }
      const nl = bytes.indexOf(0x0a)
      if (nl < 0) throw new Error('no summaries line')
      const summaries = JSON.parse(bytes.toString('utf8', 0, nl)) as TraceSummary[]
      if (!Array.isArray(summaries)) throw new Error('no summaries line')
      if (m[3] === undefined) {
        // Before the labels: their rows have none, so the live list's items of them have none either.
        const before = summaries.map((s) => ({ ...s, user: '', session: '', tags: [] }))
        return { file: f.name, kind: 'traces', token: m[2]!, columns: TRACE_COLUMNS_BEFORE_LABELS, summaries: before, tsv: bytes.subarray(nl + 1), cut: 0, checkStored: f.check }
      }
      const nl2 = bytes.indexOf(0x0a, nl + 1)
      if (nl2 < 0) throw new Error('no columns line')
      const tsv = bytes.subarray(nl2 + 1)
      // The columns line goes into the INSERT's text: only these names are taken.
      if (m[3] === '.usage') {
        const line = bytes.toString('utf8', nl + 1, nl2)
        const columns = [USAGE_COLUMNS, USAGE_COLUMNS_BEFORE_UNPRICED].find((c) => line === JSON.stringify(c))
        if (summaries.length !== 0 || columns === undefined) throw new Error('not a usage rollup')
        return { file: f.name, kind: 'usage', token: m[2]!, columns, summaries, tsv, cut: 0 }
      }
      const columns = traceColumns(JSON.parse(bytes.toString('utf8', nl + 1, nl2)) as unknown)
      return { file: f.name, kind: 'traces', token: m[2]!, columns, summaries, tsv, cut: 0, checkStored: f.check }
    } catch (err) {
      this.#forget(0)
      try { renameSync(path, path + '.bad') } catch { /* left where it is; not listed again this run */ }
      throw new SpoolReadError(f.name, f.rows, err)
    }
  }

  /** An insert of the batch in `file` was sent and its answer lost: its replay asks ClickHouse first. */
  mayBeStored (file: string): void {
    const f = this.#files.find((x) => x.name === file)
    if (f !== undefined) f.check = true
  }

  /** Takes a batch ClickHouse will not take off the list, keeping its file as .bad for an operator to look at. */
  setAside (file: string): void {
    const i = this.#files.findIndex((f) => f.name === file)
    if (i < 0) return
    this.#forget(i)
    const path = join(this.#dir, file)
    try { renameSync(path, path + '.bad') } catch { rmSync(path, { force: true }) }
  }

  remove (file: string): void {
    const i = this.#files.findIndex((f) => f.name === file)
    if (i < 0) return
    this.#forget(i)
    // A file that cannot be removed is replayed again after a restart, which its token makes a no-op.
    try { rmSync(join(this.#dir, file), { force: true }) } catch { /* see above */ }
  }

  #forget (i: number): void {
    const [f] = this.#files.splice(i, 1)
    this.#bytes = Math.max(0, this.#bytes - f!.size)
  }
}

/** A columns line's names. They go into the INSERT's text, so only columns of the traces table are taken. */
function traceColumns (v: unknown): readonly string[] {
  if (!Array.isArray(v) || v.length === 0 || new Set(v).size !== v.length ||
    !v.every((c) => typeof c === 'string' && TRACE_COLUMNS.includes(c))) {
    throw new Error('its columns line does not name columns of the traces table')
  }
  return v as string[]
}

/** The trace id of a half-written row, when its bytes reach past it (the third column); else null. */
function cutTraceId (partial: Buffer): string | null {
  const first = partial.indexOf(0x09)
  const second = first < 0 ? -1 : partial.indexOf(0x09, first + 1)
  const third = second < 0 ? -1 : partial.indexOf(0x09, second + 1)
  return third < 0 ? null : partial.toString('latin1', second + 1, third)
}

/** A segment's first line: the columns of its rows, as in a spool file. */
const SEGMENT_HEAD = Buffer.from(JSON.stringify(TRACE_COLUMNS) + '\n')

/** Segment names of this process, in order. */
let segmentSeq = 0

/**
 * A write-ahead segment: the rows of one batch appended as they arrive, before the batch is inserted, so
 * a process that dies leaves them on disk for the next start. Plain writes without fsync: they survive
 * the process, not the operating system. Writes throw as they fail.
 */
export class SegmentFile {
  #fd: number | null
  #bytes = 0
  #path: string

  constructor (path: string, readonly token: string, fd: number) {
    this.#path = path
    this.#fd = fd
  }

  get path (): string { return this.#path }

  /**
   * Its rows are in ClickHouse (the caller closed it before the insert): renamed `.in`, so a restart
   * replays only its rollup, whether or not ClickHouse kept the insert's deduplication token.
   */
  markInserted (): void {
    const next = this.#path.replace(/\.tsv$/, '.in.tsv')
    renameSync(this.#path, next)
    this.#path = next
  }

  get bytes (): number { return this.#bytes }

  append (b: Uint8Array): void {
    if (this.#fd === null) throw new Error('the segment is closed')
    for (let at = 0; at < b.length;) at += writeSync(this.#fd, b, at, b.length - at)
    this.#bytes += b.length
  }

  /** No more rows: the descriptor is given back, the file stays. */
  close (): void {
    if (this.#fd === null) return
    const fd = this.#fd
    this.#fd = null
    closeSync(fd)
  }

  /** The batch is stored (or given up): the file goes. */
  discard (): void {
    try { this.close() } catch { /* removed below all the same */ }
    rmSync(this.#path, { force: true })
  }
}

/**
 * A segment's rows as a batch: the columns line must name this version's columns, or the first of them
 * (a segment an earlier version left: its rows are inserted under its own columns, the later ones take
 * their defaults); the summaries for the live list and the rollup are read from the rows. A last row
 * without its newline (a write the process did not finish) is left out and reported in `cut`.
 */
function segmentBatch (file: string, token: string, bytes: Buffer): SpooledBatch {
  const nl = bytes.indexOf(0x0a)
  if (nl < 0) throw new Error('its columns line does not name the columns of this version')
  const columns = bytes.subarray(0, nl + 1).equals(SEGMENT_HEAD) ? TRACE_COLUMNS : earlierColumns(bytes.toString('utf8', 0, nl))
  // An earlier version's row is read with empty fields for the columns it did not have.
  const pad = Buffer.from('\t'.repeat(TRACE_COLUMNS.length - columns.length) + '\n')
  const end = bytes.lastIndexOf(0x0a) + 1
  const tsv = bytes.subarray(nl + 1, end)
  const summaries: TraceSummary[] = []
  const r = new EncodedRow()
  for (let at = 0; at < tsv.length;) {
    const next = tsv.indexOf(0x0a, at) + 1
    const row = pad.length === 1 ? r.index(tsv, at, next) : r.index(Buffer.concat([tsv.subarray(at, next - 1), pad]), 0, next - at + pad.length - 1)
    summaries.push(readSummary(row))
    at = next
  }
  return { file, kind: 'traces', token, columns, summaries, tsv, cut: bytes.length - end }
}

/** The columns an earlier version's segment names: the first of this version's, at least those a summary reads. */
function earlierColumns (line: string): readonly string[] {
  let v: unknown
  try { v = JSON.parse(line) } catch { v = null }
  const prefix = Array.isArray(v) && v.length >= TRACE_COLUMNS.indexOf('tags') + 1 && v.length < TRACE_COLUMNS.length && v.every((c, i) => c === TRACE_COLUMNS[i])
  if (!prefix) throw new Error('its columns line does not name the columns of this version')
  return v as string[]
}
