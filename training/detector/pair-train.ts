// Fits the pair reading (workers/detector/pair.ts): the word tables from users' requests against
// documents' sentences, then the logistic layer on data spans beside their requests (planted
// instructions and clean contexts of indirect-train.jsonl's train part, clean training documents and
// the text benign training rows paste), and its threshold on the data-dev part's clean spans.
// Deterministic: fixed seed, fixed order.
import { writeFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { extractSegments } from '../../src/scan/extract.js'
import type { Segment } from '../../src/detection/types.js'
import { PAIR_DIM, PAIR_FEATURES, PAIR_URL, decodePair, encodePair, endsUserMessage, pairFeatures, pairLogit, pairScore, requestOf, sentencesOf, wordHash, wordsOf, type PairModel } from '../../workers/detector/pair.js'
import { pastedRanges, spansOf } from '../../workers/detector/spans.js'
import { readRows, trainingRows, type Row } from './data.js'
import { documentRequest, documentSplit, documents } from './documents.js'
import { contextSplit, readIndirect, type IndirectRow } from './indirect.js'
import { rng } from './rng.js'

/** One data span beside its request, as detectInjection sees it. */
export interface PairExample {
  readonly request: string
  readonly data: string
  /** The span is text a user pasted that runs to the end of their message (pair.ts endsUserMessage). */
  readonly endsMessage: boolean
  readonly label: 0 | 1
  /** Where the planted attack stands in `data`, for attacks. */
  readonly planted?: readonly [number, number]
  readonly category?: string
  /** bipia_email, bipia_table, bipia_code, a document kind, or pasted. */
  readonly source: string
  readonly part: 'train' | 'dev' | 'heldout'
}

/** The data spans of a request body with their requests. */
function spanPairs (segments: readonly Segment[]): Array<{ request: string, data: string, endsMessage: boolean }> {
  const spans = spansOf(segments)
  return spans.flatMap((s, k) => (s.source === 'data' && s.text !== '' ? [{ request: requestOf(spans, k, segments), data: s.text, endsMessage: endsUserMessage(spans, k, segments) }] : []))
}

/** Every data span of the contexts, documents (as a tool result and pasted) and benign pasted rows. */
export function pairExamples (trainRows: readonly Row[]): PairExample[] {
  const out: PairExample[] = []
  for (const r of readIndirect()) {
    const attack = r.planted !== undefined ? r.carrier.text.slice(r.planted[0], r.planted[1]) : undefined
    for (const p of spanPairs(extractSegments('alpha', { model: 'm', messages: r.messages }))) {
      const at = attack === undefined ? -1 : p.data.indexOf(attack)
      if (attack !== undefined && at < 0) continue
      out.push({ ...p, label: r.label, source: `bipia_${r.context}`, part: contextSplit(r), ...(r.category !== undefined ? { category: r.category } : {}), ...(attack !== undefined ? { planted: [at, at + attack.length] as const } : {}) })
    }
  }
  for (const d of documents()) {
    for (const shape of ['tool', 'pasted'] as const) {
      for (const p of spanPairs(extractSegments('alpha', documentRequest(d.text, shape)))) out.push({ ...p, label: 0, source: d.source, part: documentSplit(d) })
    }
  }
  for (const r of trainRows) {
    if (r.label !== 0 || (r.role ?? 'user') !== 'user' || pastedRanges(r.text).length === 0) continue
    for (const p of spanPairs([{ message: 0, role: 'user', path: 'messages[0].content', text: r.text }])) out.push({ ...p, label: 0, source: 'pasted', part: 'train' })
  }
  return out
}

export const TABLE_BITS = 16
/** A word counts in a table only when seen in this many sentences of either side. */
const MIN_COUNT = 3

/**
 * The word tables: log-odds of a word (and of a sentence's first word) in the opening sentences of
 * train.jsonl's benign user prompts against the sentences of the clean training data spans. No attack
 * row is read, so the tables do not depend on which attacks are trained on.
 */
export function wordTables (promptRows: readonly Row[], cleanData: readonly string[]): { words: Float32Array, first: Float32Array } {
  const size = 1 << TABLE_BITS
  const cp = new Float64Array(size), cd = new Float64Array(size), fp = new Float64Array(size), fd = new Float64Array(size)
  let np = 0, nd = 0, nfp = 0, nfd = 0
  const count = (text: string, c: Float64Array, f: Float64Array): [number, number] => {
    const ws = wordsOf(text)
    for (const w of new Set(ws)) c[wordHash(w, TABLE_BITS)] = (c[wordHash(w, TABLE_BITS)] as number) + 1
    if (ws[0] !== undefined) f[wordHash(ws[0], TABLE_BITS)] = (f[wordHash(ws[0], TABLE_BITS)] as number) + 1
    return [new Set(ws).size, ws.length > 0 ? 1 : 0]
  }
  for (const r of promptRows) {
    if (r.label !== 0 || (r.role ?? 'user') !== 'user') continue
    // The user's own words: the first line, up to any text pasted after a framing line.
    const own = r.text.slice(0, pastedRanges(r.text)[0]?.[0] ?? r.text.length).split('\n')[0] as string
    for (const s of sentencesOf(own.slice(0, 600)).slice(0, 2)) { const [a, b] = count(s.text, cp, fp); np += a; nfp += b }
  }
  for (const t of cleanData) for (const s of sentencesOf(t)) { const [a, b] = count(s.text, cd, fd); nd += a; nfd += b }
  const table = (p: Float64Array, d: Float64Array, tp: number, td: number): Float32Array => Float32Array.from({ length: size }, (_, i) => {
    const a = p[i] as number, b = d[i] as number
    return a + b < MIN_COUNT ? 0 : Math.max(-4, Math.min(4, Math.log((a + 0.5) / Math.max(1, tp)) - Math.log((b + 0.5) / Math.max(1, td))))
  })
  return { words: table(cp, cd, np, nd), first: table(fp, fd, nfp, nfd) }
}

/**
 * The attack categories the pair reading is fitted on: BIPIA's task-irrelevant text attacks, a question
 * or task with no word for the model. Orders about the model's answer ("add … to your reply") are the
 * data head's; fitted on them too, the pair reading learned "your" and little else.
 */
export const TASK_IRRELEVANT: ReadonlySet<string> = new Set(['Information Retrieval', 'Content Creation', 'Learning and Tutoring', 'Language Translation', 'Programming Help'])

export interface Tables { readonly words: Float32Array, readonly first: Float32Array }

export interface PairOptions { readonly epochs: number, readonly lr: number, readonly l2: number, readonly seed: number }
export const PAIR_DEFAULTS: PairOptions = { epochs: 30, lr: 0.05, l2: 1e-4, seed: 1236 }

/**
 * The logistic layer by SGD, one sentence per example: for an attack the best-scoring sentence that
 * overlaps the planted text, for a clean span its best-scoring sentence (a span is blocked by its best
 * sentence). Classes are weighted to equal totals.
 */
export function fitPair (examples: readonly PairExample[], tables: Tables, opt: PairOptions = PAIR_DEFAULTS, tablesFor: (e: PairExample) => Tables = () => tables): PairModel {
  const base = { tableBits: TABLE_BITS, words: tables.words, first: tables.first }
  const bags = examples.flatMap((e) => {
    const t = tablesFor(e)
    const { sentences, features } = pairFeatures({ tableBits: TABLE_BITS, words: t.words, first: t.first }, e.request, e.data, e.endsMessage)
    const keep = features.filter((_, i) => e.planted === undefined || ((sentences[i]?.start ?? 0) < e.planted[1] && (sentences[i]?.end ?? 0) > e.planted[0]))
    return keep.length === 0 ? [] : [{ y: e.label, xs: keep }]
  })
  const pos = bags.filter((b) => b.y === 1).length, neg = bags.length - pos
  const weights = new Float32Array(PAIR_DIM)
  let bias = 0
  const next = rng(opt.seed)
  const order = bags.map((_, i) => i)
  for (let epoch = 0; epoch < opt.epochs; epoch++) {
    for (let i = order.length - 1; i > 0; i--) { const j = Math.floor(next() * (i + 1)); const t = order[i] as number; order[i] = order[j] as number; order[j] = t }
    for (const idx of order) {
      const b = bags[idx] as (typeof bags)[number]
      let best = b.xs[0] as Float64Array, bz = -Infinity
      for (const x of b.xs) { const z = pairLogit({ weights, bias }, x); if (z > bz) { bz = z; best = x } }
      const w = b.y === 1 ? bags.length / (2 * Math.max(1, pos)) : bags.length / (2 * Math.max(1, neg))
      const g = (1 / (1 + Math.exp(-bz)) - b.y) * w
      for (let k = 0; k < PAIR_DIM; k++) weights[k] = (weights[k] as number) * (1 - opt.lr * opt.l2) - opt.lr * g * (best[k] as number)
      bias -= opt.lr * g
    }
  }
  return { ...base, weights, bias, threshold: 0.5 }
}

/** The share of the data-dev part's clean spans the pair threshold may block. */
export const PAIR_FPR_BUDGET = 0
/** Never block by the pair reading below this probability. */
export const PAIR_MIN_THRESHOLD = 0.5

/**
 * The pair threshold: the lowest probability, never below PAIR_MIN_THRESHOLD, that at most
 * floor(PAIR_FPR_BUDGET × n) of `cleanDev` reach: the clean data-dev spans and the text dev.jsonl's
 * benign prompts paste (devPairExamples), so the pair reading blocks no benign dev prompt.
 */
export function choosePairThreshold (m: PairModel, cleanDev: readonly PairExample[]): number {
  const scores = cleanDev.map((e) => pairScore(m, e.request, e.data, e.endsMessage)).sort((a, b) => b - a)
  const first = scores[Math.floor(PAIR_FPR_BUDGET * scores.length)]
  return Math.min(0.999, Math.max(PAIR_MIN_THRESHOLD, first === undefined ? 0 : first + 1e-6))
}

/**
 * The pair model fitted without the examples `drop` names: tables from train.jsonl's prompts and the
 * clean training spans it keeps, the layer on the training spans it keeps, the threshold on the clean
 * data-dev spans it keeps.
 */
export function trainPair (examples: readonly PairExample[], drop: (e: PairExample) => boolean = () => false, opt: PairOptions = PAIR_DEFAULTS): PairModel {
  const kept = examples.filter((e) => !drop(e) && (e.label === 0 || TASK_IRRELEVANT.has(e.category ?? '')))
  const train = kept.filter((e) => e.part === 'train')
  const prompts = readRows('train.jsonl')
  const clean = train.filter((e) => e.label === 0).map((e) => e.data)
  // A clean span's sentences are in the tables the shipped model reads, which would make them look more
  // like documents than unseen ones do: each training span is featurised with the tables of the other
  // half of the clean spans (halves by a hash of the text).
  const half = (t: string): number => wordHash(t, 1)
  const halves = [0, 1].map((h) => wordTables(prompts, clean.filter((t) => half(t) !== h)))
  // Scored as shipped: int8 tables.
  const m = decodePair(encodePair(fitPair(train, wordTables(prompts, clean), opt, (e) => halves[half(e.data)] as Tables)))
  return { ...m, threshold: choosePairThreshold(m, [...kept.filter((e) => e.part === 'dev' && e.label === 0), ...devPairExamples()]) }
}

/** The data spans of dev.jsonl's benign prompts (text pasted after a framing line), beside their requests. */
export function devPairExamples (): PairExample[] {
  return readRows('dev.jsonl').flatMap((r) => (r.label !== 0 || pastedRanges(r.text).length === 0
    ? []
    : spanPairs([{ message: 0, role: 'user', path: 'messages[0].content', text: r.text }]).map((p) => ({ ...p, label: 0 as const, source: 'dev_pasted', part: 'dev' as const }))))
}

export type { IndirectRow }

/** `node dist-training/training/detector/pair-train.js`: fits the pair reading alone and writes pair.bin (train.ts writes it too). */
function main (): void {
  const pair = trainPair(pairExamples(trainingRows()))
  writeFileSync(PAIR_URL, encodePair(pair))
  console.log(JSON.stringify({ pairThreshold: pair.threshold, bias: pair.bias, weights: Object.fromEntries(PAIR_FEATURES.map((f, i) => [f, Number((pair.weights[i] as number).toFixed(3))])) }))
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) main()
