// Text normalisation for the injection detector: one canonical form that rules and the model both read,
// plus a map from every normalised character back to the original text so findings carry real spans.
// Also finds embedded base64, hex and %xx payloads so their decoded text is scored too.
import { LATIN_VARIANTS, LOOKALIKES, enclosedLetter, isFiller, isInvisible } from './lookalikes.js'
import { MAY_LEET, readLeet } from './leet.js'
import { BACKWARDS_HINT, joinSpread, keepLatinWords, splitSeamed, turnBackwardLines } from './rejoin.js'
import { FILL, LOOKALIKE, ONE, SEAM, copyUnit, isLetter, textOf, type Units } from './units.js'

/**
 * Normalised text and, for each of its UTF-16 units, the [start, end) of the original unit(s) it came
 * from. When `starts` is null the map is the identity shifted by `offset` (plain ASCII text that only
 * needed lower-casing and trimming, the common case, is mapped without building arrays).
 */
export interface Normalized {
  readonly text: string
  readonly starts: Int32Array | null
  readonly ends: Int32Array | null
  readonly offset: number
  /** The evasions undone to get `text` (EVASION bits), 0 when none: a model may count the attempt itself. */
  readonly evasions: number
}

/** Bits of Normalized.evasions. */
export const EVASION = Object.freeze({
  /** Letters spread out by separators, blank fillers or invisible characters, joined again. */
  SPREAD: 1,
  /** Look-alike letters of another script read as Latin in a Latin word. */
  LOOKALIKE: 2,
  /** Leetspeak symbols (or a 1 read as l) read as letters of a known word. */
  LEET: 4,
  /** A line read backwards. */
  BACKWARDS: 8,
})

/** A decoded payload and the span of its encoded run in the original text. */
export interface Payload {
  readonly kind: 'base64' | 'hex' | 'url'
  readonly start: number
  readonly end: number
  readonly decoded: string
}

// Digits and signs read as letters inside words ("1gn0re", "pr0mpt", "p@ssw0rd"): 0 1 3 4 5 7 @ $.
const LEET = new Uint8Array(128)
for (const [from, to] of ['0o', '1i', '3e', '4a', '5s', '7t', '@a', '$s']) LEET[(from as string).charCodeAt(0)] = (to as string).charCodeAt(0)

/** What one non-ASCII code point folds to: its text, and per unit the original letter when it is a look-alike (else 0). */
interface Fold { readonly text: string, readonly origs: readonly number[] | null }
const cache = new Map<number, Fold>()

const MARKS = /\p{M}/gu

function foldNonAscii(cp: number): Fold {
  let out = cache.get(cp)
  if (out !== undefined) return out
  const look = LOOKALIKES.get(cp)
  const enclosed = enclosedLetter(cp)
  if (look !== undefined) {
    out = { text: String.fromCharCode(look), origs: [String.fromCodePoint(cp).toLowerCase().charCodeAt(0)] }
  } else if (enclosed !== 0) {
    out = { text: String.fromCharCode(enclosed), origs: null }
  } else {
    // NFKD then dropping marks is NFKC plus diacritic folding: "ｉｇｎｏｒｅ" and "ìgnóre" both become "ignore".
    const decomposed = String.fromCodePoint(cp).normalize('NFKD').replace(MARKS, '').toLowerCase()
    let text = ''
    let origs: number[] | null = null
    for (const ch of decomposed) {
      const c = ch.codePointAt(0) as number
      const latin = LATIN_VARIANTS.get(c)
      const other = latin === undefined ? LOOKALIKES.get(c) : undefined
      if (other !== undefined && ch.length === 1) {
        origs ??= new Array<number>(text.length).fill(0)
        origs.push(c)
        text += String.fromCharCode(other)
        continue
      }
      const piece = latin ?? ch
      if (origs !== null) for (let i = 0; i < piece.length; i++) origs.push(0)
      text += piece
    }
    out = { text, origs }
  }
  if (cache.size < 65536) cache.set(cp, out)
  return out
}

