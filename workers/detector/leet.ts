// Leetspeak read as letters (normalize.ts): a word written with symbols (`!gn()r3`, `/\||`, `|\/|e`,
// `€v€r`) or with a 1 that may be an i or an l (`a11`) becomes the most frequent known word among its
// readings. A reading that is no known word is not taken, so `|name|`, `a/b`, `(x)` and code stay.
import { LEET_SEQUENCES, LEET_SYMBOLS } from './lookalikes.js'
import { DIGIT, LETTER, NEW, ONE, RUN, classOf, isLetter, isOne, move, type Units } from './units.js'
import { wordRank } from './words.js'

/** A leet symbol: readLeet looks around each one, so text with none skips it. */
export const MAY_LEET = /[!|()[\]/\\<>\u00a1-\u00a9\u00ae\u20ac]/

const MAX_READINGS = 16

/**
 * The most frequent known word (of at least two letters) among the readings of units [a, b), every
 * leet sequence and symbol read as a letter, with the unit each letter starts at; undefined when a
 * character cannot be read or no reading is a word. At most MAX_READINGS readings are tried.
 */
function bestReading (u: Units, a: number, b: number): { text: string, from: number[] } | undefined {
  const from: number[] = []
  const options: string[] = []
  let readings = 1
  for (let k = a; k < b;) {
    const c = u.codes[k] as number
    from.push(k)
    if (isLetter(c) && !isOne(u, k)) { options.push(String.fromCharCode(c)); k++; continue }
    const seq = sequenceAt(u, k, b)
    if (seq !== undefined) { options.push(seq[1]); k += seq[0].length; continue }
    const o = isOne(u, k) ? 'il' : LEET_SYMBOLS.get(c)
    if (o === undefined) return undefined
    options.push(o)
    readings *= o.length
    k++
  }
  if (from.length < 2) return undefined
  let best: string | undefined
  let bestRank = Infinity
  // Reading r picks, for each ambiguous character from the last, option (r / product of those after) % count.
  for (let r = 0; r < Math.min(readings, MAX_READINGS); r++) {
    let text = ''
    let rest = r
    for (let i = options.length - 1; i >= 0; i--) {
      const o = options[i] as string
      text = (o.length === 1 ? o : o[rest % o.length] as string) + text
      if (o.length > 1) rest = Math.floor(rest / o.length)
    }
    const rank = wordRank(text)
    if (rank >= 0 && rank < bestRank) { best = text; bestRank = rank }
  }
  return best === undefined ? undefined : { text: best, from }
}

/** The leet sequence that starts at unit k and ends by b, if any. */
function sequenceAt (u: Units, k: number, b: number): readonly [string, string] | undefined {
  for (const s of LEET_SEQUENCES) {
    if (k + s[0].length > b) continue
    let ok = true
    for (let i = 0; i < s[0].length && ok; i++) ok = u.codes[k + i] === s[0].charCodeAt(i)
    if (ok) return s
  }
  return undefined
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
      const word = bestReading(u, a, b)
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

