// Hashed features for the linear model: character 3- to 5-grams, word uni- and bigrams, and concept
// pairs (below) of the normalised text. Each feature is recorded with the position it ends at, so the
// scorer can sum any window of the text with prefix sums instead of re-extracting (long prompts are
// scored in windows).

export const BITS = 18
export const DIM = 1 << BITS

/**
 * A text's weight sum is divided by (distinct features)^LENGTH_POWER: below cosine's 0.5, so the many
 * neutral n-grams of a longer prompt do not drown the few that carry an attack (chosen by
 * `npm run train:detector -- --cv`; the figures are in this folder's EXPERIMENTS.md). Long text is still scored in windows (model.ts).
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

const SEED_PAIR = 0xa54ff53a

/**
 * Words grouped by what they do in an attack: "ignore", "disregard" and "forget" are one concept,
 * "instructions", "rules" and "guidelines" another. Each pair of concept words within PAIR_SPAN words
 * of one sentence adds the ordered concept pair as a feature ("IGNORE … INSTRUCTIONS", "REVEAL …
 * SECRET"). N-grams learn a wording; the pairs let what the model learned from one wording count for
 * its synonyms, which is what an attack source it never saw needs. In `--cv`, pairs raised the
 * left-out-source recall and the cross-validated recall without more own benign prompts over the cut;
 * concepts as single features as well raised both further but put more benign prompts over it
 * (this folder's EXPERIMENTS.md). Lists are of normalised words (lower case, diacritics and leet folded).
 */
const CONCEPTS: Readonly<Record<string, readonly string[]>> = {
  ignore: ['ignore', 'ignoring', 'ignored', 'disregard', 'disregarding', 'forget', 'forgetting', 'skip', 'drop', 'discard', 'abandon', 'overlook', 'bypass', 'override', 'overriding', 'cancel', 'scrap', 'erase', 'neglect', 'omit', 'dismiss', 'void', 'suspend', 'lift', 'vergiss', 'ignoriere', 'ignorieren', 'olvida', 'olvide', 'oublie', 'oubliez', 'ignora', 'dimentica', 'vergeet', 'zignoruj', 'esqueca', 'esquece'],
  prior: ['previous', 'prior', 'preceding', 'above', 'earlier', 'former', 'initial', 'original', 'before', 'foregoing', 'existing', 'default', 'vorherigen', 'bisherigen', 'obigen', 'anteriores', 'anterieures', 'precedentes', 'precedenti', 'eerdere', 'poprzednie'],
  instructions: ['instructions', 'instruction', 'rules', 'guidelines', 'guideline', 'directives', 'directive', 'prompt', 'prompts', 'programming', 'policies', 'policy', 'restrictions', 'constraints', 'orders', 'commands', 'guidance', 'configuration', 'setup', 'filters', 'safeguards', 'guardrails', 'anweisungen', 'regeln', 'instrucciones', 'reglas', 'consignes', 'regles', 'istruzioni', 'regole', 'instrucoes', 'regras', 'instructies', 'instrukcje'],
  reveal: ['reveal', 'print', 'repeat', 'show', 'tell', 'give', 'output', 'display', 'write', 'spell', 'leak', 'share', 'say', 'type', 'disclose', 'recite', 'dump', 'echo', 'return', 'copy', 'paste', 'quote', 'translate', 'summarize', 'summarise', 'list', 'expose', 'provide', 'send', 'forward', 'upload', 'confirm', 'read'],
  secret: ['password', 'passwords', 'passphrase', 'passcode', 'secret', 'secrets', 'code', 'key', 'pin', 'credentials', 'word', 'phrase', 'hidden', 'confidential', 'magic', 'pw', 'passwort', 'contrasena', 'senha', 'wachtwoord', 'haslo', 'codeword'],
  system: ['system', 'developer', 'developers', 'admin', 'administrator', 'operator', 'root', 'sudo', 'creator', 'creators', 'owner', 'maker', 'makers', 'openai'],
  part: ['letter', 'letters', 'character', 'characters', 'half', 'first', 'last', 'syllable', 'syllables', 'vowels', 'part', 'digits', 'position', 'length', 'long'],
  transform: ['backwards', 'backward', 'reverse', 'reversed', 'split', 'separated', 'spaced', 'encode', 'encoded', 'base64', 'hex', 'binary', 'morse', 'rotie', 'cipher', 'acrostic', 'riddle', 'rhyme', 'poem', 'song', 'story', 'hint', 'anagram', 'vertically', 'dashes', 'commas', 'spaces', 'emoji', 'leetspeak', 'synonym'],
  persona: ['pretend', 'act', 'acting', 'roleplay', 'role', 'persona', 'simulate', 'imagine', 'become', 'mode', 'dan', 'jailbreak', 'jailbroken', 'character', 'called', 'named'],
  unbound: ['unrestricted', 'unfiltered', 'uncensored', 'unlimited', 'unbound', 'unchained', 'freed', 'free', 'amoral', 'unethical', 'immoral', 'limitless', 'lawless', 'anything', 'everything', 'whatever'],
  negation: ['no', 'not', 'never', 'without', 'none', 'nothing', "don't", 'dont', 'cannot', "can't", 'longer', 'anymore'],
  you: ['you', 'your', 'yourself', "you're", 'youre'],
  now: ['now', 'henceforth', 'onwards', 'onward', 'instead', 'new'],
  ai: ['ai', 'assistant', 'model', 'chatbot', 'bot', 'gpt', 'chatgpt', 'llm', 'agent', 'language'],
  obey: ['must', 'shall', 'obey', 'follow', 'comply', 'required', 'only', 'exactly', 'verbatim'],
  // Read by the neural head only (HEAD_CONCEPT): what the model reading a text writes back, counted
  // only right after "your" ("your reply", not "reply to this email"), and orders to change or add to
  // it. Their pairs say whom an order in data addresses: "add … to your answer" is to the model.
  reply: ['response', 'responses', 'reply', 'replies', 'answer', 'answers', 'completion', 'solution', 'implementation', 'codebase', 'script', 'program'],
  alter: ['add', 'include', 'insert', 'append', 'modify', 'alter', 'mention', 'replace', 'rewrite', 'rephrase', 'convert'],
}
const PAIR_SPAN = 6
/** The concept number of `reply`, which counts only after "your" (see CONCEPTS). */
const REPLY = Object.keys(CONCEPTS).indexOf('reply')
/**
 * Concepts from this number on are the head's: their words enter a ring of their own, so the pairs of
 * the other concepts, and with them the linear part's features, are what they were without them.
 */
