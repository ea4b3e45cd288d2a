// The model and the per-segment analysis that combines it with the rules. The weights file is written
// by training/detector/train.ts; its layout (little-endian):
//   "TGI2" | u32 bits | f32 threshold | f32 bias | f32 scale | u32 families | f32[families] | i8[2^bits]
//   | u32 embBits | u32 dim | u32 hidden | f32 embScale | f32 dataThreshold | f32 dataBias
//   | i8[2^embBits × dim] | f32[hidden × dim] | f32[hidden] | f32[hidden]
// Two readings of a text. As anyone's words (modelScore): the linear part, bias + family weights +
// s·Σ w[b] over the n distinct buckets b of the window, s = n^-LENGTH_POWER. As data a request carries
// (dataModelScore: a tool result, a document): the same logit plus a neural head, dataBias +
// w2·relu(W1·(s·Σ E[b]) + b1) over the word-level buckets, in small windows. The head is fitted on
// top of the fixed linear part to tell an order addressed to the model reading the text from the same
// verbs addressed to people; the linear part keeps its judgement of what users write. Weights and
// embeddings are int8 times one scale each.
import { readFileSync } from 'node:fs'
import { repoFile } from '../../src/paths.js'
import { BITS, DIM, HEAD_ONLY, LENGTH_POWER, createBuffers, createCursor, extractFeatures, extractRange, isWordChar, resetCursor } from './features.js'
import { findPayloads, normalize, originalSpan, type Normalized } from './normalize.js'
import { FAMILIES, matchPlanted, matchRules, mentions, type Family, type RuleMatch } from './rules.js'

export interface Model {
  readonly weights: Float32Array
  /**
   * Words the explanation may name (vocab.txt, written by train.ts): words of at least two letters
   * found in at least VOCAB_MIN_ROWS training rows. Absent for models trained in memory.
   */
  readonly vocab?: ReadonlySet<string>
  /** The shipped int8 weights (weights = quantized × scale); scoring reads these, 4× less cache. */
  readonly quantized?: Int8Array
  readonly scale?: number
  readonly familyWeights: Float32Array
  readonly bias: number
  readonly threshold: number
  /** The neural head for the data reading (absent: linear only, and data is read by the linear part). */
  readonly deep?: Deep
  /**
   * The model score at which it blocks a data span (a tool result, a document) on its own, chosen by
   * train.ts on the data-dev part of the clean documents and contexts; absent in a linear-only file.
   */
  readonly dataThreshold?: number
}

/** Embedding bag over the hashed word-level buckets (bucket & (2^embBits - 1)), one ReLU layer, one output. */
export interface Deep {
  /** Added to the data logit: the head's own bias. */
  readonly dataBias: number
  readonly embBits: number
  readonly dim: number
  readonly hidden: number
  /** 2^embBits × dim, row-major; float while training, int8 × embScale as shipped. */
  readonly emb: Float32Array
  readonly embQ?: Int8Array
  readonly embScale?: number
  /** hidden × dim, row-major. */
  readonly w1: Float32Array
  readonly b1: Float32Array
  readonly w2: Float32Array
}

/** Where the committed weights live: the source folder (tsc does not copy it to dist). */
export const WEIGHTS_URL = repoFile('workers/detector/weights.bin')

const MAGIC = 0x32494754 // "TGI2"
const MAGIC_LINEAR = 0x31494754 // "TGI1": the same without the neural head, still read

function maxAbs (xs: Float32Array): number {
  let max = 0
  for (const w of xs) max = Math.max(max, Math.abs(w))
  return max
}

function quantize (xs: Float32Array, scale: number, buf: Buffer, at: number): void {
  for (let i = 0; i < xs.length; i++) buf.writeInt8(Math.max(-127, Math.min(127, Math.round((xs[i] as number) / scale))), at + i)
}

