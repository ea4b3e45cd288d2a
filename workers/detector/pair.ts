// The pair reading of a data span: the span beside the user's request in the same call. A question or
// task planted in a mail ("What is the capital of Brazil?") has no word for the model; what marks it is
// a sentence that reads like a request a user would make and whose content words occur neither in the
// rest of the data nor in the user's request. Each sentence of the span gets a few such features, a
// small logistic model scores it, and the best sentence counts. The model is written by
// training/detector/pair-train.ts into pair.bin:
//   "TGP1" | u32 tableBits | f32 tableScale | u32 features | f32 bias | f32 threshold | f32[features]
//   | i8[2^tableBits] (word log-odds) | i8[2^tableBits] (first-word log-odds)
import { readFileSync } from 'node:fs'
import { repoFile } from '../../src/paths.js'
import type { Segment } from '../../src/detection/types.js'
import type { Span } from './spans.js'

export const PAIR_URL = repoFile('workers/detector/pair.bin')

/** The pair model: two hashed word tables (how much a word marks a user's request against a document's sentence) and the logistic layer over PAIR_FEATURES. */
export interface PairModel {
  readonly tableBits: number
  /** Log-odds of a word in users' requests against documents' sentences, hashed (float while training, int8 × scale as shipped). */
  readonly words: Float32Array
  /** The same for the first word of a sentence. */
  readonly first: Float32Array
  readonly weights: Float32Array
  readonly bias: number
  /** The pair probability at which a data span is blocked by this reading alone. */
  readonly threshold: number
}

// Function words: they say nothing about what a sentence is about, so they never count as its content.
const STOP: ReadonlySet<string> = new Set(('the and for are but not you your yours all any can had has have her his him its our out was were who what when where which why how with this that these those from into onto than then there their they them she will would could should shall may might must been being also just only very more most some such each other over under about above below after before again once here both few own same too off nor yet via per upon while because until does did doing done get got make made let use using one two three way well yes let\'s i\'m it\'s don\'t can\'t won\'t isn\'t aren\'t please thanks thank hello dear regards best kind').split(' '))
const WH_WORDS = ['what', 'who', 'whom', 'whose', 'how', 'why', 'when', 'where', 'which', "what's", 'whats']
const WH: ReadonlySet<string> = new Set(WH_WORDS)
/**
 * Words that open a sentence with its subject or as a clause (a pronoun, a determiner, an interrogative
 * without a question mark: "You are receiving …", "How to set up …"): such a sentence is no imperative.
 */
const NOT_A_VERB: ReadonlySet<string> = new Set(['i', "i'm", "i've", "i'll", "i'd", 'you', "you're", "you've", "you'll", 'he', 'she', 'it', "it's", 'we', "we're", "we've", 'they', "they're", 'me', 'my', 'your', 'his', 'her', 'its', 'our', 'their', 'this', 'that', 'these', 'those', 'there', "there's", 'here', "here's", 'the', 'a', 'an', ...WH_WORDS])
const AUX: ReadonlySet<string> = new Set(['can', 'could', 'would', 'will', 'should', 'is', 'are', 'was', 'were', 'do', 'does', 'did', 'may', 'might', 'shall', 'have', 'has'])

/** The features of one sentence, in the order of PairModel.weights. */
export const PAIR_FEATURES = ['question', 'wh', 'aux', 'requestWords', 'requestFirst', 'novel', 'line', 'edge', 'you', 'proseAround', 'length', 'requestWords*novel', 'requestFirst*novel', 'question*novel', 'line*novel', 'codeAround*novel', 'marked', 'terminal', 'capital'] as const
export const PAIR_DIM = PAIR_FEATURES.length

/** Words of a text as the tables read them: runs of letters (and apostrophes), lower case. */
export function wordsOf (text: string): string[] {
  return tokens(text).words
}

