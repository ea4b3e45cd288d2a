// Process metrics in the Prometheus text format, served at GET /metrics on the proxy port. Counting
// stays cheap on the hot path (one labelled counter per finished exchange); the trace pipeline's
// numbers are read from the store worker only when scraped.
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'
import type { TraceStats } from './store/trace-types.js'

export class Metrics {
  readonly registry = new Registry()
  readonly #requests: Counter<'provider' | 'outcome'>
  readonly #rejected: Counter<'code'>

  constructor (traceStats: () => Promise<TraceStats | null>) {
    collectDefaultMetrics({ register: this.registry, prefix: 'tracegate_process_' })
    this.#requests = new Counter({
      name: 'tracegate_requests_total',
      help: 'Proxied calls that got past authentication, by provider and outcome (each one is traced).',
      labelNames: ['provider', 'outcome'],
      registers: [this.registry],
    })
    this.#rejected = new Counter({
      name: 'tracegate_requests_rejected_before_auth_total',
      help: 'Requests refused before authentication (not traced), by error code.',
      labelNames: ['code'],
      registers: [this.registry],
    })
    const traces = new Gauge({
      name: 'tracegate_traces',
      help: 'Trace pipeline since start: rows written, spooled, replayed, dropped, spoolRefused (batches a full or unwritable spool refused); queued rows; spool bytes; clickhouse_up and spool_ok (1/0).',
      labelNames: ['kind'],
      registers: [this.registry],
      async collect () {
        const s = await traceStats().catch(() => null)
        if (s === null) return
        for (const kind of ['written', 'spooled', 'replayed', 'dropped', 'spoolRefused', 'queued', 'spoolBytes'] as const) this.set({ kind }, s[kind])
        this.set({ kind: 'clickhouse_up' }, s.clickhouseUp ? 1 : 0)
        this.set({ kind: 'spool_ok' }, s.spoolError === null ? 1 : 0)
      },
    })
    void traces
  }

  finished (provider: string, outcome: string): void {
    this.#requests.inc({ provider, outcome })
  }

  rejectedBeforeAuth (code: string): void {
    this.#rejected.inc({ code })
  }

  render (): Promise<string> {
    return this.registry.metrics()
  }
}
