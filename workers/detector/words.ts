// The word list normalize.ts judges its readings by (words.txt, written by training/detector/gen-words.ts
// from the data set's training rows, most frequent first): splitting a run of letters into words,
// choosing between i and l for `1`, `|` and `!`, and telling text written backwards.
import { readFileSync } from 'node:fs'
import { repoFile } from '../../src/paths.js'

const LIST = readFileSync(repoFile('workers/detector/words.txt'), 'utf8').split('\n').filter((w) => w !== '')

/** Rank of each word (0 for the most frequent). */
const RANK: ReadonlyMap<string, number> = new Map(LIST.map((w, i) => [w, i]))
const LONGEST = LIST.reduce((m, w) => Math.max(m, w.length), 0)

export function isWord (w: string): boolean {
  return RANK.has(w)
}

/** The word's rank (0 for the most frequent), or -1 when it is no known word. */
export function wordRank (w: string): number {
  return RANK.get(w) ?? -1
}

// Cost of a word in a split: frequent words are cheap (Zipf), and each word costs a little more, so
// that a long known word beats two short ones. A letter no known word covers costs more than any word.
const WORD_COST = 1
const UNKNOWN_LETTER = Math.log(LIST.length) + 6

function cost (rank: number): number {
  return Math.log(rank + 2) + WORD_COST
}

/**
 * Where to put spaces in a run of lower-case letters so it reads as words: the ends (exclusive) of
 * each word but the last, or null when the best reading is not at least `minKnown` known letters
 * (letters no known word covers are kept together as one word). Dynamic programming over the run.
 */
export function splitWords (letters: string, minKnown = 0.8): number[] | null {
  const n = letters.length
  const best = new Float64Array(n + 1).fill(Infinity)
  const from = new Int32Array(n + 1)
  const known = new Uint8Array(n + 1) // whether the last piece ending here is a known word
  best[0] = 0
  for (let e = 1; e <= n; e++) {
    for (let s = Math.max(0, e - LONGEST); s < e; s++) {
      const r = RANK.get(letters.slice(s, e))
      if (r === undefined) continue
      const c = (best[s] as number) + cost(r)
      if (c < (best[e] as number)) { best[e] = c; from[e] = s; known[e] = 1 }
    }
    const c = (best[e - 1] as number) + UNKNOWN_LETTER
    if (c < (best[e] as number)) { best[e] = c; from[e] = e - 1; known[e] = 0 }
  }
  const ends: number[] = []
  let knownLetters = 0
  let prevUnknown = false
  for (let e = n; e > 0; e = from[e] as number) {
    const s = from[e] as number
    const isKnown = known[e] === 1
    if (isKnown) knownLetters += e - s
    // Letters no word covers stay one piece: an unknown name is not split letter by letter.
    if (!(prevUnknown && !isKnown) && e < n) ends.push(e)
    prevUnknown = !isKnown
  }
  if (knownLetters < minKnown * n) return null
  return ends.reverse()
}

/**
 * Whether a line's words read as words backwards and not forwards: at least 3 words of two or more
 * letters, most of them known when reversed, and clearly more than as written.
 */
export function readsBackwards (line: string): boolean {
  const words = line.match(/[a-z]{2,}/g)
  if (words === null || words.length < 3) return false
  let forward = 0
  let backward = 0
  for (const w of words) {
    if (RANK.has(w)) forward++
    let r = ''
    for (let i = w.length - 1; i >= 0; i--) r += w[i]
    if (RANK.has(r)) backward++
  }
  return backward >= 0.6 * words.length && backward - forward >= Math.max(2, 0.3 * words.length)
}
