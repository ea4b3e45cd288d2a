// OpenTelemetry's settings, from the standard OTEL_* variables (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/
// and .../protocol/exporter/). Read once with the rest of the configuration; null when no OTLP endpoint
// is set or OTEL_SDK_DISABLED=true, and then nothing of OpenTelemetry is loaded at all.
import { ConfigError } from '../domain/config-error.js'

type Env = Record<string, string | undefined>

export interface OtelSettings {
  /** Where spans are POSTed (OTLP/HTTP JSON), the full URL. */
  readonly url: string
  /** OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL: protobuf (the standard's default, half the bytes and cheaper to encode) or JSON. */
  readonly protocol: 'http/protobuf' | 'http/json'
  /** OTEL_EXPORTER_OTLP_(TRACES_)HEADERS: sent with every export (an API key, say); never logged. */
  readonly headers: Readonly<Record<string, string>>
  readonly serviceName: string
  /**
   * OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT (the GenAI instrumentations' opt-in): the prompt's
   * and the answer's texts on the span, never for a confidential call. Off by default.
   */
  readonly captureContent: boolean
  /** Spans waiting for export at most; past it a span is dropped and counted (OTEL_BSP_MAX_QUEUE_SIZE). */
  readonly maxQueueSize: number
  readonly maxExportBatchSize: number
  readonly scheduleDelayMs: number
  readonly exportTimeoutMs: number
}

function url (env: Env, name: string, path: string): string {
  const raw = env[name]!.trim()
  try {
    const u = new URL(raw)
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('not http')
    // The generic endpoint is a base the signal's path is added to; the per-signal one is used as is.
    return path === '' ? u.toString() : u.toString().replace(/\/?$/, path)
  } catch {
    throw new ConfigError(name, 'must be an http:// or https:// URL.')
  }
}

function headers (env: Env, name: string): Record<string, string> {
  const out: Record<string, string> = {}
  const raw = env[name]
  if (raw === undefined || raw.trim() === '') return out
  for (const pair of raw.split(',')) {
    const eq = pair.indexOf('=')
    if (eq <= 0) throw new ConfigError(name, 'must be a list of key=value pairs separated by commas.')
    try {
      out[decodeURIComponent(pair.slice(0, eq).trim()).toLowerCase()] = decodeURIComponent(pair.slice(eq + 1).trim())
    } catch {
      throw new ConfigError(name, 'has a value that is not valid percent-encoding.')
    }
  }
  return out
}

function flag (env: Env, name: string): boolean {
  const raw = env[name]?.trim().toLowerCase() ?? ''
  if (raw === '' || raw === 'false') return false
  if (raw === 'true') return true
  throw new ConfigError(name, 'must be true or false.')
}

function count (env: Env, name: string, fallback: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw.trim() === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 1 || n > max) throw new ConfigError(name, `must be a whole number from 1 to ${max}.`)
  return n
}

function protocol (env: Env): OtelSettings['protocol'] {
  const name = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL'
  const raw = env[name]?.trim() ?? ''
  if (raw === '' || raw === 'http/protobuf') return 'http/protobuf'
  if (raw === 'http/json') return 'http/json'
  throw new ConfigError(name, 'must be http/protobuf or http/json (gRPC export is not built in).')
}

export function otelSettings (env: Env): OtelSettings | null {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return null
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
  const generic = env.OTEL_EXPORTER_OTLP_ENDPOINT
  let target: string
  if (traces !== undefined && traces.trim() !== '') target = url(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', '')
  else if (generic !== undefined && generic.trim() !== '') target = url(env, 'OTEL_EXPORTER_OTLP_ENDPOINT', '/v1/traces')
  else return null
  const maxQueueSize = count(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048, 1_000_000)
  return Object.freeze({
    url: target,
    protocol: protocol(env),
    headers: Object.freeze({ ...headers(env, 'OTEL_EXPORTER_OTLP_HEADERS'), ...headers(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS') }),
    serviceName: env.OTEL_SERVICE_NAME?.trim() || 'tracegate',
    captureContent: flag(env, 'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT'),
    maxQueueSize,
    maxExportBatchSize: Math.min(maxQueueSize, count(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, 1_000_000)),
    scheduleDelayMs: count(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000, 3_600_000),
    exportTimeoutMs: count(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000, 3_600_000),
  })
}