export function encodeModel(m: Model): Buffer {
  const max = maxAbs(m.weights)
  const scale = max > 0 ? max / 127 : 1
  const head = 24 + 4 * m.familyWeights.length
  const d = m.deep
  const deepBytes = d === undefined ? 0 : 24 + d.emb.length + 4 * (d.w1.length + d.b1.length + d.w2.length)
  const buf = Buffer.alloc(head + DIM + deepBytes)
  buf.writeUInt32LE(MAGIC, 0)
  buf.writeUInt32LE(BITS, 4)
  buf.writeFloatLE(m.threshold, 8)
  buf.writeFloatLE(m.bias, 12)
  buf.writeFloatLE(scale, 16)
  buf.writeUInt32LE(m.familyWeights.length, 20)
  m.familyWeights.forEach((w, i) => buf.writeFloatLE(w, 24 + 4 * i))
  quantize(m.weights, scale, buf, head)
  if (d !== undefined) {
    let at = head + DIM
    const emax = maxAbs(d.emb)
    const escale = emax > 0 ? emax / 127 : 1
    buf.writeUInt32LE(d.embBits, at); buf.writeUInt32LE(d.dim, at + 4); buf.writeUInt32LE(d.hidden, at + 8); buf.writeFloatLE(escale, at + 12)
    buf.writeFloatLE(m.dataThreshold ?? 0, at + 16)
    buf.writeFloatLE(d.dataBias, at + 20)
    at += 24
    quantize(d.emb, escale, buf, at)
    at += d.emb.length
    for (const xs of [d.w1, d.b1, d.w2]) for (const x of xs) { buf.writeFloatLE(x, at); at += 4 }
  }
  return buf
}

export function decodeModel(buf: Buffer): Model {
  const magic = buf.readUInt32LE(0)
  if ((magic !== MAGIC && magic !== MAGIC_LINEAR) || buf.readUInt32LE(4) !== BITS) throw new Error('detector weights: wrong format or hash size')
  const threshold = buf.readFloatLE(8)
  const bias = buf.readFloatLE(12)
  const scale = buf.readFloatLE(16)
  const nf = buf.readUInt32LE(20)
  const familyWeights = new Float32Array(FAMILIES.length)
  for (let i = 0; i < Math.min(nf, familyWeights.length); i++) familyWeights[i] = buf.readFloatLE(24 + 4 * i)
  const head = 24 + 4 * nf
  const quantized = new Int8Array(DIM)
  quantized.set(new Int8Array(buf.buffer, buf.byteOffset + head, DIM))
  const weights = new Float32Array(DIM)
  for (let i = 0; i < DIM; i++) weights[i] = (quantized[i] as number) * scale
  let at = head + DIM
  if (at === buf.length) return { weights, quantized, scale, familyWeights, bias, threshold }
  const embBits = buf.readUInt32LE(at), dim = buf.readUInt32LE(at + 4), hidden = buf.readUInt32LE(at + 8), embScale = buf.readFloatLE(at + 12)
  const dataThreshold = buf.readFloatLE(at + 16)
  const dataBias = buf.readFloatLE(at + 20)
  at += 24
  const size = (1 << embBits) * dim
  if (buf.length !== at + size + 4 * (hidden * dim + 2 * hidden)) throw new Error('detector weights: wrong length')
  const embQ = new Int8Array(size)
  embQ.set(new Int8Array(buf.buffer, buf.byteOffset + at, size))
  at += size
  const emb = new Float32Array(size)
  for (let i = 0; i < size; i++) emb[i] = (embQ[i] as number) * embScale
  const floats = (n: number): Float32Array => {
    const out = new Float32Array(n)
    for (let i = 0; i < n; i++) { out[i] = buf.readFloatLE(at); at += 4 }
    return out
  }
  const w1 = floats(hidden * dim), b1 = floats(hidden), w2 = floats(hidden)
  return { weights, quantized, scale, familyWeights, bias, threshold, deep: { dataBias, embBits, dim, hidden, emb, embQ, embScale, w1, b1, w2 }, ...(dataThreshold > 0 ? { dataThreshold } : {}) }
}

/** The explanation's vocabulary, next to the weights. */
export const VOCAB_URL = repoFile('workers/detector/vocab.txt')

export function loadModel(url: URL = WEIGHTS_URL, vocabUrl: URL = VOCAB_URL): Model {
  const vocab = new Set(readFileSync(vocabUrl, 'utf8').split('\n').filter((w) => w !== ''))
  return { ...decodeModel(readFileSync(url)), vocab }
}

export function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x))
}

/** One thing that raised the score: a rule, a decoded payload, or the model. Spans are in the original text. */
export interface Finding {
  readonly family: Family | 'model'
  readonly rule: string
  readonly score: number
  readonly span: readonly [number, number]
}

/** A word of the text and its share of the model's logit (see explainWindow). */
export interface Contribution {
  readonly feature: string
  readonly weight: number
}

