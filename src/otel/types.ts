// What the rest of tracegate knows of span export, without loading OpenTelemetry: the proxy and the
// metrics hold a CallTracer (or null when export is off) through these types only.
import type { Exchange } from '../proxy/exchange.js'
import type { OtelSettings } from './settings.js'

/** Spans lost: the export queue was full, or the receiver refused or did not answer their batch. */
export interface SpanDrops {
  queue_full: number
  export_failed: number
}

export interface CallTracer {
  readonly drops: Readonly<SpanDrops>
  /** At the head, while the request is readable: the span starts, under the client's trace if it sent one. */
  begin (x: Exchange, traceparent: string, tracestate: string): void
  /** Sets the traceparent (and tracestate) naming this call's span on the upstream headers. */
  inject (x: Exchange, headers: Record<string, string>): void
  /** Once the exchange finished: its attributes, then the span is queued for export. */
  end (x: Exchange): void
  /** Exports what is queued, then stops. */
  close (): Promise<void>
}

/** Loads OpenTelemetry (only now) and starts the exporter. */
export async function loadTracer (settings: OtelSettings): Promise<CallTracer> {
  const { startTracer } = await import('./tracer.js')
  return startTracer(settings)
}
