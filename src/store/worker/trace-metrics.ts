// What the trace writer counts for /metrics: tokens and cost by provider and priced model, and how long
// inserts take. The front thread does not know a call's tokens or cost (they are read from the answer
// here), so the totals live here and are read with the trace stats when /metrics is scraped.
import { performance } from 'node:perf_hooks'
import type { Pricing } from '../../pricing/index.js'
import type { ProviderName } from '../../providers/index.js'
import { INSERT_BUCKETS, OTHER_MODEL, type InsertLatency, type UsageTotal } from '../trace-types.js'

export class TraceMetrics {
  readonly usage: UsageTotal[] = []
  readonly inserts: InsertLatency = { counts: new Array<number>(INSERT_BUCKETS.length + 1).fill(0), sum: 0, count: 0 }
  readonly #byKey = new Map<string, UsageTotal>()
  readonly #pricing: Pricing

  constructor (pricing: Pricing) {
    this.#pricing = pricing
  }

  /** One built row's tokens and cost (null cost: an unpriced model, counted as 0). */
  row (provider: ProviderName, model: string, input: number, output: number, costUsd: number | null): void {
    const key = provider + '\n' + model
    let u = this.#byKey.get(key)
    if (u === undefined) {
      const priced = this.#pricing.find(provider, model)?.model ?? OTHER_MODEL
      // Every unpriced model of a provider shares one total, whatever name it came with.
      const bucket = provider + '\n' + priced
      u = this.#byKey.get(bucket)
      if (u === undefined) {
        u = { provider, model: priced, input: 0, output: 0, costUsd: 0 }
        this.usage.push(u)
        this.#byKey.set(bucket, u)
      }
      // Names a client made up are not remembered one by one: the map stays as small as the price table.
      if (priced !== OTHER_MODEL) this.#byKey.set(key, u)
    }
    u.input += input
    u.output += output
    u.costUsd += costUsd ?? 0
  }

  /** Times one insert, failed or not. */
  async timed<T> (insert: () => Promise<T>): Promise<T> {
    const t0 = performance.now()
    try {
      return await insert()
    } finally {
      const s = (performance.now() - t0) / 1000
      let i = 0
      while (i < INSERT_BUCKETS.length && s > INSERT_BUCKETS[i]!) i++
      this.inserts.counts[i]!++
      this.inserts.sum += s
      this.inserts.count++
    }
  }
}
