// The shapes of the dashboard's JSON API. Types only. Traces and usage are the server's own types
// (src/store/trace-types.ts); what is here is what the server answers as opaque JSON, read by the UI.
import type { Issue } from '../../detection/types.js'
import type { TraceDetail as StoredTrace, TraceListItem, UsageBody, UsageMeasures } from '../../store/trace-types.js'

export type { TraceListItem, UsageMeasures }
export type Usage = UsageBody

export interface User { id: string, email: string, role: string }
export interface Account { id: string, name: string, plan: string, server_side_keys: boolean }
export interface Session { user: User, account: Account, csrf: string }

export interface TraceList { traces: TraceListItem[], next_cursor: string | null }

/** A stored safety finding, as the detector made it. */
export type Finding = Issue

export interface Detection {
  ran: boolean
  blocked?: boolean
  score?: number
  categories?: string[]
  ms?: number
  failure?: string
  /** The account's detection policy that judged the call (block, monitor, off), and what it decided. */
  policy?: string
  would_block?: boolean
  threshold?: number
  /** `mask`: the stored prompt and response have PII and secrets replaced by placeholders; counts by kind. */
  pii_at_rest?: string
  pii_masked?: { prompt?: Record<string, number>, response?: Record<string, number> }
}

/** One trace as the API answers it, with its stored detection and findings parsed. */
/** One attempt over the provider's targets, as the trace lists it. */
export interface Attempt { target: string, key_id: string, status: number, ms: number, cause: string }

export type TraceDetail = Omit<StoredTrace, 'detection' | 'issues' | 'attempts'> & { detection: Detection | null, issues: Finding[] | null, attempts?: Attempt[] }

export type UsageGroup = UsageMeasures & { group: string, name?: string | null }

export type KeyStatus = 'active' | 'expired' | 'revoked'

/** A key's or the account's limits under the members an update takes; null = no limit. */
export interface Limits {
  rpm: number | null
  tpm: number | null
  budget_day: number | null
  budget_month: number | null
  models: string[] | null
  /** Keys only. */
  max_body_bytes?: number | null
}

/** What counts against each limit now: requests and tokens this minute, USD this UTC day and month. */
export interface LimitUse {
  rpm: number
  tpm: number
  budget_day: number
  budget_month: number
  /** When each window ends, epoch ms. */
  resets_at: { minute: number, day: number, month: number }
}

export interface AccountLimits { limits: Limits, use: LimitUse, editable: boolean }

export interface ApiKey {
  id: string
  name: string
  prefix: string
  scope: 'proxy' | 'read' | 'sql'
  created_at: string | number
  expires_at: string | number | null
  last_used_at: string | number | null
  status: KeyStatus
  limits: Limits
  use: LimitUse
}
