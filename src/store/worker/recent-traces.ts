// The recent traces that are not in ClickHouse yet, answered from memory: the rows the trace writer holds
// (its queue and the batch being inserted), read straight from their encoded bytes. The trace list and a
// trace's detail merge these with ClickHouse's answer by trace id (trace-queries.ts), so a trace shows
// as soon as its row is built however seldom inserts run, and once it is in both, it shows once.
// Every filter the list query has is applied here exactly as ClickHouse applies it; the one that cannot
// always be (the text search, see `textMatch`) makes the query skip these rows instead.
import { EncodedRow, readRow, readSummary, unescapeInto } from './tsv-read.js'
import { TsvWriter } from './tsv.js'
import type { TraceFilter } from './trace-queries.js'
import type { TraceRow, TraceSummary } from '../trace-types.js'

/** Rows in memory: their TabSeparated bytes back to back and where each ends (trace-writer.ts). */
export interface HeldRows {
  readonly tsv: Buffer
  readonly ends: readonly number[]
}

/** A String column's value as the row holds it (escaped as tsv.ts writes it), for comparing bytes. */
function held (value: string): Buffer {
  return Buffer.from(new TsvWriter(value.length * 3 + 8).string(value).view())
}

/** ClickHouse's DateTime64(3) text (UTC) as epoch ms. */
function epochMs (time: string): number {
  return Date.parse(time.replace(' ', 'T') + 'Z')
}

/**
 * A key that sorts UUIDs as ClickHouse does: by their second 64-bit half, then their first, each as
 * an unsigned number (so `ORDER BY trace_id` is not the text order).
 */
export function uuidKey (id: string): string {
  return id.slice(19, 23) + id.slice(24) + id.slice(0, 8) + id.slice(9, 13) + id.slice(14, 18)
}

/** Newest first as the list orders them: time, then trace id, both descending. */
export function newestFirst (a: { time: string; trace_id: string }, b: { time: string; trace_id: string }): number {
  if (a.time !== b.time) return a.time < b.time ? 1 : -1
  const ka = uuidKey(a.trace_id)
  const kb = uuidKey(b.trace_id)
  return ka === kb ? 0 : ka < kb ? 1 : -1
}

/**
 * Code points that ClickHouse's positionCaseInsensitiveUTF8 matches to an ASCII letter in some cases and
 * not in others (it depends on the block and the needle: KELVIN SIGN matches "k" inside "akb" but not
 * alone), as UTF-8: U+0130, U+0131, U+017F, U+212A. They are the only code points whose lower or upper
 * case is ASCII. A row holding one cannot be judged here.
 */
const AMBIGUOUS = [Buffer.from('\u0130'), Buffer.from('\u0131'), Buffer.from('\u017f'), Buffer.from('\u212a')]

/** The text search's needle with ASCII letters in lower case, or null when it is not all ASCII. */
function asciiNeedle (q: string): Buffer | null {
  const b = Buffer.from(q, 'utf8')
  for (let i = 0; i < b.length; i++) {
    const c = b[i]!
    if (c >= 0x80) return null
    if (c >= 0x41 && c <= 0x5a) b[i] = c + 32
  }
  return b
}

/** Lower-cases ASCII letters in place (bytes of other characters are never in that range). */
function lowerAscii (b: Buffer, n: number): void {
  for (let i = 0; i < n; i++) {
    const c = b[i]!
    if (c >= 0x41 && c <= 0x5a) b[i] = c + 32
  }
}

/**
 * `positionCaseInsensitiveUTF8(prompt, q) > 0 OR positionCaseInsensitiveUTF8(response, q) > 0` for an
 * ASCII needle: ASCII letters match either case, every other byte only itself. Null when the row holds
 * a character ClickHouse treats inconsistently (AMBIGUOUS), so no answer here would be exact.
 */
