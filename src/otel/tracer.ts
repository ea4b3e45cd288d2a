// One span per proxied call, exported over OTLP/HTTP (JSON) with the official OpenTelemetry SDK,
// named and described as the GenAI semantic conventions say (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/).
// Loaded with a dynamic import only when an OTLP endpoint is configured (src/otel/settings.ts).
//
// The span is CLIENT: it stands for tracegate's call to the model provider, the kind the conventions
// give an inference call to a remote model; the caller's own span (from its traceparent) is its parent,
// and the provider receives a traceparent naming this span.
//
// The front thread only starts a span, sets attributes and ends it; the BatchSpanProcessor queues it and
// exports batches from a timer. At most maxQueueSize spans wait: past that a span is dropped before it
// is built and counted, as are the spans of a batch the receiver refused or never answered.
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, defaultTextMapGetter, defaultTextMapSetter, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api'
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base'
import type { ProviderName } from '../providers/index.js'
import type { Exchange } from '../proxy/exchange.js'
import type { CallTracer, SpanDrops } from './types.js'
import type { OtelSettings } from './settings.js'
import { windowUsage } from './usage.js'

/** gen_ai.provider.name (and the older gen_ai.system) of each dialect, as the conventions spell them. */
const GENAI_PROVIDER: Record<ProviderName, string> = { alpha: 'openai', beta: 'anthropic', gamma: 'gcp.gemini' }

/** Counts what it hands on and what never arrived, so the processor's queue is known from outside. */
class CountingExporter implements SpanExporter {
  readonly #inner: SpanExporter
  readonly drops: SpanDrops = { queue_full: 0, export_failed: 0 }
  /** Spans ended and not yet handed to an export. */
  waiting = 0

  constructor (inner: SpanExporter) { this.#inner = inner }

  export (spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.waiting -= spans.length
    this.#inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) this.drops.export_failed += spans.length
      done(result)
    })
  }

  shutdown (): Promise<void> { return this.#inner.shutdown() }
  forceFlush (): Promise<void> { return this.#inner.forceFlush?.() ?? Promise.resolve() }
}

class OtelCallTracer implements CallTracer {
  readonly #provider: BasicTracerProvider
  readonly #tracer: Tracer
  readonly #exporter: CountingExporter
  readonly #propagator = new W3CTraceContextPropagator()
  readonly #maxQueue: number
  /** The span of each exchange in flight; a WeakMap, so an Exchange keeps its shape when OTel is off. */
  readonly #spans = new WeakMap<Exchange, Span>()

  constructor (s: OtelSettings) {
    this.#exporter = new CountingExporter(new OTLPTraceExporter({ url: s.url, headers: { ...s.headers }, timeoutMillis: s.exportTimeoutMs }))
    this.#maxQueue = s.maxQueueSize
    this.#provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ 'service.name': s.serviceName }),
      spanProcessors: [new BatchSpanProcessor(this.#exporter, {
        maxQueueSize: s.maxQueueSize,
        maxExportBatchSize: s.maxExportBatchSize,
        scheduledDelayMillis: s.scheduleDelayMs,
        exportTimeoutMillis: s.exportTimeoutMs,
      })],
    })
    this.#tracer = this.#provider.getTracer('tracegate')
  }

  get drops (): Readonly<SpanDrops> { return this.#exporter.drops }

  begin (x: Exchange, traceparent: string, tracestate: string): void {
    let parent: Context = ROOT_CONTEXT
    if (traceparent !== '') {
      const carrier: Record<string, string> = tracestate === '' ? { traceparent } : { traceparent, tracestate }
      parent = this.#propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter)
    }
    this.#spans.set(x, this.#tracer.startSpan('chat', { kind: SpanKind.CLIENT, startTime: x.startedWall }, parent))
  }

  inject (x: Exchange, headers: Record<string, string>): void {
    const span = this.#spans.get(x)
    if (span !== undefined) this.#propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, defaultTextMapSetter)
  }

  end (x: Exchange): void {
    const span = this.#spans.get(x)
    if (span === undefined) return
    this.#spans.delete(x)
    if (!span.isRecording()) return
    if (this.#exporter.waiting >= this.#maxQueue) {
      this.#exporter.drops.queue_full++
      return
    }
    this.#exporter.waiting++
    span.updateName(x.model === null ? 'chat' : `chat ${x.model}`)
    span.setAttributes(attributes(x))
    if (x.outcome !== 'ok') span.setStatus({ code: SpanStatusCode.ERROR })
    span.end(x.startedWall + (x.endedAt - x.startedAt))
  }

  async close (): Promise<void> {
    await this.#provider.shutdown().catch(() => {})
  }
}

/** What a span says of a call: never a key, a prompt or an answer; the account id neither (see README). */
function attributes (x: Exchange): Attributes {
  const provider = GENAI_PROVIDER[x.dialect.name]
  const a: Attributes = {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': provider,
    'gen_ai.system': provider,
    'tracegate.request_id': x.requestId,
    'tracegate.route': x.endpoint,
    'tracegate.outcome': x.outcome ?? 'proxy_error',
    'tracegate.streaming': x.streaming,
    'tracegate.confidential': x.confidential,
  }
  if (x.model !== null) a['gen_ai.request.model'] = x.model
  if (x.status !== 0) a['http.response.status_code'] = x.status
  if (x.outcome !== 'ok') a['error.type'] = x.errorCode ?? x.outcome ?? 'proxy_error'
  if (x.outcome === 'ok' && x.capture !== null) {
    const u = windowUsage(x.dialect.name, x.streaming, x.capture)
    if (u !== null) {
      a['gen_ai.usage.input_tokens'] = u.input
      a['gen_ai.usage.output_tokens'] = u.output
    }
  }
  return a
}

export function startTracer (s: OtelSettings): CallTracer {
  return new OtelCallTracer(s)
}
