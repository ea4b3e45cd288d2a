// Totals of the trace list's filter: calls, errors, tokens, cost (and the unpriced calls it leaves out)
// and latency percentiles, over every trace the filter matches, the rows still in memory included. A row
// held in memory is counted from memory and left out of ClickHouse's part by its trace id (it may already
// be in both), so each trace counts once; the percentiles are computed by ClickHouse over the union of
// both parts, never merged from two answers.
import type { ClickHouseClient } from '@clickhouse/client'
import { HeldRow, heldTests, where, type HeldTest } from './trace-filters.js'
import { passes, type HeldRows } from './recent-traces.js'
import { ERROR_OUTCOMES } from '../../domain/outcome.js'
import type { TraceFilter } from '../query-types.js'
import type { TraceTotals } from '../trace-types.js'



/** The held rows the filter matches, as columns; null when they cannot be judged exactly as ClickHouse would. */
interface HeldColumns {
  ids: string[]
  outcome: string[]
  input: number[]
  output: number[]
  /** -1 for an unpriced call (summed as 0, counted in unpriced_calls). */
  cost: number[]
  latency: number[]
}

export function heldColumns (batches: Iterable<HeldRows>, f: TraceFilter): HeldColumns | null {
  const tests = heldTests({ ...f, cursor: null })
  if (tests === null) return null
  const all: HeldTest[] = [...tests.cheap, ...tests.late]
  const out: HeldColumns = { ids: [], outcome: [], input: [], output: [], cost: [], latency: [] }
  const r = new HeldRow()
  for (const { tsv, ends } of batches) {
    for (let i = 0; i < ends.length; i++) {
      r.at(tsv, i === 0 ? 0 : ends[i - 1]!, ends[i]!)
      const pass = passes(all, r)
      if (pass === null) return null
      if (!pass) continue
      const row = r.fields
      out.ids.push(r.traceId)
      out.outcome.push(row.string('outcome'))
      out.input.push(row.number('input_tokens')!)
      out.output.push(row.number('output_tokens')!)
      out.cost.push(row.number('cost_usd') ?? -1)
      out.latency.push(row.number('latency_ms')!)
    }
  }
  return out
}

interface TotalsRow {
  calls: number
  errors: number
  blocked: number
  input_tokens: number
  output_tokens: number
  cost_usd: number
  unpriced_calls: number
  latency: number[]
}

/**
 * One aggregate over the filter's traces (its cursor and order do not apply). `held`: the matching rows in
 * memory (heldColumns), read before ClickHouse is asked, or null when ClickHouse's rows are the answer.
 */
export async function traceTotals (ch: ClickHouseClient, f: TraceFilter, held: HeldColumns | null): Promise<TraceTotals> {
  const w = where({ ...f, cursor: null })
  const params: Record<string, unknown> = { ...w.params, errorOutcomes: ERROR_OUTCOMES }
  let source = `SELECT toString(outcome) AS o, toUInt64(input_tokens) AS i, toUInt64(output_tokens) AS u,
    ifNull(cost_usd, 0) AS c, isNull(cost_usd) AS np, latency_ms AS l FROM traces WHERE ${w.sql}`
  if (held !== null && held.ids.length > 0) {
    source += ` AND trace_id NOT IN {heldIds:Array(UUID)}
      UNION ALL
      SELECT z.1 AS o, z.2 AS i, z.3 AS u, if(z.4 < 0, 0, z.4) AS c, z.4 < 0 AS np, z.5 AS l FROM (SELECT arrayJoin(arrayZip(
        {heldOutcome:Array(String)}, {heldIn:Array(UInt64)}, {heldOut:Array(UInt64)}, {heldCost:Array(Float64)}, {heldLatency:Array(Float32)})) AS z)`
    Object.assign(params, {
      heldIds: held.ids, heldOutcome: held.outcome, heldIn: held.input, heldOut: held.output, heldCost: held.cost, heldLatency: held.latency,
    })
  }
  const rs = await ch.query({
    query: `SELECT count() AS calls, countIf(o IN {errorOutcomes:Array(String)}) AS errors, countIf(o = 'blocked') AS blocked,
      sum(i) AS input_tokens, sum(u) AS output_tokens, sum(c) AS cost_usd, countIf(np) AS unpriced_calls, quantilesExact(0.5, 0.95, 0.99)(l) AS latency
      FROM (${source})`,
    query_params: params,
    format: 'JSONEachRow',
  })
  const row = (await rs.json<TotalsRow>())[0]!
  const calls = Number(row.calls)
  const q = (i: number): number | null => calls === 0 ? null : Number(row.latency[i])
  return {
    calls,
    errors: Number(row.errors),
    error_rate: calls === 0 ? null : Number(row.errors) / calls,
    blocked: Number(row.blocked),
    input_tokens: Number(row.input_tokens),
    output_tokens: Number(row.output_tokens),
    cost_usd: Number(row.cost_usd),
    unpriced_calls: Number(row.unpriced_calls),
    latency_p50_ms: q(0),
    latency_p95_ms: q(1),
    latency_p99_ms: q(2),
  }
}
