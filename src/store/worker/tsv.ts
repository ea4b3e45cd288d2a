// A TabSeparated batch written straight into one growing buffer. Trace rows are inserted in this
// format because prompt and response arrive as UTF-8 bytes: they are escaped byte by byte into the
// batch and never become JS strings, JSON strings or a SQL string on the way to ClickHouse (the
// client's JSONEachRow path cost a decode, a JSON.stringify and a re-encode per row; see bench/ingest).
// Escapes are ClickHouse's TSV ones: https://clickhouse.com/docs/interfaces/formats/TabSeparated

const TAB = 0x09
const NL = 0x0a
const BACKSLASH = 0x5c

/** For each byte, the letter of its escape after a backslash, or 0 when it is written as is. */
export const ESCAPE = new Uint8Array(256)
ESCAPE[0x00] = 0x30 // \0
ESCAPE[0x08] = 0x62 // \b
ESCAPE[0x09] = 0x74 // \t
ESCAPE[0x0a] = 0x6e // \n
ESCAPE[0x0c] = 0x66 // \f
ESCAPE[0x0d] = 0x72 // \r
ESCAPE[0x5c] = 0x5c // \\

const ESCAPED_BYTES = [0x5c, 0x0a, 0x09, 0x0d, 0x00, 0x08, 0x0c]

/** The index of the first byte that needs an escape, or the length when none does. */
function firstEscaped (src: Uint8Array): number {
  const b = Buffer.isBuffer(src) ? src : Buffer.from(src.buffer, src.byteOffset, src.byteLength)
  let first = src.length
  for (const c of ESCAPED_BYTES) {
    const at = b.indexOf(c)
    if (at >= 0 && at < first) first = at
  }
  return first
}

const NEEDS_ESCAPE = /[\0\b\t\n\f\r\\]/
const ESCAPES: Record<string, string> = { '\0': '\\0', '\b': '\\b', '\t': '\\t', '\n': '\\n', '\f': '\\f', '\r': '\\r', '\\': '\\\\' }
const escapeChar = (c: string): string => ESCAPES[c]!

/**
 * An element of an Array or Map field: a quoted string, with the field's own escapes and `\'` for the
 * quote. One level only: inside the quotes the TSV escapes already keep tabs and newlines out of the bytes.
 */
const QUOTED_ESCAPES: Record<string, string> = { ...ESCAPES, "'": "\\'" }
const quoteChar = (c: string): string => QUOTED_ESCAPES[c]!
const NEEDS_QUOTED_ESCAPE = /[\0\b\t\n\f\r\\']/
function quoted (s: string): string {
  return NEEDS_QUOTED_ESCAPE.test(s) ? `'${s.replace(/[\0\b\t\n\f\r\\']/g, quoteChar)}'` : `'${s}'`
}

export class TsvWriter {
  #buf: Buffer
  #pos = 0
  /** True before the first field of a row: no tab goes before it. */
  #rowStart = true

  /** Writes into `initial` (a buffer given back by an earlier batch), or into a new buffer of that size. */
  constructor (initial: number | Buffer = 64 * 1024) {
    this.#buf = typeof initial === 'number' ? Buffer.allocUnsafeSlow(initial) : initial
  }

  #room (n: number): void {
    if (this.#pos + n <= this.#buf.length) return
    const next = Buffer.allocUnsafeSlow(Math.max(this.#buf.length * 2, this.#pos + n))
    this.#buf.copy(next, 0, 0, this.#pos)
    this.#buf = next
  }

  #sep (): void {
    if (this.#rowStart) {
      this.#rowStart = false
      return
    }
    this.#room(1)
    this.#buf[this.#pos++] = TAB
  }

  /** A String field from UTF-8 bytes, escaped byte by byte (at most two output bytes per input byte). */
  bytes (src: Uint8Array): this {
    this.#sep()
    this.#room(src.length * 2)
    const out = this.#buf
    let pos = this.#pos
    // Most text holds none of the escaped bytes or only late: find the first with native scans and copy
    // everything before it in one go.
    const first = firstEscaped(src)
    out.set(first === src.length ? src : src.subarray(0, first), pos)
    pos += first
    for (let i = first; i < src.length; i++) {
      const b = src[i]!
      const e = ESCAPE[b]!
      if (e === 0) {
        out[pos++] = b
      } else {
        out[pos++] = BACKSLASH
        out[pos++] = e
      }
    }
    this.#pos = pos
    return this
  }

  /** A String field from a JS string (ids, names, small JSON). */
  string (s: string): this {
    return this.#utf8(NEEDS_ESCAPE.test(s) ? s.replace(/[\0\b\t\n\f\r\\]/g, escapeChar) : s)
  }

  /** An Array(String) field: `['a','b']`. */
  strings (list: readonly string[]): this {
    if (list.length === 0) return this.#ascii('[]')
    let text = '['
    for (let i = 0; i < list.length; i++) text += (i === 0 ? '' : ',') + quoted(list[i]!)
    return this.#utf8(text + ']')
  }

  /** A Map(String, String) field: `{'k':'v'}`, the object's own keys in their order. */
  map (m: Readonly<Record<string, string>>): this {
    const keys = Object.keys(m)
    if (keys.length === 0) return this.#ascii('{}')
    let text = '{'
    for (let i = 0; i < keys.length; i++) text += (i === 0 ? '' : ',') + quoted(keys[i]!) + ':' + quoted(m[keys[i]!]!)
    return this.#utf8(text + '}')
  }

  /** Text already escaped for the field. */
  #utf8 (text: string): this {
    this.#sep()
    this.#room(text.length * 3)
    this.#pos += this.#buf.write(text, this.#pos, 'utf8')
    return this
  }

  /** A number field; null writes `\N` (a Nullable column's NULL). */
  number (n: number | null): this {
    return n === null ? this.#ascii('\\N') : this.#ascii(String(n))
  }

  bool (b: boolean): this {
    return this.#ascii(b ? 'true' : 'false')
  }

  /** Fields already in their TSV form: ASCII, escaped, separated by tabs (constant runs of fields). */
  fields (text: string): this {
    return this.#ascii(text)
  }

  #ascii (s: string): this {
    this.#sep()
    this.#room(s.length)
    this.#pos += this.#buf.write(s, this.#pos, 'latin1')
    return this
  }

  endRow (): void {
    this.#room(1)
    this.#buf[this.#pos++] = NL
    this.#rowStart = true
  }

  /** Bytes written so far (the end of the last whole row after endRow). */
  get size (): number { return this.#pos }

  /** Drops what was written after `size` bytes (a row whose encoding failed half-way). */
  rewind (size: number): void {
    this.#pos = Math.min(size, this.#pos)
    this.#rowStart = true
  }

  /** The batch so far, as a view on this writer's memory (valid until the next write). */
  view (): Buffer {
    return this.#buf.subarray(0, this.#pos)
  }
}

/** Where a UTF-8 byte range cut at `end` must stop so that it does not end inside a character. */
export function utf8End (bytes: Uint8Array, end: number): number {
  // Walk back over at most three continuation bytes to the lead byte of the last character.
  let i = end - 1
  let k = 0
  while (i >= 0 && k < 3 && (bytes[i]! & 0xc0) === 0x80) { i--; k++ }
  if (i < 0) return end
  const lead = bytes[i]!
  const need = lead < 0x80 ? 1 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1
  return end - i >= need ? end : i
}
