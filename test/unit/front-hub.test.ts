// The channel between the main thread and a front thread (src/front/hub.ts) over a real MessageChannel, and
// the limits a front thread judges (src/limits/front.ts): a turn's requests leave in one message, answers
// and errors come back to their callers, a side that is gone fails what waits for it; a call whose key has
// a counted limit is judged by the main thread's Limiter, any other is judged locally and counted there.
// Each front thread's detection pool gets its share of the workers and of the queue (shareOf).
// The protocol's tables are checked by tsc: the `@ts-expect-error` lines below fail the build the day a
// missing handler, a mistyped argument or an unknown operation gets through.
import t from 'tap'
import { MessageChannel, type MessagePort } from 'node:worker_threads'
import { defaultThreads } from '../../src/config.js'
import { shareOf } from '../../src/detection/pool.js'
import { Hub, type Handlers, type NoteHandlers, type Side } from '../../src/front/hub.js'
import type { FrontSide, MainSide } from '../../src/front/protocol.js'
import { FrontLimits, type CountedNote } from '../../src/limits/front.js'
import { Limiter, type LimitCall } from '../../src/limits/limiter.js'
import { until } from '../helpers/wait.js'
import { NO_LIMITS, type Limits } from '../../src/domain/limits.js'

/** A side that answers nothing and hears nothing. */
type Mute = { serves: Record<never, never>; hears: Record<never, never> }

function pair<M extends Side> (t: Tap, handlers: Handlers<M>, notes: NoteHandlers<M>): { front: Hub<Mute, M>; main: Hub<M, Mute>; sent: () => number } {
  const c = new MessageChannel()
  t.teardown(() => { c.port1.close() })
  const main = new Hub<M, Mute>(c.port1, handlers, notes)
  const post = c.port2.postMessage.bind(c.port2)
  let sent = 0
  c.port2.postMessage = (msg: unknown, transfer?: readonly ArrayBuffer[]) => { sent++; post(msg, transfer as ArrayBuffer[]) }
  return { front: new Hub<Mute, M>(c.port2, {}, {}), main, sent: () => sent }
}

type Arith = { serves: { double: { args: number; result: number }; later: { args: number; result: number } }; hears: Record<never, never> }
type Faulty = { serves: { fail: { args: null; result: never }; slow: { args: null; result: never } }; hears: Record<never, never> }

interface Tap { teardown (fn: () => unknown): void }

t.test('a turn\'s requests leave in one message and each gets its own answer', async (t) => {
  const { front, sent } = pair<Arith>(t, { double: (n) => n * 2, later: async (n) => { await new Promise((r) => setTimeout(r, 5)); return n + 1 } }, {})
  const answers = await Promise.all([front.request('double', 1), front.request('double', 2), front.request('later', 3)])
  t.same(answers, [2, 4, 4])
  t.equal(sent(), 1, 'three requests, one postMessage')
})

t.test('an error, an unknown call and a side that is gone reject the caller', async (t) => {
  const { front } = pair<Faulty>(t, { fail: () => { throw new Error('no such key') }, slow: () => new Promise(() => {}) }, {})
  await t.rejects(front.request('fail', null), { name: 'HubError', message: 'no such key' })
  // What the other side may send is not typed at run time: an unknown name is answered with an error.
  await t.rejects(front.request('nothing' as never, null as never), { message: 'no such call: nothing' })
  const waiting = front.request('slow', null)
  await new Promise((r) => setImmediate(r))
  front.gone('the main thread stopped')
  await t.rejects(waiting, { message: 'the main thread stopped' })
  await t.rejects(front.request('fail', null), { message: 'the main thread stopped' }, 'and so does any later request')
})

const limits = (l: Partial<Limits>): Limits => ({ ...NO_LIMITS, ...l })
const callOf = (keyId: string, key: Partial<Limits>, account: Partial<Limits> = {}): LimitCall => ({ keyId, accountId: 'acct', key: limits(key), account: limits(account) })