function isSpace(cp: number): boolean {
  return cp === 32 || (cp >= 9 && cp <= 13) || cp === 0xa0 || cp === 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
    cp === 0x2028 || cp === 0x2029 || cp === 0x202f || cp === 0x205f || cp === 0x3000 || cp === 0x85
}

// Reused output buffers: the hot path normalises every segment of every request.
let units: Units = allocUnits(1024)

// The buffer splitSeamed writes into when it puts spaces in (the result is copied out before the next call).
let spare: Units = allocUnits(1024)
const SPARE_KEPT = 1 << 20

function spareUnits(size: number): Units {
  if (spare.codes.length < size) spare = allocUnits(Math.max(size, spare.codes.length * 2))
  return spare
}

function allocUnits(size: number): Units {
  return { codes: new Uint16Array(size), starts: new Int32Array(size), ends: new Int32Array(size), marks: new Uint8Array(size), origs: new Uint16Array(size), n: 0 }
}

function ensure(n: number): void {
  if (units.codes.length >= n) return
  let size = units.codes.length
  while (size < n) size *= 2
  const next = allocUnits(size)
  next.codes.set(units.codes); next.starts.set(units.starts); next.ends.set(units.ends); next.marks.set(units.marks); next.origs.set(units.origs)
  units = next
}

// Text the fast path cannot take: anything outside printable ASCII and newline, a whitespace run, a
// digit or sign next to a letter (leet), a leet symbol (`!g`, `|`, `()`, `[]`, `/\`, `\/`, `><`), and
// what the passes' own gates let through (letters spread out, words written backwards). One native
// scan each, instead of the character loop below; every text the loop would change matches one.
const NOT_PLAIN = /[^\x20-\x7e\n]|\s\s|[a-z][013457@$]|[013457@$][a-z]|![a-z0-9!|@$()[\]/\\<>_-]|\||\(\)|\[\]|\/\\|\\\/|></i
// MAY_SPREAD for ASCII in either case, with the first letter's left side checked too (a cheaper scan).
const SPREAD_ANY_CASE = /(?:^|[^A-Za-z0-9!|@$])[A-Za-z0-9!|@$][ \n\t._/\\*+~,:-]{1,3}[A-Za-z0-9!|@$][ \n\t._/\\*+~,:-]{1,3}[A-Za-z0-9!|@$](?![A-Za-z0-9!|@$])/
/**
 * The three as one expression, one scan instead of three: each already reads both cases (the classes
 * name both, or the flag does), has no numbered group, and a text matches the alternation exactly
 * when it matches one of them.
 */
const MAY_CHANGE = new RegExp(`${NOT_PLAIN.source}|${SPREAD_ANY_CASE.source}|${BACKWARDS_HINT.source}`, 'i')

/**
 * Lower-cased, NFKC-folded, confusable- and leet-mapped text with whitespace runs collapsed (newline
 * kept), and letters an evasion pulled apart, dressed up or turned around put back (rejoin.ts, leet.ts).
 */
export function normalize(input: string): Normalized {
  let a = 0
  let b = input.length
  while (a < b && isSpace(input.charCodeAt(a))) a++
  while (b > a && isSpace(input.charCodeAt(b - 1))) b--
  const core = a === 0 && b === input.length ? input : input.slice(a, b)
  if (!MAY_CHANGE.test(core)) {
    return { text: core.toLowerCase(), starts: null, ends: null, offset: core === '' ? 0 : a, evasions: 0 }
  }
  return normalizeSlow(input)
}

