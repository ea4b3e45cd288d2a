// Trains the injection model on the training rows only (data.ts: train.jsonl, the hand-written hard
// negatives and positives, and the own train part), picks the blocking threshold on dev.jsonl only, and
// writes workers/detector/weights.bin. `npm run train:detector`. Deterministic: fixed seed, fixed order.
//
// Logistic regression by SGD over hashed n-grams (features.ts) plus one indicator per rule family.
// L2 is applied exactly with the scaled-weights trick (w = scale * v, Bottou 2012, "Stochastic Gradient
// Descent Tricks"), so an update costs only the features of one example.
import { writeFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { DIM, HEAD_ONLY, LENGTH_POWER, createBuffers, extractFeatures } from '../../workers/detector/features.js'
import { STRONG_RULE, VOCAB_URL, WEIGHTS_URL, analyze, decodeModel, deepForward, encodeModel, plantedFindings, prepare, sigmoid, type Deep, type Model } from '../../workers/detector/model.js'
import { segmentScore } from '../../workers/detector/injection.js'
import { normalize } from '../../workers/detector/normalize.js'
import { FAMILIES } from '../../workers/detector/rules.js'
import { OWN_SOURCES, QUESTION_SOURCES, dataRows, headTrainingRows, readRows, trainingRows, type Row } from './data.js'
import { rng } from './rng.js'

export type { Row } from './data.js'
export { readRows, trainingRows } from './data.js'

/** Benign sources that contain trigger words: each must stay at or under the FPR budget on its own. */
export const TRIGGER_SOURCES = ['surge_toxicity', 'hh_rlhf_harmless', 'awesome-chatgpt-prompts'] as const
/** The share of each trigger source's benign dev prompts the threshold may block (and the cross-validation cut). */
export const FPR_BUDGET = 0.01
/** The share of all benign dev prompts the threshold may block: the dev target. */
export const DEV_FPR_TARGET = 0.005
/** Never block below this score, whatever dev allows. */
export const MIN_THRESHOLD = 0.25

/**
 * The lowest threshold that blocks at most DEV_FPR_TARGET of all benign prompts and at most FPR_BUDGET
 * of each trigger source's: in each group, at most floor(budget × n) benign scores may reach it.
 * `scores` are blocking scores (blockingScore), so the guards' effect is counted, not guessed.
 */
export function chooseThreshold (scores: readonly number[], rows: readonly Row[]): number {
  const groups: Array<{ budget: number, scores: number[] }> = [{ budget: DEV_FPR_TARGET, scores: [] }]
  const bySource = new Map<string, number[]>()
  for (const s of TRIGGER_SOURCES) bySource.set(s, [])
  rows.forEach((r, i) => {
    if (r.label !== 0) return
    const s = scores[i] as number
    groups[0]?.scores.push(s)
    bySource.get(r.source)?.push(s)
  })
  for (const g of bySource.values()) groups.push({ budget: FPR_BUDGET, scores: g })
  let t = MIN_THRESHOLD
  for (const { budget, scores: g } of groups) {
    g.sort((a, b) => b - a)
    const allowed = Math.floor(budget * g.length)
    const firstBlocked = g[allowed]
    if (firstBlocked !== undefined) t = Math.max(t, firstBlocked + 1e-6)
  }
  return t
}

/**
 * A row's score as detectInjection judges it in its role (injection.ts segmentScore), with no
 * threshold: a text the short-text, system or data guard holds back scores 0, since it is blocked at
 * no threshold (the guard blocks it only when the model reaches its bar, and then it scores as usual).
 */
export function blockingScore (model: Model, r: Row): number {
  return segmentScore(analyze(model, r.text), { role: r.role ?? 'user', path: 'messages[0].content', text: r.text }, 0)
}

export interface TrainOptions {
  readonly epochs: number
  readonly lr: number
  /** L2 strength per example for the hashed weights and for the family weights. */
  readonly l2: number
  readonly l2Family: number
  readonly seed: number
  /**
   * Examples from a data-set source with more than this many rows count for cap / rows each, so that the
   * two big password-game sources (Gandalf, Mosscap: 70% of the attacks) do not teach "password" = attack.
   */
  readonly sourceCap: number
  /** Weight of each hand-written benign row (few of them, against hundreds of attacks per trigger word). */
  readonly hardNegativeWeight: number
  /** Weight of each hand-written attack. */
  readonly hardPositiveWeight: number
  /**
   * Total weight of one generated template, shared by its rows: a template is one phrasing, and its
   * dozen fillings must not count as a dozen hand-written prompts.
   */
  readonly templateWeight: number
  /** Weight of each planted-instruction context and each npm passage (rows with a group and no template). */
  readonly dataWeight: number
  /** The neural head (model.ts Deep): sizes, its own rate and epochs; absent trains the linear model alone. */
  readonly deep?: DeepOptions
  /** No per-epoch loss on stderr (cross-validation trains many models). */
  readonly quiet?: boolean
}

export interface DeepOptions {
  readonly embBits: number
  readonly dim: number
  readonly hidden: number
  readonly lr: number
  readonly epochs: number
  /** Weight decay per step on the hidden layer and the output (the embeddings have none). */
  readonly decay: number
}

// Chosen by `--cv` (cross-validation and left-out sources), not on dev (workers/detector/EXPERIMENTS.md):
// a source cap of 1000 lets the password games count more, and own benign rows and templates at 15
// keep over-defense down at the same time. The neural head's sizes, rate and epochs were compared with
// the held-out parts' figures printed (workers/detector/EXPERIMENTS.md: they are not untouched).
export const DEFAULTS: TrainOptions = {
  epochs: 20, lr: 0.2, l2: 1e-5, l2Family: 1e-5, seed: 1234, sourceCap: 1000, hardNegativeWeight: 15, hardPositiveWeight: 5, templateWeight: 15, dataWeight: 1,
  deep: { embBits: 16, dim: 16, hidden: 16, lr: 0.01, epochs: 20, decay: 1e-4 },
}

export interface Example {
  /** Distinct buckets the linear part reads: features are binary, as model.ts scores them. */
  readonly buckets: Int32Array
  /** Distinct word-level and head-only features: the neural head's bag. */
  readonly words: Int32Array
  readonly mask: number
  readonly y: number
}

/** Features of every row, computed once: leaving a source out refits on a subset without re-extracting. */
export function featurize (rows: readonly Row[]): Example[] {
  const buf = createBuffers()
  return rows.map((r) => {
    const prep = prepare(r.text)
    extractFeatures(prep.modelText, buf)
    // As model.ts reads them: a bucket counts at its first occurrence, the linear part's unless it is
    // a head-only pair, the head's unless it is a character n-gram.
    const seen = new Set<number>()
    const linear: number[] = []
    const words: number[] = []
    for (let k = 0; k < buf.count; k++) {
      const b = buf.buckets[k] as number
      if (seen.has(b)) continue
      seen.add(b)
      const kind = buf.words[k] as number
      if (kind !== HEAD_ONLY) linear.push(b)
      if (kind !== 0) words.push(b)
    }
    return { buckets: Int32Array.from(linear), words: Int32Array.from(words), mask: prep.mask, y: r.label }
  })
}

/** Each row's weight in the loss, given the rows trained on together (the source cap counts those rows). */
export function weightsOf (rows: readonly Row[], opt: TrainOptions = DEFAULTS): Float64Array {
  const perSource = new Map<string, number>()
  const perTemplate = new Map<string, number>()
  for (const r of rows) {
    perSource.set(r.source, (perSource.get(r.source) ?? 0) + 1)
    if (r.template !== undefined) perTemplate.set(r.template, (perTemplate.get(r.template) ?? 0) + 1)
  }
  return Float64Array.from(rows, (r) => {
    if (r.weight !== undefined) return r.weight
    if (r.template !== undefined) return opt.templateWeight / (perTemplate.get(r.template) ?? 1)
    if (OWN_SOURCES.has(r.source)) return r.label === 1 ? opt.hardPositiveWeight : opt.hardNegativeWeight
    if (r.group !== undefined) return opt.dataWeight
    return Math.min(1, opt.sourceCap / (perSource.get(r.source) ?? 1))
  })
}

/** The neural head's starting point: small uniform values from the seeded generator. */
function initDeep (o: DeepOptions, next: () => number): Deep {
  const u = (n: number, a: number): Float32Array => Float32Array.from({ length: n }, () => (next() * 2 - 1) * a)
  return { dataBias: 0, embBits: o.embBits, dim: o.dim, hidden: o.hidden, emb: u((1 << o.embBits) * o.dim, 0.05), w1: u(o.hidden * o.dim, Math.sqrt(3 / o.dim)), b1: new Float32Array(o.hidden).fill(0.01), w2: u(o.hidden, 0.1) }
}

/** SGD on the examples with these weights: the linear part; the threshold is left at 0.5 (see calibrate). */
export function fit (examples: readonly Example[], weights: ArrayLike<number>, opt: TrainOptions = DEFAULTS): Model {
  const v = new Float32Array(DIM)
  const fam = new Float32Array(FAMILIES.length)
  let scale = 1
  let bias = 0
  const next = rng(opt.seed)
  const order = examples.map((_, i) => i)
  let step = 0
  for (let epoch = 0; epoch < opt.epochs; epoch++) {
    shuffle(order, next)
    let loss = 0
    for (const idx of order) {
      const ex = examples[idx] as Example
      const weight = weights[idx] as number
      const lr = opt.lr / (1 + step++ * 1e-5)
      const n = ex.buckets.length
      const x = n > 0 ? Math.pow(n, -LENGTH_POWER) : 0
      let z = bias
      for (let k = 0; k < n; k++) z += (v[ex.buckets[k] as number] as number) * scale * x
      for (let f = 0; f < FAMILIES.length; f++) if ((ex.mask & (1 << f)) !== 0) z += fam[f] as number
      const p = sigmoid(z)
      loss -= weight * (ex.y === 1 ? Math.log(p + 1e-12) : Math.log(1 - p + 1e-12))
      const g = (p - ex.y) * weight
      scale *= 1 - lr * opt.l2
      const gv = lr * g * x / scale
      for (let k = 0; k < n; k++) { const b = ex.buckets[k] as number; v[b] = (v[b] as number) - gv }
      for (let f = 0; f < FAMILIES.length; f++) {
        fam[f] = (fam[f] as number) * (1 - lr * opt.l2Family)
        if ((ex.mask & (1 << f)) !== 0) fam[f] = (fam[f] as number) - lr * g
      }
      bias -= lr * g
      if (scale < 1e-6) { for (let b = 0; b < DIM; b++) v[b] = (v[b] as number) * scale; scale = 1 }
    }
    if (opt.quiet !== true) process.stderr.write(`epoch ${epoch + 1}: mean loss ${(loss / order.length).toFixed(4)}\n`)
  }
  for (let b = 0; b < DIM; b++) v[b] = (v[b] as number) * scale
  return { weights: v, familyWeights: fam, bias, threshold: 0.5 }
}

function shuffle (order: number[], next: () => number): void {
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1))
    const tmp = order[i] as number; order[i] = order[j] as number; order[j] = tmp
  }
}

