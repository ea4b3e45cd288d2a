// What a request's key says about its caller: the store worker answers it, the key cache holds it, the
// key decision (auth/authenticate.ts) judges it.
// Imports nothing of a thread (a leaf: test/unit/import-rules.test.ts keeps it one).
import type { AccountDetection } from './detection-policy.js'
import type { Limits } from './limits.js'
import type { Plan } from './plan.js'
import type { Scope } from './scope.js'

/** What a request's key says about its caller, cached per key hash. */
export interface KeyInfo {
  readonly keyId: string
  readonly accountId: string
  readonly scope: Scope
  readonly expiresAt: number | null
  readonly revoked: boolean
  readonly plan: Plan
  readonly serverSideKeys: boolean
  /** The key's own limits, and its account's; a call must pass both. */
  readonly limits: Limits
  readonly accountLimits: Limits
  /** The account's detection policy: what a verdict does, its threshold and allow phrases. */
  readonly detection: AccountDetection
}
