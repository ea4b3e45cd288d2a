// One span per proxied call, exported over OTLP/HTTP (protobuf, or JSON) with the official OpenTelemetry exporters,
// named and described as the GenAI semantic conventions say (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/).
// Built here in the store worker from the trace record the front thread already sends, so the front thread
// pays for a span id and a traceparent only; the token counts are the trace row's own.
// Loaded with a dynamic import only when an OTLP endpoint is configured (otel/settings.ts).
//
// The span is CLIENT: it stands for tracegate's call to the model provider; the caller's span (from its
// traceparent) is its parent, and the provider received a traceparent naming this span (otel/propagation.ts).
//
// At most maxQueueSize spans wait for export: past that a span is dropped and counted, as are the spans of
// a batch the receiver refused or never answered. One export is in flight at a time.
import { SpanKind, SpanStatusCode, TraceFlags, type Attributes, type HrTime, type SpanContext } from '@opentelemetry/api'
import { ExportResultCode, TraceState } from '@opentelemetry/core'
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources'
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { DIALECTS } from '../../providers/index.js'
import type { OtelSettings } from '../../otel/settings.js'
import type { RawTrace, SpanDrops, TraceSummary } from '../trace-types.js'
import { inputMessages, outputMessages } from './span-content.js'
import { maskText } from './pii-at-rest.js'
import { withoutTracegateKeys } from './key-scrub.js'

const SCOPE = { name: 'tracegate' }

function hrTime (ms: number): HrTime {
  const s = Math.floor(ms / 1000)
  return [s, Math.round((ms - s * 1000) * 1e6)]
}

/**
 * The GenAI conventions' operation of a call, by its route: `embeddings` on the embeddings routes
 * (OpenAI's /v1/embeddings, Gemini's embedContent and batchEmbedContents), else `chat`.
 */
function operationOf (endpoint: string): 'chat' | 'embeddings' {
  return /(?:\/embeddings|:embedContent|:batchEmbedContents)$/.test(endpoint) ? 'embeddings' : 'chat'
}

/** What a span says of a call: never a key or the account id; the prompt and answer only when the operator opted in. */
function attributes (raw: RawTrace, row: TraceSummary | null, content: boolean): Attributes {
  const provider = DIALECTS[raw.provider].otelSystem
  const outcome = raw.outcome
  const a: Attributes = {
    'gen_ai.operation.name': operationOf(raw.endpoint),
    'gen_ai.provider.name': provider,
    'gen_ai.system': provider,
    'tracegate.request_id': raw.traceId,
    'tracegate.route': raw.endpoint,
    'tracegate.outcome': outcome,
    'tracegate.streaming': raw.streaming,
    'tracegate.confidential': raw.confidential,
  }
  if (raw.model !== '') a['gen_ai.request.model'] = raw.model
  if (raw.status !== 0) a['http.response.status_code'] = raw.status
  if (outcome !== 'ok') a['error.type'] = raw.errorCode === '' ? outcome : raw.errorCode
  // The row's counts: the provider's usage, or tracegate's estimate when it reported none (token_source says which).
  if (outcome === 'ok' && row !== null && row.token_source !== 'none') {
    a['gen_ai.usage.input_tokens'] = row.input_tokens
    a['gen_ai.usage.output_tokens'] = row.output_tokens
    a['tracegate.token_source'] = row.token_source
  }
  // The operator's opt-in; a confidential call's text is never read, and a span-only record has none.
  if (content && !raw.confidential && raw.stored) {
    const bytes = raw.bytes.subarray(0, raw.requestLength + raw.headLength)
    // As the trace's text: no tracegate key whatever the account's setting, its PII masked when it masks at rest.
    const stored = (from: number, to: number, streaming: boolean): string => {
      const scrubbed = withoutTracegateKeys(bytes.subarray(from, to), streaming)
      const text = Buffer.from(scrubbed.buffer, scrubbed.byteOffset, scrubbed.byteLength).toString('utf8')
      return raw.maskPii === true ? maskText(text, streaming, {}) : text
    }
    const input = inputMessages(raw.provider, stored(0, raw.requestLength, false))
    if (input !== null) a['gen_ai.input.messages'] = input
    const output = outputMessages(raw.provider, raw.streaming, stored(raw.requestLength, raw.requestLength + raw.headLength, raw.streaming))
    if (output !== null) a['gen_ai.output.messages'] = output
  }
  return a
}