/** The character loop and the passes after it; exported for the test that checks the fast path against it. */
export function normalizeSlow(input: string): Normalized {
  ensure(input.length * 3 + 8)
  let u = units
  let { codes, starts, ends, marks, origs } = u
  let n = 0
  let pendingSpace = 0 // 0 none, 32 space, 10 newline
  let spaceStart = 0
  let seam = 0 // SEAM when an invisible character was dropped since the last unit
  let seams = false
  let fills = false
  let lookalikes = false
  for (let i = 0; i < input.length;) {
    const cp = input.codePointAt(i) as number
    const width = cp > 0xffff ? 2 : 1
    const at = i
    i += width
    if (cp < 128) {
      if (cp === 32 || (cp >= 9 && cp <= 13)) {
        if (pendingSpace === 0) spaceStart = at
        if (cp === 10 || pendingSpace === 10) pendingSpace = 10
        else pendingSpace = 32
        seam = 0
        continue
      }
      if (pendingSpace !== 0) {
        if (n > 0) { codes[n] = pendingSpace; starts[n] = spaceStart; ends[n] = at; marks[n] = 0; n++ }
        pendingSpace = 0
      }
      codes[n] = cp >= 65 && cp <= 90 ? cp + 32 : cp
      starts[n] = at; ends[n] = i; marks[n] = seam; n++
      seam = 0
      continue
    }
    if (isInvisible(cp)) { if (n > 0 && pendingSpace === 0) { seam = SEAM; seams = true } continue }
    if (isSpace(cp)) {
      if (pendingSpace === 0) { spaceStart = at; pendingSpace = 32 }
      if (cp === 0x2028 || cp === 0x2029 || cp === 0x85) pendingSpace = 10
      seam = 0
      continue
    }
    const isFill = isFiller(cp)
    const folded = isFill ? FILL_FOLD : foldNonAscii(cp)
    if (folded.text.length === 0) continue
    if (pendingSpace !== 0) {
      if (n > 0) { codes[n] = pendingSpace; starts[n] = spaceStart; ends[n] = at; marks[n] = 0; n++ }
      pendingSpace = 0
    }
    fills ||= isFill
    if (n + folded.text.length + 2 > codes.length) {
      units.n = n
      ensure(n + folded.text.length + 2)
      u = units;
      ({ codes, starts, ends, marks, origs } = u)
    }
    for (let k = 0; k < folded.text.length; k++) {
      const orig = folded.origs === null ? 0 : folded.origs[k] as number
      codes[n] = folded.text.charCodeAt(k); starts[n] = at; ends[n] = i
      marks[n] = (k === 0 ? seam : 0) | (orig !== 0 ? LOOKALIKE : 0); origs[n] = orig; n++
      if (orig !== 0) lookalikes = true
    }
    seam = 0
  }
  u.n = n
  if (fills) { resolveFills(u); seams = true }
  let anyOne = readDigits(u)
  // The passes' gates read the text once; a pass that changes units makes it stale, and it is built
  // again only then.
  let text = textOf(u)
  let dirty = false
  let evasions = seams && lettersJoined(u) ? EVASION.SPREAD : 0
  if (joinSpread(u, text)) {
    anyOne = readDigits(u) || anyOne
    seams = dirty = true
    evasions |= EVASION.SPREAD
  }
  if ((anyOne || MAY_LEET.test(text)) && readLeet(u)) { dirty = true; evasions |= EVASION.LEET }
  if (lookalikes) {
    if (keepLatinWords(u)) evasions |= EVASION.LOOKALIKE
    dirty = true
  }
  if (seams) {
    const split = splitSeamed(u, spareUnits)
    if (split !== null) { u = split; dirty = true }
  }
  if (dirty) text = textOf(u)
  if (BACKWARDS_HINT.test(text) && turnBackwardLines(u, text)) {
    text = textOf(u)
    evasions |= EVASION.BACKWARDS
  }
  const out = { text, starts: u.starts.slice(0, u.n), ends: u.ends.slice(0, u.n), offset: 0, evasions }
  // A long text split into words once should not keep a buffer twice its size for the worker's life.
  if (spare.codes.length > SPARE_KEPT) spare = allocUnits(1024)
  return out
}