/** The words of a text (wordsOf) and where each starts. */
function tokens (text: string): { words: string[], starts: number[] } {
  const words: string[] = [], starts: number[] = []
  const re = /[a-z][a-z']*/gi
  for (let m = re.exec(text); m !== null; m = re.exec(text)) { words.push(m[0].toLowerCase()); starts.push(m.index) }
  return { words, starts }
}

/** FNV-1a of a word, masked to the table. */
export function wordHash (w: string, bits: number): number {
  let h = 0x811c9dc5
  for (let i = 0; i < w.length; i++) h = Math.imul(h ^ w.charCodeAt(i), 16777619)
  return (h >>> 0) & ((1 << bits) - 1)
}

/** One sentence of a span, with where it stands. */
export interface Sentence {
  readonly text: string
  /** [start, end) in the span's text. */
  readonly start: number
  readonly end: number
  /** The sentence is its whole line. */
  readonly line: boolean
  /** Where its line starts in the span's text. */
  readonly lineStart: number
  /** Its words (wordsOf). */
  readonly words: readonly string[]
}

const MIN_WORDS = 3
const MAX_WORDS = 60

/** The sentences of a text: each line, cut after `.`, `!` or `?` before a capital; those of MIN_WORDS to MAX_WORDS words. */
export function sentencesOf (text: string, tok = tokens(text)): Sentence[] {
  const out: Sentence[] = []
  let at = 0
  // Sentences come in text order, and so do their words: one pointer walks the text's words.
  let k = 0
  for (const line of text.split('\n')) {
    const lineStart = at
    at += line.length + 1
    const cut = /[.!?]["')\]]?\s+(?=["'(]?[A-Z])/g
    let from = 0
    const parts: Array<[number, number]> = []
    for (let m = cut.exec(line); m !== null; m = cut.exec(line)) { parts.push([from, m.index + m[0].length]); from = m.index + m[0].length }
    parts.push([from, line.length])
    for (const [s, e] of parts) {
      while (k < tok.starts.length && (tok.starts[k] as number) < lineStart + s) k++
      let j = k
      while (j < tok.starts.length && (tok.starts[j] as number) < lineStart + e) j++
      const n = j - k
      if (n < MIN_WORDS || n > MAX_WORDS) continue
      out.push({ text: line.slice(s, e).trim(), start: lineStart + s, end: lineStart + e, line: parts.length === 1, lineStart, words: tok.words.slice(k, j) })
    }
  }
  return out
}

/** Content words: not function words, three letters or more. */
function contentWords (words: readonly string[]): string[] {
  return words.filter((w) => w.length >= 3 && !STOP.has(w))
}

/** A sentence that opens as document structure: a list item, a heading, a quotation, a table cell, a code comment. */
const MARKED = /^(?:[-*+#>|•]|\/\/|\d{1,3}[.)]\s|\[[ x]\])/

/** A line of running text (mostly letters, four words or more), as opposed to code, a table row or a header. */
function isProse (line: string): boolean {
  let letters = 0, chars = 0, words = 0, inWord = false
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i)
    const space = c === 32 || c === 9 || c === 13
    if (!space || chars > 0) chars++
    const l = c | 32
    if ((l >= 97 && l <= 122) || c === 32) letters++
    if (!space && !inWord) words++
    inWord = !space
  }
  // Trailing blanks counted in `chars` are few against a line of four words; a blank line is no prose.
  return chars > 0 && letters / chars >= 0.85 && words >= 4
}

function clip (x: number, lim: number): number {
  return Math.max(-lim, Math.min(lim, x))
}

/** A pasted span's last paragraph is the user's when it is at most this long and this many sentences. */
const TAIL_MAX = 400
const TAIL_SENTENCES = 2
/** A line a user labels as their own question or task after pasted text ("Question: …", "Q: …"). */
const LABELLED = /[ \t]*(?:q|question|my question|task|instruction)[ \t]*:/iy

/**
 * The features of each candidate sentence of `data` beside `request` (the user's words in the same
 * call). A candidate reads as a request: it ends in a question mark, or it is a whole imperative
 * sentence, ending in `.` or `!` and opening with no subject (NOT_A_VERB) and with a word that opens
 * users' requests at least as often as documents' sentences, or is too rare to say (the first-word
 * table). A span of one sentence has none: there is no data around it to depart from.
 * `endsMessage`: the span is text a user pasted that runs to the end of their message (spans.ts keeps
 * unfenced pasted text to the end when no labelled question follows), so what the user asks about it
 * may stand there: its last sentence, a short last paragraph after a blank line and any line labelled
 * as a question are read as the user's request, not as candidates.
 */
export function pairFeatures (model: Pick<PairModel, 'tableBits' | 'words' | 'first'>, request: string, data: string, endsMessage = false): { sentences: Sentence[], features: Float64Array[] } {
  const tok = tokens(data)
  const all = sentencesOf(data, tok)
  if (all.length < 2) return { sentences: [], features: [] }
  let candidates = all
  if (endsMessage) {
    const blank = /\n[ \t]*\n\s*(?=\S)/g
    let tail = (all[all.length - 1] as Sentence).start
    let last = -1
    for (let m = blank.exec(data); m !== null; m = blank.exec(data)) last = m.index + m[0].length
    if (last >= 0 && data.length - last <= TAIL_MAX && all.filter((c) => c.start >= last).length <= TAIL_SENTENCES) tail = Math.min(tail, last)
    const own: string[] = [data.slice(tail)]
    candidates = all.filter((c) => {
      if (c.start >= tail) return false
      LABELLED.lastIndex = c.lineStart
      if (!LABELLED.test(data)) return true
      own.push(c.text)
      return false
    })
    request = `${request}\n${own.join('\n')}`
  }
  candidates = candidates.filter((c) => {
    const first = c.words[0] as string
    if (/\?["')\]]?$/.test(c.text)) return true
    return /[.!]["')\]]?$/.test(c.text) && !NOT_A_VERB.has(first) && (model.first[wordHash(first, model.tableBits)] as number) >= 0
  })
  const sentences = candidates
  if (sentences.length === 0) return { sentences, features: [] }
  // How often each content word occurs in the whole span: a word of the sentence occurs elsewhere when
  // its count exceeds its count in the sentence itself.
  const counts = new Map<string, number>()
  for (const w of contentWords(tok.words)) counts.set(w, (counts.get(w) ?? 0) + 1)
  const req = new Set(contentWords(wordsOf(request)))
  let lineCount = 0, proseLines = 0
  for (const l of data.split('\n')) {
    if (/\S/.test(l)) lineCount++
    if (isProse(l)) proseLines++
  }
  const features = sentences.map((s, i) => {
    const words = s.words
    const content = contentWords(words)
    const own = new Map<string, number>()
    for (const w of content) own.set(w, (own.get(w) ?? 0) + 1)
    // Novel: a content word found neither elsewhere in the span nor in the user's request.
    let novel = 0
    for (const [w, n] of own) if ((counts.get(w) ?? 0) <= n && !req.has(w)) novel++
    novel = own.size === 0 ? 0 : novel / own.size
    let rw = 0
    for (const w of words) rw += model.words[wordHash(w, model.tableBits)] as number
    const requestWords = clip(rw / Math.max(1, words.length), 4) / 4
    const requestFirst = clip(model.first[wordHash(words[0] as string, model.tableBits)] as number, 4) / 4
    const question = /\?["')\]]?$/.test(s.text) ? 1 : 0
    const first = words[0] as string
    const self = isProse(s.text) ? 1 : 0
    const others = lineCount - self
    const proseAround = others <= 0 ? 0 : Math.max(0, proseLines - self) / others
    const line = s.line ? 1 : 0
    const f = new Float64Array(PAIR_DIM)
    f.set([
      question, WH.has(first) ? 1 : 0, AUX.has(first) ? 1 : 0, requestWords, requestFirst, novel, line,
      i === 0 || i === sentences.length - 1 ? 1 : 0, words.some((w) => w === 'you' || w === 'your') ? 1 : 0, proseAround,
      Math.min(words.length, 30) / 30, requestWords * novel, requestFirst * novel, question * novel, line * novel, (1 - proseAround) * novel,
      MARKED.test(s.text) ? 1 : 0, /[.!?]["')\]]?$/.test(s.text) ? 1 : 0, /^["'(]?[A-Z]/.test(s.text) ? 1 : 0,
    ])
    return f
  })
  return { sentences, features }
}

/** The logit of one sentence's features. */
export function pairLogit (model: Pick<PairModel, 'weights' | 'bias'>, f: ArrayLike<number>): number {
  let z = model.bias
  for (let k = 0; k < PAIR_DIM; k++) z += (model.weights[k] as number) * (f[k] as number)
  return z
}

/** The pair probability of a data span beside the user's request: the best sentence's. 0 for a span with no sentence. */
export function pairScore (model: PairModel, request: string, data: string, endsMessage = false): number {
  const { features } = pairFeatures(model, request, data, endsMessage)
  let best = -Infinity
  for (const f of features) best = Math.max(best, pairLogit(model, f))
  return best === -Infinity ? 0 : 1 / (1 + Math.exp(-best))
}

/**
 * The user's request a data span stands beside: the user's own text of the same message (the framing
 * line and the question around pasted text), else the last user message before the span (what a tool
 * result answers). Empty when there is none.
 */
export function requestOf (spans: readonly Span[], k: number, segments: readonly Segment[]): string {
  const span = spans[k] as Span
  const userText = (s: Span): boolean => s.source === 'user' && segments[s.pieces[0]?.segment ?? -1]?.role === 'user'
  const same = spans.filter((s) => s.message === span.message && userText(s)).map((s) => s.text)
  if (same.length > 0) return same.join('\n')
  for (let j = k - 1; j >= 0; j--) {
    const s = spans[j] as Span
    if (s.message < span.message && userText(s)) return s.text
  }
  return ''
}

/** Whether data span `k` is text a user pasted that runs to the end of their message: no user text of that message follows it. */
export function endsUserMessage (spans: readonly Span[], k: number, segments: readonly Segment[]): boolean {
  const span = spans[k] as Span
  if (segments[span.pieces[0]?.segment ?? -1]?.role !== 'user') return false
  const next = spans[k + 1]
  return next === undefined || next.message !== span.message || next.source !== 'user'
}

/** The pair probability of data span `k` of a request, beside its request (requestOf). */
export function spanPairScore (model: PairModel, spans: readonly Span[], k: number, segments: readonly Segment[]): number {
  return pairScore(model, requestOf(spans, k, segments), (spans[k] as Span).text, endsUserMessage(spans, k, segments))
}

const MAGIC = 0x31504754 // "TGP1"

export function encodePair (m: PairModel): Buffer {
  let max = 0
  for (const xs of [m.words, m.first]) for (const x of xs) max = Math.max(max, Math.abs(x))
  const scale = max > 0 ? max / 127 : 1
  const size = 1 << m.tableBits
  const buf = Buffer.alloc(24 + 4 * PAIR_DIM + 2 * size)
  buf.writeUInt32LE(MAGIC, 0); buf.writeUInt32LE(m.tableBits, 4); buf.writeFloatLE(scale, 8); buf.writeUInt32LE(PAIR_DIM, 12)
  buf.writeFloatLE(m.bias, 16); buf.writeFloatLE(m.threshold, 20)
  let at = 24
  for (const w of m.weights) { buf.writeFloatLE(w, at); at += 4 }
  for (const xs of [m.words, m.first]) for (const x of xs) { buf.writeInt8(Math.max(-127, Math.min(127, Math.round(x / scale))), at); at++ }
  return buf
}

export function decodePair (buf: Buffer): PairModel {
  if (buf.readUInt32LE(0) !== MAGIC || buf.readUInt32LE(12) !== PAIR_DIM) throw new Error('detector pair model: wrong format or feature count')
  const tableBits = buf.readUInt32LE(4), scale = buf.readFloatLE(8), bias = buf.readFloatLE(16), threshold = buf.readFloatLE(20)
  let at = 24
  const weights = new Float32Array(PAIR_DIM)
  for (let k = 0; k < PAIR_DIM; k++) { weights[k] = buf.readFloatLE(at); at += 4 }
  const size = 1 << tableBits
  if (buf.length !== at + 2 * size) throw new Error('detector pair model: wrong length')
  const table = (): Float32Array => { const t = new Float32Array(size); for (let i = 0; i < size; i++) t[i] = buf.readInt8(at + i) * scale; at += size; return t }
  const words = table()
  const first = table()
  return { tableBits, words, first, weights, bias, threshold }
}

export function loadPair (url: URL = PAIR_URL): PairModel {
  return decodePair(readFileSync(url))
}
