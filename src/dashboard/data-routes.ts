// What the UI API and the read API both answer: the trace list, one trace, usage, and sessions. The caller's
// account comes from the session or the read key, never from the request. Times are ISO 8601 in UTC (`Z`).
import { isoTime } from '../admin/views.js'
import { roundThreshold } from '../detection/policy.js'
import { TracegateError } from '../errors.js'
import type { StoreClient } from '../store/client.js'
import { listItem, type TraceDetail, type TraceSummary, type TraceListItem, type TraceTotals, type UsageMeasures } from '../store/trace-types.js'
import type { SessionBody, SessionList, SessionSummary, TtftMeasures, UsageAnswer } from '../store/insight-types.js'
import { bucketMs, chEpoch, encodeCursor, encodeListCursor, encodeSessionCursor, sessionCallsQuery, sessionListFilter, traceFilter, usageScope, usageWindow, UUID } from './params.js'

/** Stored JSON text as JSON; empty (confidential, or nothing ran) as null. */
function parsed (text: string): unknown {
  if (text === '') return null
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}

/** A list's trace (a session's call keeps its own members: listItem copies them all) with its time zoned. */
function item<T extends TraceSummary> (s: T): T & { blocked: boolean } {
  return { ...listItem(s), time: isoTime(s.time) } as T & { blocked: boolean }
}

function summary (s: SessionSummary): SessionSummary {
  return { ...s, first_time: isoTime(s.first_time), last_time: isoTime(s.last_time) }
}

/** A stored verdict with its thresholds as people read them (a detector's own is a float from training). */
function detectionOf (text: string): unknown {
  const d = parsed(text)
  if (d === null || typeof d !== 'object' || Array.isArray(d)) return d
  const v = { ...d as Record<string, unknown> }
  for (const name of ['threshold', 'data_threshold']) if (typeof v[name] === 'number') v[name] = roundThreshold(v[name])
  return v
}

export async function listTraces (store: StoreClient, accountId: string, q: URLSearchParams): Promise<{ traces: TraceListItem[]; next_cursor: string | null }> {
  const f = traceFilter(accountId, q)
  const page = await store.call('listTraces', f)
  return { traces: page.traces.map(item), next_cursor: page.next === null ? null : encodeListCursor(f, page.next) }
}

/** Totals of the list's filter (the same parameters; sort, limit and cursor do not change them). */
export async function traceTotals (store: StoreClient, accountId: string, q: URLSearchParams): Promise<TraceTotals> {
  return store.call('traceTotals', traceFilter(accountId, q))
}

/** Another account's id answers exactly as an unknown one. */
export async function getTrace (store: StoreClient, accountId: string, id: string): Promise<TraceDetail> {
  if (!UUID.test(id)) throw new TracegateError('trace_not_found')
  const row = await store.call('getTrace', { accountId, traceId: id.toLowerCase() })
  if (row === null) throw new TracegateError('trace_not_found')
  return { ...row, time: isoTime(row.time), detection: detectionOf(row.detection), issues: parsed(row.issues), attempts: row.attempts === '' ? [] : parsed(row.attempts), blocked: row.outcome === 'blocked' }
}

function zero (): UsageMeasures {
  return {
    requests: 0, blocked: 0, errors: 0, input_tokens: 0, output_tokens: 0, cached_input_tokens: 0, cost_usd: 0, unpriced_calls: 0,
    latency_p50_ms: null, latency_p95_ms: null, latency_p99_ms: null,
  }
}

/** Epoch ms as ISO 8601 to the second, in UTC. */
function isoSeconds (ms: number): string {
  return new Date(ms).toISOString().slice(0, 19) + 'Z'
}

const NO_TTFT: TtftMeasures = { streams: 0, ttft_p50_ms: null, ttft_p95_ms: null, ttft_p99_ms: null }

/**
 * Usage over a window, narrowed to one key and/or one user when asked. Counts, tokens, cost and latency
 * come from the usage_minute rollup; what it lacks (time to first token, users, anything about a user)
 * from the traces of the same window.
 */
export async function usage (store: StoreClient, accountId: string, q: URLSearchParams): Promise<UsageAnswer> {
  const w = usageWindow(q)
  const scope = usageScope(q)
  const s = { accountId, from: w.from, to: w.to, bucket: w.bucket, keyId: scope.keyId, user: scope.user }
  const [rollup, extras, byUser, keys] = await Promise.all([
    scope.user === null ? store.call('usageReport', { accountId, from: w.from, to: w.to, bucket: w.bucket, keyId: scope.keyId }) : null,
    store.call('usageExtras', s),
    store.call('usageByUser', { ...s, order: scope.usersBy }),
    store.call('listKeys', { accountId }),
  ])
  const report = rollup ?? extras.report
  if (report === null) throw new Error('the usage report is missing')
  const { totals, series, byKey, byModel, byProvider } = report
  const step = bucketMs(w.bucket)
  const have = new Map(series.map((p) => [chEpoch(p.t), p]))
  const ttft = new Map(extras.series.map((p) => [chEpoch(p.t), p]))
  const filled: UsageAnswer['series'] = []
  for (let t = Math.floor(w.from / step) * step; t < w.to; t += step) {
    const p = have.get(t)
    const { t: _t, ...m } = p ?? { t: '', ...zero() }
    const { t: _t2, ...f } = ttft.get(t) ?? { t: '', ...NO_TTFT }
    filled.push({ t: isoSeconds(t), ts: t, ...m, ...f })
  }
  const names = new Map(keys.map((k) => [k.id, k.name]))
  return {
    from: w.from,
    to: w.to,
    bucket: w.bucket,
    totals: { ...totals, ...extras.totals, users: byUser.users },
    series: filled,
    by_key: byKey.map((r) => ({ ...r, name: names.get(r.group) ?? null })),
    by_model: byModel,
    by_provider: byProvider,
    by_user: byUser.top,
    users_by: scope.usersBy,
    filter: { key: scope.keyId, user: scope.user },
  }
}

/** Sessions with calls in the window (default the last 7 days), the most recently active first. */
export async function listSessions (store: StoreClient, accountId: string, q: URLSearchParams): Promise<SessionList> {
  const page = await store.call('listSessions', sessionListFilter(accountId, q))
  return { sessions: page.sessions.map(summary), next_cursor: page.next === null ? null : encodeSessionCursor(page.next) }
}

/** One session: its totals over all its calls, and its calls oldest first. Another account's is unknown. */
export async function getSession (store: StoreClient, accountId: string, id: string, q: URLSearchParams): Promise<SessionBody> {
  const query = sessionCallsQuery(accountId, id, q)
  if (query === null) throw new TracegateError('session_not_found')
  const r = await store.call('sessionCalls', query)
  if (r.totals === null) throw new TracegateError('session_not_found')
  return {
    session: id,
    totals: summary(r.totals),
    calls: r.calls.map(item),
    next_cursor: r.next === null ? null : encodeCursor(r.next),
  }
}
