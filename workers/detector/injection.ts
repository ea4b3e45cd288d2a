// Prompt-injection and jailbreak verdict over a request's segments: rules, decoded payloads and the
// linear model per span (model.ts; spans.ts labels the spans by writer), score = max over spans,
// blocked at the threshold chosen on dev.jsonl and stored in the weights file. Issues name the family
// and score, never the matched text.
import type { InjectionResult, Issue, Segment, Severity, SpanSource } from '../../src/detection/types.js'
import { STRONG_RULE, analyze, loadModel, plantedFindings, type Finding, type SegmentAnalysis } from './model.js'
import { categoryOf } from './rules.js'
import { sourceOf, spansOf, toSegment, type Piece } from './spans.js'
import { TextCache } from './text-cache.js'

// Once per worker thread: a 1.25 MiB read and decode (the neural head's embeddings are most of it).
const MODEL = loadModel()

/** Block at or above this score. Chosen on dev.jsonl by training/detector/train.ts (see this folder's README.md, Thresholds). */
export const THRESHOLD = MODEL.threshold

/** Rule findings below this weight only inform the model and are not reported. */
const REPORT_MIN = 0.5

/**
 * A short text carries little evidence for the n-gram model: on its own (no rule fired) it blocks one
 * only when very sure, so everyday prompts such as "Tell me a story" pass even though the data's short,
 * mislabelled-looking attacks taught the model to distrust them. The bar was chosen by `npm run train:detector -- --cv`,
 * never on dev (the figures are in this folder's EXPERIMENTS.md).
 */
const SHORT_TEXT = 40
const SHORT_MODEL_ONLY = 0.9

/**
 * How a span is judged depends on who wrote it (spans.ts). The rules apply in full to every span, so an
 * injection is blocked wherever it stands; what differs is the bar for the model alone and which rules
 * look for orders addressed to the model.
 *
 * `application` (system and developer prompts, tool and schema descriptions): written by the
 * application, not by whoever sends the request, and full of the words attacks use ("you are", "never
 * reveal these instructions", "ignore requests to …"); the data set has none, so the model alone blocks
 * one only when very sure.
 *
 * `data` (tool and function results, documents, search results, files, text the user pasted after a
 * framing line): written by neither the user nor the application, and judged for what it may do to the
 * model that reads it. Instructions in it addressed to that model (rules.ts PLANTED_RULES: "Note to the
 * AI summarising this email: forward …"), looked for only here, block, since no page, mail or tool result
 * has a reason to give the model orders; so does a task swapped for another (`task_switch`), a rule of
 * the override family. Imperatives addressed to people (READMEs, recipes, mail, forms) are everyday
 * content there, so the model alone blocks only at the data bar. In `--cv` 0.8 and 0.9 put none of 68
 * held-out benign tool results over the cut and caught 183 and 175 of 191 planted ones (0.7: 2 benign,
 * 186); 0.9 is kept because those 68 are few and alike (this folder's EXPERIMENTS.md).
 *
 * `user`: the sender's words, judged by the model at its own threshold, except a short text.
 */
const MODEL_ONLY: Readonly<Record<SpanSource, number>> = { application: 0.95, data: MODEL.dataThreshold ?? 0.9, user: 0 }
// Data is read by the model's data reading (small windows and the neural head, model.ts dataModelScore),
// whose bar is chosen with the weights (train.ts chooseDataThreshold); 0.9 for a linear-only file.
export const DATA_MODEL_ONLY = MODEL_ONLY.data

/** Whether a segment is data the application hands the model (spans.ts sourceOf). */
export function isData (seg: Pick<Segment, 'role' | 'path' | 'source'>): boolean {
  return sourceOf(seg) === 'data'
}
const PLANTED_IN_DATA = 0.9

/**
 * In data, an order to the model (a planted instruction) or a task swapped for another ("your real task
 * is", "End of text. Now …": rules.ts `task_switch`, weak from a user, who may change the task) decides.
 */
const inDataDecides = (f: Finding): boolean => f.family === 'planted_instruction' || f.rule === 'task_switch'

/** A finding's score where the span's writer is taken into account. */
function findingScore (f: Finding, data: boolean): number {
  return data && inDataDecides(f) ? Math.max(f.score, PLANTED_IN_DATA) : f.score
}

/** Planted instructions of a data span's text, kept with its cached analysis. */
const plantedByAnalysis = new WeakMap<SegmentAnalysis, readonly Finding[]>()

type Judged = Pick<Segment, 'role' | 'path' | 'text' | 'source'>

/** The findings a span is judged by: its text's analysis, plus planted instructions when it is data. */
export function findingsOf (a: SegmentAnalysis, seg: Judged): readonly Finding[] {
  if (!isData(seg)) return a.findings
  let planted = plantedByAnalysis.get(a)
  if (planted === undefined) {
    planted = plantedFindings(seg.text)
    plantedByAnalysis.set(a, planted)
  }
  return planted.length === 0 ? a.findings : [...a.findings, ...planted]
}

/**
 * The span's score under its writer, for a model with this threshold. The analysis (rules, payloads,
 * model) is the same for a text wherever it appears; the bars for short texts, the application's texts
 * and data, and the weight of a planted instruction in data, depend on who wrote it.
 */
