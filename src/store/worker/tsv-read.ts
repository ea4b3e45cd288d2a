// Reading back the trace rows the writer encoded (tsv.ts, rows.ts) while they wait in memory for their
// insert: the dashboard's list and detail of recent traces, and the spool's summaries line, are read from
// those bytes on demand, so a waiting row costs no JS object. Values come out as ClickHouse answers them
// in JSONEachRow (Float32 columns at Float32 precision), so a row read here and the same row read back
// from ClickHouse are equal.
import { TRACE_COLUMNS } from './rows.js'
import { ESCAPE } from './tsv.js'
import type { TraceRow, TraceSummary } from '../trace-types.js'

const TAB = 0x09
const BACKSLASH = 0x5c
const QUOTE = 0x27

/** Each column's position in a row, by name. */
const AT: Readonly<Record<string, number>> = Object.fromEntries(TRACE_COLUMNS.map((c, i) => [c, i]))
const COLUMNS = TRACE_COLUMNS.length

/** The byte an escape letter stands for: tsv.ts's ESCAPE read backwards (anything else stands for itself). */
const UNESCAPE = new Uint8Array(256).map((_, i) => i)
for (let b = 0; b < 256; b++) if (ESCAPE[b] !== 0) UNESCAPE[ESCAPE[b]!] = b

/**
 * ClickHouse's text form of a Float32 value: the shortest decimal that reads back as the same Float32
 * (`toFloat32(300.2)` prints 300.2, `toFloat32(123456789.1)` prints 123456790).
 */
export function float32 (x: number): number {
  const f = Math.fround(x)
  if (!Number.isFinite(f)) return f
  for (let p = 1; p < 10; p++) {
    const d = Number(f.toPrecision(p))
    if (Math.fround(d) === f) return d
  }
  return f
}

/** Unescapes `src[from, to)` into `out` from 0; returns the length written. `out` must hold to - from bytes. */
export function unescapeInto (src: Buffer, from: number, to: number, out: Buffer): number {
  let first = src.indexOf(BACKSLASH, from)
  if (first < 0 || first >= to) first = to
  src.copy(out, 0, from, first)
  let n = first - from
  for (let i = first; i < to; i++) {
    const b = src[i]!
    if (b === BACKSLASH && i + 1 < to) out[n++] = UNESCAPE[src[++i]!]!
    else out[n++] = b
  }
  return n
}

/**
 * One encoded row: where each field starts and ends. `index` walks the row once (the field separators
 * are the only tabs: tsv.ts escapes every tab inside a field); the getters decode a field on demand.
 */
export class EncodedRow {
  /** Field i spans [bounds[i], bounds[i + 1] - 1): each bound is one past a separator. */
  readonly #bounds = new Int32Array(COLUMNS + 1)
  #tsv: Buffer = Buffer.alloc(0)

  /** Points at the row in `tsv[start, end)` (its newline at end - 1). */
  index (tsv: Buffer, start: number, end: number): this {
    this.#tsv = tsv
    const b = this.#bounds
    b[0] = start
    let at = start
    for (let i = 1; i < COLUMNS; i++) {
      at = tsv.indexOf(TAB, at)
      if (at < 0 || at >= end) throw new Error(`an encoded trace row has ${i} fields, not ${COLUMNS}`)
      b[i] = ++at
    }
    b[COLUMNS] = end
    return this
  }

