// Labelled counters and histograms for the hot path, read by prom-client's registry when /metrics is
// scraped. prom-client hashes the label object on every inc/observe; here a call finds its series once
// per label set (the caller keeps it under one string key) and then only adds to numbers.
import type { Metric, Registry } from 'prom-client'

type Labels = Record<string, string>

/** One sample line as prom-client's registry prints it. */
interface Sample {
  readonly metricName?: string
  readonly labels: Labels
  readonly value: number
}

export class CounterSeries {
  value = 0
  constructor (readonly labels: Labels) {}
}

export class HistogramSeries {
  /** Per bucket, not cumulative; the last one is past every bound. */
  readonly counts: Float64Array
  sum = 0
  count = 0
  constructor (readonly labels: Labels, readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1)
  }

  observe (v: number): void {
    const b = this.bounds
    let i = 0
    while (i < b.length && v > b[i]!) i++
    this.counts[i]!++
    this.sum += v
    this.count++
  }
}

/** The part of prom-client's metric interface its registry reads. */
abstract class Family<S extends { labels: Labels }> {
  readonly aggregator = 'sum' as const
  abstract readonly type: 'counter' | 'histogram'
  readonly #series = new Map<string, S>()
  constructor (readonly name: string, readonly help: string, readonly refresh: (() => Promise<void>) | null = null) {}

  protected abstract make (labels: Labels): S

  /** The series for `key` (a string the caller builds from the label values), made on first use. */
  series (key: string, labels: Labels): S {
    let s = this.#series.get(key)
    if (s === undefined) {
      s = this.make(labels)
      this.#series.set(key, s)
    }
    return s
  }

  protected all (): IterableIterator<S> { return this.#series.values() }

  protected abstract values (): Sample[]

  async get (): Promise<{ name: string; help: string; type: string; aggregator: 'sum'; values: Sample[] }> {
    if (this.refresh !== null) await this.refresh()
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: this.values() }
  }

  reset (): void { this.#series.clear() }

  /** Registered as is: prom-client's registry only calls `get` (and `reset`) on what it holds. */
  register (registry: Registry): this {
    registry.registerMetric(this as unknown as Metric)
    return this
  }
}

export class CounterFamily extends Family<CounterSeries> {
  readonly type = 'counter' as const
  protected make (labels: Labels): CounterSeries { return new CounterSeries(labels) }
  protected values (): Sample[] {
    return [...this.all()].map((s) => ({ labels: s.labels, value: s.value }))
  }
}

export class HistogramFamily extends Family<HistogramSeries> {
  readonly type = 'histogram' as const
  constructor (name: string, help: string, readonly bounds: readonly number[], refresh: (() => Promise<void>) | null = null) {
    super(name, help, refresh)
  }

  protected make (labels: Labels): HistogramSeries { return new HistogramSeries(labels, this.bounds) }

  protected values (): Sample[] {
    const out: Sample[] = []
    for (const s of this.all()) {
      let acc = 0
      for (let i = 0; i <= this.bounds.length; i++) {
        acc += s.counts[i]!
        const le = i < this.bounds.length ? String(this.bounds[i]) : '+Inf'
        out.push({ metricName: this.name + '_bucket', labels: { ...s.labels, le }, value: acc })
      }
      out.push({ metricName: this.name + '_sum', labels: s.labels, value: s.sum })
      out.push({ metricName: this.name + '_count', labels: s.labels, value: s.count })
    }
    return out
  }
}