export interface SegmentAnalysis {
  /** max(model probability, strongest rule weight among rules of weight >= STRONG_RULE). */
  readonly score: number
  readonly modelScore: number
  readonly findings: readonly Finding[]
  /** The words that raised the model's score most, when it reached the model's threshold (else empty). */
  readonly features: readonly Contribution[]
  /** The model's score for the text read as data: the best DATA_WINDOW window, neural head included (worked out when first read). */
  readonly dataModelScore: number
  /** `score` for the text read as data: max(dataModelScore, strongest rule of weight >= STRONG_RULE). */
  readonly dataScore: number
}

/** Normalised text and the rule findings (including encoded payloads) of one segment. */
export interface Prepared {
  readonly norm: Normalized
  readonly text: string
  /** What the model reads: `text` with mentioned quotations (rules.ts mentions) blanked, same length and positions. */
  readonly modelText: string
  readonly findings: Finding[]
  /** Bit i set when family FAMILIES[i] fired. */
  readonly mask: number
  /** Normalised decoded payloads, scored by the model on their own. */
  readonly payloads: readonly { readonly text: string, readonly span: readonly [number, number] }[]
}

function familyBit(f: Family): number {
  return 1 << FAMILIES.indexOf(f)
}

export function prepare(original: string): Prepared {
  const norm = normalize(original)
  const findings: Finding[] = []
  let mask = 0
  const quoted = mentions(norm.text)
  for (const m of matchRules(norm.text, quoted)) {
    findings.push({ family: m.family, rule: m.rule, score: m.weight, span: originalSpan(norm, m.start, m.end) })
    mask |= familyBit(m.family)
  }
  // A payload someone bothered to encode that decodes to an attack phrase is worse than the phrase.
  const encoded = (rule: string, weight: number, span: readonly [number, number]): void => {
    findings.push({ family: 'encoded_payload', rule, score: Math.min(0.99, Math.max(0.95, weight)), span })
    mask |= familyBit('encoded_payload')
  }
  const payloads: { text: string, span: readonly [number, number] }[] = []
  const pending = findPayloads(original).map((p) => ({ p, depth: 1 }))
  for (let item = pending.pop(); item !== undefined; item = pending.pop()) {
    const { p, depth } = item
    const pn = normalize(p.decoded)
    const span: [number, number] = [p.start, p.end]
    payloads.push({ text: pn.text, span })
    const best = strongestMatch(pn.text)
    if (best !== undefined) encoded(`${p.kind}_payload`, best.weight, span)
    if (depth < 2) for (const inner of findPayloads(p.decoded)) pending.push({ p: { ...inner, start: p.start, end: p.end }, depth: depth + 1 })
  }
  // Text read backwards or in ROT13: the attack has to tell the model how to read it ("read this
  // backwards", "decode this ROT13"), so only text with such a cue pays for more rule scans, and only
  // on the text near the first cue (a 32 k document that says "reverse" once stays cheap).
  const cue = TRANSFORM_CUE.exec(norm.text)
  if (cue !== null) {
    const from = Math.max(0, cue.index - TRANSFORM_BEFORE)
    const near = norm.text.slice(from, cue.index + TRANSFORM_AFTER)
    const n = near.length
    for (const kind of ['rot13', 'reversed'] as const) {
      const best = strongestMatch(kind === 'rot13' ? rot13(near) : reverse(near))
      if (best === undefined) continue
      const span = kind === 'rot13' ? originalSpan(norm, from + best.start, from + best.end) : originalSpan(norm, from + n - best.end, from + n - best.start)
      encoded(`${kind}_payload`, best.weight, span)
    }
  }
  return { norm, text: norm.text, modelText: quoted.length === 0 ? norm.text : blank(norm.text, quoted), findings, mask, payloads }
}

/** `text` with each span replaced by as many spaces: positions, and so windows and spans, are unchanged. */
function blank (text: string, spans: ReadonlyArray<readonly [number, number]>): string {
  let out = ''
  let at = 0
  for (const [s, e] of [...spans].sort((a, b) => a[0] - b[0])) {
    if (e <= at) continue
    const from = Math.max(at, s)
    out += text.slice(at, from) + ' '.repeat(e - from)
    at = e
  }
  return out + text.slice(at)
}

