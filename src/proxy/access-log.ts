// The access log's line for one finished call (TRACEGATE_ACCESS_LOG). Only what an operator needs to find
// and time a call: ids, route, model, status and timings. Never a key, never prompt or response text,
// never the caller's x-tracegate-* labels (free text a caller may fill with personal data; the trace has
// them). Tokens and cost are not here: the store worker counts them after the call, off this thread; the
// trace row (trace id = request_id) and the Prometheus counters have them.
import type { Exchange } from './exchange.js'

export interface AccessFields {
  readonly request_id: string
  readonly account_id: string | null
  readonly key_id: string | null
  readonly route: string
  readonly provider: string
  readonly model: string | null
  readonly status: number
  readonly outcome: string | null
  readonly error_code: string | null
  readonly streaming: boolean
  readonly confidential: boolean
  /** Arrival to the end of the call. */
  readonly latency_ms: number
  /** Arrival to the first response byte handed to the client; null when nothing was written. */
  readonly ttfb_ms: number | null
  /** From the request sent upstream to the end; null when the provider was not called. */
  readonly provider_ms: number | null
  /** Arrival to the request sent upstream (tracegate's own time, as the overhead metric counts it). */
  readonly overhead_ms: number | null
}

function ms (n: number): number {
  return Math.round(n * 10) / 10
}

export function accessFields (x: Exchange): AccessFields {
  const reached = x.upstreamStartAt !== 0
  return {
    request_id: x.requestId,
    account_id: x.accountId,
    key_id: x.keyId,
    route: x.endpoint,
    provider: x.dialect.name,
    model: x.model,
    status: x.status,
    outcome: x.outcome,
    error_code: x.errorCode,
    streaming: x.streaming,
    confidential: x.confidential,
    latency_ms: ms(x.endedAt - x.startedAt),
    ttfb_ms: x.firstWriteAt === 0 ? null : ms(x.firstWriteAt - x.startedAt),
    provider_ms: reached ? ms(x.endedAt - x.upstreamStartAt) : null,
    overhead_ms: reached ? ms(x.upstreamStartAt - x.startedAt) : null,
  }
}