  get tsv (): Buffer { return this.#tsv }

  /** The raw (still escaped) byte range of a column. */
  range (column: string): [number, number] {
    const i = AT[column]!
    return [this.#bounds[i]!, this.#bounds[i + 1]! - 1]
  }

  string (column: string): string {
    const [from, to] = this.range(column)
    const at = this.#tsv.indexOf(BACKSLASH, from)
    if (at < 0 || at >= to) return this.#tsv.toString('utf8', from, to)
    const out = Buffer.allocUnsafe(to - from)
    return out.toString('utf8', 0, unescapeInto(this.#tsv, from, to, out))
  }

  /** True when a String column equals `value` (compared as bytes, without decoding the field). */
  equals (column: string, value: Buffer): boolean {
    const [from, to] = this.range(column)
    return to - from === value.length && this.#tsv.compare(value, 0, value.length, from, to) === 0
  }

  /** A number column; null for `\N`. */
  number (column: string): number | null {
    const [from, to] = this.range(column)
    if (to - from === 2 && this.#tsv[from] === BACKSLASH) return null
    return Number(this.#tsv.toString('latin1', from, to))
  }

  bool (column: string): boolean {
    const [from] = this.range(column)
    return this.#tsv[from] === 0x74 // 't'rue
  }

  /** An Array(String) column: `['a','b']`. */
  strings (column: string): string[] {
    const [from, to] = this.range(column)
    const out: string[] = []
    let i = from + 1
    while (i < to - 1) {
      const [s, next] = this.#quoted(i)
      out.push(s)
      i = next + 1 // past the comma (or onto the closing bracket)
    }
    return out
  }

  /** A Map(String, String) column: `{'k':'v'}`, in its order. */
  map (column: string): Record<string, string> {
    const [from, to] = this.range(column)
    const out: Record<string, string> = {}
    let i = from + 1
    while (i < to - 1) {
      const [k, colon] = this.#quoted(i)
      const [v, next] = this.#quoted(colon + 1)
      out[k] = v
      i = next + 1
    }
    return out
  }

  /** The quoted string starting at `at` (its opening quote) and the index just after its closing quote. */
  #quoted (at: number): [string, number] {
    const tsv = this.#tsv
    const bytes: number[] = []
    let i = at + 1
    for (; tsv[i] !== QUOTE; i++) {
      const b = tsv[i]!
      bytes.push(b === BACKSLASH ? UNESCAPE[tsv[++i]!]! : b)
    }
    return [Buffer.from(bytes).toString('utf8'), i + 1]
  }
}

/** The live list's item of a row, as ClickHouse answers the list's columns. */
export function readSummary (r: EncodedRow): TraceSummary {
  return {
    account_id: r.string('account_id'),
    trace_id: r.string('trace_id'),
    time: r.string('time'),
    key_id: r.string('key_id'),
    provider: r.string('provider'),
    model: r.string('model'),
    streaming: r.bool('streaming'),
    confidential: r.bool('confidential'),
    status: r.number('status')!,
    outcome: r.string('outcome'),
    error_code: r.string('error_code'),
    input_tokens: r.number('input_tokens')!,
    output_tokens: r.number('output_tokens')!,
    cached_input_tokens: r.number('cached_input_tokens')!,
    token_source: r.string('token_source'),
    latency_ms: float32(r.number('latency_ms')!),
    cost_usd: r.number('cost_usd'),
    user: r.string('user'),
    session: r.string('session'),
    tags: r.strings('tags'),
  }
}

function maybeFloat32 (x: number | null): number | null {
  return x === null ? null : float32(x)
}

/** The whole row as `SELECT * FROM traces` answers it, in the table's column order. */
export function readRow (r: EncodedRow): TraceRow {
  return {
    account_id: r.string('account_id'),
    time: r.string('time'),
    trace_id: r.string('trace_id'),
    key_id: r.string('key_id'),
    provider: r.string('provider'),
    model: r.string('model'),
    endpoint: r.string('endpoint'),
    user: r.string('user'),
    session: r.string('session'),
    tags: r.strings('tags'),
    metadata: r.map('metadata'),
    streaming: r.bool('streaming'),
    confidential: r.bool('confidential'),
    status: r.number('status')!,
    outcome: r.string('outcome'),
    error_code: r.string('error_code'),
    error_cause: r.string('error_cause'),
    prompt: r.string('prompt'),
    prompt_truncated: r.bool('prompt_truncated'),
    response: r.string('response'),
    response_truncated: r.bool('response_truncated'),
    request_bytes: r.number('request_bytes')!,
    response_bytes: r.number('response_bytes')!,
    input_tokens: r.number('input_tokens')!,
    output_tokens: r.number('output_tokens')!,
    cached_input_tokens: r.number('cached_input_tokens')!,
    token_source: r.string('token_source') as TraceRow['token_source'],
    latency_ms: float32(r.number('latency_ms')!),
    ttfb_ms: maybeFloat32(r.number('ttfb_ms')),
    ttft_ms: maybeFloat32(r.number('ttft_ms')),
    provider_ms: maybeFloat32(r.number('provider_ms')),
    overhead_ms: float32(r.number('overhead_ms')!),
    cost_usd: r.number('cost_usd'),
    cost_status: r.string('cost_status') as TraceRow['cost_status'],
    detection: r.string('detection'),
    issues: r.string('issues'),
    attempts: r.string('attempts'),
    cache: r.string('cache') as TraceRow['cache'],
    cost_saved_usd: r.number('cost_saved_usd'),
  }
}
