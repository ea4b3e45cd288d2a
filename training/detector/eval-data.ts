// Data spans in `npm run eval:detector`: planted instructions of held-out contexts and
// clean documents never trained on, judged through the alpha dialect's walker and detectInjection as a
// request carries them; then planted instructions of attack categories and context kinds left out of
// training (the model refitted without them, threshold chosen on dev as train.ts does).
import type { Segment } from '../../src/detection/types.js'
import { DATA_MODEL_ONLY, detectInjection, isData, segmentScore } from '../../workers/detector/injection.js'
import { extractSegments } from '../../src/scan/extract.js'
import { spansOf, type Piece } from '../../workers/detector/spans.js'
import { STRONG_RULE, analyze, decodeModel, encodeModel, type Model } from '../../workers/detector/model.js'
import { dataRows, headTrainingRows, readRows, trainingRows, type Row } from './data.js'
import { documents, isHeldOutDocument, type DocumentRow } from './documents.js'
import { isHeldOutContext, readIndirect, type IndirectRow } from './indirect.js'
import { DEFAULTS, calibrate, featurize, fit, fitHead, headRowsOf, weightsOf, type DeepOptions, type Example, type TrainOptions } from './train.js'

export interface Rate { readonly n: number, readonly blocked: number }

function pct (r: Rate): number {
  return Math.round((r.blocked / Math.max(1, r.n)) * 10000) / 100
}

function add (m: Map<string, Rate>, k: string, hit: boolean): void {
  const r = m.get(k) ?? { n: 0, blocked: 0 }
  m.set(k, { n: r.n + 1, blocked: r.blocked + (hit ? 1 : 0) })
}

function print (title: string, m: ReadonlyMap<string, Rate>, what: (k: string) => string): Record<string, Rate> {
  console.log(title)
  for (const [k, r] of [...m].sort((a, b) => a[0].localeCompare(b[0]))) console.log(`  ${k.padEnd(44)} ${String(r.n).padStart(5)} ${String(r.blocked).padStart(6)}  ${pct(r).toFixed(2)}% ${what(k)}`)
  return Object.fromEntries(m)
}