const HEAD_CONCEPT = REPLY

function wordHash (w: string): number {
  let h = SEED_WORD
  for (let i = 0; i < w.length; i++) h = Math.imul(h ^ w.charCodeAt(i), 16777619)
  return h
}

const YOUR = wordHash('your')

// Word hash (as extractFeatures computes it) to concept number + 1, in an open-addressing table: one
// lookup per word of every text, several times cheaper than a Map.
const CONCEPT_BITS = 10
const CONCEPT_KEYS = new Int32Array(1 << CONCEPT_BITS)
const CONCEPT_VALS = new Int8Array(1 << CONCEPT_BITS)
Object.values(CONCEPTS).forEach((words, k) => {
  for (const w of words) {
    const h = wordHash(w)
    let slot = (Math.imul(h, 0x9e3779b1) >>> (32 - CONCEPT_BITS))
    while (CONCEPT_VALS[slot] !== 0 && CONCEPT_KEYS[slot] !== h) slot = (slot + 1) & ((1 << CONCEPT_BITS) - 1)
    CONCEPT_KEYS[slot] = h
    CONCEPT_VALS[slot] = k + 1
  }
})

/** The concept of a word by its hash, or -1. */
function conceptOf (h: number): number {
  let slot = (Math.imul(h, 0x9e3779b1) >>> (32 - CONCEPT_BITS))
  for (;;) {
    const v = CONCEPT_VALS[slot] as number
    if (v === 0) return -1
    if (CONCEPT_KEYS[slot] === h) return v - 1
    slot = (slot + 1) & ((1 << CONCEPT_BITS) - 1)
  }
}

