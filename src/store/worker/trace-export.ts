// Export of the trace list's filter as CSV or JSONL, streamed: ClickHouse is read in keyset pages in the
// list's order (never the whole result at once; embedded chDB answers a query in one piece), each page
// becomes one chunk of text, and the next page is read only once the receiver took the chunk. So the
// worker holds one page at a time whatever the export's size. The caller's account is the filter's first
// clause, as for the list. Rows still waiting in memory for their insert are not exported.
import type { ClickHouseClient } from '@clickhouse/client'
import { orderBy, where } from './trace-filters.js'
import { cursorOf } from './trace-queries.js'
import type { ExportArgs, TraceFilter } from '../query-types.js'
import type { TraceSummary } from '../trace-types.js'

/** Rows per ClickHouse page (and per chunk sent). */
export const EXPORT_PAGE = 1000

/** The exported columns, in order: the list's, the labels and metadata, and the text. */
export const EXPORT_COLUMNS = [
  'trace_id', 'time', 'key_id', 'provider', 'model', 'endpoint', 'streaming', 'confidential', 'status', 'outcome',
  'error_code', 'input_tokens', 'output_tokens', 'cached_input_tokens', 'token_source', 'latency_ms', 'ttft_ms',
  'cost_usd', 'user', 'session', 'tags', 'metadata', 'prompt', 'response',
] as const

type ExportRow = Record<(typeof EXPORT_COLUMNS)[number], unknown>

/**
 * One CSV cell (RFC 4180): quoted when it holds a quote, comma or line break, quotes doubled. Text that
 * a spreadsheet would run as a formula (starting with = + - @, or a tab or carriage return before one)
 * gets a leading apostrophe, OWASP's guard against CSV injection. Numbers are written as they are.
 */
export function csvCell (v: unknown): string {
  if (v === null || v === undefined) return ''
  if (typeof v === 'number' || typeof v === 'boolean') return String(v)
  let s = typeof v === 'string' ? v : JSON.stringify(v)
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s
}

function csvLine (cells: readonly unknown[]): string {
  return cells.map(csvCell).join(',') + '\r\n'
}

/**
 * Streams the export through `send`, one chunk per page (the CSV header first); `send` resolves when the
 * chunk was taken, to false when the receiver is gone (the export stops). Returns the rows sent.
 */
export async function exportTraces (ch: ClickHouseClient, a: ExportArgs, send: (chunk: string) => Promise<boolean>): Promise<{ rows: number }> {
  let f: TraceFilter = { ...a.filter, cursor: null }
  let rows = 0
  if (a.format === 'csv' && !await send(csvLine(EXPORT_COLUMNS))) return { rows }
  while (rows < a.maxRows) {
    const limit = Math.min(EXPORT_PAGE, a.maxRows - rows)
    const w = where(f)
    const rs = await ch.query({
      query: `SELECT ${EXPORT_COLUMNS.join(', ')} FROM traces WHERE ${w.sql} ORDER BY ${orderBy(f)} LIMIT {limit:UInt32}`,
      query_params: { ...w.params, limit },
      format: 'JSONEachRow',
    })
    const page = await rs.json<ExportRow>()
    if (page.length === 0) break
    let text = ''
    for (const r of page) text += a.format === 'csv' ? csvLine(EXPORT_COLUMNS.map((c) => r[c])) : JSON.stringify(r) + '\n'
    rows += page.length
    if (!await send(text)) return { rows }
    if (page.length < limit) break
    // The exported columns include every one the sort values read (TraceSummary's).
    f = { ...f, cursor: cursorOf(f, page[page.length - 1] as unknown as TraceSummary) }
  }
  return { rows }
}