/** A document as a request carries it: returned by a tool, or pasted by the user after framing. */
export function documentRequest (text: string, shape: 'tool' | 'pasted'): Record<string, unknown> {
  const system = { role: 'system', content: 'You are an assistant that helps the user with their files, mail and tools.' }
  if (shape === 'pasted') return { model: 'm', messages: [system, { role: 'user', content: `Here is the document:\n\n${text}\n\nQ: Summarise it in three sentences.` }] }
  return {
    model: 'm',
    messages: [
      system,
      { role: 'user', content: 'Summarise the document I just opened.' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read_document', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: text },
    ],
  }
}

/**
 * Whether a model (refitted, with its own thresholds) blocks these segments, as detectInjection judges
 * them, span by span (spans.ts: text pasted after a framing line is data): a data span is blocked by a
 * strong rule or by the model alone at the model's own data threshold (segmentScore applies the
 * shipped model's), any other by segmentScore.
 */
export function blockedBy (model: Model, segments: readonly Segment[]): boolean {
  const t = model.threshold
  return spansOf(segments).some((span) => {
    if (span.text === '') return false
    const first = segments[(span.pieces[0] as Piece).segment] as Segment
    const s = { role: first.role, path: first.path, text: span.text, source: span.source }
    const a = analyze(model, s.text)
    if (!isData(s)) return segmentScore(a, s, t) >= t
    const rules = a.findings.reduce((m, f) => (f.family !== 'model' && f.score >= STRONG_RULE ? Math.max(m, f.score) : m), 0)
    return segmentScore({ ...a, score: rules, modelScore: 0, dataModelScore: 0, dataScore: rules }, s, t) >= t || a.dataModelScore >= (model.dataThreshold ?? DATA_MODEL_ONLY)
  })
}

const shipped = (body: Record<string, unknown>): boolean => detectInjection(extractSegments('alpha', body)).blocked

export interface DataReport {
  readonly plantedHeldOutContexts: Rate
  readonly cleanHeldOutContexts: Rate
  readonly plantedAsData: Rate
  readonly cleanAsData: Rate
  readonly documentsHeldOut: Rate
  readonly byKind: Record<string, Rate>
}

/** The shipped model on the held-out contexts and the held-out clean documents. */
export function dataReport (): DataReport {
  const indirect = readIndirect().filter(isHeldOutContext)
  const ctx = new Map<string, Rate>()
  for (const r of indirect) add(ctx, `${r.context} ${r.shape} ${r.label === 1 ? 'planted' : 'clean'}`, shipped({ model: 'm', messages: r.messages }))
  const byCtx = print('held-out contexts (indirect-train.jsonl, 20% of contexts never trained on): kind, shape, n, blocked', ctx, (k) => (k.endsWith('planted') ? 'TPR' : 'blocked'))
  const sum = (pred: (k: string) => boolean): Rate => Object.entries(byCtx).filter(([k]) => pred(k)).reduce((a, [, r]) => ({ n: a.n + r.n, blocked: a.blocked + r.blocked }), { n: 0, blocked: 0 })
  const planted = sum((k) => k.endsWith('planted'))
  const clean = sum((k) => k.endsWith('clean'))
  const docs = documents().filter(isHeldOutDocument)
  const kinds = new Map<string, Rate>()
  for (const d of docs) for (const shape of ['tool', 'pasted'] as const) {
    const hit = shipped(documentRequest(d.text, shape))
    add(kinds, `${d.source} (${shape})`, hit)
    if (hit) console.log(`    blocked ${d.source} ${shape}: ${JSON.stringify(d.text.slice(0, 90))}`)
  }
  const byKind = print('held-out clean documents, as a tool result and pasted: kind, n, blocked', kinds, () => 'blocked')
  const all = Object.values(byKind).reduce((a, r) => ({ n: a.n + r.n, blocked: a.blocked + r.blocked }), { n: 0, blocked: 0 })
  const asData = sum((k) => k.includes(' tool ') && k.endsWith('planted'))
  const cleanAsData = sum((k) => k.includes(' tool ') && k.endsWith('clean'))
  console.log(`  planted (held-out contexts) ${pct(planted)}% of ${planted.n}; clean contexts ${pct(clean)}% of ${clean.n}; clean documents ${pct(all)}% of ${all.n}`)
  console.log(`  returned by a tool (read as data): planted ${pct(asData)}% of ${asData.n}, clean ${pct(cleanAsData)}% of ${cleanAsData.n}`)
  return { plantedHeldOutContexts: planted, cleanHeldOutContexts: clean, plantedAsData: asData, cleanAsData, documentsHeldOut: all, byKind }
}

/** Categories are held out in this many folds (every category in exactly one), each fold one refit. */
export const CATEGORY_FOLDS = 5

/**
 * Planted instructions of attack categories never trained on: BIPIA's 25 train categories dealt into
 * CATEGORY_FOLDS folds; for each, the model is refitted without that fold's attack rows and the recall
 * is measured on every row of those categories, by shape. Then each context kind (email, table, code)
 * left out whole (its attacks and clean contexts), with the recall and the clean block rate on that
 * kind's tool results.
 */
export function leaveDataOut (opt: TrainOptions = DEFAULTS): { categories: Record<string, Rate>, categoryMean: number, sources: Record<string, { planted: Rate, clean: Rate }>, sourceMean: number } {
  const rows = trainingRows()
  const head = headTrainingRows()
  const exRows = featurize(rows)
  const exHead = featurize(head)
  const dev = readRows('dev.jsonl')
  const indirect = readIndirect()
  const cats = [...new Set(indirect.flatMap((r) => (r.category !== undefined ? [r.category] : [])))].sort()
  const dataDev = dataRows('dev')
  // The linear part is fitted on what users write, which holds no planted instruction: one fit serves every refit.
  const linear = decodeModel(encodeModel(fit(exRows, weightsOf(rows, opt), { ...opt, quiet: true })))
  const own = headRowsOf(rows, exRows)
  const refit = (drop: (r: Row) => boolean): Model => {
    const keep = head.flatMap((r, i) => (drop(r) ? [] : [i]))
    const all = [...own.rows, ...keep.map((i) => head[i] as Row)]
    const trained = fitHead([...own.examples, ...keep.map((i) => exHead[i] as Example)], weightsOf(all, opt), linear, opt.deep as DeepOptions, { ...opt, quiet: true })
    return calibrate(trained, dev, dataDev.filter((r) => !drop(r)))
  }
  const judge = (m: Model, r: IndirectRow): boolean => blockedBy(m, extractSegments('alpha', { model: 'm', messages: r.messages }))
  const categories = new Map<string, Rate>()
  console.log(`attack categories left out (${CATEGORY_FOLDS} folds, refitted without them): category, n, blocked`)
  for (let f = 0; f < CATEGORY_FOLDS; f++) {
    const out = new Set(cats.filter((_, i) => i % CATEGORY_FOLDS === f))
    const m = refit((r) => r.category !== undefined && out.has(r.category))
    for (const r of indirect) if (r.category !== undefined && out.has(r.category)) add(categories, `${r.category} (${r.shape})`, judge(m, r))
  }
  const byCat = print('', categories, () => 'TPR')
  // Returned by a tool, the context is data; pasted after a framing line ("Here is the email:"), the
  // pasted text is a data span too (spans.ts).
  const meanOf = (shape: string): number => {
    const xs = Object.entries(byCat).filter(([k]) => k.endsWith(`(${shape})`)).map(([, r]) => pct(r))
    return xs.reduce((a, x) => a + x, 0) / Math.max(1, xs.length)
  }
  const categoryMean = meanOf('tool')
  const all = Object.values(byCat).reduce((a, r) => ({ n: a.n + r.n, blocked: a.blocked + r.blocked }), { n: 0, blocked: 0 })
  console.log(`  categories left out, mean over categories: returned by a tool ${categoryMean.toFixed(2)}%, pasted ${meanOf('pasted').toFixed(2)}%; all rows ${pct(all)}% of ${all.n}`)
  const sources: Record<string, { planted: Rate, clean: Rate }> = {}
  console.log('context kinds left out (refitted without the kind): kind, planted blocked, clean blocked')
  for (const kind of ['email', 'table', 'code'] as const) {
    const m = refit((r) => r.source === `bipia_${kind}`)
    const p = new Map<string, Rate>()
    for (const r of indirect) if (r.context === kind && r.shape === 'tool') add(p, r.label === 1 ? 'planted' : 'clean', judge(m, r))
    const planted = p.get('planted') ?? { n: 0, blocked: 0 }
    const clean = p.get('clean') ?? { n: 0, blocked: 0 }
    sources[kind] = { planted, clean }
    console.log(`  ${kind.padEnd(8)} returned by a tool: planted ${pct(planted)}% of ${planted.n}, clean ${pct(clean)}% of ${clean.n}  (threshold ${m.threshold.toFixed(3)}, data ${(m.dataThreshold ?? DATA_MODEL_ONLY).toFixed(3)})`)
  }
  const sourceMean = Object.values(sources).reduce((a, s) => a + pct(s.planted), 0) / 3
  return { categories: byCat, categoryMean, sources, sourceMean }
}

export type { DocumentRow }
