// Passes of normalize.ts's character loop that undo evasions: letters spread out by separators
// (`i.g.n.o.r.e`, `i g n o r e`, a Hangul filler between letters) joined and split into words again,
// leetspeak symbols read as letters where that makes a known word (`!gn0re`, `pr()mpt`, `|\/|e`),
// look-alike letters of other scripts kept only in words that are Latin, and lines written backwards
// turned around. Every unit keeps the [start, end) of the original characters it came from.
import { LEET_SEQUENCES, LEET_SYMBOLS } from './lookalikes.js'
import { isWord, readsBackwards, splitWords, wordRank } from './words.js'

/** Normalised UTF-16 units and where each came from; `n` are in use. */
export interface Units {
  codes: Uint16Array
  starts: Int32Array
  ends: Int32Array
  /** Per unit: LOOKALIKE (mapped from another script, the original in `origs`), SEAM (a separator or invisible character was removed before it), ONE. */
  marks: Uint8Array
  origs: Uint16Array
  n: number
}

export const LOOKALIKE = 1
export const SEAM = 2
/** An `i` read from the digit 1, which may as well have been an l. */
export const ONE = 4

function isOne (u: Units, k: number): boolean {
  return ((u.marks[k] as number) & ONE) !== 0
}
/** Code of a blank filler (Hangul filler, Braille blank) until the passes decide what it was. */
export const FILL = 0x3164

function isLetter (c: number): boolean {
  return c >= 97 && c <= 122
}

// Character classes of the passes, one table lookup each (the passes run over every slow-path text).
const LETTER = 1, LEET = 2, NEW = 4, RUN = 8, SEP = 16, DIGIT = 32
const ASCII_CLASS = new Uint8Array(128)
const OTHER_CLASS = new Map<number, number>()

function classOf (c: number): number {
  return c < 128 ? ASCII_CLASS[c] as number : c === FILL ? SEP : OTHER_CLASS.get(c) ?? 0
}

/** Units copied with their spans and marks, from `k` to `j` (the passes only ever move units left or keep them). */
function move (u: Units, j: number, k: number): void {
  u.codes[j] = u.codes[k] as number
  u.starts[j] = u.starts[k] as number
  u.ends[j] = u.ends[k] as number
  u.marks[j] = u.marks[k] as number
  u.origs[j] = u.origs[k] as number
}

// Letters are spread out with separators (SEP: blanks, `. - _ / \\ * + ~ , :`, middle dots, bullets). A
// separator between two letters is at most three of them, and all separators of one run are the same
// (same units, and for a blank the same width).
const MAX_SEP = 3
/** A run of at least this many single letters is spread-out text; a shorter one only beside such a run with the same separator. */
const STRONG_RUN = 4

/** A letter (or leet character) that stands alone: no letter, digit or leet character either side. */
function single (u: Units, k: number): boolean {
  if ((classOf(u.codes[k] as number) & (LETTER | LEET)) === 0) return false
  return (k === 0 || !wordish(u.codes[k - 1] as number)) && (k + 1 >= u.n || !wordish(u.codes[k + 1] as number))
}

function wordish (c: number): boolean {
  return c >= 0xc0 ? c !== FILL : (classOf(c) & (LETTER | LEET | DIGIT)) !== 0
}

/**
 * One separator unit, the same one repeated ("--"), or one between two spaces (" - "). Not a sign
 * and then a space: "J. R. R." and "a, b, c" are how initials and lists are written.
 */
function plainSeparator (u: Units, from: number, to: number): boolean {
  const c = u.codes[from] as number
  if (to - from === 1) return true
  let same = true
  for (let k = from + 1; k < to; k++) same &&= u.codes[k] === c
  return same || (to - from === 3 && c === 32 && u.codes[from + 2] === 32)
}

/** A blank's width in the original text, else 0: separators of one run are the same units and widths. */
function width (u: Units, k: number): number {
  const c = u.codes[k] as number
  return c === 32 || c === 10 || c === 9 ? (u.ends[k] as number) - (u.starts[k] as number) : 0
}

