// Per-account detection policy: what a verdict does (block, monitor, off), the score at
// which it blocks, the score at which a data span (what the model is handed to read) blocks, the phrases that never count as injection for that account, and whether the PII and secrets
// found in its calls are masked in the stored prompt and response. How a change is read from loose input
// (the CLI, the admin socket, the dashboard), the front thread's decision, and what a blocked call's 403
// tells the client of it; the values are in domain/detection-policy.ts.
import { givenName, isNone, refuse, type Code } from '../limits/types.js'
import type { Issue, Verdict } from './types.js'
import { DETECTION_POLICIES, PII_AT_REST, type AccountDetection, type DetectionPatch } from '../domain/detection-policy.js'

/** Bounded so the worker's per-list expression stays small and a list fits the admin socket's 64 KiB. */
export const MAX_ALLOW_PHRASES = 50
export const ALLOW_PHRASE_MIN = 3
export const ALLOW_PHRASE_MAX = 100
/** Printable, no comma (a list must survive the CLI's comma-separated form), and a letter or digit. */
const PHRASE = /^[^,\p{Cc}]+$/u
const HAS_WORD = /[\p{L}\p{N}]/u
const THRESHOLD = /^(?:\d+(?:\.\d{1,3})?|\.\d{1,3})$/

type Field = keyof DetectionPatch

/** Input names for each member, the JSON spelling first. */
export type DetectionNames = Readonly<Record<Field, readonly string[]>>
/** The admin socket's members and the CLI's flags (`tracegate account update`). */
export const ADMIN_NAMES: DetectionNames = {
  policy: ['detection_policy', 'detection-policy'],
  threshold: ['detection_threshold', 'detection-threshold'],
  dataThreshold: ['detection_data_threshold', 'detection-data-threshold'],
  allowPhrases: ['detection_allow', 'detection-allow'],
  piiAtRest: ['pii_at_rest', 'pii-at-rest'],
}
/** The dashboard API's members (`/api/ui/account/detection`). */
export const UI_NAMES: DetectionNames = {
  policy: ['policy'],
  threshold: ['threshold'],
  dataThreshold: ['data_threshold'],
  allowPhrases: ['allow_phrases'],
  piiAtRest: [],
}
/** The dashboard API's member for the stored text (`/api/ui/account/pii-at-rest`). */
export const UI_PII_NAMES: DetectionNames = { policy: [], threshold: [], dataThreshold: [], allowPhrases: [], piiAtRest: ['pii_at_rest'] }

/**
 * Reads a patch from loosely typed input; members that are not detection fields are ignored (the input
 * also carries the id and the limits). Throws TracegateError(code, { param: <the name as given> }).
 */
export function parseDetectionPatch (input: Record<string, unknown>, opts: { names: DetectionNames; code: Code }): DetectionPatch {
  const patch: DetectionPatch = {}
  for (const field of ['policy', 'threshold', 'dataThreshold', 'allowPhrases', 'piiAtRest'] as const) {
    const name = givenName(input, opts.names[field], opts.code)
    if (name === null) continue
    const value = input[name]
    switch (field) {
      case 'policy': patch.policy = oneOf(DETECTION_POLICIES, value, name, opts.code); break
      case 'threshold': patch.threshold = isNone(value) ? null : threshold(value, name, opts.code); break
      case 'dataThreshold': patch.dataThreshold = isNone(value) ? null : threshold(value, name, opts.code, 'none for the threshold'); break
      case 'allowPhrases': patch.allowPhrases = isNone(value) ? Object.freeze([]) : phrases(value, name, opts.code); break
      case 'piiAtRest': patch.piiAtRest = oneOf(PII_AT_REST, value, name, opts.code); break
    }
  }
  return patch
}

export function applyDetectionPatch (base: AccountDetection, patch: DetectionPatch): AccountDetection {
  return Object.freeze({
    policy: patch.policy ?? base.policy,
    threshold: patch.threshold === undefined ? base.threshold : patch.threshold,
    dataThreshold: patch.dataThreshold === undefined ? base.dataThreshold : patch.dataThreshold,
    allowPhrases: patch.allowPhrases ?? base.allowPhrases,
    piiAtRest: patch.piiAtRest ?? base.piiAtRest,
  })
}

export const isEmptyPatch = (p: DetectionPatch): boolean =>
  p.policy === undefined && p.threshold === undefined && p.dataThreshold === undefined && p.allowPhrases === undefined && p.piiAtRest === undefined

/** One of `values`, given in any case with spaces around. */
function oneOf<T extends string> (values: readonly T[], value: unknown, name: string, code: Code): T {
  const v = typeof value === 'string' ? value.trim().toLowerCase() : ''
  if (!values.includes(v as T)) throw refuse(code, name, `${name} must be one of ${values.join(', ')}`)
  return v as T
}