t.test('counted limits are judged by the main thread\'s Limiter; the rest locally, and counted there', async (t) => {
  const limiter = new Limiter()
  t.teardown(() => limiter.close())
  const counted: CountedNote[] = []
  type Counts = { serves: Pick<MainSide['serves'], 'admit'>; hears: Pick<MainSide['hears'], 'counted'> }
  const { front } = pair<Counts>(t, { admit: (c) => limiter.count(c) }, {
    counted: (note) => { counted.push(note); for (const [k, a, n] of note) limiter.counted(k, a, n) },
  })
  const fl = new FrontLimits({ admit: (call) => front.request('admit', call), counted: (note) => { front.note('counted', note) } })
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

t.test('counts a trace batch takes are not sent again; counts no batch takes go in a note of their own', async (t) => {
  const notes: CountedNote[] = []
  const fl = new FrontLimits({ admit: () => Promise.resolve(null), counted: (note) => { notes.push(note) } })
  t.teardown(() => fl.close())
  t.equal(fl.takeCounted(), null, 'nothing counted, nothing to take')
  for (let i = 0; i < 3; i++) t.equal(fl.admit(callOf('k4', {}), 'gpt-4o', 10), null)
  t.same(fl.takeCounted(), [['k4', 'acct', 3]], 'the batch takes the key\'s calls, summed')
  t.equal(fl.takeCounted(), null, 'and only once')
  // Past the note's delay (100 ms): what the batch took is not told twice.
  await new Promise((r) => setTimeout(r, 250))
  t.same(notes, [], 'no note for counts a batch carried')
  // No batch leaves (traces off, or an idle thread): the counts go in a note.
  t.equal(fl.admit(callOf('k5', {}), 'gpt-4o', 10), null)
  await until(() => notes.length === 1, { ms: 2000, what: 'the note of counts no batch took' })
  t.same(notes, [[['k5', 'acct', 1]]])
  t.equal(fl.takeCounted(), null, 'a note\'s counts are not taken again')
})

/**
 * Never run: it only has to build. Each `@ts-expect-error` line must be an error, or tsc fails the build
 * (an unused directive is an error itself).
 */
function tablesChecked (port: MessagePort): void {
  const noop = (): void => {}
  const notes: NoteHandlers<MainSide> = { counted: noop, log: noop, started: noop }
  const main = new Hub<MainSide, FrontSide>(port, {
    admit: () => null, ready: () => ({ not: null, tracesBehindS: null, limits: 'local' }), metrics: () => '',
  }, notes)
  // @ts-expect-error the main thread must answer every operation of its table (`metrics` is missing)
  new Hub<MainSide, FrontSide>(port, { admit: () => null, ready: () => ({ not: null, tracesBehindS: null, limits: 'local' }) }, notes)
  // @ts-expect-error with the result its table says (`ready` answers a Readiness, not a string)
  new Hub<MainSide, FrontSide>(port, { admit: () => null, ready: () => 'ready', metrics: () => '' }, notes)
  // @ts-expect-error and take every note (`started` is missing)
  new Hub<MainSide, FrontSide>(port, { admit: () => null, ready: () => ({ not: null, tracesBehindS: null, limits: 'local' }), metrics: () => '' }, { counted: noop, log: noop })
  const front = new Hub<FrontSide, MainSide>(port, { invalidate: () => true, invalidateAccount: () => true, metricsJson: () => [], drain: () => true }, {})
  // @ts-expect-error a front thread cannot ask what the main thread does not answer
  void front.request('invalidate', { hash: 'h' })
  // @ts-expect-error nor send an argument of another type
  void front.request('admit', { keyId: 'k' })
  // @ts-expect-error nor a note the main thread does not take
  front.note('drain', { graceMs: 1 })
  // @ts-expect-error and the main thread cannot ask a front thread what it does not answer
  void main.request('admit', null)
  // @ts-expect-error nor a front thread the main thread for detection: each front thread has its own pool
  void front.request('detect', null)
  // An answer has its table's type: a Readiness here, so `.limits` reads.
  void front.request('ready', null).then((r) => r.limits satisfies 'local' | 'shared' | 'fallback')
}

t.test('the protocol\'s tables are checked on both sides by tsc', async (t) => {
  t.equal(typeof tablesChecked, 'function', 'this file built: tsc caught each @ts-expect-error in tablesChecked')
})

t.test('the default number of front threads follows the cores', async (t) => {
  t.same([1, 2, 3, 4, 6, 8, 16, 32, 64].map((c) => defaultThreads(c)), [1, 1, 1, 2, 3, 4, 8, 8, 8])
})

t.test('each front thread\'s pool gets its share of the detection workers and of the queue', async (t) => {
  const shares = (n: number, threads: number): number[] => Array.from({ length: threads }, (_, i) => shareOf(n, threads, i))
  // The defaults on 16 cores: 15 detection threads between 8 front threads, all 15 kept.
  t.same(shares(15, 8), [2, 2, 2, 2, 2, 2, 2, 1])
  t.same(shares(3, 2), [2, 1], '4 cores: 3 between 2')
  t.same(shares(1024, 3), [342, 341, 341], 'the queue bound adds up too')
  t.same(shares(1, 2), [1, 1], 'at least one each, even when that is more than the setting')
  t.same(shares(7, 1), [7], 'one thread keeps it all')
})