export class SpanExport {
  readonly #exporter: JsonExporter | ProtobufExporter
  readonly #resource: Resource
  readonly #maxQueue: number
  readonly #batch: number
  readonly #content: boolean
  readonly #timer: NodeJS.Timeout
  #queue: ReadableSpan[] = []
  #exporting: Promise<void> | null = null
  readonly drops: SpanDrops = { queue_full: 0, export_failed: 0 }

  constructor (s: OtelSettings) {
    const config = { url: s.url, headers: { ...s.headers }, timeoutMillis: s.exportTimeoutMs }
    this.#exporter = s.protocol === 'http/json' ? new JsonExporter(config) : new ProtobufExporter(config)
    this.#resource = resourceFromAttributes({ 'service.name': s.serviceName })
    this.#maxQueue = s.maxQueueSize
    this.#batch = s.maxExportBatchSize
    this.#content = s.captureContent
    this.#timer = setInterval(() => { this.#next() }, s.scheduleDelayMs)
    this.#timer.unref()
  }

  /** A call's record, with its built row when it has one (the token counts come from it). */
  add (raw: RawTrace, row: TraceSummary | null): void {
    const ref = raw.span
    if (ref === null) return
    if (this.#queue.length >= this.#maxQueue) {
      this.drops.queue_full++
      return
    }
    const context: SpanContext = {
      traceId: ref.traceId,
      spanId: ref.spanId,
      traceFlags: TraceFlags.SAMPLED,
      ...(ref.tracestate === '' ? {} : { traceState: new TraceState(ref.tracestate) }),
    }
    const parent: SpanContext | undefined = ref.parentSpanId === ''
      ? undefined
      : { traceId: ref.traceId, spanId: ref.parentSpanId, traceFlags: TraceFlags.SAMPLED, isRemote: true }
    const end = raw.time + raw.latencyMs
    this.#queue.push({
      name: raw.model === '' ? operationOf(raw.endpoint) : `${operationOf(raw.endpoint)} ${raw.model}`,
      kind: SpanKind.CLIENT,
      spanContext: () => context,
      ...(parent === undefined ? {} : { parentSpanContext: parent }),
      startTime: hrTime(raw.time),
      endTime: hrTime(end),
      duration: hrTime(raw.latencyMs),
      status: { code: raw.outcome === 'ok' ? SpanStatusCode.UNSET : SpanStatusCode.ERROR },
      attributes: attributes(raw, row, this.#content),
      links: [],
      events: [],
      ended: true,
      resource: this.#resource,
      instrumentationScope: SCOPE,
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0,
    })
    if (this.#queue.length >= this.#batch) this.#next()
  }

  /** Starts one export of up to a batch, unless one is in flight (it starts the next when it ends). */
  #next (): void {
    if (this.#exporting !== null || this.#queue.length === 0) return
    const spans = this.#queue.length <= this.#batch ? this.#queue : this.#queue.slice(0, this.#batch)
    this.#queue = spans === this.#queue ? [] : this.#queue.slice(this.#batch)
    this.#exporting = new Promise<void>((resolve) => {
      this.#exporter.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS) this.drops.export_failed += spans.length
        resolve()
      })
    }).then(() => {
      this.#exporting = null
      if (this.#queue.length >= this.#batch) this.#next()
    })
  }

  /** Exports what is queued (each batch within the export timeout), then stops. */
  async close (): Promise<void> {
    clearInterval(this.#timer)
    for (;;) {
      if (this.#exporting !== null) await this.#exporting
      if (this.#queue.length === 0) break
      this.#next()
    }
    await this.#exporter.shutdown().catch(() => {})
  }
}
