// The usage rollup (usage_minute: per account, minute, key, provider and model) summed here, in the store
// worker, and inserted as one small batch beside each trace batch, instead of a materialized view that
// grouped every trace insert inside ClickHouse (measured in bench/RESULTS.md). Each row's share is
// noted as it is built, as numbers outside the JS heap (a row waiting for its insert holds no object);
// the batch sums its rows' shares and keeps their latencies, from which ClickHouse builds the quantile
// state (migration 007). A row without a price (cost_usd null) adds nothing to the cost and one to
// unpriced_calls (migration 013), so a sum of costs can say how many calls it leaves out. The rollup
// batch carries the trace batch's deduplication token, so a replayed batch is counted once in
// usage_minute as in traces.
import { ERROR_OUTCOMES } from '../../domain/outcome.js'
import type { TraceSummary } from '../trace-types.js'
import { TsvWriter } from './tsv.js'

/** ERROR_OUTCOMES (the ones the view counted as errors, migration 002) as a ClickHouse tuple, for `outcome IN …`. */
export const ERROR_OUTCOMES_SQL = `(${ERROR_OUTCOMES.map((o) => `'${o}'`).join(', ')})`
const ERRORS: ReadonlySet<string> = new Set(ERROR_OUTCOMES)

/** What a rollup row is grouped by. */
interface UsageGroup {
  readonly key: string
  readonly accountId: string
  /** The row's minute, as ClickHouse's DateTime text (`toStartOfMinute(time)`, UTC). */
  readonly minute: string
  readonly keyId: string
  readonly provider: string
  readonly model: string
}

// A row's share: its group's index, blocked (0/1), error (0/1), input, output and cached tokens, cost,
// latency, unpriced (0/1).
const STRIDE = 9

/** The shares of a run of rows, in row order; a run splits where its rows do. */
export class RowUsage {
  constructor (readonly groups: readonly UsageGroup[], readonly cells: Float64Array) {}

  get rows (): number { return this.cells.length / STRIDE }

  split (n: number): [RowUsage, RowUsage] {
    return [new RowUsage(this.groups, this.cells.subarray(0, n * STRIDE)), new RowUsage(this.groups, this.cells.subarray(n * STRIDE))]
  }
}

function groupKey (s: TraceSummary): string {
  // time is `YYYY-MM-DD hh:mm:ss.sss`: its first 16 characters name the minute.
  return s.account_id + ' ' + s.time.slice(0, 16) + ' ' + s.key_id + ' ' + s.provider + ' ' + s.model
}

function group (key: string, s: TraceSummary): UsageGroup {
  return { key, accountId: s.account_id, minute: s.time.slice(0, 16) + ':00', keyId: s.key_id, provider: s.provider, model: s.model }
}

/** Notes the shares of the rows of one message as they are built. */
export class RowUsageBuilder {
  readonly #groups: UsageGroup[] = []
  readonly #index = new Map<string, number>()
  readonly #cells: Float64Array
  #rows = 0

  constructor (capacity: number) {
    this.#cells = new Float64Array(capacity * STRIDE)
  }

  add (s: TraceSummary): void {
    const key = groupKey(s)
    let g = this.#index.get(key)
    if (g === undefined) {
      g = this.#groups.length
      this.#groups.push(group(key, s))
      this.#index.set(key, g)
    }
    const c = this.#cells
    const at = this.#rows++ * STRIDE
    c[at] = g
    c[at + 1] = s.outcome === 'blocked' ? 1 : 0
    c[at + 2] = ERRORS.has(s.outcome) ? 1 : 0
    c[at + 3] = s.input_tokens
    c[at + 4] = s.output_tokens
    c[at + 5] = s.cached_input_tokens
    c[at + 6] = s.cost_usd ?? 0
    c[at + 7] = s.latency_ms
    c[at + 8] = s.cost_usd === null ? 1 : 0
  }

  build (): RowUsage {
    return new RowUsage(this.#groups, this.#cells.subarray(0, this.#rows * STRIDE))
  }
}

interface Sums {
  readonly group: UsageGroup
  requests: number
  blocked: number
  errors: number
  input: number
  output: number
  cached: number
  cost: number
  unpriced: number
  readonly latencies: number[]
}

/** The columns of `usage_batches` (migrations 007 and 013), in the order `UsageBatch.tsv` writes them. */
export const USAGE_COLUMNS: readonly string[] = [
  'account_id', 'minute', 'key_id', 'provider', 'model', 'requests', 'blocked', 'errors',
  'input_tokens', 'output_tokens', 'cached_input_tokens', 'cost_usd', 'unpriced_calls', 'latencies',
]

/**
 * The columns of a rollup spooled by a tracegate before migration 013: it replays as those, its calls
 * counted as priced (unpriced_calls takes its default, 0).
 */
export const USAGE_COLUMNS_BEFORE_UNPRICED: readonly string[] = USAGE_COLUMNS.filter((c) => c !== 'unpriced_calls')

/** One insert's rollup: the sums per group of every row of a trace batch. */
export class UsageBatch {
  readonly #sums = new Map<string, Sums>()

  #at (g: UsageGroup): Sums {
    let s = this.#sums.get(g.key)
    if (s === undefined) {
      s = { group: g, requests: 0, blocked: 0, errors: 0, input: 0, output: 0, cached: 0, cost: 0, unpriced: 0, latencies: [] }
      this.#sums.set(g.key, s)
    }
    return s
  }

  /** The rows of a run, from their noted shares. */
  addRows (u: RowUsage): void {
    const c = u.cells
    for (let at = 0; at < c.length; at += STRIDE) {
      const s = this.#at(u.groups[c[at]!]!)
      s.requests++
      s.blocked += c[at + 1]!
      s.errors += c[at + 2]!
      s.input += c[at + 3]!
      s.output += c[at + 4]!
      s.cached += c[at + 5]!
      s.cost += c[at + 6]!
      s.latencies.push(c[at + 7]!)
      s.unpriced += c[at + 8]!
    }
  }

  /**
   * The rollup of a batch read back from the spool, from its summaries line; null when an entry is not a
   * row's summary (a damaged file).
   */
  static of (summaries: readonly TraceSummary[]): UsageBatch | null {
    const b = new RowUsageBuilder(summaries.length)
    for (const s of summaries) {
      if (!isSummary(s)) return null
      b.add(s)
    }
    const batch = new UsageBatch()
    batch.addRows(b.build())
    return batch
  }

  /** The rollup rows as TabSeparated in USAGE_COLUMNS. */
  tsv (): Buffer {
    const w = new TsvWriter(256 * this.#sums.size)
    for (const s of this.#sums.values()) {
      const g = s.group
      w.string(g.accountId).string(g.minute).string(g.keyId).string(g.provider).string(g.model)
        .number(s.requests).number(s.blocked).number(s.errors).number(s.input).number(s.output).number(s.cached)
        .number(s.cost).number(s.unpriced).fields(`[${s.latencies.join(',')}]`)
      w.endRow()
    }
    return w.view()
  }
}

const TIME = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,3})?$/

/** The fields the rollup reads are there and of their types. */
function isSummary (s: unknown): s is TraceSummary {
  const r = s as Record<string, unknown> | null
  if (typeof r !== 'object' || r === null) return false
  return ['account_id', 'key_id', 'provider', 'model', 'outcome'].every((k) => typeof r[k] === 'string') &&
    typeof r.time === 'string' && TIME.test(r.time) &&
    ['input_tokens', 'output_tokens', 'cached_input_tokens', 'latency_ms'].every((k) => typeof r[k] === 'number') &&
    (r.cost_usd === null || typeof r.cost_usd === 'number')
}
