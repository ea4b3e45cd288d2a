// What the UI API and the read API both answer: the trace list, one trace, and usage. The caller's
// account comes from the session or the read key, never from the request.
import { TracegateError } from '../errors.js'
import type { StoreClient } from '../store/client.js'
import { listItem, type TraceDetail, type SeriesPoint, type TraceListItem, type UsageBody, type UsageMeasures } from '../store/trace-types.js'
import { bucketMs, chEpoch, encodeCursor, traceFilter, usageWindow, UUID } from './params.js'

/** Stored JSON text as JSON; empty (confidential, or nothing ran) as null. */
function parsed (text: string): unknown {
  if (text === '') return null
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}

export async function listTraces (store: StoreClient, accountId: string, q: URLSearchParams): Promise<{ traces: TraceListItem[]; next_cursor: string | null }> {
  const page = await store.call('listTraces', traceFilter(accountId, q))
  return { traces: page.traces.map(listItem), next_cursor: page.next === null ? null : encodeCursor(page.next) }
}

/** Another account's id answers exactly as an unknown one. */
export async function getTrace (store: StoreClient, accountId: string, id: string): Promise<TraceDetail> {
  if (!UUID.test(id)) throw new TracegateError('trace_not_found')
  const row = await store.call('getTrace', { accountId, traceId: id.toLowerCase() })
  if (row === null) throw new TracegateError('trace_not_found')
  return { ...row, detection: parsed(row.detection), issues: parsed(row.issues), blocked: row.outcome === 'blocked' }
}

function zero (): UsageMeasures {
  return {
    requests: 0, blocked: 0, errors: 0, input_tokens: 0, output_tokens: 0, cached_input_tokens: 0, cost_usd: 0,
    latency_p50_ms: null, latency_p95_ms: null, latency_p99_ms: null,
  }
}

/** Epoch ms as ClickHouse's `YYYY-MM-DD hh:mm:ss` (UTC). */
function chSeconds (ms: number): string {
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ')
}

export async function usage (store: StoreClient, accountId: string, q: URLSearchParams): Promise<UsageBody> {
  const w = usageWindow(q)
  const range = { accountId, from: w.from, to: w.to }
  const [report, keys] = await Promise.all([
    store.call('usageReport', { ...range, bucket: w.bucket }),
    store.call('listKeys', { accountId }),
  ])
  const { totals, series, byKey, byModel, byProvider } = report
  const step = bucketMs(w.bucket)
  const have = new Map(series.map((p) => [chEpoch(p.t), p]))
  const filled: SeriesPoint[] = []
  for (let t = Math.floor(w.from / step) * step; t < w.to; t += step) {
    const p = have.get(t)
    const { t: _t, ...m } = p ?? { t: '', ...zero() }
    filled.push({ t: chSeconds(t), ts: t, ...m })
  }
  const names = new Map(keys.map((k) => [k.id, k.name]))
  return {
    from: w.from,
    to: w.to,
    bucket: w.bucket,
    totals,
    series: filled,
    by_key: byKey.map((r) => ({ ...r, name: names.get(r.group) ?? null })),
    by_model: byModel,
    by_provider: byProvider,
  }
}
