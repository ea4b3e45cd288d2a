// The shapes of the usage drill-down extras and of sessions, as the UI API and the read API answer them.
// Pure types, compiled into the browser build too (like trace-types.ts).
import type { SeriesPoint, TraceListItem, UsageBody, UsageMeasures } from './trace-types.js'

/**
 * Time to first token of streamed calls that were answered (2xx): the time from the request's arrival to
 * its first answer bytes reaching the client (the trace's `ttfb_ms`, what `tracegate_time_to_first_token_seconds`
 * measures). `streams` counts the calls measured; the percentiles are null when there were none.
 */
export interface TtftMeasures {
  streams: number
  ttft_p50_ms: number | null
  ttft_p95_ms: number | null
  ttft_p99_ms: number | null
}

export type UsageGroupRow = UsageMeasures & { group: string }

/** What the usage answer is narrowed to: one key, one user (the caller's `user` label), or neither. */
export interface UsageScopeFilter {
  readonly key: string | null
  readonly user: string | null
}

export type UsersOrder = 'requests' | 'cost'

/** The usage answer with its drill-down: TTFT beside every measure, and the busiest users. */
export type UsageAnswer = Omit<UsageBody, 'totals' | 'series'> & {
  readonly totals: UsageMeasures & TtftMeasures & { users: number }
  readonly series: Array<SeriesPoint & TtftMeasures>
  /** The top users (at most 50) by `users_by`; '' is the calls sent without a user label. */
  readonly by_user: UsageGroupRow[]
  readonly users_by: UsersOrder
  readonly filter: UsageScopeFilter
}

/** A session's numbers: every call of the session id (in the list: within its time range). */
export interface SessionSummary {
  session: string
  /** The first non-empty user label of the session's calls, or ''. */
  user: string
  /** How many different non-empty user labels its calls carry. */
  users: number
  first_time: string
  last_time: string
  calls: number
  errors: number
  blocked: number
  input_tokens: number
  output_tokens: number
  cached_input_tokens: number
  /** The priced calls' cost: a call with no price for its model adds nothing here and one to unpriced_calls. */
  cost_usd: number
  unpriced_calls: number
  /** From the first call's arrival to the end of the call that ended last. */
  duration_ms: number
}

/** One call of a session, with what its conversation view shows of it. */
export type SessionCall = TraceListItem & {
  ttfb_ms: number | null
  /**
   * The request reduced to its last message (usually the new user turn), as a body of the call's own
   * dialect: `{"messages":[…]}` or `{"contents":[…]}`. '' when confidential, when the stored request is
   * cut or not JSON, or when that message is longer than 64 KiB (the trace's detail shows it).
   */
  input: string
  /** The stored response's first 64 KiB (JSON or SSE, as stored). */
  output: string
  /** The response is longer than `output`. */
  output_cut: boolean
}

export interface SessionList {
  readonly sessions: SessionSummary[]
  readonly next_cursor: string | null
}

export interface SessionBody {
  readonly session: string
  readonly totals: SessionSummary
  /** Oldest first. */
  readonly calls: SessionCall[]
  readonly next_cursor: string | null
}
