// The trace list's filters, each described once: the clause ClickHouse runs (every value a query
// parameter) and the same test on a row still held in the store worker's memory (recent-traces.ts), which
// must give exactly ClickHouse's answer. A new filter is one entry in FILTERS; the list query's WHERE and
// the rows from memory both follow from it.
import { chTime } from './connect.js'
import { EncodedRow, unescapeInto } from './tsv-read.js'
import { TsvWriter } from './tsv.js'
import type { SortKey } from '../../domain/sort-key.js'
import type { TraceFilter } from '../query-types.js'
import type { TraceSummary } from '../trace-types.js'

/** A String column's value as a held row holds it (escaped as tsv.ts writes it), for comparing bytes. */
export function heldBytes (value: string): Buffer {
  return Buffer.from(new TsvWriter(value.length * 3 + 8).string(value).view())
}

/** The attempts a trace's `attempts` JSON lists, as ClickHouse's JSONLength counts them ('' lists none). */
function attemptCount (json: string): number {
  if (json === '') return 0
  try {
    const v: unknown = JSON.parse(json)
    return Array.isArray(v) ? v.length : 0
  } catch {
    return 0
  }
}

/** ClickHouse's DateTime64(3) text (UTC) as epoch ms. */
export function epochMs (time: string): number {
  return Date.parse(time.replace(' ', 'T') + 'Z')
}

/**
 * A key that sorts UUIDs as ClickHouse does: by their second 64-bit half, then their first, each as
 * an unsigned number (so `ORDER BY trace_id` is not the text order).
 */
export function uuidKey (id: string): string {
  return id.slice(19, 23) + id.slice(24) + id.slice(0, 8) + id.slice(9, 13) + id.slice(14, 18)
}

/**
 * A held row as the filters read it: its bytes, its fields indexed on first use, and its time and trace
 * id decoded once whichever filters ask for them.
 */
export class HeldRow {
  readonly row = new EncodedRow()
  #tsv: Buffer = Buffer.alloc(0)
  #start = 0
  #end = 0
  #indexed = false
  #time: string | null = null
  #ms = 0
  #traceId: string | null = null

  at (tsv: Buffer, start: number, end: number): this {
    this.#tsv = tsv
    this.#start = start
    this.#end = end
    this.#indexed = false
    this.#time = this.#traceId = null
    return this
  }