/** Whether the separators [a, a + len) and [b, b + len) are the same. */
function sameSeparator (u: Units, a: number, b: number, len: number): boolean {
  for (let i = 0; i < len; i++) if (u.codes[a + i] !== u.codes[b + i] || width(u, a + i) !== width(u, b + i)) return false
  return true
}

function sepKey (u: Units, from: number, to: number): string {
  let key = ''
  for (let k = from; k < to; k++) key += `${u.codes[k] as number}:${width(u, k)},`
  return key
}

interface Run { readonly letters: number[], readonly key: string, readonly real: number }

/**
 * Maximal runs of single letters with one separator between them, each as the positions of its
 * letters. Only the stretches MAY_SPREAD finds in `text` (the units' text) are looked at.
 */
function spreadRuns (u: Units, text: string): Run[] {
  const runs: Run[] = []
  let k = 0
  MAY_SPREAD_ALL.lastIndex = 0
  for (let m = MAY_SPREAD_ALL.exec(text); m !== null; m = MAY_SPREAD_ALL.exec(text)) {
    let limit = m.index + m[0].length
    for (k = Math.max(k, m.index); k < limit && k < u.n; k++) {
      if (!single(u, k)) continue
      const letters = [k]
      let sepAt = -1, sepLen = 0 // the run's separator: the first one
      let at = k
      for (;;) {
        let e = at + 1
        while (e < u.n && e - at - 1 < MAX_SEP && (classOf(u.codes[e] as number) & SEP) !== 0) e++
        if (e >= u.n || e === at + 1 || !single(u, e) || !plainSeparator(u, at + 1, e)) break
        if (sepAt < 0) { sepAt = at + 1; sepLen = e - at - 1 } else if (e - at - 1 !== sepLen || !sameSeparator(u, sepAt, at + 1, sepLen)) break
        letters.push(e)
        at = e
      }
      let real = 0
      for (const p of letters) if (isLetter(u.codes[p] as number)) real++
      if (letters.length >= 2) runs.push({ letters, key: sepKey(u, sepAt, sepAt + sepLen), real })
      // The last letter may start the next run, with another separator ("e.g., a/n/t/i").
      limit = Math.max(limit, at + 1 + MAX_SEP + 1)
      k = letters.length >= 2 ? at - 1 : at
    }
    MAY_SPREAD_ALL.lastIndex = Math.max(k, m.index + 1)
  }
  return runs
}

/**
 * Joins letters spread out by one repeated separator: runs of at least STRONG_RUN letters, and shorter
 * runs of at least two with a separator a strong run uses ("i.g.n.o.r.e a.l.l"). At least half of a
 * strong run must be real letters (not leet digits), three at least, so numbers, sizes and versions stay. Returns whether anything changed.
 */
export function joinSpread (u: Units, text: string): boolean {
  const runs = spreadRuns(u, text)
  if (runs.length === 0) return false
  const strongRun = (r: Run): boolean => r.letters.length >= STRONG_RUN && r.real >= 3 && r.real * 2 >= r.letters.length
  const strong = new Set(runs.filter(strongRun).map((r) => r.key))
  if (strong.size === 0) return false
  const drop = new Uint8Array(u.n)
  for (const r of runs) {
    // A short run joins only beside a strong one and only if it is all letters: "2 x 4 x 10" stays.
    if (!strong.has(r.key) || !(strongRun(r) || r.real === r.letters.length)) continue
    for (let i = 1; i < r.letters.length; i++) {
      const a = r.letters[i - 1] as number, b = r.letters[i] as number
      for (let k = a + 1; k < b; k++) drop[k] = 1
      u.marks[b] = (u.marks[b] as number) | SEAM
    }
    u.marks[r.letters[0] as number] = (u.marks[r.letters[0] as number] as number) | SEAM
  }
  let j = 0
  for (let k = 0; k < u.n; k++) if (drop[k] === 0) move(u, j++, k)
  u.n = j
  return true
}

const MAX_READINGS = 16

