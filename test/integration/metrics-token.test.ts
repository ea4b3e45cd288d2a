// /metrics behind TRACEGATE_METRICS_TOKEN: served on the proxy port only with the
// bearer token, which the metrics port asks for too; per-account labels only when the operator turns
// them on; a short token refused at start.
import t from 'tap'
import { startServer } from '../helpers/server.js'
import { json, send } from '../helpers/http.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { loadConfig } from '../../src/config.js'
import { ConfigError } from '../../src/domain/config-error.js'
import { parseMetrics, samples } from '../helpers/prometheus.js'

const TOKEN = 'metrics-token-0123456789abcdef'
const s = await startServer(t, { TRACEGATE_METRICS_TOKEN: TOKEN, TRACEGATE_METRICS_PORT: '0', TRACEGATE_METRICS_ACCOUNT_LABELS: 'on' })
const metricsPort = `http://127.0.0.1:${s.tg.metricsPort}/metrics`

for (const [where, url] of [['proxy port', s.url + '/metrics'], ['metrics port', metricsPort]] as const) {
  t.test(`${where}: the bearer token is required`, async (t) => {
    for (const headers of [{}, { authorization: 'Bearer wrong-token-0123456789' }, { authorization: TOKEN }] as Array<Record<string, string>>) {
      const r = await send(url, { method: 'GET', headers })
      t.equal(r.status, 401)
      t.equal(json(r).error.code, 'unauthorized')
      t.match(r.headers['www-authenticate'], /^Bearer/)
    }
    const r = await send(url, { method: 'GET', headers: { authorization: `Bearer ${TOKEN}` } })
    t.equal(r.status, 200)
    t.match(r.headers['content-type'], /^text\/plain/)
    t.match(r.text, /^# HELP /m)
  })
}

t.test('per-account labels when turned on', async (t) => {
  const r = await send(s.url + ROUTES.alpha, { body: JSON.stringify({ ...bodyFor('alpha'), api_key: s.key }) })
  t.equal(r.status, 200)
  const text = (await send(metricsPort, { method: 'GET', headers: { authorization: `Bearer ${TOKEN}` } })).text
  const calls = samples(parseMetrics(text), 'tracegate_requests_total')
  t.equal(calls.length, 1)
  t.equal(calls[0]!.labels.account, s.accountId)
  t.notOk(text.includes(s.key), 'never the key')
})

t.test('a short token is refused at start', async (t) => {
  const refused = (env: Record<string, string>): string | null => {
    try { loadConfig(env) } catch (err) { return err instanceof ConfigError ? err.variable : null }
    return null
  }
  t.equal(refused({ TRACEGATE_METRICS_TOKEN: 'short' }), 'TRACEGATE_METRICS_TOKEN')
  t.equal(refused({ TRACEGATE_METRICS_PORT: '70000' }), 'TRACEGATE_METRICS_PORT')
  t.equal(loadConfig({}).metrics.port, null, 'no metrics port unless set')
  t.equal(loadConfig({}).metrics.token, null)
})
