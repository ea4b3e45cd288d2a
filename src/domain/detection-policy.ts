// An account's detection policy as values: what a verdict does, its thresholds, its allow phrases and what
// the stored prompt and response keep. Parsing and the front thread's decision live in detection/policy.ts.
// Imports nothing of a thread (a leaf: test/unit/import-rules.test.ts keeps it one).

/**
 * `block`: an injection is answered 403 and nothing is forwarded. `monitor`: detection runs and its
 * verdict is recorded, and the call is forwarded anyway. `off`: the account's calls are not judged.
 */
export type DetectionPolicy = 'block' | 'monitor' | 'off'
export const DETECTION_POLICIES: readonly DetectionPolicy[] = ['block', 'monitor', 'off']

/**
 * `keep`: the prompt and response are stored as sent. `mask`: the store worker replaces every e-mail,
 * phone number, card number, IBAN, SSN and secret in them with a placeholder before the row is written.
 */
export type PiiAtRest = 'keep' | 'mask'
export const PII_AT_REST: readonly PiiAtRest[] = ['keep', 'mask']

export interface AccountDetection {
  readonly policy: DetectionPolicy
  /** Injection at or above this score (0 < t <= 1); null = the detector's own threshold. */
  readonly threshold: number | null
  /** Injection in a data span (tool results, documents, pasted text) at or above this score; null = `threshold`. */
  readonly dataThreshold: number | null
  /** Matched case-insensitively as whole phrases and blanked before injection scoring; [] = none. */
  readonly allowPhrases: readonly string[]
  /** What the stored prompt and response keep of the PII and secrets in them. */
  readonly piiAtRest: PiiAtRest
}

/** What an account without a setting has: today's behaviour. Rows from before migrations 010, 011 and 012 read as this. */
export const DEFAULT_DETECTION: AccountDetection = Object.freeze({ policy: 'block', threshold: null, dataThreshold: null, allowPhrases: Object.freeze([]), piiAtRest: 'keep' })

/** A change: a member absent = unchanged; threshold null = the detector's own; dataThreshold null = the threshold; allowPhrases [] = none. */
export interface DetectionPatch {
  policy?: DetectionPolicy
  threshold?: number | null
  dataThreshold?: number | null
  allowPhrases?: readonly string[]
  piiAtRest?: PiiAtRest
}
