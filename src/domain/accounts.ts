// Accounts, keys and users as the store returns them (ClickHouse's row shapes: snake_case, times as text).
// Imports nothing of a thread (a leaf: test/unit/import-rules.test.ts keeps it one).
import type { AccountDetection } from './detection-policy.js'
import type { Limits } from './limits.js'
import type { Plan } from './plan.js'
import type { Scope } from './scope.js'

export interface AccountRow {
  readonly id: string
  readonly name: string
  readonly plan: Plan
  readonly server_side_keys: boolean
  readonly created_at: string
  /** Limits on all the account's keys together (maxBodyBytes is always null here). */
  readonly limits: Limits
  /** What detection does with the account's calls (block, monitor, off), its threshold and allow phrases. */
  readonly detection: AccountDetection
}

export interface KeyRow {
  readonly id: string
  readonly account_id: string
  readonly name: string
  readonly prefix: string
  readonly scope: Scope
  readonly created_at: string
  readonly expires_at: string | null
  readonly revoked_at: string | null
  readonly limits: Limits
}

export interface UserRow {
  readonly id: string
  readonly account_id: string
  readonly email: string
  readonly role: string
  readonly disabled: boolean
}