/** The linear logit of an example under a (shipped, int8) model: what the head is fitted on top of. */
function linearLogit (m: Model, ex: Example): number {
  const n = ex.buckets.length
  let z = m.bias
  for (let f = 0; f < FAMILIES.length; f++) if ((ex.mask & (1 << f)) !== 0) z += m.familyWeights[f] as number
  if (n === 0) return z
  let sum = 0
  for (let k = 0; k < n; k++) sum += m.weights[ex.buckets[k] as number] as number
  return z + sum * Math.pow(n, -LENGTH_POWER)
}

/**
 * The neural head (model.ts Deep) by SGD on top of the fixed linear part of `base`: the data logit
 * is linearLogit + dataBias + w2·relu(W1·bag + b1), the bag the word-level buckets' embeddings scaled
 * as the linear sum is. Backpropagation reaches the layers and each bag row.
 */
export function fitHead (examples: readonly Example[], weights: ArrayLike<number>, base: Model, o: DeepOptions, opt: TrainOptions = DEFAULTS): Model {
  const next = rng(opt.seed + 1)
  const d = initDeep(o, next)
  let dataBias = 0
  const { dim, hidden } = d
  const emask = (1 << d.embBits) - 1
  const z0 = examples.map((ex) => linearLogit(base, ex))
  const bag = new Float64Array(dim)
  const h = new Float64Array(hidden)
  const dh = new Float64Array(hidden)
  const de = new Float64Array(dim)
  const order = examples.map((_, i) => i)
  let step = 0
  for (let epoch = 0; epoch < o.epochs; epoch++) {
    shuffle(order, next)
    let loss = 0
    for (const idx of order) {
      const ex = examples[idx] as Example
      const weight = weights[idx] as number
      const x = Math.pow(Math.max(1, ex.buckets.length), -LENGTH_POWER)
      bag.fill(0)
      for (let k = 0; k < ex.words.length; k++) {
        const row = ((ex.words[k] as number) & emask) * dim
        for (let c = 0; c < dim; c++) bag[c] = (bag[c] as number) + (d.emb[row + c] as number)
      }
      for (let c = 0; c < dim; c++) bag[c] = (bag[c] as number) * x
      const z = (z0[idx] as number) + dataBias + deepForward(d, bag, h)
      const p = sigmoid(z)
      loss -= weight * (ex.y === 1 ? Math.log(p + 1e-12) : Math.log(1 - p + 1e-12))
      const g = (p - ex.y) * weight
      const lr = o.lr / (1 + step++ * 1e-5)
      const keep = 1 - lr * o.decay
      de.fill(0)
      for (let j = 0; j < hidden; j++) {
        dh[j] = (h[j] as number) > 0 ? g * (d.w2[j] as number) : 0
        const row = j * dim
        for (let c = 0; c < dim; c++) de[c] = (de[c] as number) + (dh[j] as number) * (d.w1[row + c] as number)
      }
      for (let j = 0; j < hidden; j++) {
        d.w2[j] = (d.w2[j] as number) * keep - lr * g * (h[j] as number)
        d.b1[j] = (d.b1[j] as number) - lr * (dh[j] as number)
        const row = j * dim
        for (let c = 0; c < dim; c++) d.w1[row + c] = (d.w1[row + c] as number) * keep - lr * (dh[j] as number) * (bag[c] as number)
      }
      dataBias -= lr * g
      for (let c = 0; c < dim; c++) de[c] = (de[c] as number) * x * lr
      for (let k = 0; k < ex.words.length; k++) {
        const row = ((ex.words[k] as number) & emask) * dim
        for (let c = 0; c < dim; c++) d.emb[row + c] = (d.emb[row + c] as number) - (de[c] as number)
      }
    }
    if (opt.quiet !== true) process.stderr.write(`head epoch ${epoch + 1}: mean loss ${(loss / order.length).toFixed(4)}\n`)
  }
  return { ...base, deep: { ...d, dataBias } }
}

