// The channel between the main thread and a front thread (src/front/hub.ts) over a real MessageChannel, and
// the limits a front thread judges (src/limits/front.ts): a turn's requests leave in one message, answers
// and errors come back to their callers, a side that is gone fails what waits for it; a call whose key has
// a counted limit is judged by the main thread's Limiter, any other is judged locally and counted there.
import t from 'tap'
import { MessageChannel } from 'node:worker_threads'
import { defaultThreads } from '../../src/config.js'
import { Hub } from '../../src/front/hub.js'
import { FrontLimits, type CountedNote } from '../../src/limits/front.js'
import { Limiter, type LimitCall } from '../../src/limits/limiter.js'
import { until } from '../helpers/wait.js'
import { NO_LIMITS, type Limits } from '../../src/domain/limits.js'

function pair (t: Tap, handlers: Record<string, (a: never) => unknown>, notes: Record<string, (a: never) => void> = {}): { front: Hub; main: Hub; sent: () => number } {
  const c = new MessageChannel()
  t.teardown(() => { c.port1.close() })
  const main = new Hub(c.port1, handlers, notes)
  const post = c.port2.postMessage.bind(c.port2)
  let sent = 0
  c.port2.postMessage = (msg: unknown, transfer?: readonly ArrayBuffer[]) => { sent++; post(msg, transfer as ArrayBuffer[]) }
  return { front: new Hub(c.port2, {}, {}), main, sent: () => sent }
}

interface Tap { teardown (fn: () => unknown): void }

t.test('a turn\'s requests leave in one message and each gets its own answer', async (t) => {
  const { front, sent } = pair(t, { double: (n: number) => n * 2, later: async (n: number) => { await new Promise((r) => setTimeout(r, 5)); return n + 1 } })
  const answers = await Promise.all([front.request('double', 1), front.request('double', 2), front.request('later', 3)])
  t.same(answers, [2, 4, 4])
  t.equal(sent(), 1, 'three requests, one postMessage')
})

t.test('an error, an unknown call and a side that is gone reject the caller', async (t) => {
  const { front } = pair(t, { fail: () => { throw new Error('no such key') }, slow: () => new Promise(() => {}) })
  await t.rejects(front.request('fail'), { name: 'HubError', message: 'no such key' })
  await t.rejects(front.request('nothing'), { message: 'no such call: nothing' })
  const waiting = front.request('slow')
  await new Promise((r) => setImmediate(r))
  front.gone('the main thread stopped')
  await t.rejects(waiting, { message: 'the main thread stopped' })
  await t.rejects(front.request('fail'), { message: 'the main thread stopped' }, 'and so does any later request')
})

const limits = (l: Partial<Limits>): Limits => ({ ...NO_LIMITS, ...l })
const callOf = (keyId: string, key: Partial<Limits>, account: Partial<Limits> = {}): LimitCall => ({ keyId, accountId: 'acct', key: limits(key), account: limits(account) })

t.test('counted limits are judged by the main thread\'s Limiter; the rest locally, and counted there', async (t) => {
  const limiter = new Limiter()
  t.teardown(() => limiter.close())
  const counted: CountedNote[] = []
  const { front } = pair(t, { admit: (c: LimitCall) => limiter.count(c) }, {
    counted: (note: CountedNote) => { counted.push(note); for (const [k, a, n] of note) limiter.counted(k, a, n) },
  })
  const fl = new FrontLimits(front)
  t.teardown(() => fl.close())
  // rpm 3 on the key: asked of the main thread, exact.
  const asked = [fl.admit(callOf('k1', { rpm: 3 }), 'gpt-4o', 10), fl.admit(callOf('k1', { rpm: 3 }), 'gpt-4o', 10),
    fl.admit(callOf('k1', { rpm: 3 }), 'gpt-4o', 10), fl.admit(callOf('k1', { rpm: 3 }), 'gpt-4o', 10)]
  t.ok(asked.every((a) => a instanceof Promise), 'a counted limit waits for the main thread')
  const verdicts = await Promise.all(asked)
  t.same(verdicts.map((v) => v?.code ?? 'admitted'), ['admitted', 'admitted', 'admitted', 'rate_limited'])
  // An account's budget is counted too.
  const budget = fl.admit(callOf('k2', {}, { budgetDayUsd: 5 }), null, 10)
  t.ok(budget instanceof Promise)
  t.equal(await budget, null)
  // No counted limit: judged here, synchronously; the models and body limits need no count.
  t.equal(fl.admit(callOf('k3', {}), 'gpt-4o', 10), null)
  t.equal(fl.admit(callOf('k3', {}), 'gpt-4o', 10), null)
  t.equal((fl.admit(callOf('k3', { models: ['claude-*'] }), 'gpt-4o', 10) as { code: string }).code, 'model_not_allowed')
  t.equal((fl.admit(callOf('k3', { maxBodyBytes: 5 }), 'gpt-4o', 10) as { code: string }).code, 'body_too_large')
  await until(() => limiter.usage({ keyId: 'k3' }).minuteRequests === 2, { ms: 1000, what: 'k3 counted on the main thread' })
  t.same(counted, [[['k3', 'acct', 2]]], 'one note for the turn, the key\'s calls summed')
  t.equal(limiter.usage({ accountId: 'acct' }).minuteRequests, 3 + 1 + 2, 'the account counts every admitted call')
})

t.test('the default number of front threads follows the cores', async (t) => {
  t.same([1, 2, 3, 4, 6, 8, 16, 32, 64].map((c) => defaultThreads(c)), [1, 1, 1, 2, 3, 4, 8, 8, 8])
})
