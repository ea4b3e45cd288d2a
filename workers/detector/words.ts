// The word list normalize.ts judges its readings by (words.txt, written by training/detector/gen-words.ts
// from the data set's training rows, most frequent first): splitting a run of letters into words,
// choosing between i and l for `1`, `|` and `!`, and telling text written backwards.
import { readFileSync } from 'node:fs'
import { repoFile } from '../../src/paths.js'

const LIST = readFileSync(repoFile('workers/detector/words.txt'), 'utf8').split('\n').filter((w) => w !== '')

/** Rank of each word (0 for the most frequent). */
const RANK: ReadonlyMap<string, number> = new Map(LIST.map((w, i) => [w, i]))

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

const COST = Float64Array.from(LIST, (_w, rank) => Math.log(rank + 2) + WORD_COST)

// The words as a trie over a-z: node i's child for letter c is CHILD[i * 26 + c] (0: none), and
// WORD_AT[i] is the rank + 1 of the word ending at node i (0: none). Splitting walks it from each
// letter without building a string per candidate.
const { CHILD, WORD_AT } = buildTrie()

function buildTrie (): { CHILD: Uint16Array, WORD_AT: Uint16Array } {
  const size = 1 + LIST.reduce((m, w) => m + w.length, 0)
  if (size > 0xffff || LIST.length >= 0xffff) throw new Error('words.txt: too many words for the trie')
  const child = new Uint16Array(size * 26)
  const wordAt = new Uint16Array(size)
  let used = 1
  LIST.forEach((w, rank) => {
    let node = 0
    for (let i = 0; i < w.length; i++) {
      const c = w.charCodeAt(i) - 97
      if (c < 0 || c >= 26) return
      let next = child[node * 26 + c] as number
      if (next === 0) { next = used++; child[node * 26 + c] = next }
      node = next
    }
    if (wordAt[node] === 0) wordAt[node] = rank + 1
  })
  return { CHILD: child.slice(0, used * 26), WORD_AT: wordAt.slice(0, used) }
}

/**
 * Where to put spaces in a run of lower-case letters so it reads as words: the ends (exclusive) of
 * each word but the last, or null when the best reading is not at least `minKnown` known letters
 * (letters no known word covers are kept together as one word). Dynamic programming over the run,
 * the known words at each position found by walking the trie.
 */
export function splitWords (letters: string, minKnown = 0.8): number[] | null {
  const n = letters.length
  const best = new Float64Array(n + 1).fill(Infinity)
  const from = new Int32Array(n + 1)
  const known = new Uint8Array(n + 1) // whether the last piece ending here is a known word
  best[0] = 0
  for (let s = 0; s < n; s++) {
    const base = best[s] as number
    if (base === Infinity) continue
    const unknown = base + UNKNOWN_LETTER
    if (unknown < (best[s + 1] as number)) { best[s + 1] = unknown; from[s + 1] = s; known[s + 1] = 0 }
    let node = 0
    for (let e = s; e < n; e++) {
      node = CHILD[node * 26 + letters.charCodeAt(e) - 97] as number
      if (node === 0) break
      const rank = WORD_AT[node] as number
      if (rank === 0) continue
      const c = base + (COST[rank - 1] as number)
      if (c < (best[e + 1] as number)) { best[e + 1] = c; from[e + 1] = s; known[e + 1] = 1 }
    }
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