/**
 * The linear part on `rows` (what users write), then, with opt.deep, the neural head on those rows
 * (headRowsOf) and `dataRows` (planted instructions, clean documents and their windows) on top of it.
 */
export function train (rows: readonly Row[], opt: TrainOptions = DEFAULTS, dataRows: readonly Row[] = []): Model {
  const examples = featurize(rows)
  const linear = fit(examples, weightsOf(rows, opt), opt)
  if (opt.deep === undefined || opt.deep === null) return linear
  const own = headRowsOf(rows, examples)
  const all = [...own.rows, ...dataRows]
  return fitHead([...own.examples, ...featurize(dataRows)], weightsOf(all, opt), decodeModel(encodeModel(linear)), opt.deep, opt)
}

/** The rows of the linear part the head is fitted on too: all but the users' questions (data.ts QUESTION_SOURCES). */
export function headRowsOf (rows: readonly Row[], examples: readonly Example[]): { rows: Row[], examples: Example[] } {
  const keep = rows.flatMap((r, i) => (QUESTION_SOURCES.has(r.source) ? [] : [i]))
  return { rows: keep.map((i) => rows[i] as Row), examples: keep.map((i) => examples[i] as Example) }
}

/** The share of the data-dev part's clean data spans the data threshold may block. */
export const DATA_FPR_BUDGET = 0.01

