// /readyz and the detection pool: while the detection workers are not warm (their
// warm-up failed at start) /readyz answers 503 `detection_not_warm`; once a worker answers, it is ready.
import t from 'tap'
import { fileURLToPath } from 'node:url'
import { moduleFile } from '../../src/paths.js'
import { startServer } from '../helpers/server.js'
import { json, send } from '../helpers/http.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'

const COLD_WORKER = fileURLToPath(moduleFile('../fixtures/cold-worker.js', import.meta.url))
const s = await startServer(t, { TRACEGATE_DETECTION_THREADS: '1' }, { detectionWorker: COLD_WORKER })

t.test('not ready while the detection workers are cold', async (t) => {
  for (let i = 0; i < 2; i++) {
    const r = await send(s.url + '/readyz', { method: 'GET' })
    t.equal(r.status, 503)
    t.equal(json(r).error.code, 'service_unavailable')
    t.equal(json(r).error.reason, 'detection_not_warm', 'a stable reason')
  }
  t.equal((await send(s.url + '/healthz', { method: 'GET' })).status, 200, 'alive all the same')
})

t.test('ready once a worker has answered', async (t) => {
  const r = await send(s.url + ROUTES.alpha, { body: JSON.stringify({ ...bodyFor('alpha'), api_key: s.key }) })
  t.equal(r.status, 200, 'the call was judged and forwarded')
  const ready = await send(s.url + '/readyz', { method: 'GET' })
  t.equal(ready.status, 200)
  t.equal(json(ready).status, 'ready')
})
