// Accounts and keys as JSON for people and scripts: the dashboard's API and the CLI's --json print the
// same members (snake_case), times as ISO 8601 in UTC with a `Z`, thresholds rounded to four decimals,
// and a key's status from the one rule (auth/key-status.ts).
import { keyStatus, type KeyStatus } from '../auth/key-status.js'
import { roundThreshold } from '../detection/policy.js'
import type { AccountDetection, DetectionPolicy, PiiAtRest } from '../domain/detection-policy.js'
import type { Limits } from '../domain/limits.js'
import type { AccountRow, KeyRow } from '../domain/accounts.js'
import type { Plan } from '../domain/plan.js'

/** ClickHouse's `YYYY-MM-DD hh:mm:ss[.fff]`, which is UTC. */
const CH_TIME = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)$/

/** A stored time as ISO 8601 with its zone (`2026-11-26T23:36:12.123Z`); text of any other form is left as it is. */
export function isoTime (t: string): string {
  const m = CH_TIME.exec(t)
  return m === null ? t : `${m[1]}T${m[2]}Z`
}

export function isoTimeOrNull (t: string | null): string | null {
  return t === null ? null : isoTime(t)
}

/** Limits under the JSON members a create or an update takes, so what is read can be sent back. */
export interface LimitsView {
  readonly rpm: number | null
  readonly tpm: number | null
  readonly budget_day: number | null
  readonly budget_month: number | null
  readonly models: readonly string[] | null
  /** Keys only: an account has no body limit, and its view has no such member. */
  readonly max_body_bytes?: number | null
}

export function limitsView (l: Limits, forAccount = false): LimitsView {
  const shared = { rpm: l.rpm, tpm: l.tpm, budget_day: l.budgetDayUsd, budget_month: l.budgetMonthUsd, models: l.models }
  return forAccount ? shared : { ...shared, max_body_bytes: l.maxBodyBytes }
}

/** The policy under the JSON members the dashboard's update takes, so what is read can be sent back. */
export interface DetectionView {
  readonly policy: DetectionPolicy
  /** null: the detector's own threshold. */
  readonly threshold: number | null
  /** null: the threshold. */
  readonly data_threshold: number | null
  readonly allow_phrases: readonly string[]
}

export function detectionView (d: AccountDetection): DetectionView {
  return {
    policy: d.policy,
    threshold: d.threshold === null ? null : roundThreshold(d.threshold),
    data_threshold: d.dataThreshold === null ? null : roundThreshold(d.dataThreshold),
    allow_phrases: d.allowPhrases,
  }
}

/** A key's row (times zoned) with its last call's time (null: never used), its status and its limits. */
export type KeyView = Omit<KeyRow, 'limits'> & {
  readonly last_used_at: string | null
  readonly status: KeyStatus
  readonly limits: LimitsView
}

export function keyView (k: KeyRow, lastUsed: string | null, now = Date.now()): KeyView {
  const expiresAt = isoTimeOrNull(k.expires_at)
  return {
    id: k.id,
    account_id: k.account_id,
    name: k.name,
    prefix: k.prefix,
    scope: k.scope,
    created_at: isoTime(k.created_at),
    expires_at: expiresAt,
    revoked_at: isoTimeOrNull(k.revoked_at),
    last_used_at: isoTimeOrNull(lastUsed),
    status: keyStatus({ revoked: k.revoked_at !== null, expiresAt: expiresAt === null ? null : Date.parse(expiresAt) }, now),
    limits: limitsView(k.limits),
  }
}

/** The detection settings as the CLI prints them: the dashboard's members, and what stored text keeps of PII. */
export type AccountDetectionView = DetectionView & { readonly pii_at_rest: PiiAtRest }

export function accountDetectionView (d: AccountDetection): AccountDetectionView {
  return { ...detectionView(d), pii_at_rest: d.piiAtRest }
}

export interface AccountView {
  readonly id: string
  readonly name: string
  readonly plan: Plan
  readonly server_side_keys: boolean
  readonly created_at: string
  readonly limits: LimitsView
  readonly detection: AccountDetectionView
}

export function accountView (a: AccountRow): AccountView {
  return {
    id: a.id,
    name: a.name,
    plan: a.plan,
    server_side_keys: a.server_side_keys,
    created_at: isoTime(a.created_at),
    limits: limitsView(a.limits, true),
    detection: accountDetectionView(a.detection),
  }
}