/**
 * The data threshold: the lowest model score, never below `threshold`, at which at most
 * floor(DATA_FPR_BUDGET × n) of the clean data-dev spans (documents and contexts, as data) score.
 * A span a strong rule decides is left out: the bar is for the model alone.
 */
export function chooseDataThreshold (model: Model, cleanData: readonly Row[]): number {
  const scores = cleanData.flatMap((r) => {
    const a = analyze(model, r.text)
    return a.findings.some((f) => f.family !== 'model' && f.score >= STRONG_RULE) ? [] : [a.dataModelScore]
  }).sort((a, b) => b - a)
  const first = scores[Math.floor(DATA_FPR_BUDGET * scores.length)]
  return Math.min(0.999, Math.max(model.threshold, first === undefined ? 0 : first + 1e-6))
}

/**
 * The model as it ships (int8 weights) with its threshold chosen on dev: dev is scored as
 * detectInjection judges it (blockingScore: analyze() and the guards of its role), and chooseThreshold
 * reads only its benign rows. With `dataDev` (the clean rows of the data-dev part), the data threshold
 * is chosen on them too.
 */
export function calibrate (trained: Model, devRows: readonly Row[], dataDev?: readonly Row[]): Model {
  const model = decodeModel(encodeModel(trained))
  const threshold = chooseThreshold(devRows.map((r) => blockingScore(model, r)), devRows)
  const dataThreshold = dataDev === undefined || model.deep === undefined ? undefined : chooseDataThreshold({ ...model, threshold }, dataDev.filter((r) => r.label === 0))
  return decodeModel(encodeModel({ ...model, threshold, ...(dataThreshold !== undefined ? { dataThreshold } : {}) }))
}