/** Whether a dropped invisible character or filler stood between two letters (an emoji's joiner does not). */
function lettersJoined(u: Units): boolean {
  for (let k = 1; k < u.n; k++) {
    if (((u.marks[k] as number) & SEAM) !== 0 && isLetter(u.codes[k] as number) && isLetter(u.codes[k - 1] as number)) return true
  }
  return false
}

/**
 * Leet digits and signs count as letters only next to a letter, so "2024" and "3.14" stay numbers. A
 * 1 read as i is marked ONE (readLeet may make it an l). Returns whether there was one.
 */
function readDigits(u: Units): boolean {
  const codes = u.codes
  let anyOne = false
  for (let k = 0; k < u.n; k++) {
    const c = codes[k] as number
    const m = c < 128 ? LEET[c] as number : 0
    if (m === 0) continue
    const prev = k > 0 ? codes[k - 1] as number : 0
    const next = k + 1 < u.n ? codes[k + 1] as number : 0
    if (isLetter(prev) || isLetter(next)) {
      if (c === 49) { u.marks[k] = (u.marks[k] as number) | ONE; anyOne = true }
      codes[k] = m
    }
  }
  return anyOne
}

const FILL_FOLD: Fold = { text: String.fromCharCode(FILL), origs: null }



/**
 * A blank filler alone between two letters is dropped, as an invisible character is ("i⠀g⠀n⠀o⠀r⠀e"
 * reads "ignore", and words it ran together are split again later); any other filler is a space.
 * Spaces that end up side by side become one, a newline winning, and none is left at either end.
 */
function resolveFills(u: Units): void {
  let j = 0
  for (let k = 0; k < u.n; k++) {
    let c = u.codes[k] as number
    if (c === FILL) {
      const prev = k > 0 ? u.codes[k - 1] as number : 0
      const next = k + 1 < u.n ? u.codes[k + 1] as number : 0
      if (prev !== FILL && next !== FILL && isLetter(prev) && isLetter(next)) {
        u.marks[k + 1] = (u.marks[k + 1] as number) | SEAM
        continue
      }
      c = 32
    }
    if (c === 32 || c === 10) {
      if (j === 0) continue
      const last = u.codes[j - 1] as number
      if (last === 32 || last === 10) {
        if (c === 10) u.codes[j - 1] = 10
        u.ends[j - 1] = u.ends[k] as number
        continue
      }
    }
    copyUnit(u, j, u, k)
    u.codes[j++] = c
  }
  while (j > 0 && (u.codes[j - 1] === 32 || u.codes[j - 1] === 10)) j--
  u.n = j
}

/** Maps a [start, end) span of normalised text back to the original text. */
export function originalSpan(norm: Normalized, start: number, end: number): [number, number] {
  if (norm.starts === null || norm.ends === null) {
    const n = norm.text.length
    return [norm.offset + Math.min(start, n), norm.offset + Math.max(Math.min(start, n), Math.min(end, n))]
  }
  const n = norm.starts.length
  if (n === 0) return [0, 0]
  const from = Math.min(start, n - 1)
  const to = Math.max(from + 1, Math.min(end, n))
  // A line read backwards maps back in reverse order, so the span is the least start and greatest end.
  let s = norm.starts[from] as number
  let e = norm.ends[to - 1] as number
  for (let k = from; k < to; k++) {
    if ((norm.starts[k] as number) < s) s = norm.starts[k] as number
    if ((norm.ends[k] as number) > e) e = norm.ends[k] as number
  }
  return [s, Math.max(s, e)]
}

const HEX_RUN = /(?:(?:\\x|0x)?[0-9a-fA-F]{2}[ :,]?){8,}/g
// Starts at a '%' so the engine can skip to candidates; at least three escapes close together.
const URL_RUN = /(?:%[0-9a-fA-F]{2}[^\s%]{0,12}){3,}/g

