// The top-level scan of a raw request body. The front thread never parses a whole prompt: it validates
// the bytes (UTF-8 and JSON grammar, natively), then walks only the top-level object to find each
// member's key and the byte span of its value. Nested values are skipped by bracket matching.
// bench/scan.ts measures this against JSON.parse; bench/RESULTS.md has the numbers.
import { isUtf8 } from 'node:buffer'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const simdjson = require('simdjson') as { isValid (json: string): boolean }

export const enum Kind { String, Number, Object, Array, True, False, Null }

export interface Member {
  /** The key, with JSON escapes decoded (so `"api\u005fkey"` is `api_key`). */
  readonly name: string
  /** Offset of the key's opening quote. */
  readonly start: number
  readonly valueStart: number
  /** Offset just past the value. */
  readonly end: number
  readonly kind: Kind
}

const QUOTE = 0x22
const BACKSLASH = 0x5c

/**
 * Whole-body validity: UTF-8 and JSON grammar. simdjson wins over JSON.parse here (bench/scan.ts), but
 * it refuses integers outside the 64-bit range, which JSON allows (RFC 8259 §6) and providers may
 * receive; so a body simdjson refuses is judged again by JSON.parse. That second look only happens on
 * bodies that are invalid or carry such numbers, and the body limit bounds its cost.
 */
export function isValidJson (body: Buffer): boolean {
  if (!isUtf8(body)) return false
  // latin1 maps each byte to one UTF-16 unit without decoding; simdjson re-encodes it to UTF-8 and sees
  // the same JSON structure (every structural byte is ASCII), so validity is unchanged and we skip a decode.
  if (simdjson.isValid(body.toString('latin1'))) return true
  try {
    JSON.parse(body.toString('utf8'))
    return true
  } catch {
    return false
  }
}

function isWs (b: number): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09
}

function skipWs (buf: Buffer, i: number): number {
  while (i < buf.length && isWs(buf[i]!)) i++
  return i
}

/** `i` is at an opening quote; returns the offset just past the closing one. */
export function endOfString (buf: Buffer, i: number): number {
  let j = buf.indexOf(QUOTE, i + 1)
  for (;;) {
    if (j < 0) return buf.length
    let k = j - 1
    while (buf[k] === BACKSLASH) k--
    if ((j - 1 - k) % 2 === 0) return j + 1
    j = buf.indexOf(QUOTE, j + 1)
  }
}

function endOfValue (buf: Buffer, i: number): number {
  const b = buf[i]
  if (b === QUOTE) return endOfString(buf, i)
  if (b === 0x7b || b === 0x5b) {
    let depth = 0
    while (i < buf.length) {
      const c = buf[i]!
      if (c === QUOTE) { i = endOfString(buf, i); continue }
      if (c === 0x7b || c === 0x5b) depth++
      else if (c === 0x7d || c === 0x5d) {
        depth--
        if (depth === 0) return i + 1
      }
      i++
    }
    return i
  }
  // number, true, false, null: runs to the next delimiter
  while (i < buf.length) {
    const c = buf[i]!
    if (c === 0x2c || c === 0x7d || c === 0x5d || isWs(c)) break
    i++
  }
  return i
}

function hasBackslash (buf: Buffer, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (buf[i] === BACKSLASH) return true
  return false
}

function kindOf (b: number): Kind {
  switch (b) {
    case QUOTE: return Kind.String
    case 0x7b: return Kind.Object
    case 0x5b: return Kind.Array
    case 0x74: return Kind.True
    case 0x66: return Kind.False
    case 0x6e: return Kind.Null
    default: return Kind.Number
  }
}

/**
 * The members of the top-level object of a body that `isValidJson` accepted, in order.
 * Returns null when the top level is not an object.
 */
export function scanTopLevel (buf: Buffer): Member[] | null {
  let i = skipWs(buf, 0)
  if (buf[i] !== 0x7b) return null
  i = skipWs(buf, i + 1)
  const members: Member[] = []
  if (buf[i] === 0x7d) return members
  while (i < buf.length) {
    const start = i
    const keyEnd = endOfString(buf, i)
    const name = hasBackslash(buf, i + 1, keyEnd)
      ? JSON.parse(buf.toString('utf8', i, keyEnd)) as string
      : buf.toString('utf8', i + 1, keyEnd - 1)
    i = skipWs(buf, keyEnd)
    i = skipWs(buf, i + 1) // past ':'
    const valueStart = i
    const end = endOfValue(buf, i)
    members.push({ name, start, valueStart, end, kind: kindOf(buf[valueStart]!) })
    i = skipWs(buf, end)
    if (buf[i] !== 0x2c) break // '}'
    i = skipWs(buf, i + 1)
  }
  return members
}

/** The decoded value of a string member (service field values are short; JSON.parse handles escapes). */
export function stringValue (buf: Buffer, m: Member): string {
  const raw = buf.toString('utf8', m.valueStart, m.end)
  return raw.indexOf('\\') === -1 ? raw.slice(1, -1) : JSON.parse(raw) as string
}

/**
 * The body with the given members cut out and every other byte kept. Each cut member takes the comma
 * that separates it from its neighbour with it: the following one, or for the last member the one
 * before it. Overlapping ranges merge, so any set of members can be cut.
 */
export function cutMembers (buf: Buffer, members: readonly Member[], cut: ReadonlySet<number>): Buffer {
  if (cut.size === 0) return buf
  const ranges: Array<[number, number]> = []
  for (let k = 0; k < members.length; k++) {
    if (!cut.has(k)) continue
    const m = members[k]!
    const next = members[k + 1]
    if (next !== undefined) {
      ranges.push([m.start, next.start])
    } else {
      let p = k - 1
      while (p >= 0 && cut.has(p)) p--
      ranges.push([p >= 0 ? members[p]!.end : m.start, m.end])
    }
  }
  ranges.sort((a, b) => a[0] - b[0])
  const merged: Array<[number, number]> = []
  let removed = 0
  for (const r of ranges) {
    const last = merged[merged.length - 1]
    if (last !== undefined && r[0] <= last[1]) {
      if (r[1] > last[1]) { removed += r[1] - last[1]; last[1] = r[1] }
    } else {
      merged.push([r[0], r[1]])
      removed += r[1] - r[0]
    }
  }
  const out = Buffer.allocUnsafe(buf.length - removed)
  let from = 0
  let to = 0
  for (const [s, e] of merged) {
    to += buf.copy(out, to, from, s)
    from = e
  }
  buf.copy(out, to, from, buf.length)
  return out
}
