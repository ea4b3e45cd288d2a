// Passes of normalize.ts's character loop that undo evasions: letters spread out by separators
// (`i.g.n.o.r.e`, `i g n o r e`, a Hangul filler between letters) joined and split into words again,
// look-alike letters of other scripts kept only in words that are Latin, and lines written backwards
// turned around (leetspeak is read in leet.ts). Every unit keeps the [start, end) of the original
// characters it came from.
import { DIGIT, FILL, LEET, LETTER, LOOKALIKE, SEAM, SEP, classOf, copyUnit, isLetter, move, swap, textOf, type Units } from './units.js'
import { isWord, readsBackwards, splitWords } from './words.js'

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
 * Returns whether a look-alike stayed Latin.
 */
export function keepLatinWords (u: Units): boolean {
  let kept = false
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
    if (lookalike && (foreign || (!latin && !isWord(textOf(u, k, e))))) {
      for (let i = k; i < e; i++) if (((u.marks[i] as number) & LOOKALIKE) !== 0) u.codes[i] = u.origs[i] as number
    } else if (lookalike) {
      kept = true
    }
    k = e
  }
  return kept
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
    const text = seam && e - k >= 5 ? textOf(u, k, e) : ''
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

/**
 * A native scan of the normalised text that every text joinSpread would change matches, so that other
 * text skips the pass: three single letters spread out (joinSpread needs four).
 */
export const MAY_SPREAD = /[a-z0-9!|@$\u00a1-\u00ae\u20ac][ \n\t._/\\*+~,:\u00b7\u2022-]{1,3}[a-z0-9!|@$\u00a1-\u00ae\u20ac][ \n\t._/\\*+~,:\u00b7\u2022-]{1,3}[a-z0-9!|@$\u00a1-\u00ae\u20ac](?![a-z0-9!|@$\u00a1-\u00ae\u00c0-\uffff])/

const MAY_SPREAD_ALL = new RegExp(MAY_SPREAD.source, 'g')