  get tsv (): Buffer { return this.#tsv }
  get start (): number { return this.#start }
  get end (): number { return this.#end }

  /** The row's fields (indexed on first use). */
  get fields (): EncodedRow {
    if (!this.#indexed) {
      this.row.index(this.#tsv, this.#start, this.#end)
      this.#indexed = true
    }
    return this.row
  }

  get time (): string {
    if (this.#time === null) {
      this.#time = this.fields.string('time')
      this.#ms = epochMs(this.#time)
    }
    return this.#time
  }

  get ms (): number {
    void this.time
    return this.#ms
  }

  get traceId (): string {
    this.#traceId ??= this.fields.string('trace_id')
    return this.#traceId
  }
}

/**
 * A filter's test of a held row: whether ClickHouse's clause holds for it, or null when this row cannot
 * be judged exactly as ClickHouse would (the page is then answered by ClickHouse alone).
 */
export type HeldTest = (row: HeldRow) => boolean | null

export interface ListFilter {
  /** The clauses (joined with AND) and their parameters for the filter's value; null when it is not set. */
  sql (f: TraceFilter): { readonly clauses: readonly string[]; readonly params: Record<string, unknown> } | null
  /**
   * The same filter on held rows (called only when `sql` gives clauses); null when no held row can be
   * judged exactly for this value (the page then comes from ClickHouse alone).
   */
  held (f: TraceFilter): HeldTest | null
  /** A costly test: run only on the page's candidates, newest first, once the cheap ones passed. */
  readonly late?: true
}

/** A filter that is one equality test of one field of TraceFilter. */
function equals (field: 'provider' | 'model' | 'user' | 'session', column: string): ListFilter {
  return {
    sql: (f) => f[field] === null ? null : { clauses: [`${column} = {${field}:String}`], params: { [field]: f[field] } },
    held: (f) => {
      const value = heldBytes(f[field]!)
      return (r) => r.fields.equals(column, value)
    },
  }
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
function textTest (needle: Buffer): HeldTest {
  let scratch = Buffer.allocUnsafe(0)
  return (row) => {
    const r = row.fields
    let found = false
    for (const column of ['prompt', 'response']) {
      const [from, to] = r.range(column)
      if (scratch.length < to - from) scratch = Buffer.allocUnsafe(to - from)
      const n = unescapeInto(r.tsv, from, to, scratch)
      const text = scratch.subarray(0, n)
      for (const a of AMBIGUOUS) if (text.indexOf(a) >= 0) return null
      lowerAscii(text, n)
      if (!found && text.indexOf(needle) >= 0) found = true
    }
    return found
  }
}

/** Every filter of the list, cheap ones first; the account's comes first and is always set. */
export const FILTERS: readonly ListFilter[] = [
  {
    // The account is the row's first field: rows of other accounts are passed over on these bytes alone.
    sql: (f) => ({ clauses: ['account_id = {accountId:UUID}'], params: { accountId: f.accountId } }),
    held: (f) => {
      const account = heldBytes(f.accountId.toLowerCase())
      return (r) => r.tsv.compare(account, 0, account.length, r.start, r.start + account.length) === 0 &&
        r.tsv[r.start + account.length] === 0x09
    },
  },
  {
    sql: (f) => f.from === null ? null : { clauses: ["time >= {from:DateTime64(3, 'UTC')}"], params: { from: chTime(f.from) } },
    held: (f) => (r) => r.ms >= f.from!,
  },
  {
    sql: (f) => f.to === null ? null : { clauses: ["time < {to:DateTime64(3, 'UTC')}"], params: { to: chTime(f.to) } },
    held: (f) => (r) => r.ms < f.to!,
  },
  equals('provider', 'provider'),
  equals('model', 'model'),
  {
    sql: (f) => f.outcomes === null ? null : { clauses: ['outcome IN {outcomes:Array(String)}'], params: { outcomes: f.outcomes } },
    held: (f) => {
      const values = f.outcomes!.map(heldBytes)
      return (r) => values.some((v) => r.fields.equals('outcome', v))
    },
  },
  {
    // 2xx, 4xx, 5xx…: the hundreds of the status code (0, no answer at all, is in no class).
    sql: (f) => f.statusClasses === null ? null : { clauses: ['intDiv(status, 100) IN {statusClasses:Array(UInt8)}'], params: { statusClasses: f.statusClasses } },
    held: (f) => (r) => f.statusClasses!.includes(Math.floor(r.fields.number('status')! / 100)),
  },
  {
    // latency_ms is a Float32: the held value is rounded to it, and both sides compare it as a Float64.
    sql: (f) => f.latencyMin === null ? null : { clauses: ['latency_ms >= {latencyMin:Float64}'], params: { latencyMin: f.latencyMin } },
    held: (f) => (r) => Math.fround(r.fields.number('latency_ms')!) >= f.latencyMin!,
  },
  {
    sql: (f) => f.latencyMax === null ? null : { clauses: ['latency_ms <= {latencyMax:Float64}'], params: { latencyMax: f.latencyMax } },
    held: (f) => (r) => Math.fround(r.fields.number('latency_ms')!) <= f.latencyMax!,
  },
  {
    // An unpriced call (cost NULL) is in no cost range: NULL compares as neither true nor false.
    sql: (f) => f.costMin === null ? null : { clauses: ['cost_usd >= {costMin:Float64}'], params: { costMin: f.costMin } },
    held: (f) => (r) => { const c = r.fields.number('cost_usd'); return c !== null && c >= f.costMin! },
  },
  {
    sql: (f) => f.costMax === null ? null : { clauses: ['cost_usd <= {costMax:Float64}'], params: { costMax: f.costMax } },
    held: (f) => (r) => { const c = r.fields.number('cost_usd'); return c !== null && c <= f.costMax! },
  },
  {
    sql: (f) => f.streaming === null ? null : { clauses: ['streaming = {streaming:Bool}'], params: { streaming: f.streaming } },
    held: (f) => (r) => r.fields.bool('streaming') === f.streaming,
  },
  {
    sql: (f) => f.confidential === null ? null : { clauses: ['confidential = {confidential:Bool}'], params: { confidential: f.confidential } },
    held: (f) => (r) => r.fields.bool('confidential') === f.confidential,
  },
  {
    // More than one attempt listed: the call fell over (a call made directly lists none).
    sql: (f) => f.fellOver === null ? null : { clauses: [`JSONLength(attempts) ${f.fellOver ? '>' : '<='} 1`], params: {} },
    held: (f) => (r) => attemptCount(r.fields.string('attempts')) > 1 === f.fellOver,
  },
  {
    sql: (f) => f.keyId === null ? null : { clauses: ['key_id = {keyId:UUID}'], params: { keyId: f.keyId } },
    held: (f) => {
      const value = heldBytes(f.keyId!.toLowerCase())
      return (r) => r.fields.equals('key_id', value)
    },
  },
  equals('user', 'user'),
  equals('session', 'session'),
  {
    sql: (f) => f.tag === null ? null : { clauses: ['has(tags, {tag:String})'], params: { tag: f.tag } },
    held: (f) => (r) => r.fields.strings('tags').includes(f.tag!),
  },
  {
    // A metadata value: ClickHouse reads a key the map lacks as '', so `key=` also matches traces without it.
    sql: (f) => f.meta === null ? null : { clauses: ['metadata[{metaKey:String}] = {metaValue:String}'], params: { metaKey: f.meta.key, metaValue: f.meta.value } },
    held: (f) => {
      const { key, value } = f.meta!
      // A key the decoded object cannot hold as its own property is not judged here.
      if (key === '__proto__') return null
      return (r) => {
        const m = r.fields.map('metadata')
        return (Object.hasOwn(m, key) ? m[key] : '') === value
      }
    },
  },
  {
    // Rows strictly after the cursor in the list's order: (time, trace_id) descending or ascending, or
    // (sort value, time, trace_id). For time the clause is spelled out rather than a tuple comparison:
    // `time <= …` lets the primary key skip every granule before the cursor, so a deep page costs what
    // the first one does (a tuple comparison scans them).
    sql: (f) => {
      const c = f.cursor
      if (c === null) return null
      const lt = f.order === 'desc' ? '<' : '>'
      const time = "{cursorTime:DateTime64(3, 'UTC')}"
      const params: Record<string, unknown> = { cursorTime: c.time, cursorId: c.traceId }
      const after = `(time ${lt} ${time} OR (time = ${time} AND trace_id ${lt} {cursorId:UUID}))`
      if (f.sort === 'time') return { clauses: [`time ${lt}= ${time}`, `(time ${lt} ${time} OR trace_id ${lt} {cursorId:UUID})`], params }
      const s = SORTS[f.sort]
      params.cursorValue = c.value
      const v = `{cursorValue:${s.type}}`
      return { clauses: [`(${s.sql} ${lt} ${v} OR (${s.sql} = ${v} AND ${after}))`], params }
    },
    held: (f) => {
      const order = listOrder(f)
      const c = f.cursor!
      const at: Ordered = { value: c.value ?? 0, time: c.time, trace_id: c.traceId.toLowerCase() }
      const sort = SORTS[f.sort]
      return (r) => order({ value: sort.held(r), time: r.time, trace_id: r.traceId }, at) > 0
    },
  },
  {
    // Case-insensitive text in the prompt or the response. In memory only for an ASCII needle: ClickHouse
    // folds other characters' case in ways this would have to copy exactly.
    sql: (f) => f.q === null ? null : {
      clauses: ['(positionCaseInsensitiveUTF8(prompt, {q:String}) > 0 OR positionCaseInsensitiveUTF8(response, {q:String}) > 0)'],
      params: { q: f.q },
    },
    held: (f) => {
      const needle = asciiNeedle(f.q!)
      return needle === null ? null : textTest(needle)
    },
    late: true,
  },
]

/** A row as the list orders it: its sort value (0 when sorted by time), its time text and trace id. */
export interface Ordered {
  readonly value: number
  readonly time: string
  readonly trace_id: string
}

/**
 * Each sort of the list: the expression ClickHouse orders by, its type for the cursor's parameter, and the
 * same value of a held row and of a summary (ClickHouse's answer). An unpriced call's cost sorts as -1,
 * below every priced one.
 */
export const SORTS: Readonly<Record<SortKey, { readonly sql: string; readonly type: string; held (r: HeldRow): number; summary (s: TraceSummary): number }>> = {
  time: { sql: 'time', type: "DateTime64(3, 'UTC')", held: () => 0, summary: () => 0 },
  latency: { sql: 'latency_ms', type: 'Float32', held: (r) => Math.fround(r.fields.number('latency_ms')!), summary: (s) => Math.fround(s.latency_ms) },
  cost: { sql: 'ifNull(cost_usd, -1)', type: 'Float64', held: (r) => r.fields.number('cost_usd') ?? -1, summary: (s) => s.cost_usd ?? -1 },
  tokens: {
    sql: '(toUInt64(input_tokens) + output_tokens)',
    type: 'UInt64',
    held: (r) => r.fields.number('input_tokens')! + r.fields.number('output_tokens')!,
    summary: (s) => s.input_tokens + s.output_tokens,
  },
}

/** The list's ORDER BY: the sort value (unless time), then time and trace id, all in the one direction. */
export function orderBy (f: Pick<TraceFilter, 'sort' | 'order'>): string {
  const d = f.order === 'desc' ? ' DESC' : ' ASC'
  const keys = f.sort === 'time' ? ['time', 'trace_id'] : [SORTS[f.sort].sql, 'time', 'trace_id']
  return keys.map((k) => k + d).join(', ')
}

/**
 * The list's order as a comparison: negative when `a` comes first. Times compare as ClickHouse's
 * fixed-width text, trace ids as ClickHouse orders UUIDs (uuidKey).
 */
export function listOrder (f: Pick<TraceFilter, 'sort' | 'order'>): (a: Ordered, b: Ordered) => number {
  const sign = f.order === 'desc' ? -1 : 1
  const byValue = f.sort !== 'time'
  return (a, b) => {
    if (byValue && a.value !== b.value) return a.value < b.value ? -sign : sign
    if (a.time !== b.time) return a.time < b.time ? -sign : sign
    const ka = uuidKey(a.trace_id)
    const kb = uuidKey(b.trace_id)
    return ka === kb ? 0 : ka < kb ? -sign : sign
  }
}

/** The WHERE clause and its parameters. Only fixed text is joined; every value is a parameter. */
export function where (f: TraceFilter): { sql: string; params: Record<string, unknown> } {
  const clauses: string[] = []
  const params: Record<string, unknown> = {}
  for (const filter of FILTERS) {
    const s = filter.sql(f)
    if (s === null) continue
    clauses.push(...s.clauses)
    Object.assign(params, s.params)
  }
  return { sql: clauses.join(' AND '), params }
}

/** The held-row tests of the filter's set filters, cheap and late; null when held rows cannot answer it. */
export function heldTests (f: TraceFilter): { cheap: HeldTest[]; late: HeldTest[] } | null {
  const cheap: HeldTest[] = []
  const late: HeldTest[] = []
  for (const filter of FILTERS) {
    if (filter.sql(f) === null) continue
    const test = filter.held(f)
    if (test === null) return null
    ;(filter.late === true ? late : cheap).push(test)
  }
  return { cheap, late }
}