/**
 * Extracted features live in these reused buffers; only the first `count` entries are valid. `words`
 * is 1 for a word-level feature (word, bigram, concept pair), 0 for a character n-gram and HEAD_ONLY
 * for a pair with a head concept: the neural part of the model (model.ts) reads the word-level ones
 * and those, a seventh of all features, which keeps its cost within the latency budget; the linear
 * part reads all but the HEAD_ONLY ones.
 */
export const HEAD_ONLY = 2

export interface FeatureBuffers {
  buckets: Int32Array
  positions: Int32Array
  words: Uint8Array
  count: number
}

export function createBuffers(): FeatureBuffers {
  return { buckets: new Int32Array(4096), positions: new Int32Array(4096), words: new Uint8Array(4096), count: 0 }
}

function fmix(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h & MASK
}

/** Letters, digits, the apostrophe and any non-ASCII character make words (the text is normalised). */
export function isWordChar(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 39 || c > 127
}

const RING = 4

/**
 * Where an extraction stands between two calls of extractRange: the characters and word behind it, and
 * the sentence's concept rings. Features of a text extracted in several ranges are exactly those of one
 * pass, so a long text can be read in pieces while the buffers hold only the part being scored.
 */
export interface FeatureCursor {
  /** The next step: characters [0, at) are read; step text.length is the closing space. */
  at: number
  c1: number; c2: number; c3: number; c4: number
  word: number
  inWord: boolean
  prevWord: number
  hasPrev: boolean
  words: number
  ringN: number
  headN: number
  readonly ringC: Int32Array
  readonly ringW: Int32Array
  readonly headC: Int32Array
  readonly headW: Int32Array
}

export function createCursor (): FeatureCursor {
  return {
    at: 0, c1: 32, c2: 32, c3: 32, c4: 32, word: SEED_WORD, inWord: false, prevWord: 0, hasPrev: false, words: 0,
    ringN: 0, headN: 0, ringC: new Int32Array(RING), ringW: new Int32Array(RING), headC: new Int32Array(RING), headW: new Int32Array(RING),
  }
}

/** Back to the start of a text (the text is padded with one leading space). */
export function resetCursor (cur: FeatureCursor): void {
  cur.at = 0; cur.c1 = 32; cur.c2 = 32; cur.c3 = 32; cur.c4 = 32
  cur.word = SEED_WORD; cur.inWord = false; cur.prevWord = 0; cur.hasPrev = false; cur.words = 0
  cur.ringN = 0; cur.headN = 0
}

const whole = createCursor()

/** Fills `out` with every feature of `text` (already normalised). */
export function extractFeatures(text: string, out: FeatureBuffers): void {
  resetCursor(whole)
  out.count = 0
  extractRange(text, out, whole, text.length + 1)
}

/**
 * Appends to `out` (after its `count` entries) the features of steps [cur.at, to) of `text`, step
 * text.length being the closing space that ends the last word, and moves the cursor to `to`. The
 * features of step i end at i (character n-grams) or i - 1 (the word that step closes).
 */