/** The readings of units [a, b) with every leet sequence and symbol read as a letter, or [] when one cannot be. */
function readings (u: Units, a: number, b: number): Array<{ text: string, from: number[] }> {
  let out: Array<{ text: string, from: number[] }> = [{ text: '', from: [] }]
  for (let k = a; k < b;) {
    const c = u.codes[k] as number
    if (isLetter(c) && !isOne(u, k)) { for (const r of out) { r.text += String.fromCharCode(c); r.from.push(k) } k++; continue }
    let seq: readonly [string, string] | undefined
    for (const s of LEET_SEQUENCES) {
      if (k + s[0].length > b) continue
      let ok = true
      for (let i = 0; i < s[0].length && ok; i++) ok = u.codes[k + i] === s[0].charCodeAt(i)
      if (ok) { seq = s; break }
    }
    if (seq !== undefined) {
      for (const r of out) { r.text += seq[1]; r.from.push(k) }
      k += seq[0].length
      continue
    }
    const options = isOne(u, k) ? 'il' : LEET_SYMBOLS.get(c)
    if (options === undefined) return []
    const next: Array<{ text: string, from: number[] }> = []
    for (const r of out) for (const o of options) if (next.length < MAX_READINGS) next.push({ text: r.text + o, from: [...r.from, k] })
    out = next
    k++
  }
  return out
}

/**
 * Reads leetspeak words: a run of letters and leet characters that holds a symbol (`!`, `|`, `()`,
 * `/\`, `€`, …) or a `1` read as i, read with each symbol as a letter; the most frequent known word
 * among its readings (edge symbols dropped if need be) replaces it, each letter spanning the
 * characters it was written with. Runs are looked at only around such symbols. Returns whether
 * anything changed.
 */
export function readLeet (u: Units): boolean {
  const found: Array<{ a: number, b: number, word: { text: string, from: number[] } }> = []
  const inRun = (c: number): boolean => (classOf(c) & (LETTER | RUN)) !== 0
  let done = 0 // units before this were looked at as part of a run
  const look = (t: number): void => {
    if (t < done) return
    let k = t
    while (k > 0 && inRun(u.codes[k - 1] as number)) k--
    let e = t + 1
    while (e < u.n && inRun(u.codes[e] as number)) e++
    done = e
    // An exclamation mark that ends a word is punctuation.
    while (e > k + 1 && u.codes[e - 1] === 33) e--
    if (e - k < 2 || e - k > 40) return
    // The whole run first, then without a leading or trailing symbol ("(ignore)", "pr0mpt!").
    for (const [a, b] of trims(u, k, e)) {
      if (!readable(u, a, b)) continue
      const word = bestWord(readings(u, a, b))
      if (word === undefined) continue
      found.push({ a, b, word })
      return
    }
  }
  for (let t = 0; t < u.n; t++) if ((classOf(u.codes[t] as number) & NEW) !== 0 || isOne(u, t)) look(t)
  if (found.length === 0) return false
  let j = 0
  let at = 0
  for (const { a, b, word } of found) {
    while (at < a) move(u, j++, at++)
    for (let i = 0; i < word.text.length; i++) {
      const from = word.from[i] as number
      const to = i + 1 < word.from.length ? word.from[i + 1] as number : b
      u.codes[j] = word.text.charCodeAt(i)
      u.starts[j] = u.starts[from] as number
      u.ends[j] = u.ends[to - 1] as number
      u.marks[j] = (u.marks[from] as number) & ~ONE
      u.origs[j] = u.origs[from] as number
      j++
    }
    at = b
  }
  while (at < u.n) move(u, j++, at++)
  u.n = j
  return true
}

/** The reading that is the most frequent known word of at least two letters. */
function bestWord (options: ReadonlyArray<{ text: string, from: number[] }>): { text: string, from: number[] } | undefined {
  let best: { text: string, from: number[] } | undefined
  let bestRank = Infinity
  for (const o of options) {
    const r = o.text.length >= 2 ? wordRank(o.text) : -1
    if (r >= 0 && r < bestRank) { best = o; bestRank = r }
  }
  return best
}

/**
 * Whether units [a, b) may be read as leetspeak: a symbol or a `1` read as i among them, and a letter,
 * or only symbols (`/\\||`); digits with no letter stay a number ("2011)").
 */
