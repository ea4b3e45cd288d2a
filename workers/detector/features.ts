// Hashed features for the linear model: character 3- to 5-grams and word uni- and bigrams of the
// normalised text. Each feature is recorded with the position it ends at, so the scorer can sum any
// window of the text with prefix sums instead of re-extracting (long prompts are scored in windows).

export const BITS = 18
export const DIM = 1 << BITS

/**
 * A text's weight sum is divided by (distinct features)^LENGTH_POWER: below cosine's 0.5, so the many
 * neutral n-grams of a longer prompt do not drown the few that carry an attack (chosen by
 * `npm run train:detector -- --cv`; the figures are in this folder's README). Long text is still scored in windows (model.ts).
 */
export const LENGTH_POWER = 0.35
const MASK = DIM - 1

const SEED3 = 0x9e3779b1 // by n-gram length
const SEED4 = 0x85ebca77
const SEED5 = 0xc2b2ae3d
const P1 = 0x01000193
const P2 = Math.imul(P1, P1)
const P3 = Math.imul(P2, P1)
const P4 = Math.imul(P3, P1)
const SEED_WORD = 0x27d4eb2f
const SEED_BIGRAM = 0x165667b1

/** Extracted features live in these reused buffers; only the first `count` entries are valid. */
export interface FeatureBuffers {
  buckets: Int32Array
  positions: Int32Array
  count: number
}

export function createBuffers(): FeatureBuffers {
  return { buckets: new Int32Array(4096), positions: new Int32Array(4096), count: 0 }
}

function fmix(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h & MASK
}

function isWordChar(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 39 || c > 127
}

/** Fills `out` with every feature of `text` (already normalised). */
export function extractFeatures(text: string, out: FeatureBuffers): void {
  const len = text.length
  // At most 3 char n-grams and 2 word features per character.
  const need = len * 5 + 8
  if (out.buckets.length < need) {
    let size = out.buckets.length
    while (size < need) size *= 2
    out.buckets = new Int32Array(size)
    out.positions = new Int32Array(size)
  }
  const buckets = out.buckets
  const positions = out.positions
  let n = 0
  let c1 = 32, c2 = 32, c3 = 32, c4 = 32 // previous characters, most recent first; text starts after a space
  let word = SEED_WORD
  let inWord = false
  let prevWord = 0
  let hasPrev = false
  for (let i = 0; i <= len; i++) {
    const c = i < len ? text.charCodeAt(i) : 32
    if (i < len) {
      // Character n-grams ending at i (the text is padded with one leading space), as nested
      // polynomials: the 4- and 5-gram each add one term to the shorter one, then fmix mixes each with
      // its length's seed. A third of the multiplications of hashing each n-gram from scratch.
      const h3 = (Math.imul(c2, P2) + Math.imul(c1, P1) + c) | 0
      const h4 = (Math.imul(c3, P3) + h3) | 0
      const h5 = (Math.imul(c4, P4) + h4) | 0
      buckets[n] = fmix(h3 ^ SEED3); positions[n++] = i
      buckets[n] = fmix(h4 ^ SEED4); positions[n++] = i
      buckets[n] = fmix(h5 ^ SEED5); positions[n++] = i
    }
    if (isWordChar(c)) {
      word = Math.imul(word ^ c, 16777619)
      inWord = true
    } else if (inWord) {
      buckets[n] = fmix(word); positions[n++] = i - 1
      if (hasPrev) { buckets[n] = fmix(Math.imul(prevWord ^ SEED_BIGRAM, 0x01000193) ^ word); positions[n++] = i - 1 }
      prevWord = word
      hasPrev = true
      word = SEED_WORD
      inWord = false
      // A sentence end breaks bigrams so they do not span unrelated clauses.
      if (c === 46 || c === 10 || c === 33 || c === 63) hasPrev = false
    }
    c4 = c3; c3 = c2; c2 = c1; c1 = c
  }
  out.count = n
}
