// Prompt-injection and jailbreak verdict over a request's segments: rules, decoded payloads and the
// linear model per segment (model.ts), score = max over segments, blocked at the threshold chosen on
// dev.jsonl and stored in the weights file. Issues name the family and score, never the matched text.
import type { InjectionResult, Issue, Segment, Severity } from '../../src/detection/types.js'
import { analyze, loadModel } from './model.js'
import { categoryOf } from './rules.js'

// Once per worker thread: a 256 KiB read and decode, well under a millisecond of startup.
const MODEL = loadModel()

/** Block at or above this score. Chosen on dev.jsonl by train.ts (see README.md). */
export const THRESHOLD = MODEL.threshold

/** Rule findings below this weight only inform the model and are not reported. */
const REPORT_MIN = 0.5

/**
 * A short text carries little evidence for the n-gram model: on its own (no rule fired) it blocks
 * one only when very sure. Measured on dev this gives up about 5 points of attack recall (84 → 79%)
 * and halves the benign blocks (0.56 → 0.32%), and stops blocking everyday prompts such as "Tell me
 * a story" or "Tell me about Paris", which the data's short, mislabelled-looking attacks taught the
 * model to distrust. Dev is not the final judge; real traffic is.
 */
const SHORT_TEXT = 40
const SHORT_MODEL_ONLY = 0.8

function segmentScore (a: ReturnType<typeof analyze>, text: string): number {
  const ruleFired = a.findings.some((f) => f.family !== 'model')
  if (ruleFired || a.score > a.modelScore || text.length >= SHORT_TEXT || a.modelScore >= SHORT_MODEL_ONLY) return a.score
  // Rescaled, still monotonic, so SHORT_MODEL_ONLY maps onto the threshold.
  return Math.min(a.score, (THRESHOLD * a.modelScore) / SHORT_MODEL_ONLY)
}

const EMPTY: InjectionResult = Object.freeze({ score: 0, blocked: false, categories: Object.freeze([]), issues: Object.freeze([]) })

export function detectInjection(segments: readonly Segment[]): InjectionResult {
  let score = 0
  const issues: Issue[] = []
  const categories = new Set<string>()
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i] as Segment
    if (seg.text.length === 0) continue
    const a = analyze(MODEL, seg.text)
    const segScore = segmentScore(a, seg.text)
    if (segScore > score) score = segScore
    const segmentBlocked = segScore >= THRESHOLD
    // One issue per family and segment: the strongest finding of that family.
    const best = new Map<string, (typeof a.findings)[number]>()
    for (const found of a.findings) {
      const f = found.family === 'model' ? { ...found, score: Math.min(found.score, segScore) } : found
      const floor = f.family === 'model' ? THRESHOLD : REPORT_MIN
      if (f.score < floor) continue
      const prev = best.get(f.family)
      if (prev === undefined || f.score > prev.score) best.set(f.family, f)
    }
    for (const f of best.values()) {
      const severity: Severity = f.score >= THRESHOLD ? 'high' : segmentBlocked ? 'medium' : 'low'
      categories.add(f.family)
      issues.push({
        category: f.family === 'model' && hasPersona(best) ? 'jailbreak' : categoryOf(f.family),
        kind: f.family,
        severity,
        detail: `${f.family} score ${f.score.toFixed(3)}`,
        segment: i,
        message: seg.message,
        span: f.span,
      })
    }
  }
  if (score === 0 && issues.length === 0) return EMPTY
  return { score, blocked: score >= THRESHOLD, categories: [...categories], issues }
}

function hasPersona(best: ReadonlyMap<string, unknown>): boolean {
  return best.has('jailbreak_persona')
}
