// Per-key and per-account limits as values: what a key and an account carry, a change to them, and one
// key's stored use. Parsing and matching live in limits/types.ts.
// Imports nothing of a thread (a leaf: test/unit/import-rules.test.ts keeps it one).

export interface Limits {
  /** Requests per minute: a whole number >= 1, or null = no limit. */
  readonly rpm: number | null
  /** Tokens (input + output) per minute: a whole number >= 1. */
  readonly tpm: number | null
  /** USD per UTC day: > 0, at most 6 decimals. */
  readonly budgetDayUsd: number | null
  /** USD per UTC month. */
  readonly budgetMonthUsd: number | null
  /** Allowed models (exact names and `*` patterns): null = any model, otherwise a non-empty list. */
  readonly models: readonly string[] | null
  /** Keys only (always null on an account): a whole number of bytes >= 1. */
  readonly maxBodyBytes: number | null
}

export const NO_LIMITS: Limits = Object.freeze({
  rpm: null, tpm: null, budgetDayUsd: null, budgetMonthUsd: null, models: null, maxBodyBytes: null,
})

/** A change: a field absent = unchanged; null = remove that limit. */
export type LimitsPatch = { -readonly [K in keyof Limits]?: Limits[K] }

/** One key's use in the current windows, as stored (for seeding the limiter on start). */
export interface LimitUsageRow {
  readonly accountId: string
  readonly keyId: string
  readonly minuteRequests: number
  readonly minuteTokens: number
  readonly dayUsd: number
  readonly monthUsd: number
}