/**
 * Instructions planted for the model (rules.ts PLANTED_RULES) in a segment's text, with spans in the
 * original text. injection.ts asks only for data segments; the analysis of a text does not hold them,
 * since it is the same wherever the text stands.
 */
export function plantedFindings (original: string): Finding[] {
  const norm = normalize(original)
  return matchPlanted(norm.text, mentions(norm.text)).map((m) => ({ family: m.family, rule: m.rule, score: m.weight, span: originalSpan(norm, m.start, m.end) }))
}

/** The strongest rule match in decoded text, when it is strong enough (weight >= 0.5) to count. */
function strongestMatch(text: string): RuleMatch | undefined {
  let best: RuleMatch | undefined
  for (const m of matchRules(text)) if (best === undefined || m.weight > best.weight) best = m
  return best !== undefined && best.weight >= 0.5 ? best : undefined
}

const TRANSFORM_BEFORE = 512
const TRANSFORM_AFTER = 2048
// "rot13" is normalised to "rotie" (leet digits next to letters become letters).
// Not "reverse" alone: "reverse proxy" and "reverse the list" are everyday words in technical text.
const TRANSFORM_CUE = /\brot ?(?:13|ie)\b|\bcaesar\b|\bbackwards?\b|\breversed\b|\bin reverse\b|\breverse (?:order|it|this|that|the text|the message|each|every|all)\b|\bright to left\b|\bmirror(?:ed)?\b/

function rot13(s: string): string {
  let out = ''
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    out += c >= 97 && c <= 122 ? String.fromCharCode(((c - 84) % 26) + 97) : s[i]
  }
  return out
}

function reverse(s: string): string {
  let out = ''
  for (let i = s.length - 1; i >= 0; i--) out += s[i]
  return out
}

/** Rules at or above this weight set the score by themselves (all of them sit above the threshold). */
export const STRONG_RULE = 0.8

/** Long text is scored in windows so that a short injection is not averaged away by the rest. */
export const WINDOW = 4096
export const STRIDE = 2048
/**
 * Data (a tool result, a document) is read in small windows, the best one counting (`dataModelScore`):
 * an order planted in a long mail or table is one sentence among many, and a 4,096-character window
 * averages it away. Only data is read so: a user's long prompt read as the best of many small windows
 * blocks more of the benign ones (dev's threshold rose to 0.99 that way). The head is fitted on
 * windows of this size too (data.ts `windowRows`).
 */
export const DATA_WINDOW = 512
export const DATA_STRIDE = 256

const feats = createBuffers()
/** The text whose features `feats` holds: a data span's second reading of a text reuses the first one's. */
let featsOf: string | null = null

/** Fills `feats` with the features of `text`, unless they are there already. */
function featuresOf (text: string): void {
  if (featsOf === text) return
  extractFeatures(text, feats)
  featsOf = text
}

/**
 * A text longer than this is read in pieces: the buffers then hold the features of about one window
 * past COMPACT_AT, not ten entries per character of the whole text (hundreds of MB for a 4 MB prompt,
 * kept by the worker). Its features are not kept for a second reading.
 */
const STREAM_MIN = 1 << 16
const COMPACT_AT = 1 << 16
const cursor = createCursor()

/** Drops the features before index `from` of the buffer. */
function compact (from: number): void {
  if (from === 0) return
  const n = feats.count
  feats.buckets.copyWithin(0, from, n)
  feats.positions.copyWithin(0, from, n)
  feats.words.copyWithin(0, from, n)
  feats.count = n - from
}

/**
 * bestWindow over `text`, whole or in pieces (STREAM_MIN); the same windows and logits either way.
 * `score` reads the buffer by index, and must read `feats` when called (a piece may move it).
 */
function scoreWindows (text: string, window: number, stride: number, score: (from: number, to: number) => number): { logit: number, start: number, end: number } {
  const len = text.length
  if (len <= STREAM_MIN) {
    featuresOf(text)
    return bestWindow(len, window, stride, score)
  }
  featsOf = null
  resetCursor(cursor)
  feats.count = 0
  let best = -Infinity, bs = 0, be = 0
  let lo = 0
  for (let s = 0; ; s += stride) {
    const e = Math.min(len, s + window)
    // The features of steps before e are exactly those ending before e (the window's run in bestWindow);
    // the last window also takes the closing step that ends the last word.
    extractRange(text, feats, cursor, e === len ? len + 1 : e)
    const positions = feats.positions
    while (lo < feats.count && (positions[lo] as number) < s) lo++
    if (lo >= COMPACT_AT) { compact(lo); lo = 0 }
    const logit = score(lo, feats.count)
    if (logit > best) { best = logit; bs = s; be = e }
    if (e === len) break
  }
  return { logit: best, start: bs, end: be }
}

