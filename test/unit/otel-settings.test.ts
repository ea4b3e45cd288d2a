// The OTEL_* variables (src/otel/settings.ts): export is off unless an endpoint is set, OTEL_SDK_DISABLED
// wins, the generic endpoint gets /v1/traces and the per-signal one is used as is, and a bad value
// names its variable.
import t from 'tap'
import { ConfigError } from '../../src/domain/config-error.js'
import { otelSettings } from '../../src/otel/settings.js'

t.test('off unless an endpoint is set, and off when the SDK is disabled', async (t) => {
  t.equal(otelSettings({}), null)
  t.equal(otelSettings({ OTEL_SERVICE_NAME: 'x' }), null)
  t.equal(otelSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }), null)
  t.not(otelSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'false' }), null)
})

t.test('endpoints, headers, service name, queue', async (t) => {
  t.match(otelSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), { url: 'http://c:4318/v1/traces', serviceName: 'tracegate', maxQueueSize: 2048, headers: {} })
  t.equal(otelSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://c/otlp/' })?.url, 'https://c/otlp/v1/traces')
  t.equal(otelSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:1', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:2/custom' })?.url, 'http://b:2/custom')
  const s = otelSettings({
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SERVICE_NAME: 'gw', OTEL_BSP_MAX_QUEUE_SIZE: '100',
    OTEL_EXPORTER_OTLP_HEADERS: 'Api-Key=a%20b, x-one=1', OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-one=2',
  })
  t.match(s, { serviceName: 'gw', maxQueueSize: 100, maxExportBatchSize: 100 })
  t.same(s?.headers, { 'api-key': 'a b', 'x-one': '2' })
})

t.test('message content: off unless opted in', async (t) => {
  const base = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }
  t.equal(otelSettings(base)?.captureContent, false)
  t.equal(otelSettings({ ...base, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'false' })?.captureContent, false)
  t.equal(otelSettings({ ...base, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'TRUE' })?.captureContent, true)
})

t.test('protocol: protobuf by default (as the standard says), JSON on request, the per-signal variable first', async (t) => {
  const base = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }
  t.equal(otelSettings(base)?.protocol, 'http/protobuf')
  t.equal(otelSettings({ ...base, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })?.protocol, 'http/json')
  t.equal(otelSettings({ ...base, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' })?.protocol, 'http/protobuf')
  t.equal(otelSettings({ ...base, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' })?.protocol, 'http/json')
})

t.test('a bad value names its variable', async (t) => {
  for (const [env, variable] of [
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'c:4318' }, 'OTEL_EXPORTER_OTLP_ENDPOINT'],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://c' }, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_HEADERS: 'novalue' }, 'OTEL_EXPORTER_OTLP_HEADERS'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_BSP_MAX_QUEUE_SIZE: '0' }, 'OTEL_BSP_MAX_QUEUE_SIZE'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'OTEL_EXPORTER_OTLP_PROTOCOL'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'yes' }, 'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'json' }, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'],
  ] as const) {
    let thrown: unknown = null
    try { otelSettings(env) } catch (err) { thrown = err }
    t.ok(thrown instanceof ConfigError && thrown.variable === variable, variable)
  }
})
