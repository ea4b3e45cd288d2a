// With front threads and shared limits, closing the server right after its calls: every call's request,
// tokens and spend reach Redis in the limits' last sync. A front thread's counts travel with its trace
// batches through the store worker, whose report reaches the main thread's limits before that sync.
import { Redis } from 'ioredis'
import t from 'tap'
import { KEY_PREFIX } from '../../src/limits/redis.js'
import { startServer } from '../helpers/server.js'
import { send } from '../helpers/http.js'
import { bodyFor, ROUTES } from '../helpers/bodies.js'
import { redisUrl } from '../helpers/redis.js'

t.test('closing right after the calls: the threads\' requests, tokens and spend are all in Redis', async (t) => {
  const url = await redisUrl(t)
  const s = await startServer(t, { TRACEGATE_THREADS: '2', TRACEGATE_REDIS_URL: url })
  const account = await s.tg.admin.createAccount({ name: 'closing', plan: 'pro' })
  // No counted limit: its calls are judged on the threads and only counted on the main thread.
  const key = await s.tg.admin.createKey({ account: account.id, scope: 'proxy' })
  const calls = 12
  const rs = await Promise.all(Array.from({ length: calls }, () =>
    send(s.url + ROUTES.alpha, { body: JSON.stringify(bodyFor('alpha', { alpha_api_key: 'sk-x', api_key: key.key })) })))
  t.same(rs.map((r) => r.status), rs.map(() => 200))
  await s.tg.close()
  const redis = new Redis(url)
  t.teardown(() => { redis.disconnect() })
  const sum = async (what: string): Promise<number> => {
    const names = await redis.keys(`${KEY_PREFIX}k:${key.id}:${what}:*`)
    let n = 0
    for (const name of names) n += Number(await redis.get(name))
    return n
  }
  t.equal(await sum('requests'), calls, 'every request')
  t.ok(await sum('tokens') > 0, 'their tokens')
  t.ok(await sum('day_microusd') > 0, 'their spend')
  t.equal(await redis.keys(`${KEY_PREFIX}a:${account.id}:requests:*`).then((ns) => Promise.all(ns.map((n) => redis.get(n)))).then((vs) => vs.reduce((a, v) => a + Number(v), 0)), calls, 'the account\'s too')
})