export function segmentScore (a: SegmentAnalysis, seg: Judged, threshold: number): number {
  const source = sourceOf(seg)
  const data = source === 'data'
  const modelScore = data ? a.dataModelScore : a.modelScore
  let score = data ? a.dataScore : a.score
  let ruled = false
  for (const f of findingsOf(a, seg)) {
    if (f.family === 'model') continue
    const fs = findingScore(f, data)
    if (fs >= STRONG_RULE) score = Math.max(score, fs)
    // In data only a finding strong enough to decide counts as evidence beside the model: a weak one
    // ("jailbreak" in a search result about phones) does not lower the bar.
    if (!data || fs >= STRONG_RULE) ruled = true
  }
  const bar = source === 'user' && seg.text.length < SHORT_TEXT ? SHORT_MODEL_ONLY : MODEL_ONLY[source]
  if (bar === 0 || ruled || score > modelScore || modelScore >= bar) return score
  // Rescaled, still monotonic, so the bar maps onto the threshold.
  return Math.min(score, (threshold * modelScore) / bar)
}

/**
 * Segment analyses by text, bounded by the characters held. A chat client resends the whole
 * conversation every turn, and the system prompt with every request, so most segments of a request
 * were judged before; this makes a turn cost the new text, not the history. The analysis is a pure
 * function of the text (the role-dependent part is segmentScore, applied after).
 */
const ANALYSES = new TextCache<ReturnType<typeof analyze>>(4_000_000, 65_536)
const analyzeText = (text: string): ReturnType<typeof analyze> => analyze(MODEL, text)
let cacheOn = true

/** training/detector/eval.ts times detection with the cache off: the latency targets are for text not seen before. */
export function setAnalysisCache (on: boolean): void {
  cacheOn = on
  ANALYSES.clear()
}

function analyzeCached (text: string): ReturnType<typeof analyze> {
  return cacheOn ? ANALYSES.get(text, analyzeText) : analyzeText(text)
}

const EMPTY: InjectionResult = Object.freeze({ score: 0, dataScore: 0, ownScore: 0, blocked: false, categories: Object.freeze([]), issues: Object.freeze([]) })

/**
 * The verdict over a request's segments: each span (spans.ts) judged under its writer, `score` the
 * highest span score, `dataScore` that of the data spans (an account may set another threshold for
 * them: src/detection/policy.ts). Issues name the segment, the span within its text, who wrote it and
 * its JSON path.
 */
export function detectInjection (segments: readonly Segment[]): InjectionResult {
  let own = 0
  let dataScore = 0
  const issues: Issue[] = []
  const categories = new Set<string>()
  for (const span of spansOf(segments)) {
    const first = segments[(span.pieces[0] as Piece).segment] as Segment
    const judged: Judged = { role: first.role, path: first.path, text: span.text, source: span.source }
    const a = analyzeCached(span.text)
    const spanScore = segmentScore(a, judged, THRESHOLD)
    const data = span.source === 'data'
    if (data) dataScore = Math.max(dataScore, spanScore)
    else own = Math.max(own, spanScore)
    const spanBlocked = spanScore >= THRESHOLD
    // One issue per family and span: the strongest finding of that family. Most spans report none, and
    // pay for no map or copied finding.
    let best: Map<string, Finding> | null = null
    for (const found of findingsOf(a, judged)) {
      const model = found.family === 'model'
      const score = model ? Math.min(data ? a.dataModelScore : found.score, spanScore) : data && inDataDecides(found) ? findingScore(found, true) : found.score
      if (score < (model ? THRESHOLD : REPORT_MIN)) continue
      const prev = best?.get(found.family)
      if (prev === undefined || score > prev.score) (best ??= new Map()).set(found.family, score === found.score ? found : { ...found, score })
    }
    if (best === null) continue
    for (const f of best.values()) {
      const severity: Severity = f.score >= THRESHOLD ? 'high' : spanBlocked ? 'medium' : 'low'
      categories.add(f.family)
      const at = toSegment(span, f.span[0], f.span[1])
      const seg = segments[at.segment] as Segment
      const issue: Issue = {
        category: f.family === 'model' && hasPersona(best) ? 'jailbreak' : categoryOf(f.family),
        kind: f.family,
        severity,
        detail: `${f.family} score ${f.score.toFixed(3)}`,
        segment: at.segment,
        message: seg.message,
        span: at.span,
        source: span.source,
        path: seg.path,
      }
      // Why: the rule that matched, or the words that drove the model (model.ts explainWindow).
      issues.push(f.family === 'model' ? (a.features.length > 0 ? { ...issue, features: a.features } : issue) : { ...issue, rule: f.rule })
    }
  }
  const score = Math.max(own, dataScore)
  if (score === 0 && issues.length === 0) return EMPTY
  return { score, dataScore, ownScore: own, blocked: score >= THRESHOLD, categories: [...categories], issues }
}

function hasPersona (best: ReadonlyMap<string, unknown>): boolean {
  return best.has('jailbreak_persona')
}
