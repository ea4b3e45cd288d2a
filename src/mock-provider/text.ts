// The answer text: deterministic lorem words, WORDS_PER_CHUNK to a chunk, so a test can predict it and
// a token count is simply the number of words. Every chunk string (and its JSON form) is built once at
// load, so a streamed answer allocates nothing for its text.

const WORDS = (
  'Lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et ' +
  'dolore magna aliqua Ut enim ad minim veniam quis nostrud exercitation ullamco laboris nisi ut aliquip ex ' +
  'ea commodo consequat'
).split(' ')

export const WORDS_PER_CHUNK = 3
// 36 words make 12 distinct chunks; chunk k reuses chunk k % CYCLE.
const CYCLE = WORDS.length / WORDS_PER_CHUNK

function words (i: number): string {
  return WORDS.slice(i * WORDS_PER_CHUNK, (i + 1) * WORDS_PER_CHUNK).join(' ')
}

// Slots 0..CYCLE-1: a middle chunk (leading space); CYCLE..2*CYCLE-1: the same, last (ends the sentence);
// 2*CYCLE: the first chunk; 2*CYCLE+1: the first chunk when it is also the last.
const TEXTS: readonly string[] = [
  ...Array.from({ length: CYCLE }, (_, i) => ` ${words(i)}`),
  ...Array.from({ length: CYCLE }, (_, i) => ` ${words(i)}.`),
  words(0),
  `${words(0)}.`,
]
const JSONS: readonly string[] = TEXTS.map((s) => JSON.stringify(s))

function slot (k: number, n: number): number {
  const last = k === n - 1
  if (k === 0) return last ? 2 * CYCLE + 1 : 2 * CYCLE
  return (last ? CYCLE : 0) + (k % CYCLE)
}

/** The text of chunk k (0-based) of an answer of n chunks. */
export function chunkText (k: number, n: number): string {
  return TEXTS[slot(k, n)] ?? ''
}

/** chunkText as a JSON string literal, ready to splice into an event. */
export function chunkJson (k: number, n: number): string {
  return JSONS[slot(k, n)] ?? '""'
}

const FULL = new Map<number, string>()
const FULL_CACHE_MAX_CHUNKS = 4096

/** The whole answer of n chunks, as a non-streamed answer carries it. */
export function fullText (n: number): string {
  let text = FULL.get(n)
  if (text === undefined) {
    text = ''
    for (let k = 0; k < n; k++) text += chunkText(k, n)
    if (n <= FULL_CACHE_MAX_CHUNKS) FULL.set(n, text)
  }
  return text
}

/** Output tokens of k chunks: one per word. */
export function outputTokens (chunks: number): number {
  return chunks * WORDS_PER_CHUNK
}

/** Input tokens estimated the usual rough way: four bytes of body to a token. */
export function inputTokens (bodyBytes: number): number {
  return Math.ceil(bodyBytes / 4)
}