/** A word must occur in this many training rows to be named in an explanation (model.ts explainWindow). */
export const VOCAB_MIN_ROWS = 5

/**
 * The words an explanation may name: lower-case letters only, 2 to 24 of them, found in at least
 * VOCAB_MIN_ROWS training rows. Drawn from the training texts (public data and this project's own), so
 * no word of a user's prompt can enter it; sorted, one a line.
 */
export function vocabulary (rows: readonly Row[]): string {
  const seenIn = new Map<string, number>()
  for (const r of rows) {
    for (const w of new Set(normalize(r.text).text.match(/[a-z]{2,24}/g) ?? [])) seenIn.set(w, (seenIn.get(w) ?? 0) + 1)
  }
  return [...seenIn].filter(([w, n]) => n >= VOCAB_MIN_ROWS && /^[a-z]+$/.test(w)).map(([w]) => w).sort().join('\n') + '\n'
}

function main (): void {
  const t0 = Date.now()
  const trainRows = trainingRows()
  // TRAIN_OPTS tries other settings (the weights it writes are an experiment: the shipped ones use DEFAULTS).
  const opts: TrainOptions = { ...DEFAULTS, ...(JSON.parse(process.env.TRAIN_OPTS ?? '{}') as Partial<TrainOptions>) }
  const headRows = headTrainingRows()
  const model = calibrate(train(trainRows, opts, headRows), readRows('dev.jsonl'), dataRows('dev'))
  const out = encodeModel(model)
  writeFileSync(WEIGHTS_URL, out)
  writeFileSync(VOCAB_URL, vocabulary(trainRows))
  const fam = Object.fromEntries(FAMILIES.map((f, i) => [f, Number((model.familyWeights[i] as number).toFixed(3))]))
  console.log(JSON.stringify({ opts: process.env.TRAIN_OPTS ?? 'defaults', rows: trainRows.length, threshold: Number(model.threshold.toFixed(6)), dataThreshold: model.dataThreshold, bias: model.bias, familyWeights: fam, bytes: out.length, ms: Date.now() - t0 }))
}