function threshold (value: unknown, name: string, code: Code, none = 'none for the detector\'s own threshold'): number {
  // A number is judged by its shortest decimal spelling, so 0.1 has one decimal and 1e-7 is refused.
  const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim() : ''
  const n = THRESHOLD.test(text) ? Number(text) : NaN
  // 0 would block every request, even one without text: the lowest is 0.001.
  if (!(n > 0 && n <= 1)) throw refuse(code, name, `${name} must be a score above 0 and at most 1 with at most 3 decimals, or ${none}`)
  return n
}

/** Trimmed, inner whitespace runs as one space, duplicates (ignoring case) dropped. */
function phrases (value: unknown, name: string, code: Code): readonly string[] {
  const rule = `${name} must be a list of phrases, each ${ALLOW_PHRASE_MIN} to ${ALLOW_PHRASE_MAX} characters with a letter or digit and no comma, at most ${MAX_ALLOW_PHRASES} of them, or none`
  let items: unknown[]
  if (typeof value === 'string') items = value.split(',')
  else if (Array.isArray(value)) items = value
  else throw refuse(code, name, rule)
  const out: string[] = []
  const seen = new Set<string>()
  for (const item of items) {
    if (typeof item !== 'string') throw refuse(code, name, rule)
    const p = item.trim().replace(/\s+/g, ' ')
    if (p.length < ALLOW_PHRASE_MIN || p.length > ALLOW_PHRASE_MAX || !PHRASE.test(p) || !HAS_WORD.test(p)) throw refuse(code, name, rule)
    const folded = p.toLowerCase()
    if (seen.has(folded)) continue
    seen.add(folded)
    out.push(p)
  }
  if (out.length > MAX_ALLOW_PHRASES) throw refuse(code, name, rule)
  return Object.freeze(out)
}

const MODEL_ONLY: readonly string[] = Object.freeze(['model'])

/**
 * The worker's verdict at the account's thresholds: `blocked` and `threshold` say what they decided (the
 * verdict itself when the account keeps the detector's own). The data spans' score is held to
 * `dataThreshold` (the threshold when none), the other spans' to the threshold. Every block is a score at
 * or above a threshold, rules included: strong rules score their weight (0.8 to 0.99), so an account
 * threshold above a rule's weight lets that rule's finding through too. The detector reports the model
 * among the categories only above its own threshold, so a block at a lower one that no rule explains
 * names `model`, whose score it was.
 */
export function atThreshold (d: AccountDetection, v: Verdict): Verdict {
  if ((d.threshold === null || d.threshold === v.threshold) && d.dataThreshold === null) return v
  const t = d.threshold ?? v.threshold
  const dt = d.dataThreshold ?? t
  const blocked = (v.ownScore ?? v.score) >= t || (v.dataScore ?? v.score) >= dt
  const categories = blocked && v.categories.length === 0 ? MODEL_ONLY : v.categories
  return { ...v, blocked, threshold: t, dataThreshold: dt, categories }
}

/** Thresholds as people read them: four decimals (a detector's own threshold is a float from training). */
export function roundThreshold (t: number): number {
  return Math.round(t * 10_000) / 10_000
}

/** `prompt_injection` → `Prompt injection`. */
function categoryName (category: string): string {
  const words = category.replace(/_/g, ' ')
  return words.charAt(0).toUpperCase() + words.slice(1)
}

/** Where a finding is, for a person: its JSON path (or message number), its characters, and who wrote it. Never the text. */
function findingSentence (i: Issue): string {
  const where = i.path !== undefined && i.path !== '' ? i.path : i.message < 0 ? 'the system prompt' : `message ${i.message}`
  const by = i.source === undefined ? '' : `, written by the ${i.source}`
  return `${categoryName(i.category)} (${i.kind}) found in ${where}, characters ${i.span[0]} to ${i.span[1]}${by}.`
}

/**
 * The `detection` member of a 403 prompt_injection_detected: the score, the thresholds that blocked it,
 * the categories, and each injection finding with a sentence saying what was found where, its message
 * index and character span, who wrote the span and its JSON path. Never the matched text.
 */
export function blockedSummary (v: Verdict): Record<string, unknown> {
  return {
    score: Math.round(v.score * 1000) / 1000,
    threshold: roundThreshold(v.threshold),
    ...(v.dataThreshold !== undefined ? { data_threshold: roundThreshold(v.dataThreshold) } : {}),
    categories: v.categories,
    findings: v.issues
      .filter((i) => i.category === 'prompt_injection' || i.category === 'jailbreak')
      .map((i) => ({
        category: i.category,
        kind: i.kind,
        severity: i.severity,
        message: findingSentence(i),
        message_index: i.message,
        span: i.span,
        source: i.source,
        path: i.path,
      })),
  }
}