/** Leaves in the buffer every feature of `text` ending in [start, end), and perhaps others. */
function featuresAround (text: string, start: number, end: number): void {
  if (featsOf === text) return
  if (text.length <= STREAM_MIN) { featuresOf(text); return }
  resetCursor(cursor)
  feats.count = 0
  const last = Math.min(end, text.length) + 1
  while (cursor.at < last) {
    extractRange(text, feats, cursor, Math.min(last, cursor.at + COMPACT_AT))
    let k = 0
    while (k < feats.count && (feats.positions[k] as number) < start) k++
    compact(k)
  }
}

/** The rule-family indicator features: each family that fired adds its learned weight. */
function familyTerm (model: Model, mask: number): number {
  let z = 0
  for (let f = 0; f < model.familyWeights.length; f++) if ((mask & (1 << f)) !== 0) z += model.familyWeights[f] as number
  return z
}
// Features count once per window whatever their repetition (binary, not term frequency): a text
// repeated k times must not score sqrt(k) times higher. One bit per bucket marks "seen in this window":
// the marks fit the core's nearest cache beside the weights, and each pass clears the words it set.
const seen = new Int32Array(DIM >>> 5)

/** Clears the marks of features [from, to) of `buckets`: word by word, or at once for a long run. */
function unmark (buckets: Int32Array, from: number, to: number): void {
  if (to - from > seen.length >>> 2) { seen.fill(0); return }
  for (let k = from; k < to; k++) seen[(buckets[k] as number) >>> 5] = 0
}

/**
 * For a text scored as one window (at most WINDOW characters) with `credit` (windowLogit), the sum of
 * the weights of its distinct features by the position each first occurs at, filled in the same pass
 * that scores it: explainWindow reads it instead of passing over every feature again. `creditOf` names
 * the text it belongs to. The credit is the linear part's: the neural head is not split by word.
 */
let posCredit = new Float64Array(WINDOW)
let creditOf: string | null = null
let creditCount = 0

/** The embedding bag of the last distinctSum (int8 units, summed exactly), and the hidden layer's buffer. */
let embAcc = new Int32Array(16)
let hiddenBuf = new Float64Array(16)
const bagIn = new Float64Array(64)

/**
 * The neural head's contribution to the logit for the bag `x` (already scaled): w2·relu(W1·x + b1).
 * `h` receives the hidden activations (training reads them for the gradient).
 */
export function deepForward (d: Deep, x: ArrayLike<number>, h: Float64Array): number {
  let out = 0
  for (let j = 0; j < d.hidden; j++) {
    let a = d.b1[j] as number
    const row = j * d.dim
    for (let k = 0; k < d.dim; k++) a += (d.w1[row + k] as number) * (x[k] as number)
    const r = a > 0 ? a : 0
    h[j] = r
    out += r * (d.w2[j] as number)
  }
  return out
}

/** The int8 embeddings to score with: scoring reads only a decoded (shipped) model's. */
function embeddingsOf (d: Deep | undefined): Int8Array | undefined {
  if (d === undefined) return undefined
  if (d.embQ === undefined) throw new Error('detector model: score a decoded model (decodeModel(encodeModel(m)))')
  if (embAcc.length < d.dim) embAcc = new Int32Array(d.dim)
  if (hiddenBuf.length < d.hidden) hiddenBuf = new Float64Array(d.hidden)
  embAcc.fill(0)
  return d.embQ
}

/** Sum of the weights of the distinct buckets among features [from, to), how many there were, and their embedding bag (embAcc). */
function distinctSum (model: Model, w: Int8Array | Float32Array, buckets: Int32Array, from: number, to: number, bag = false): { sum: number; count: number } {
  const d = bag ? model.deep : undefined
  const e = embeddingsOf(d)
  const acc = embAcc
  const dim = d?.dim ?? 0
  const emask = d === undefined ? 0 : (1 << d.embBits) - 1
  const words = feats.words
  let sum = 0
  let count = 0
  for (let k = from; k < to; k++) {
    const b = buckets[k] as number
    const word = b >>> 5, bit = 1 << (b & 31)
    const marks = seen[word] as number
    if ((marks & bit) !== 0) continue
    seen[word] = marks | bit
    const kind = words[k] as number
    if (e !== undefined && kind !== 0) {
      const row = (b & emask) * dim
      for (let c = 0; c < dim; c++) acc[c] = (acc[c] as number) + (e[row + c] as number)
    }
    if (kind === HEAD_ONLY) continue
    sum += w[b] as number
    count++
  }
  unmark(buckets, from, to)
  return { sum, count }
}