/** TPR at the cut that lets floor(1%) of the benign scores reach it. */
function tprAtFpr (benign: number[], attacks: readonly number[]): number {
  benign.sort((a, b) => b - a)
  const cut = (benign[Math.floor(FPR_BUDGET * benign.length)] ?? 0) + 1e-9
  return attacks.filter((s) => s >= cut).length / Math.max(1, attacks.length)
}

/** A fixed fold per row; generated rows fold by template, so no phrasing sits on both sides of a fold. */
function foldOf (r: Row, i: number): number {
  if (r.template === undefined) return Math.imul(i + 1, 0x9e3779b1) >>> 30
  let h = 0x811c9dc5
  for (let k = 0; k < r.template.length; k++) h = Math.imul(h ^ r.template.charCodeAt(k), 16777619)
  return Math.imul(h, 0x9e3779b1) >>> 30
}

/**
 * `train.js --cv`: how the settings are chosen, without dev and without the held-out part. 4-fold
 * cross-validation on the training rows (TPR at 1% FPR on the data-set rows of the held-out fold, and
 * how many held-out own benign rows and own attacks land on each side of that cut), then each data-set
 * attack source left out of training in turn (recall on it at the 1%-FPR cut of the benign rows of
 * fold 0, also held out). Prints one JSON line.
 */