function textMatch (r: EncodedRow, needle: Buffer, scratch: { buf: Buffer }): boolean | null {
  let found = false
  for (const column of ['prompt', 'response']) {
    const [from, to] = r.range(column)
    if (scratch.buf.length < to - from) scratch.buf = Buffer.allocUnsafe(to - from)
    const n = unescapeInto(r.tsv, from, to, scratch.buf)
    const text = scratch.buf.subarray(0, n)
    for (const a of AMBIGUOUS) if (text.indexOf(a) >= 0) return null
    lowerAscii(text, n)
    if (!found && text.indexOf(needle) >= 0) found = true
  }
  return found
}

interface Candidate {
  readonly time: string
  readonly trace_id: string
  readonly rows: HeldRows
  readonly start: number
  readonly end: number
}

/**
 * The rows of the filter's account that pass all its filters, newest first, at most `limit + 1` (what
 * the list query asks ClickHouse for). Null when the filter has a text search these rows cannot answer
 * exactly as ClickHouse would (a needle that is not all ASCII, or a row with an ambiguous character):
 * the list then shows what ClickHouse holds, as it did before rows waited in memory.
 */
export function recentPage (batches: Iterable<HeldRows>, f: TraceFilter): TraceSummary[] | null {
  const needle = f.q === null ? null : asciiNeedle(f.q)
  if (f.q !== null && needle === null) return null
  const account = held(f.accountId.toLowerCase())
  const equal: Array<[string, Buffer]> = []
  if (f.provider !== null) equal.push(['provider', held(f.provider)])
  if (f.model !== null) equal.push(['model', held(f.model)])
  if (f.outcome !== null) equal.push(['outcome', held(f.outcome)])
  if (f.keyId !== null) equal.push(['key_id', held(f.keyId.toLowerCase())])
  if (f.user !== null) equal.push(['user', held(f.user)])
  if (f.session !== null) equal.push(['session', held(f.session)])
  const cursorMs = f.cursor === null ? 0 : epochMs(f.cursor.time)
  const cursorKey = f.cursor === null ? '' : uuidKey(f.cursor.traceId.toLowerCase())

  const candidates: Candidate[] = []
  const r = new EncodedRow()
  for (const rows of batches) {
    const { tsv, ends } = rows
    for (let i = 0; i < ends.length; i++) {
      const start = i === 0 ? 0 : ends[i - 1]!
      // The account is the row's first field: rows of other accounts are passed over on these bytes alone.
      if (tsv.compare(account, 0, account.length, start, start + account.length) !== 0 || tsv[start + account.length] !== 0x09) continue
      r.index(tsv, start, ends[i]!)
      if (!equal.every(([column, value]) => r.equals(column, value))) continue
      if (f.tag !== null && !r.strings('tags').includes(f.tag)) continue
      const time = r.string('time')
      const ms = epochMs(time)
      if (f.from !== null && ms < f.from) continue
      if (f.to !== null && ms >= f.to) continue
      const traceId = r.string('trace_id')
      if (f.cursor !== null && !(ms < cursorMs || (ms === cursorMs && uuidKey(traceId) < cursorKey))) continue
      candidates.push({ time, trace_id: traceId, rows, start, end: ends[i]! })
    }
  }
  candidates.sort(newestFirst)
  const out: TraceSummary[] = []
  const scratch = { buf: Buffer.allocUnsafe(0) }
  for (const c of candidates) {
    if (out.length > f.limit) break
    r.index(c.rows.tsv, c.start, c.end)
    if (needle !== null) {
      const match = textMatch(r, needle, scratch)
      if (match === null) return null
      if (!match) continue
    }
    out.push(readSummary(r))
  }
  return out
}

/** The row of one trace of the account while it waits in memory, or null. */
export function recentTrace (batches: Iterable<HeldRows>, accountId: string, traceId: string): TraceRow | null {
  const account = held(accountId.toLowerCase())
  const id = held(traceId.toLowerCase())
  const r = new EncodedRow()
  for (const { tsv, ends } of batches) {
    for (let i = 0; i < ends.length; i++) {
      const start = i === 0 ? 0 : ends[i - 1]!
      if (tsv.compare(account, 0, account.length, start, start + account.length) !== 0) continue
      r.index(tsv, start, ends[i]!)
      if (r.equals('account_id', account) && r.equals('trace_id', id)) return readRow(r)
    }
  }
  return null
}