/** distinctSum of a whole text that also fills posCredit (see above). */
function distinctSumCredited (w: Int8Array | Float32Array, buckets: Int32Array, positions: Int32Array, to: number, len: number): { sum: number; count: number } {
  if (posCredit.length < len) posCredit = new Float64Array(len)
  posCredit.fill(0, 0, len)
  const kinds = feats.words
  let sum = 0
  let count = 0
  for (let k = 0; k < to; k++) {
    const b = buckets[k] as number
    const word = b >>> 5, bit = 1 << (b & 31)
    const marks = seen[word] as number
    if ((marks & bit) !== 0) continue
    seen[word] = marks | bit
    if (kinds[k] === HEAD_ONLY) continue
    const wb = w[b] as number
    sum += wb
    const at = positions[k] as number
    posCredit[at] = (posCredit[at] as number) + wb
    count++
  }
  unmark(buckets, 0, to)
  return { sum, count }
}

/** The neural head's term for the bag in embAcc of a window of `count` distinct features. */
function deepTerm (d: Deep, count: number): number {
  const s = (d.embScale ?? 1) * Math.pow(Math.max(1, count), -LENGTH_POWER)
  for (let k = 0; k < d.dim; k++) bagIn[k] = (embAcc[k] as number) * s
  return d.dataBias + deepForward(d, bagIn, hiddenBuf)
}

/**
 * The model's logit for the best window of `text`. With `credit`, a text of one window also fills
 * posCredit for explainWindow in the same pass; without it, explainWindow passes over the features
 * itself when asked. analyze asks for it when a rule matched, so that benign text, which mostly matches
 * none and is never explained, does not pay for it.
 */
export function windowLogit(model: Model, text: string, mask: number, credit = false): { logit: number, start: number, end: number } {
  const base = model.bias + familyTerm(model, mask)
  const q = model.quantized
  const w: Int8Array | Float32Array = q ?? model.weights
  const unit = q !== undefined ? model.scale ?? 1 : 1
  const len = text.length
  const logitOf = (d: { sum: number, count: number }): number => base + (d.count > 0 ? (d.sum * unit) * Math.pow(d.count, -LENGTH_POWER) : 0)
  creditOf = null
  const score = (from: number, to: number): number => logitOf(distinctSum(model, w, feats.buckets, from, to))
  if (len > WINDOW) return scoreWindows(text, WINDOW, STRIDE, score)
  featuresOf(text)
  if (credit) {
    const d = distinctSumCredited(w, feats.buckets, feats.positions, feats.count, len)
    creditOf = text
    creditCount = d.count
    return { logit: logitOf(d), start: 0, end: len }
  }
  return { logit: score(0, feats.count), start: 0, end: len }
}

/** The best window of the features in the buffer (a text of `len` characters): its logit and span. */
function bestWindow (len: number, window: number, stride: number, score: (from: number, to: number) => number): { logit: number, start: number, end: number } {
  // Features are produced in text order, so each window is a contiguous run of them.
  const positions = feats.positions
  const n = feats.count
  let best = -Infinity, bs = 0, be = 0
  let lo = 0
  for (let s = 0; ; s += stride) {
    const e = Math.min(len, s + window)
    while (lo < n && (positions[lo] as number) < s) lo++
    let hi = lo
    while (hi < n && (positions[hi] as number) < e) hi++
    const logit = score(lo, hi)
    if (logit > best) { best = logit; bs = s; be = e }
    if (e === len) break
  }
  return { logit: best, start: bs, end: be }
}

/**
 * The data logit (linear part plus neural head) of the best DATA_WINDOW window of `text` (the model's
 * text; `mask` its rule families). Without a head, the linear logit of the best window.
 */
