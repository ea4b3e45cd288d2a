// Writes workers/detector/words.txt, the word list normalize.ts reads to rejoin and re-split letters
// an evasion pulled apart, to check a leet reading and to tell text written backwards. Words are the
// runs of a-z in the data set's train.jsonl (both labels: attack words must be words too) found in at
// least MIN_ROWS rows, most frequent first, so a word's line number is its rank. Deterministic.
// Run: tsc -p training && node dist-training/training/detector/gen-words.js
import { writeFileSync } from 'node:fs'
import { repoFile } from '../../src/paths.js'
import { readRows } from './data.js'

const MIN_ROWS = 3
const MAX_LENGTH = 20
// Single letters are words only as English writes them; two-letter runs need more rows to count.
const SINGLE = new Set(['a', 'i'])
const MIN_ROWS_SHORT = 20
// Pieces of contractions ("I'll", "we've", "you're", "don't") are no words of their own.
const PIECES = new Set(['ll', 've', 're', 'nt', 'didn', 'doesn', 'isn', 'wasn', 'aren', 'couldn', 'wouldn', 'shouldn', 'haven', 'hasn', 'weren'])

const rows = new Map<string, number>()
for (const r of readRows('train.jsonl')) {
  for (const w of new Set(r.text.toLowerCase().match(/[a-z]+/g) ?? [])) rows.set(w, (rows.get(w) ?? 0) + 1)
}
const words = [...rows]
  .filter(([w, n]) => w.length <= MAX_LENGTH && !PIECES.has(w) && (w.length === 1 ? SINGLE.has(w) : n >= (w.length === 2 ? MIN_ROWS_SHORT : MIN_ROWS)))
  .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
  .map(([w]) => w)
writeFileSync(repoFile('workers/detector/words.txt'), words.join('\n') + '\n')
console.log(`${words.length} words`)
