// Leave one attack source out (`npm run eval:detector`): for each attack source, train without its
// attack rows, choose the threshold on dev exactly as train.ts does, and measure the recall on every
// row of that source, judged as detectInjection judges it (role guards included). This is the closest
// the data gets to "a style of attack nobody showed the model"; the rules were written knowing all of
// them, so it measures the model's share of generalisation, not the rules'.
import { analyze, type Model } from '../../workers/detector/model.js'
import { segmentScore } from '../../workers/detector/injection.js'
import { OWN_SOURCES, ownRows, readRows, type Row } from './data.js'
import { DEFAULTS, calibrate, featurize, fit, weightsOf, type Example } from './train.js'

export interface LeftOut {
  readonly source: string
  /** Data set source, or one written for this project. */
  readonly own: boolean
  readonly n: number
  readonly caught: number
  readonly threshold: number
}

/** Sources with fewer attack rows than this are too small for a rate and are not left out. */
const MIN_ROWS = 20

export function recallOf (model: Model, rows: readonly Row[]): number {
  let caught = 0
  for (const r of rows) {
    const seg = { role: r.role ?? 'user', path: 'messages[0].content', text: r.text }
    if (segmentScore(analyze(model, r.text), seg, model.threshold) >= model.threshold) caught++
  }
  return caught
}

export function leaveOneSourceOut (trainRows: readonly Row[], onEach?: (r: LeftOut) => void): LeftOut[] {
  const examples = featurize(trainRows)
  const dev = readRows('dev.jsonl')
  // Every row of the source that exists, trained on or not: none of them is in the refitted model.
  const all = [...trainRows, ...dev, ...ownRows('heldout')]
  // Planted instructions in data (bipia_*) are left out by category and kind in eval-data.ts.
  const sources = [...new Set(trainRows.filter((r) => r.label === 1 && r.category === undefined).map((r) => r.source))]
    .filter((s) => trainRows.filter((r) => r.label === 1 && r.source === s).length >= MIN_ROWS).sort()
  const out: LeftOut[] = []
  for (const source of sources) {
    const keep = trainRows.flatMap((r, i) => (r.label === 1 && r.source === source ? [] : [i]))
    const model = calibrate(fit(keep.map((i) => examples[i] as Example), weightsOf(keep.map((i) => trainRows[i] as Row), DEFAULTS), { ...DEFAULTS, quiet: true }), dev)
    const rows = all.filter((r) => r.label === 1 && r.source === source)
    const r: LeftOut = { source, own: OWN_SOURCES.has(source), n: rows.length, caught: recallOf(model, rows), threshold: model.threshold }
    onEach?.(r)
    out.push(r)
  }
  return out
}
