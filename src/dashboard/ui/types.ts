// The shapes of the dashboard's JSON API (docs: notes/dashboard-contract.md). Types only.

export interface User { id: string, email: string, role: string }
export interface Account { id: string, name: string, plan: string, server_side_keys: boolean }
export interface Session { user: User, account: Account, csrf: string }

export interface TraceListItem {
  account_id: string
  trace_id: string
  /** ClickHouse DateTime64 text in UTC (`2026-01-02 03:04:05.678`), ISO, or epoch ms. */
  time: string | number
  key_id: string
  provider: string
  model: string
  streaming: boolean
  confidential: boolean
  status: number
  outcome: string
  error_code: string
  input_tokens: number
  output_tokens: number
  cached_input_tokens: number
  token_source: string
  latency_ms: number
  cost_usd: number | null
  blocked: boolean
}

export interface TraceList { traces: TraceListItem[], next_cursor: string | null }

/** A stored safety finding (src/detection/types.ts Issue). */
export interface Finding {
  category: string
  kind: string
  severity: string
  detail: string
  /** Index into the request's text segments, in the order the detector extracts them. */
  segment: number
  message: number
  span: [number, number]
}

export interface Detection {
  ran: boolean
  blocked?: boolean
  score?: number
  categories?: string[]
  ms?: number
  failure?: string
}

export interface TraceDetail extends TraceListItem {
  endpoint: string
  /** Why tracegate failed the call itself ('' otherwise; absent on rows older than the column). */
  error_cause?: string
  prompt: string
  prompt_truncated: boolean
  response: string
  response_truncated: boolean
  request_bytes: number
  response_bytes: number
  ttfb_ms: number | null
  ttft_ms: number | null
  provider_ms: number | null
  overhead_ms: number
  cost_status: string
  detection: Detection | null
  issues: Finding[] | null
}

export interface UsageMeasures {
  requests: number
  blocked: number
  errors: number
  input_tokens: number
  output_tokens: number
  cached_input_tokens: number
  cost_usd: number
  latency_p50_ms: number | null
  latency_p95_ms: number | null
  latency_p99_ms?: number | null
}

export interface UsageGroup extends UsageMeasures { group: string, name?: string | null }

export interface Usage {
  from: string | number
  to: string | number
  bucket: 'minute' | 'hour' | 'day'
  totals: UsageMeasures
  series: Array<UsageMeasures & { t: string | number }>
  by_key: UsageGroup[]
  by_model: UsageGroup[]
  by_provider: UsageGroup[]
}

export type KeyStatus = 'active' | 'expired' | 'revoked'

export interface ApiKey {
  id: string
  name: string
  prefix: string
  scope: 'proxy' | 'read'
  created_at: string | number
  expires_at: string | number | null
  last_used_at: string | number | null
  status: KeyStatus
}