export function extractRange(text: string, out: FeatureBuffers, cur: FeatureCursor, to: number): void {
  const len = text.length
  const from = cur.at
  // Per character at most 3 char n-grams and 2 word features; per word of two or more characters
  // (with its separator) at most RING concept pairs and RING head pairs; a word begun before `from`
  // can close within the range (the slack).
  const need = out.count + (to - from) * 10 + 32
  if (out.buckets.length < need) {
    let size = out.buckets.length
    while (size < need) size *= 2
    const keep = out.count
    const buckets = new Int32Array(size)
    const positions = new Int32Array(size)
    const words = new Uint8Array(size)
    buckets.set(out.buckets.subarray(0, keep))
    positions.set(out.positions.subarray(0, keep))
    words.set(out.words.subarray(0, keep))
    out.buckets = buckets
    out.positions = positions
    out.words = words
  }
  const buckets = out.buckets
  const positions = out.positions
  const kinds = out.words
  let n = out.count
  let c1 = cur.c1, c2 = cur.c2, c3 = cur.c3, c4 = cur.c4 // previous characters, most recent first
  let word = cur.word
  let inWord = cur.inWord
  let prevWord = cur.prevWord
  let hasPrev = cur.hasPrev
  // The last RING concept words of the sentence: concept and word number.
  const ringC = cur.ringC
  const ringW = cur.ringW
  let ringN = cur.ringN
  // The last RING concept words of any concept, for the head's pairs.
  const headC = cur.headC
  const headW = cur.headW
  let headN = cur.headN
  let words = cur.words
  for (let i = from; i < to; i++) {
    const c = i < len ? text.charCodeAt(i) : 32
    if (i < len) {
      // Character n-grams ending at i (the text is padded with one leading space), as nested
      // polynomials: the 4- and 5-gram each add one term to the shorter one, then fmix mixes each with
      // its length's seed. A third of the multiplications of hashing each n-gram from scratch.
      const h3 = (Math.imul(c2, P2) + Math.imul(c1, P1) + c) | 0
      const h4 = (Math.imul(c3, P3) + h3) | 0
      const h5 = (Math.imul(c4, P4) + h4) | 0
      buckets[n] = fmix(h3 ^ SEED3); kinds[n] = 0; positions[n++] = i
      buckets[n] = fmix(h4 ^ SEED4); kinds[n] = 0; positions[n++] = i
      buckets[n] = fmix(h5 ^ SEED5); kinds[n] = 0; positions[n++] = i
    }
    if (isWordChar(c)) {
      word = Math.imul(word ^ c, 16777619)
      inWord = true
    } else if (inWord) {
      buckets[n] = fmix(word); kinds[n] = 1; positions[n++] = i - 1
      if (hasPrev) { buckets[n] = fmix(Math.imul(prevWord ^ SEED_BIGRAM, 0x01000193) ^ word); kinds[n] = 1; positions[n++] = i - 1 }
      let concept = conceptOf(word)
      if (concept === REPLY && !(hasPrev && prevWord === YOUR)) concept = -1
      if (concept >= 0 && concept < HEAD_CONCEPT) {
        for (let k = 0; k < ringN; k++) {
          if (words - (ringW[k] as number) > PAIR_SPAN) continue
          buckets[n] = fmix(Math.imul((((ringC[k] as number) << 8) | concept) + 1, 0x85ebca77) ^ SEED_PAIR); kinds[n] = 1; positions[n++] = i - 1
        }
        if (ringN === RING) { ringC.copyWithin(0, 1); ringW.copyWithin(0, 1); ringN-- }
        ringC[ringN] = concept
        ringW[ringN++] = words
      }
      if (concept >= 0) {
        // Pairs with a head concept on either side, from a ring that holds every concept word.
        for (let k = 0; k < headN; k++) {
          const other = headC[k] as number
          if (words - (headW[k] as number) > PAIR_SPAN || (other < HEAD_CONCEPT && concept < HEAD_CONCEPT)) continue
          buckets[n] = fmix(Math.imul(((other << 8) | concept) + 1, 0x85ebca77) ^ SEED_PAIR); kinds[n] = HEAD_ONLY; positions[n++] = i - 1
        }
        if (headN === RING) { headC.copyWithin(0, 1); headW.copyWithin(0, 1); headN-- }
        headC[headN] = concept
        headW[headN++] = words
      }
      words++
      prevWord = word
      hasPrev = true
      word = SEED_WORD
      inWord = false
      // A sentence end breaks bigrams and concept pairs so they do not span unrelated clauses.
      if (c === 46 || c === 10 || c === 33 || c === 63) { hasPrev = false; ringN = 0; headN = 0 }
    }
    c4 = c3; c3 = c2; c2 = c1; c1 = c
  }
  out.count = n
  cur.at = to
  cur.c1 = c1; cur.c2 = c2; cur.c3 = c3; cur.c4 = c4
  cur.word = word; cur.inWord = inWord; cur.prevWord = prevWord; cur.hasPrev = hasPrev; cur.words = words
  cur.ringN = ringN; cur.headN = headN
}
