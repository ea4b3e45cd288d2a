// The trace list's filters, each described once: the clause ClickHouse runs (every value a query
// parameter) and the same test on a row still held in the store worker's memory (recent-traces.ts), which
// must give exactly ClickHouse's answer. A new filter is one entry in FILTERS; the list query's WHERE and
// the rows from memory both follow from it.
import { chTime } from './connect.js'
import { EncodedRow, unescapeInto } from './tsv-read.js'
import { TsvWriter } from './tsv.js'
import type { TraceFilter } from './trace-queries.js'

/** A String column's value as a held row holds it (escaped as tsv.ts writes it), for comparing bytes. */
export function heldBytes (value: string): Buffer {
  return Buffer.from(new TsvWriter(value.length * 3 + 8).string(value).view())
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

/** A filter that is one equality or membership test of one field of TraceFilter. */
function equals (field: 'provider' | 'model' | 'outcome' | 'user' | 'session', column: string): ListFilter {
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
  equals('outcome', 'outcome'),
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
    // Rows strictly older than the cursor in (time, trace_id) order. Spelled out rather than as a tuple
    // comparison: `time <= …` lets the primary key skip every granule newer than the cursor, so a deep
    // page costs what the first one does (a tuple `<` scans them).
    sql: (f) => f.cursor === null ? null : {
      clauses: ["time <= {cursorTime:DateTime64(3, 'UTC')}", "(time < {cursorTime:DateTime64(3, 'UTC')} OR trace_id < {cursorId:UUID})"],
      params: { cursorTime: f.cursor.time, cursorId: f.cursor.traceId },
    },
    held: (f) => {
      const ms = epochMs(f.cursor!.time)
      const key = uuidKey(f.cursor!.traceId.toLowerCase())
      return (r) => r.ms < ms || (r.ms === ms && uuidKey(r.traceId) < key)
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
