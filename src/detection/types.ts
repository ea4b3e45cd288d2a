// The types shared by the detection pool (front thread) and its workers. Both sides import them with
// `import type`; nothing here runs.
import type { ProviderName } from '../providers/index.js'
import type { SpanSource } from '../providers/types.js'

export type { SpanSource }

/** One piece of prompt text as a dialect carries it, with where it came from. */
export interface Segment {
  /** Index of the message (or content entry) in the request; -1 for a system prompt outside the list. */
  readonly message: number
  /** `system`, `user`, `assistant`, `tool` (tool and function results), `developer`. */
  readonly role: string
  /** JSON path of the text in the body, e.g. `messages[2].content[0].text`. */
  readonly path: string
  readonly text: string
  /** Who wrote it (workers/detector/spans.ts); absent: read from the role. */
  readonly source?: SpanSource
}

export type Severity = 'low' | 'medium' | 'high'

/** A safety finding. `detail` is masked: it never holds a whole secret or PII value. */
export interface Issue {
  /** `prompt_injection`, `jailbreak`, `pii`, `secret`. */
  readonly category: string
  /** What exactly: `instruction_override`, `email`, `payment_card`, `openai_key`, … */
  readonly kind: string
  readonly severity: Severity
  readonly detail: string
  /** Index into the segments, and the character span [start, end) within that segment's text. */
  readonly segment: number
  readonly message: number
  readonly span: readonly [number, number]
  /** Injection findings: who wrote the judged span, and the segment's JSON path. */
  readonly source?: SpanSource
  readonly path?: string
  /** Injection findings of a rule family: the rule that matched, e.g. `override_previous`. */
  readonly rule?: string
  /**
   * The `model` finding: the words that raised its score most (at most 5), each with its share of the
   * model's logit. Words come only from the model's vocabulary (public training text, letters only),
   * never a secret or PII value.
   */
  readonly features?: readonly FeatureContribution[]
}

/** A word of the prompt and how much it raised the model's logit (the score is its sigmoid). */
export interface FeatureContribution {
  readonly feature: string
  readonly weight: number
}

export interface InjectionResult {
  /** 0..1, higher is more likely an injection or jailbreak. */
  readonly score: number
  /** The highest score of the data spans (0: none); `score` covers them too. */
  readonly dataScore: number
  /** The highest score of the other spans. */
  readonly ownScore: number
  readonly blocked: boolean
  /** Rule families and model signals that fired, e.g. `instruction_override`, `model`. */
  readonly categories: readonly string[]
  readonly issues: readonly Issue[]
}

/** What a worker answers for one request. */
export interface Verdict {
  readonly blocked: boolean
  readonly score: number
  /** InjectionResult's split of `score`: data spans, and the rest (absent: `score` for both). */
  readonly dataScore?: number
  readonly ownScore?: number
  readonly categories: readonly string[]
  readonly issues: readonly Issue[]
  /** Time spent judging it, in the worker (or in the serving thread, for a body judged inline). */
  readonly ms: number
  /** The detector's own threshold, at which `blocked` was decided (an account's policy may use another). */
  readonly threshold: number
  /** Where an account sets one for data spans (src/detection/policy.ts atThreshold): the score that blocked them. */
  readonly dataThreshold?: number
  /** True when an allow phrase of the account was found and blanked before injection scoring. */
  readonly allowApplied: boolean
}

/**
 * What the front thread sends a worker: the forwarded bodies of one batch of requests, back to back in
 * one moved buffer, with where each ends and its dialect. The worker answers one verdict per body, in order.
 */
export interface DetectTask {
  readonly providers: readonly ProviderName[]
  /** End offset of each body in `body`. */
  readonly ends: readonly number[]
  readonly body: Uint8Array
  /**
   * Per body, its account's allow phrases (null: none). Bodies of one account share one array, which
   * the structured clone sends once.
   */
  readonly allow: ReadonlyArray<readonly string[] | null>
}