function crossValidate (): void {
  const rows = trainingRows()
  // TRAIN_OPTS='{"l2": 1e-4}' tries other settings; the shipped weights always use DEFAULTS.
  const opts: TrainOptions = { ...DEFAULTS, ...(JSON.parse(process.env.TRAIN_OPTS ?? '{}') as Partial<TrainOptions>), quiet: true }
  const examples = featurize(rows)
  const folds = rows.map(foldOf)
  const subset = (keep: (r: Row, i: number) => boolean): { ex: Example[], w: Float64Array } => {
    const idx = rows.flatMap((r, i) => (keep(r, i) ? [i] : []))
    return { ex: idx.map((i) => examples[i] as Example), w: weightsOf(idx.map((i) => rows[i] as Row), opts) }
  }
  const cv: number[] = []
  let ownBenignOver = 0, ownBenign = 0, ownCaught = 0, ownAttacks = 0
  // Short texts with no rule firing, as the short-text guard in injection.ts sees them (SHORT_TEXT = 40):
  // blocked at a model-only bar when the model score reaches both the bar and the fold's cut.
  const BARS = [0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95] as const
  const short: Array<{ kind: string, model: number, fold: number, cut: number }> = []
  // Tool results (role tool) as injection.ts judges data: rules of weight >= 0.8 (a planted instruction
  // counts 0.9 there) decide; otherwise the model alone blocks at a bar, here chosen among DATA_BARS.
  const DATA_BARS = [0.7, 0.8, 0.9, 0.95] as const
  const data: Array<{ label: number, score: number, model: number, ruled: boolean, fold: number, cut: number }> = []
  for (let k = 0; k < 4; k++) {
    const s = subset((_, i) => folds[i] !== k)
    const model = decodeModel(encodeModel(fit(s.ex, s.w, opts)))
    const benign: number[] = [], attacks: number[] = [], ownB: number[] = [], ownA: number[] = []
    rows.forEach((r, i) => {
      if (folds[i] !== k) return
      const a = analyze(model, r.text)
      const score = a.score
      if (r.text.length < 40 && !a.findings.some((f) => f.family !== 'model')) {
        short.push({ kind: `${OWN_SOURCES.has(r.source) ? 'own ' : ''}${r.label === 1 ? 'attack' : 'benign'}`, model: a.modelScore, fold: k, cut: 0 })
      }
      if (r.role === 'tool') {
        const ruled = plantedFindings(r.text).length > 0 || a.findings.some((f) => f.family !== 'model' && f.score >= STRONG_RULE)
        data.push({ label: r.label, score: ruled ? Math.max(score, 0.9) : score, model: a.modelScore, ruled, fold: k, cut: 0 })
      }
      if (OWN_SOURCES.has(r.source)) (r.label === 1 ? ownA : ownB).push(score)
      else (r.label === 1 ? attacks : benign).push(score)
    })
    cv.push(tprAtFpr(benign, attacks))
    const cut = (benign[Math.floor(FPR_BUDGET * benign.length)] ?? 0) + 1e-9
    ownBenignOver += ownB.filter((x) => x >= cut).length
    ownBenign += ownB.length
    ownCaught += ownA.filter((x) => x >= cut).length
    ownAttacks += ownA.length
    for (const x of short) if (x.fold === k) x.cut = cut
    for (const x of data) if (x.fold === k) x.cut = cut
  }
  const dataBlocked: Record<string, string> = {}
  for (const bar of DATA_BARS) {
    const hit = (x: (typeof data)[number]): boolean => x.score >= x.cut && (x.ruled || x.model >= bar || x.score > x.model)
    dataBlocked[String(bar)] = `benign ${data.filter((x) => x.label === 0 && hit(x)).length}/${data.filter((x) => x.label === 0).length}, attacks ${data.filter((x) => x.label === 1 && hit(x)).length}/${data.filter((x) => x.label === 1).length}`
  }
  const shortBlocked: Record<string, Record<string, string>> = {}
  for (const bar of BARS) {
    const by: Record<string, string> = {}
    for (const kind of ['attack', 'benign', 'own attack', 'own benign']) {
      const xs = short.filter((x) => x.kind === kind)
      by[kind] = `${xs.filter((x) => x.model >= bar && x.model >= x.cut).length}/${xs.length}`
    }
    shortBlocked[String(bar)] = by
  }
  const sources = [...new Set(rows.filter((r) => r.label === 1 && !OWN_SOURCES.has(r.source) && r.category === undefined).map((r) => r.source))]
    .filter((src) => rows.filter((r) => r.source === src && r.label === 1).length >= 20).sort()
  const loso: Record<string, number> = {}
  for (const src of sources) {
    const heldBenign = (r: Row, i: number): boolean => r.label === 0 && !OWN_SOURCES.has(r.source) && folds[i] === 0
    const s = subset((r, i) => !(r.label === 1 && r.source === src) && !heldBenign(r, i))
    const model = decodeModel(encodeModel(fit(s.ex, s.w, opts)))
    const benign = rows.flatMap((r, i) => (heldBenign(r, i) ? [analyze(model, r.text).score] : []))
    const attacks = rows.flatMap((r) => (r.label === 1 && r.source === src ? [analyze(model, r.text).score] : []))
    loso[src] = Math.round(tprAtFpr(benign, attacks) * 1000) / 10
  }
  const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length
  console.log(JSON.stringify({
    cvTprAt1: Math.round(mean(cv) * 1000) / 10,
    cvFolds: cv.map((x) => Math.round(x * 1000) / 10),
    cvOwnBenignOverCut: `${ownBenignOver}/${ownBenign}`,
    cvOwnAttacksOverCut: `${ownCaught}/${ownAttacks}`,
    losoMean: Math.round(mean(Object.values(loso)) * 10) / 10,
    loso,
    shortBlocked,
    dataBlocked,
  }))
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv.includes('--cv')) crossValidate(); else main()
}
