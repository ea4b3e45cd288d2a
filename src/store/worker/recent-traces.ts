// The recent traces that are not in ClickHouse yet, answered from memory: the rows the trace writer holds
// (its queue and the batch being inserted), read straight from their encoded bytes. The trace list and a
// trace's detail merge these with ClickHouse's answer by trace id (trace-queries.ts), so a trace shows
// as soon as its row is built however seldom inserts run, and once it is in both, it shows once.
// Every filter the list query has is applied here exactly as ClickHouse applies it, from the one
// description of each (trace-filters.ts); one that cannot always be (the text search) makes the query
// skip these rows instead.
import { readRow, readSummary } from './tsv-read.js'
import { HeldRow, heldBytes, heldTests, listOrder, SORTS, type HeldTest } from './trace-filters.js'
import type { TraceFilter } from '../query-types.js'
import type { TraceRow, TraceSummary } from '../trace-types.js'

/** Rows in memory: their TabSeparated bytes back to back and where each ends (trace-writer.ts). */
export interface HeldRows {
  readonly tsv: Buffer
  readonly ends: readonly number[]
}

interface Candidate {
  /** The row's value under the list's sort (0 when sorted by time). */
  readonly value: number
  readonly time: string
  readonly trace_id: string
  readonly rows: HeldRows
  readonly start: number
  readonly end: number
}

/**
 * The rows of the filter's account that pass all its filters (trace-filters.ts, each tested as ClickHouse
 * tests it), in the list's order (newest first unless sorted otherwise), at most `limit + 1` (what the list query asks ClickHouse for). Null when the
 * filter has a test these rows cannot answer exactly as ClickHouse would (the text search with a needle
 * that is not all ASCII, or a row with a character ClickHouse case-folds inconsistently): the list then
 * shows what ClickHouse holds, as it did before rows waited in memory.
 */
export function recentPage (batches: Iterable<HeldRows>, f: TraceFilter): TraceSummary[] | null {
  const tests = heldTests(f)
  if (tests === null) return null
  const candidates: Candidate[] = []
  const r = new HeldRow()
  const sortValue = SORTS[f.sort].held
  for (const rows of batches) {
    const { tsv, ends } = rows
    for (let i = 0; i < ends.length; i++) {
      r.at(tsv, i === 0 ? 0 : ends[i - 1]!, ends[i]!)
      const pass = passes(tests.cheap, r)
      if (pass === null) return null
      if (!pass) continue
      candidates.push({ value: sortValue(r), time: r.time, trace_id: r.traceId, rows, start: r.start, end: r.end })
    }
  }
  candidates.sort(listOrder(f))
  const out: TraceSummary[] = []
  for (const c of candidates) {
    if (out.length > f.limit) break
    const pass = passes(tests.late, r.at(c.rows.tsv, c.start, c.end))
    if (pass === null) return null
    if (pass) out.push(readSummary(r.fields))
  }
  return out
}

/** Whether every test passes, stopping at the first that fails; null when one cannot judge the row. */
export function passes (tests: readonly HeldTest[], r: HeldRow): boolean | null {
  for (const test of tests) {
    const match = test(r)
    if (match !== true) return match
  }
  return true
}

/** The row of one trace of the account while it waits in memory, or null. */
export function recentTrace (batches: Iterable<HeldRows>, accountId: string, traceId: string): TraceRow | null {
  const account = heldBytes(accountId.toLowerCase())
  const id = heldBytes(traceId.toLowerCase())
  const r = new HeldRow()
  for (const { tsv, ends } of batches) {
    for (let i = 0; i < ends.length; i++) {
      const start = i === 0 ? 0 : ends[i - 1]!
      if (tsv.compare(account, 0, account.length, start, start + account.length) !== 0) continue
      const row = r.at(tsv, start, ends[i]!).fields
      if (row.equals('account_id', account) && row.equals('trace_id', id)) return readRow(row)
    }
  }
  return null
}