// Character classes for the hand-written run scanner, which is cheaper than a regex over long text.
const B64 = 1, HEX = 2, SEP = 4
const CLASS = new Uint8Array(128)
for (let c = 0; c < 128; c++) {
  const ch = String.fromCharCode(c)
  if (/[A-Za-z0-9+/_=-]/.test(ch)) CLASS[c] = (CLASS[c] as number) | B64
  if (/[0-9a-fA-Fx\\]/.test(ch)) CLASS[c] = (CLASS[c] as number) | HEX
  if (ch === ' ' || ch === ':' || ch === ',') CLASS[c] = (CLASS[c] as number) | SEP
}

/**
 * One pass over the text for both run kinds: `b64(start, end)` for each maximal run of base64
 * characters and `hex(start, end)` for each maximal run of hex characters (separators allowed inside),
 * each with at least `min` characters of its class. One pass instead of one per kind: this scan is paid
 * by every segment, and almost all of them have no run at all.
 */
function scanRuns(input: string, min: number, b64: (start: number, end: number) => void, hex: (start: number, end: number) => void): void {
  let bStart = -1, bCount = 0
  let hStart = -1, hCount = 0
  for (let i = 0; i <= input.length; i++) {
    const c = i < input.length ? input.charCodeAt(i) : 0
    const k = c < 128 ? CLASS[c] as number : 0
    if ((k & B64) !== 0) {
      if (bStart < 0) { bStart = i; bCount = 0 }
      bCount++
    } else if (bStart >= 0) {
      if (bCount >= min) b64(bStart, i)
      bStart = -1
    }
    if ((k & HEX) !== 0) {
      if (hStart < 0) { hStart = i; hCount = 0 }
      hCount++
    } else if (hStart >= 0 && (k & SEP) === 0) {
      if (hCount >= min) hex(hStart, i)
      hStart = -1
    }
  }
}

function readable(s: string): boolean {
  if (s.length < 6) return false
  let letters = 0
  let bad = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 32) letters++
    else if (c === 0xfffd || (c < 32 && c !== 10 && c !== 13 && c !== 9)) bad++
  }
  return bad === 0 && letters >= s.length * 0.6
}

function decodeUrl(run: string): string {
  try {
    return decodeURIComponent(run.replace(/\+/g, ' '))
  } catch {
    return run.replace(/%([0-9a-fA-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)))
  }
}

/** Encoded runs in the text whose decoded form is readable text (depth 1; callers may recurse). */
export function findPayloads(input: string): Payload[] {
  const out: Payload[] = []
  if (input.length < 16) return out
  const hexRuns: Array<[number, number]> = []
  scanRuns(input, 16, (start, end) => {
    let run = input.slice(start, end)
    // "==" only pads the end; a long word is not base64, so require the mixed alphabet real encodings have.
    const pad = run.indexOf('=')
    if (pad >= 0) run = run.slice(0, pad)
    if (run.length < 16 || !/[A-Z]/.test(run) || !/[a-z0-9]/.test(run)) return
    const decoded = Buffer.from(run, 'base64').toString('utf8')
    if (readable(decoded)) out.push({ kind: 'base64', start, end, decoded })
  }, (start, end) => { hexRuns.push([start, end]) })
  // Hex payloads after base64 ones, as before the scans shared a pass (findings keep their order).
  for (const [start, end] of hexRuns) {
    HEX_RUN.lastIndex = 0
    for (const m of input.slice(start, end).matchAll(HEX_RUN)) {
      const digits = m[0].replace(/\\x|0x|[ :,]/g, '')
      if (digits.length % 2 !== 0 || (!/[a-fA-F]/.test(digits) && !/^(?:[2-7][0-9])+$/.test(digits))) continue
      const decoded = Buffer.from(digits, 'hex').toString('utf8')
      if (readable(decoded)) out.push({ kind: 'hex', start: start + m.index, end: start + m.index + m[0].length, decoded })
    }
  }
  if (input.includes('%')) {
    for (const m of input.matchAll(URL_RUN)) {
      const decoded = decodeUrl(m[0])
      if (readable(decoded)) out.push({ kind: 'url', start: m.index, end: m.index + m[0].length, decoded })
    }
  }
  return out
}