function dataWindowLogit (model: Model, text: string, mask: number): number {
  creditOf = null
  const base = model.bias + familyTerm(model, mask)
  const q = model.quantized
  const w: Int8Array | Float32Array = q ?? model.weights
  const unit = q !== undefined ? model.scale ?? 1 : 1
  const d = model.deep
  const score = (from: number, to: number): number => {
    const r = distinctSum(model, w, feats.buckets, from, to, true)
    return base + (r.count > 0 ? (r.sum * unit) * Math.pow(r.count, -LENGTH_POWER) : 0) + (d !== undefined ? deepTerm(d, r.count) : 0)
  }
  return scoreWindows(text, DATA_WINDOW, DATA_STRIDE, score).logit
}

/** Rules, decoded payloads and the model over one segment's text. */
export function analyze(model: Model, original: string): SegmentAnalysis {
  const prep = prepare(original)
  let score = 0
  // Only strong rules decide on their own; weaker ones act through the model's family weights.
  for (const f of prep.findings) if (f.score >= STRONG_RULE) score = Math.max(score, f.score)
  let modelScore = 0
  let modelSpan: readonly [number, number] = [0, original.length]
  let features: readonly Contribution[] = NO_FEATURES
  // The explanation is worked out while the features of the text that scored are still in the buffer,
  // and only when the model reaches its threshold, so a text the model passes pays nothing for it.
  if (prep.text.length > 0) {
    const win = windowLogit(model, prep.modelText, prep.mask, prep.findings.length > 0)
    modelScore = sigmoid(win.logit)
    if (prep.text.length > WINDOW) modelSpan = originalSpan(prep.norm, win.start, win.end)
    if (modelScore >= model.threshold) features = explainWindow(model, prep.modelText, win.start, win.end)
  }
  for (const p of prep.payloads) {
    const win = windowLogit(model, p.text, prep.mask)
    const ps = sigmoid(win.logit)
    if (ps > modelScore) {
      modelScore = ps
      modelSpan = p.span
      features = ps >= model.threshold ? explainWindow(model, p.text, win.start, win.end) : NO_FEATURES
    }
  }
  // A copy of exactly its length: the analysis is kept (injection.ts), and a list grown by push holds
  // 17 slots for the one finding most texts have.
  const findings = [...prep.findings, { family: 'model', rule: 'model', score: modelScore, span: modelSpan } as const]
  return new Analysis(model, prep.modelText, prep.mask, score, modelScore, findings, features)
}

/**
 * One text's analysis. A class, not an object literal with getters: such a literal is built by the
 * engine's slow path on every call, and one shape keeps the cached analyses small. The data reading is
 * worked out only when a data span first asks (injection.ts), so a user's text does not pay for it.
 */
class Analysis implements SegmentAnalysis {
  #dataModelScore: number | undefined = undefined
  readonly score: number
  constructor (
    private readonly model: Model,
    /** The model's text and its rule families, for the data reading. */
    private readonly text: string,
    private readonly mask: number,
    /** The strongest rule weight at or above STRONG_RULE (0 if none). */
    private readonly rules: number,
    readonly modelScore: number,
    readonly findings: readonly Finding[],
    readonly features: readonly Contribution[],
  ) {
    this.score = Math.max(rules, modelScore)
  }

  get dataModelScore (): number {
    this.#dataModelScore ??= this.text.length === 0 ? 0 : sigmoid(dataWindowLogit(this.model, this.text, this.mask))
    return this.#dataModelScore
  }

  get dataScore (): number {
    return Math.max(this.rules, this.dataModelScore)
  }
}

const NO_FEATURES: readonly Contribution[] = Object.freeze([])

// A run of text between spaces that is one plain word with at most punctuation around it. A word in
// any other run ("jane" in jane.roe@mail.example, "proj" in sk-proj-…, "de" in DE89 3704…) may be part
// of an address, a key or a number, which findings show masked or not at all, so it is never named.
// The word itself is a vocabulary word (letters only); what is checked is the rest of its run.
const OPENERS = new Set([40, 34, 39, 96, 91, 123, 60]) // ( " ' ` [ { <
const CLOSERS = new Set([41, 34, 39, 96, 93, 125, 62, 46, 44, 59, 58, 33, 63]) // ) " ' ` ] } > . , ; : ! ?

function plainChunk (text: string, from: number, to: number): boolean {
  for (let i = from - 1; i >= 0; i--) {
    const c = text.charCodeAt(i)
    if (isSpace(c)) break
    if (!OPENERS.has(c)) return false
  }
  for (let i = to; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (isSpace(c)) break
    if (!CLOSERS.has(c)) return false
  }
  return true
}

