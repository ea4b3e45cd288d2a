// Trains the injection model on train.jsonl only, picks the blocking threshold on dev.jsonl only, and
// writes workers/detector/weights.bin. `npm run train:detector`. Deterministic: fixed seed, fixed order.
//
// Logistic regression by SGD over hashed n-grams (features.ts) plus one indicator per rule family.
// L2 is applied exactly with the scaled-weights trick (w = scale * v, Bottou 2012, "Stochastic Gradient
// Descent Tricks"), so an update costs only the features of one example.
import { readFileSync, writeFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { ROOT, repoFile } from '../../src/paths.js'
import { DIM, LENGTH_POWER, createBuffers, extractFeatures } from '../../workers/detector/features.js'
import { WEIGHTS_URL, analyze, decodeModel, encodeModel, prepare, sigmoid, type Model } from '../../workers/detector/model.js'
import { FAMILIES } from '../../workers/detector/rules.js'

export interface Row {
  readonly text: string
  readonly label: 0 | 1
  readonly source: string
}

/** The data set folder: TRACEGATE_DATASET_DIR, else ../shared/datasets/injection next to the repository. */
export function datasetDir(): string {
  const root = fileURLToPath(ROOT)
  return process.env.TRACEGATE_DATASET_DIR ?? resolve(root, '../shared/datasets/injection')
}

export function readRows(file: 'train.jsonl' | 'dev.jsonl'): Row[] {
  const rows: Row[] = []
  for (const line of readFileSync(resolve(datasetDir(), file), 'utf8').split('\n')) {
    if (line.trim() === '') continue
    const o = JSON.parse(line) as { text: string, label: number, source: string }
    rows.push({ text: o.text, label: o.label === 1 ? 1 : 0, source: o.source })
  }
  return rows
}

/**
 * Hand-written benign prompts that use the data set's trigger words in ordinary ways (passwords and
 * secrets asked about, system prompts, "ignore" and "instructions" in everyday requests, role-play,
 * questions about jailbreaks). train.jsonl has almost none, so the model learned "password", "secret"
 * and "you are" as attack words and blocked system prompts. Written for this project, never copied
 * from dev.jsonl; probes.jsonl (separate prompts, not trained on) checks the effect.
 */
export const HARD_NEGATIVES_URL = repoFile('training/detector/hard-negatives.jsonl')

/**
 * Hand-written attacks in the styles the data set lacks (indirect injection in mail, pages and tool
 * results, polite overrides, the prompt or the secret asked for sideways, personas, spoofed turns, six
 * languages). Written for this project; holdout.jsonl and probes.jsonl hold different prompts.
 */
export const HARD_POSITIVES_URL = repoFile('training/detector/hard-positives.jsonl')

/** Sources written for this project (not taken from any data set). */
const HAND_WRITTEN: ReadonlySet<string> = new Set(['hard_negatives', 'hard_positives'])

/** train.jsonl plus the hand-written hard negatives and attacks: everything the model is fitted on. */
export function trainingRows(): Row[] {
  const rows = readRows('train.jsonl')
  for (const url of [HARD_NEGATIVES_URL, HARD_POSITIVES_URL]) {
    for (const line of readFileSync(url, 'utf8').split('\n')) {
      if (line.trim() === '') continue
      const o = JSON.parse(line) as { text: string, label: number, source: string }
      rows.push({ text: o.text, label: o.label === 1 ? 1 : 0, source: o.source })
    }
  }
  return rows
}

/** Benign sources that contain trigger words: each must stay at or under the FPR budget on its own. */
export const TRIGGER_SOURCES = ['surge_toxicity', 'hh_rlhf_harmless', 'awesome-chatgpt-prompts'] as const
export const FPR_BUDGET = 0.01
/** Never block below this model probability, whatever dev allows. */
export const MIN_THRESHOLD = 0.25

/**
 * The lowest threshold that blocks at most FPR_BUDGET of benign prompts overall and of each trigger
 * source: in each group, at most floor(budget × n) benign scores may reach it.
 */
export function chooseThreshold(scores: readonly number[], rows: readonly Row[]): number {
  const groups: number[][] = [[]]
  const bySource = new Map<string, number[]>()
  for (const s of TRIGGER_SOURCES) bySource.set(s, [])
  rows.forEach((r, i) => {
    if (r.label !== 0) return
    const s = scores[i] as number
    groups[0]?.push(s)
    bySource.get(r.source)?.push(s)
  })
  groups.push(...bySource.values())
  let t = MIN_THRESHOLD
  for (const g of groups) {
    g.sort((a, b) => b - a)
    const allowed = Math.floor(FPR_BUDGET * g.length)
    const firstBlocked = g[allowed]
    if (firstBlocked !== undefined) t = Math.max(t, firstBlocked + 1e-6)
  }
  return t
}

// Mulberry32: a small seeded PRNG so the shuffle, and so the weights, are reproducible.
function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export interface TrainOptions {
  readonly epochs: number
  readonly lr: number
  /** L2 strength per example for the hashed weights and for the family weights. */
  readonly l2: number
  readonly l2Family: number
  readonly seed: number
  /**
   * Examples from a source with more than this many rows count for cap / rows each, so that the two big
   * password-game sources (Gandalf, Mosscap: 70% of the attacks) do not teach "password" = attack.
   */
  readonly sourceCap: number
  /** Weight of each hand-written hard negative (there are few of them, against hundreds of attacks per trigger word). */
  readonly hardNegativeWeight: number
  /** Weight of each hand-written attack. */
  readonly hardPositiveWeight: number
  /** No per-epoch loss on stderr (cross-validation trains many models). */
  readonly quiet?: boolean
}

// epochs 20 and l2 3e-5 (from 12 and 1e-4): the model was under-fitted; chosen by cross-validation on
// train.jsonl and by leaving each attack source out, not on dev.
export const DEFAULTS: TrainOptions = { epochs: 20, lr: 0.2, l2: 3e-5, l2Family: 1e-5, seed: 1234, sourceCap: 400, hardNegativeWeight: 5, hardPositiveWeight: 5 }

interface Example {
  readonly buckets: Int32Array
  readonly mask: number
  readonly y: number
  readonly weight: number
}

export function train(rows: readonly Row[], opt: TrainOptions = DEFAULTS): Model {
  const buf = createBuffers()
  const perSource = new Map<string, number>()
  for (const r of rows) perSource.set(r.source, (perSource.get(r.source) ?? 0) + 1)
  const examples: Example[] = rows.map((r) => {
    const prep = prepare(r.text)
    extractFeatures(prep.text, buf)
    // Binary features, as model.ts scores them: each distinct bucket once.
    return { buckets: Int32Array.from(new Set(buf.buckets.subarray(0, buf.count))), mask: prep.mask, y: r.label, weight: r.source === 'hard_negatives' ? opt.hardNegativeWeight : r.source === 'hard_positives' ? opt.hardPositiveWeight : Math.min(1, opt.sourceCap / (perSource.get(r.source) ?? 1)) }
  })
  const v = new Float32Array(DIM)
  const fam = new Float32Array(FAMILIES.length)
  let scale = 1
  let bias = 0
  const next = rng(opt.seed)
  const order = examples.map((_, i) => i)
  let step = 0
  for (let epoch = 0; epoch < opt.epochs; epoch++) {
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1))
      const tmp = order[i] as number; order[i] = order[j] as number; order[j] = tmp
    }
    let loss = 0
    for (const idx of order) {
      const ex = examples[idx] as Example
      const lr = opt.lr / (1 + step++ * 1e-5)
      const n = ex.buckets.length
      const x = n > 0 ? Math.pow(n, -LENGTH_POWER) : 0
      let z = bias
      for (let k = 0; k < n; k++) z += (v[ex.buckets[k] as number] as number) * scale * x
      for (let f = 0; f < FAMILIES.length; f++) if ((ex.mask & (1 << f)) !== 0) z += fam[f] as number
      const p = sigmoid(z)
      loss -= ex.weight * (ex.y === 1 ? Math.log(p + 1e-12) : Math.log(1 - p + 1e-12))
      const g = (p - ex.y) * ex.weight
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

function main(): void {
  const t0 = Date.now()
  const trainRows = trainingRows()
  const trained = train(trainRows)
  // Score dev with the weights as they will ship (int8), then fix the threshold on dev only.
  const shipped = encodeModel(trained)
  const model = decodeModel(shipped)
  const devRows = readRows('dev.jsonl')
  const scores = devRows.map((r) => analyze(model, r.text).score)
  const threshold = chooseThreshold(scores, devRows)
  const out = encodeModel({ ...model, threshold })
  writeFileSync(WEIGHTS_URL, out)
  const fam = Object.fromEntries(FAMILIES.map((f, i) => [f, Number((model.familyWeights[i] as number).toFixed(3))]))
  console.log(JSON.stringify({ rows: trainRows.length, threshold: Number(threshold.toFixed(6)), bias: model.bias, familyWeights: fam, bytes: out.length, ms: Date.now() - t0 }))
}

/** TPR at the cut that lets floor(1%) of the benign scores reach it. */
function tprAtFpr(benign: number[], attacks: readonly number[]): number {
  benign.sort((a, b) => b - a)
  const cut = (benign[Math.floor(FPR_BUDGET * benign.length)] ?? 0) + 1e-9
  return attacks.filter((s) => s >= cut).length / Math.max(1, attacks.length)
}

/**
 * `train.js --cv`: how the settings are chosen, without dev. 4-fold cross-validation on train.jsonl plus
 * the hard negatives (TPR at 1% FPR on the held-out fold, and how many held-out hard negatives reach
 * that cut), then each attack source left out of training in turn (recall on it at the 1%-FPR cut of
 * the benign rows of fold 0, also held out). Prints one JSON line.
 */
function crossValidate(): void {
  const rows = trainingRows()
  // TRAIN_OPTS='{"l2": 1e-4}' tries other settings; the shipped weights always use DEFAULTS.
  const opts: TrainOptions = { ...DEFAULTS, ...(JSON.parse(process.env.TRAIN_OPTS ?? '{}') as Partial<TrainOptions>), quiet: true }
  const fold = (i: number): number => Math.imul(i + 1, 0x9e3779b1) >>> 30 // fixed, 4 folds
  const cv: number[] = []
  let hardBlocked = 0, hardTotal = 0, handCaught = 0, handTotal = 0
  // Short texts with no rule firing, as the short-text guard in injection.ts sees them (SHORT_TEXT = 40):
  // blocked at a model-only bar when the model score reaches both the bar and the fold's cut.
  const BARS = [0.85, 0.9, 0.95] as const
  const short: Array<{ kind: string, model: number, cut: number }> = []
  for (let k = 0; k < 4; k++) {
    const model = decodeModel(encodeModel(train(rows.filter((_, i) => fold(i) !== k), opts)))
    const benign: number[] = [], attacks: number[] = [], hard: number[] = [], hand: number[] = []
    rows.forEach((r, i) => {
      if (fold(i) !== k) return
      const a = analyze(model, r.text)
      const s = a.score
      if (r.text.length < 40 && !a.findings.some((f) => f.family !== 'model')) short.push({ kind: HAND_WRITTEN.has(r.source) ? r.source : r.label === 1 ? 'attack' : 'benign', model: a.modelScore, cut: k })
      if (r.source === 'hard_positives') hand.push(s); else if (r.label === 1) attacks.push(s); else if (r.source === 'hard_negatives') hard.push(s); else benign.push(s)
    })
    cv.push(tprAtFpr(benign, attacks))
    const cut = (benign[Math.floor(FPR_BUDGET * benign.length)] ?? 0) + 1e-9
    for (const x of short) if (x.cut === k) x.cut = cut + 10
    hardBlocked += hard.filter((s) => s >= cut).length
    hardTotal += hard.length
    handCaught += hand.filter((s) => s >= cut).length
    handTotal += hand.length
  }
  const sources = [...new Set(rows.filter((r) => r.label === 1).map((r) => r.source))].filter((s) => !HAND_WRITTEN.has(s) && rows.filter((r) => r.source === s && r.label === 1).length >= 20).sort()
  const loso: Record<string, number> = {}
  for (const src of sources) {
    const model = decodeModel(encodeModel(train(rows.filter((r, i) => !(r.label === 1 && r.source === src) && !(r.label === 0 && !HAND_WRITTEN.has(r.source) && fold(i) === 0)), opts)))
    const benign = rows.flatMap((r, i) => (r.label === 0 && !HAND_WRITTEN.has(r.source) && fold(i) === 0 ? [analyze(model, r.text).score] : []))
    const attacks = rows.flatMap((r) => (r.label === 1 && r.source === src ? [analyze(model, r.text).score] : []))
    loso[src] = Math.round(tprAtFpr(benign, attacks) * 1000) / 10
  }
  const shortBlocked: Record<string, Record<string, string>> = {}
  for (const bar of BARS) {
    const by: Record<string, string> = {}
    for (const kind of ['attack', 'benign', 'hard_negatives', 'hard_positives']) {
      const xs = short.filter((x) => x.kind === kind)
      by[kind] = `${xs.filter((x) => x.model >= bar && x.model >= x.cut - 10).length}/${xs.length}`
    }
    shortBlocked[String(bar)] = by
  }
  const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length
  console.log(JSON.stringify({ cvTprAt1: Math.round(mean(cv) * 1000) / 10, cvFolds: cv.map((x) => Math.round(x * 1000) / 10), cvHardNegativesOverCut: `${hardBlocked}/${hardTotal}`, cvHardPositivesOverCut: `${handCaught}/${handTotal}`, losoMean: Math.round(mean(Object.values(loso)) * 10) / 10, loso, shortBlocked }))
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv.includes('--cv')) crossValidate(); else main()
}