function readable (u: Units, a: number, b: number): boolean {
  let symbol = false, letter = false, digit = false
  for (let k = a; k < b; k++) {
    const c = u.codes[k] as number
    const cls = classOf(c)
    if ((cls & NEW) !== 0 || isOne(u, k)) symbol = true
    else if ((cls & LETTER) !== 0) letter = true
    else if ((cls & DIGIT) !== 0) digit = true
  }
  return symbol && (letter || (!digit && b - a >= 3))
}

function trims (u: Units, k: number, e: number): Array<[number, number]> {
  const out: Array<[number, number]> = [[k, e]]
  let a = k
  while (a < e && !isLetter(u.codes[a] as number) && a - k < 2) { a++; out.push([a, e]) }
  let b = e
  while (b > k && !isLetter(u.codes[b - 1] as number) && e - b < 2) { b--; out.push([k, b], [a, b]) }
  return out
}

/** A letter of a word, for keepLatinWords: a-z, a look-alike, or a character of another script (not a blank, sign or punctuation). */
function isWordUnit (u: Units, k: number): boolean {
  const c = u.codes[k] as number
  if (c < 0xc0) return isLetter(c) || ((u.marks[k] as number) & LOOKALIKE) !== 0
  return c !== FILL && c !== 0xd7 && c !== 0xf7 && !(c >= 0x2000 && c <= 0x2bff) && !(c >= 0x3000 && c <= 0x303f) && !(c >= 0xff00 && c <= 0xff0f)
}

/**
 * Look-alike letters stay Latin only in a word that is Latin: one with Latin letters and no other
 * script's ("іgnоrе"), or one made only of look-alikes that reads as a known word ("ѕуѕтем"). In any
 * other word they go back to their own script, so Russian, Greek, Armenian and Cherokee stay themselves.
 */
export function keepLatinWords (u: Units): void {
  for (let k = 0; k < u.n;) {
    if (!isWordUnit(u, k)) { k++; continue }
    let e = k
    let latin = false, foreign = false, lookalike = false
    while (e < u.n && isWordUnit(u, e)) {
      const m = u.marks[e] as number
      if ((m & LOOKALIKE) !== 0) lookalike = true
      else if (isLetter(u.codes[e] as number)) latin = true
      else foreign = true
      e++
    }
    if (lookalike && (foreign || (!latin && !isWord(String.fromCharCode.apply(null, u.codes.subarray(k, e) as unknown as number[]))))) {
      for (let i = k; i < e; i++) if (((u.marks[i] as number) & LOOKALIKE) !== 0) u.codes[i] = u.origs[i] as number
    }
    k = e
  }
}

/**
 * Splits words rejoined by the passes above (letters with a SEAM) that are no known word into known
 * words ("ignoreallprevious" from `i g n o r e a l l p r e v i o u s`). Spaces put in span the gap
 * between the letters they stand between. Returns a new buffer when it split anything, else null.
 */
export function splitSeamed (u: Units, alloc: (n: number) => Units): Units | null {
  let out: Units | null = null
  let j = 0
  const copyTo = (o: Units, from: number, to: number): void => { for (let k = from; k < to; k++) copyUnit(o, j++, u, k) }
  let copied = 0
  for (let k = 0; k < u.n;) {
    if (!isLetter(u.codes[k] as number)) { k++; continue }
    let e = k
    let seam = false
    while (e < u.n && isLetter(u.codes[e] as number)) {
      if (((u.marks[e] as number) & SEAM) !== 0) seam = true
      e++
    }
    const text = seam && e - k >= 5 ? String.fromCharCode.apply(null, u.codes.subarray(k, e) as unknown as number[]) : ''
    if (text !== '' && !isWord(text)) {
      const ends = splitWords(text)
      if (ends !== null && ends.length > 0) {
        out ??= alloc(u.n * 2 + 8)
        copyTo(out, copied, k)
        let at = k
        for (const end of ends) {
          copyTo(out, at, k + end)
          out.codes[j] = 32; out.starts[j] = u.ends[k + end - 1] as number; out.ends[j] = u.starts[k + end] as number
          out.marks[j] = 0; out.origs[j] = 0; j++
          at = k + end
        }
        copyTo(out, at, e)
        copied = e
      }
    }
    k = e
  }
  if (out === null) return null
  copyTo(out, copied, u.n)
  out.n = j
  return out
}

