// /readyz with front threads, each with a detection pool of its own: while a thread's workers are cold
// (their warm-up failed at start) its /readyz answers 503 `detection_not_warm`; once a call was judged on
// every thread, each is ready.
import t from 'tap'
import { fileURLToPath } from 'node:url'
import { moduleFile } from '../../src/paths.js'
import { startServer } from '../helpers/server.js'
import { json, send } from '../helpers/http.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { parseMetrics, servedByThread } from '../helpers/prometheus.js'

const COLD_WORKER = fileURLToPath(moduleFile('../fixtures/cold-worker.js', import.meta.url))
const s = await startServer(t, { TRACEGATE_THREADS: '2', TRACEGATE_DETECTION_THREADS: '2', TRACEGATE_METRICS_PORT: '0' }, { detectionWorker: COLD_WORKER })
/** Each /readyz over a connection of its own, sixteen of them: both threads answer some (all on one by a chance of 1 in 32,768). */
const readyz = (): Promise<Array<{ status: number; reason: unknown }>> => Promise.all(Array.from({ length: 16 }, async () => {
  const r = await send(s.url + '/readyz', { method: 'GET' })
  return { status: r.status, reason: r.status === 200 ? json(r).status : json(r).error.reason }
}))

t.test('no thread is ready while its detection workers are cold', async (t) => {
  const rs = await readyz()
  t.same(rs, rs.map(() => ({ status: 503, reason: 'detection_not_warm' })), 'every answer is 503 detection_not_warm')
  t.equal((await send(s.url + '/healthz', { method: 'GET' })).status, 200, 'alive all the same')
})

t.test('each thread is ready once a call was judged on it', async (t) => {
  const body = JSON.stringify({ ...bodyFor('alpha'), api_key: s.key })
  const rs = await Promise.all(Array.from({ length: 16 }, () => send(s.url + ROUTES.alpha, { body })))
  t.same(rs.map((r) => r.status), rs.map(() => 200), 'the calls were judged and forwarded')
  const scraped = await send(`http://127.0.0.1:${s.tg.metricsPort}/metrics`, { method: 'GET' })
  const served = servedByThread(parseMetrics(scraped.text))
  t.ok(served.every((n) => n > 0), `both threads judged some (${served.join(' / ')})`)
  const ready = await readyz()
  t.same(ready, ready.map(() => ({ status: 200, reason: 'ready' })), 'every thread answers ready')
})