function isSpace (c: number): boolean {
  return c === 32 || c === 10 || c === 9 || c === 13
}
/** At most this many words explain a score, each raising the logit by at least EXPLAIN_MIN. */
export const EXPLAIN_TOP = 5
const EXPLAIN_MIN = 0.05

/**
 * The words of `text[start, end)` (the window the model scored, its features still in the buffer)
 * whose features raised the logit most. Each distinct feature is credited to the word it ends in (an
 * n-gram ending at a space or a sign, to the word before), scaled as the score scales it, and credit is
 * summed per word. Only words of the model's vocabulary (a word list drawn from the training data,
 * letters only) that stand as plain words in the text are named, so an explanation never holds a key,
 * an e-mail address, a number or any part of one. Weights are logit units, rounded to 0.01.
 */
function explainWindow (model: Model, text: string, start: number, end: number): readonly Contribution[] {
  const vocab = model.vocab
  if (vocab === undefined) return NO_FEATURES
  const q = model.quantized
  let count = creditCount
  if (creditOf !== text) {
    // A window of a longer text: credit its distinct features now (positions relative to the text).
    featuresAround(text, start, end)
    const len = end - start
    const weights: Int8Array | Float32Array = q ?? model.weights
    if (posCredit.length < len) posCredit = new Float64Array(len)
    posCredit.fill(0, 0, len)
    count = 0
    for (let k = 0; k < feats.count; k++) {
      const pos = feats.positions[k] as number
      if (pos < start || pos >= end) continue
      const b = feats.buckets[k] as number
      const word = b >>> 5, bit = 1 << (b & 31)
      const marks = seen[word] as number
      if ((marks & bit) !== 0) continue
      seen[word] = marks | bit
      if (feats.words[k] === HEAD_ONLY) continue
      count++
      posCredit[pos - start] = (posCredit[pos - start] as number) + (weights[b] as number)
    }
    unmark(feats.buckets, 0, feats.count)
  }
  const unit = (q !== undefined ? model.scale ?? 1 : 1) * Math.pow(Math.max(1, count), -LENGTH_POWER)
  // A feature is credited to the word it ends in; one that ends between words, to the word before.
  // Repeated words add few new features (each distinct feature counts once, at its first occurrence),
  // so the strongest occurrences are the candidates; a candidate's credit is then summed over all of
  // its occurrences, and it is named only if every occurrence stands as a plain word.
  const candidates: Array<{ from: number, to: number, credit: number }> = []
  const minCredit = EXPLAIN_MIN / unit
  let from = -1, to = -1, acc = 0
  let wasWord = start > 0 && isWordChar(text.charCodeAt(start - 1))
  for (let i = start; i < end; i++) {
    const word = isWordChar(text.charCodeAt(i))
    if (word && !wasWord) {
      if (from >= 0 && acc >= minCredit) candidates.push({ from, to, credit: acc })
      from = i
      acc = 0
    }
    if (word) to = i + 1
    wasWord = word
    acc += posCredit[i - start] as number
  }
  if (from >= 0 && acc >= minCredit) candidates.push({ from, to, credit: acc })
  candidates.sort((x, y) => y.credit - x.credit)
  const out: Contribution[] = []
  const tried = new Set<string>()
  for (const c of candidates) {
    const word = text.slice(c.from, c.to)
    if (tried.has(word)) continue
    tried.add(word)
    if (!vocab.has(word)) continue
    let sum = 0
    let plain = true
    for (let at = text.indexOf(word, start); at !== -1 && at < end && plain; at = text.indexOf(word, at + 1)) {
      const stop = at + word.length
      if ((at > 0 && isWordChar(text.charCodeAt(at - 1))) || (stop < text.length && isWordChar(text.charCodeAt(stop)))) continue
      let next = stop
      while (next < end && !isWordChar(text.charCodeAt(next))) next++
      for (let i = at; i < next; i++) sum += posCredit[i - start] as number
      plain = plainChunk(text, at, stop)
    }
    if (plain && sum * unit >= EXPLAIN_MIN) out.push({ feature: word, weight: Math.round(sum * unit * 100) / 100 })
    if (out.length === EXPLAIN_TOP) break
  }
  return out.sort((x, y) => y.weight - x.weight)
}