function copyUnit (o: Units, j: number, u: Units, k: number): void {
  o.codes[j] = u.codes[k] as number
  o.starts[j] = u.starts[k] as number
  o.ends[j] = u.ends[k] as number
  o.marks[j] = u.marks[k] as number
  o.origs[j] = u.origs[k] as number
}

// Reversed forms of words almost every English sentence has: text without any is not read backwards,
// so ordinary text pays one native scan for this pass.
export const BACKWARDS_HINT = /\b(?:eht|uoy|ruoy|dna|taht|siht|htiw|erongi|snoitcurtsni|tpmorp|drowssap|terces|metsys|laever)\b/

/** Turns around, in place, each line whose words read as words only backwards. Returns whether any was. */
export function turnBackwardLines (u: Units, text: string): boolean {
  let changed = false
  let from = 0
  for (let k = 0; k <= u.n; k++) {
    if (k < u.n && u.codes[k] !== 10) continue
    if (k - from >= 8 && BACKWARDS_HINT.test(text.slice(from, k)) && readsBackwards(text.slice(from, k))) {
      for (let a = from, b = k - 1; a < b; a++, b--) swap(u, a, b)
      changed = true
    }
    from = k + 1
  }
  return changed
}

function swap (u: Units, a: number, b: number): void {
  const c = u.codes[a] as number; u.codes[a] = u.codes[b] as number; u.codes[b] = c
  const s = u.starts[a] as number; u.starts[a] = u.starts[b] as number; u.starts[b] = s
  const e = u.ends[a] as number; u.ends[a] = u.ends[b] as number; u.ends[b] = e
  const m = u.marks[a] as number; u.marks[a] = u.marks[b] as number; u.marks[b] = m
  const o = u.origs[a] as number; u.origs[a] = u.origs[b] as number; u.origs[b] = o
}

for (let c = 97; c <= 122; c++) ASCII_CLASS[c] = LETTER
for (let c = 48; c <= 57; c++) ASCII_CLASS[c] = DIGIT
for (const c of LEET_SYMBOLS.keys()) {
  if (c < 128) ASCII_CLASS[c] = (ASCII_CLASS[c] as number) | LEET | RUN
  else OTHER_CLASS.set(c, LEET | RUN)
}
for (const ch of '()[]/\\<>-_') ASCII_CLASS[ch.charCodeAt(0)] = (ASCII_CLASS[ch.charCodeAt(0)] as number) | RUN
// Symbols that stand for letters only as leetspeak (digits, `@` and `$` are read the older way, by position).
for (const ch of '!|()[]/\\<>€£¡¥¢©®§') {
  const c = ch.charCodeAt(0)
  if (c < 128) ASCII_CLASS[c] = (ASCII_CLASS[c] as number) | NEW
  else OTHER_CLASS.set(c, (OTHER_CLASS.get(c) ?? 0) | NEW)
}
for (const c of [32, 10, 9, 46, 45, 95, 47, 92, 42, 43, 126, 44, 58]) ASCII_CLASS[c] = (ASCII_CLASS[c] as number) | SEP
for (const c of [0xb7, 0x2022]) OTHER_CLASS.set(c, SEP)

/**
 * Native scans of the normalised text that every text a pass would change matches, so that other
 * text skips the pass: three single letters spread out (joinSpread needs four), and a leet symbol
 * (readLeet looks around each one).
 */
export const MAY_SPREAD = /[a-z0-9!|@$\u00a1-\u00ae\u20ac][ \n\t._/\\*+~,:\u00b7\u2022-]{1,3}[a-z0-9!|@$\u00a1-\u00ae\u20ac][ \n\t._/\\*+~,:\u00b7\u2022-]{1,3}[a-z0-9!|@$\u00a1-\u00ae\u20ac](?![a-z0-9!|@$\u00a1-\u00ae\u00c0-\uffff])/
export const MAY_LEET = /[!|()[\]/\\<>\u00a1-\u00a9\u00ae\u20ac]/

const MAY_SPREAD_ALL = new RegExp(MAY_SPREAD.source, 'g')
