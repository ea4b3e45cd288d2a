// The request board (limits/board.ts): subjects are found by id in the table the main thread fills,
// worker threads racing for a limit's last requests admit exactly the limit between them, and the main
// thread's Limiter keeps reading a slot after the month's sweep dropped its subject.
import t, { type Test } from 'tap'
import { randomUUID } from 'node:crypto'
import { Worker } from 'node:worker_threads'
import { moduleFile } from '../../src/paths.js'
import { dayOf, epochOf, HOLD_EPOCH_MS, minuteOf, monthOf, RequestBoard } from '../../src/limits/board.js'
import { FrontLimits } from '../../src/limits/front.js'
import { Limiter, type LimitCall } from '../../src/limits/limiter.js'
import { NO_LIMITS } from '../../src/domain/limits.js'
import type { Refusal } from '../../src/limits/rules.js'
import { until } from '../helpers/wait.js'

const BOARD = moduleFile('../../src/limits/board.js', import.meta.url).href

t.test('a subject is found once the main thread added it, in its own table', async (t) => {
  const board = new RequestBoard(null, 64)
  const id = randomUUID()
  t.equal(board.find('key', id), -1, 'absent before')
  const slot = board.add('key', id, 100, 5)
  t.ok(slot >= 0, 'added')
  t.equal(board.find('key', id), slot, 'found by id')
  t.equal(board.add('key', id, 100, 9), slot, 'adding it again finds the same slot')
  t.equal(board.find('account', id), -1, 'an account of the same id is another subject')
  t.equal(new RequestBoard(board.buffer).find('key', id), slot, 'a view of the same buffer finds it too')
  t.equal(board.other(slot, 100), 5, 'with what is counted elsewhere')
  t.equal(board.find('key', 'not-a-uuid'), -1, 'an id that is no UUID has no slot')
  t.equal(board.add('key', 'not-a-uuid', 100, 0), -1, 'and gets none')
})

t.test('the board counts the subjects it placed and the adds it found no room for', async (t) => {
  const board = new RequestBoard(null, 8)
  t.equal(board.slots, 8, 'slots per kind')
  const ids = Array.from({ length: 8 }, () => randomUUID())
  for (const id of ids) t.ok(board.add('key', id, 100, 0) >= 0, 'placed while there is room')
  t.equal(board.add('key', ids[0]!, 100, 0), board.find('key', ids[0]!), 'a subject already there is found, not placed again')
  t.same(board.placed, { key: 8, account: 0 }, 'eight keys placed, no account')
  t.equal(board.noRoom, 0, 'no add found the table full yet')
  t.equal(board.add('key', randomUUID(), 100, 0), -1, 'a ninth key finds no room')
  t.equal(board.add('key', 'not-a-uuid', 100, 0), -1, 'an id that is no UUID gets no slot either')
  t.equal(board.noRoom, 1, 'only the add the table had no room for counts')
  t.ok(board.add('account', randomUUID(), 100, 0) >= 0, 'accounts have a table of their own')
  t.same(board.placed, { key: 8, account: 1 }, 'and their own count')
})

t.test('the limiter counts a call once when its key or account found no room on the board', async (t) => {
  const board = new RequestBoard(null, 2)
  const lim = new Limiter({ now: () => Date.UTC(2026, 1, 1), board })
  t.teardown(() => lim.close())
  const call = (keyId: string, accountId: string): LimitCall => ({ keyId, accountId, key: { ...NO_LIMITS, rpm: 100 }, account: NO_LIMITS })
  const [k1, k2, k3, a1, a2, a3] = Array.from({ length: 6 }, () => randomUUID())
  t.equal(lim.count(call(k1!, a1!)), null)
  t.equal(lim.count(call(k2!, a2!)), null)
  t.same(lim.boardStats, { slots: 2, keys: 2, accounts: 2, noRoomCalls: 0 }, 'two keys and two accounts fill the tables')
  t.equal(lim.count(call(k3!, a3!)), null, 'a third key and account are judged by the main thread')
  t.equal(lim.boardStats?.noRoomCalls, 1, 'one call, though neither found room')
  t.equal(lim.count(call(k3!, a1!)), null)
  t.equal(lim.boardStats?.noRoomCalls, 2, 'a call whose key alone found no room counts too')
  t.equal(lim.count(call(k1!, a1!)), null)
  t.equal(lim.boardStats?.noRoomCalls, 2, 'a call of subjects on the board does not')
})

t.test('counts belong to their minute, and a refusal leaves the count as it was', async (t) => {
  const board = new RequestBoard(null, 64)
  const slot = board.add('account', randomUUID(), 100, 2)
  t.equal(board.admit(slot, 100, 4), 3, 'the total with this request: 2 elsewhere and 1 here')
  t.equal(board.admit(slot, 100, 4), 4, 'the limit-th request passes')
  t.equal(board.admit(slot, 100, 4), -5, 'the next is refused, with the total it found (4)')
  t.equal(board.count(slot, 100), 2, 'the refused request is not counted')
  board.undo(slot, 100)
  t.equal(board.count(slot, 100), 1, 'undo takes one back')
  t.equal(board.count(slot, 101), 0, 'the next minute starts at 0')
  t.equal(board.other(slot, 101), 0, 'and knows nothing counted elsewhere yet')
  t.equal(board.admit(slot, 101, 4), 1, 'and admits again')
  board.undo(slot, 100)
  t.equal(board.count(slot, 101), 1, 'an undo of an ended minute changes nothing')
  t.equal(board.admit(slot, 101, null), 2, 'no limit: counted, never refused')
  board.setOther(slot, 101, 10)
  t.equal(board.admit(slot, 101, 12), -13, 'what is counted elsewhere counts against the limit')
  t.equal(minuteOf(60_000 * 7 + 59_999), 7, 'minuteOf floors epoch ms to the minute')
  t.equal(board.admit(slot, 100, null), 13, 'a caller a minute behind the word counts in the word\'s minute (10 elsewhere)')
  t.equal(board.count(slot, 101), 3, 'so the later minute\'s count is never wiped')
  t.equal(board.count(slot, 100), 0)
})

t.test('a full table adds nothing more, and what it holds is still found', async (t) => {
  const board = new RequestBoard(null, 8)
  const ids = Array.from({ length: 8 }, () => randomUUID())
  const slots = ids.map((id) => board.add('key', id, 1, 0))
  t.ok(slots.every((s) => s >= 0), 'eight keys fill eight slots')
  t.equal(new Set(slots).size, 8, 'each its own')
  t.equal(board.add('key', randomUUID(), 1, 0), -1, 'a ninth has no room')
  t.same(ids.map((id) => board.find('key', id)), slots, 'every one is found')
})

/**
 * Four threads each run `step` (an expression over `board` and `slot`, true when it took one) 60,000 times,
 * all at once: every thread waits on a gate first, so they race for longer than a time slice. Returns what each took.
 */
async function race (t: Test, board: RequestBoard, slot: number, step: string): Promise<number[]> {
  const gate = new Int32Array(new SharedArrayBuffer(4))
  const code = `
    const { workerData, parentPort } = require('node:worker_threads')
    import(workerData.board).then(({ RequestBoard }) => {
      const board = new RequestBoard(workerData.buffer)
      const slot = workerData.slot
      const gate = new Int32Array(workerData.gate)
      parentPort.postMessage('ready')
      Atomics.wait(gate, 0, 0)
      let took = 0
      for (let i = 0; i < 60_000; i++) if (${step}) took++
      parentPort.postMessage(took)
    })`
  const workers = Array.from({ length: 4 }, () => new Worker(code, { eval: true, workerData: { board: BOARD, buffer: board.buffer, slot, gate: gate.buffer } }))
  t.teardown(() => Promise.all(workers.map((w) => w.terminate())))
  const next = (w: Worker): Promise<unknown> => new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
  await Promise.all(workers.map(next))
  const done = workers.map(next) as Array<Promise<number>>
  Atomics.store(gate, 0, 1)
  Atomics.notify(gate, 0)
  return Promise.all(done)
}

t.test('four threads racing for 100,000 requests admit exactly 100,000 between them', async (t) => {
  const board = new RequestBoard()
  const slot = board.add('key', randomUUID(), 42, 0)
  const admitted = await race(t, board, slot, 'board.admit(slot, 42, 100_000) > 0')
  t.equal(admitted.reduce((a, b) => a + b, 0), 100_000, `admitted ${admitted.join(' + ')}`)
  t.ok(admitted.filter((n) => n > 0).length >= 2, 'by more than one thread')
  t.equal(board.count(slot, 42), 100_000, 'and counted')
})

t.test('a subject the month\'s sweep dropped finds its slot again, with what the threads counted there', async (t) => {
  let clock = Date.UTC(2026, 0, 31, 23, 59, 10)
  const now = (): number => clock
  const board = new RequestBoard(null, 64)
  const lim = new Limiter({ now, board })
  t.teardown(() => lim.close())
  const call: LimitCall = { keyId: randomUUID(), accountId: randomUUID(), key: { ...NO_LIMITS, rpm: 5 }, account: NO_LIMITS }
  const front = new FrontLimits({ admit: (c) => Promise.resolve(lim.count(c)), counted: (note) => { for (const [k, a, n] of note) lim.counted(k, a, n) } }, new RequestBoard(board.buffer), now)
  t.teardown(() => { front.close() })
  t.equal(lim.count(call), null, 'counted by the main thread, which puts the key and account on the board')
  t.equal(lim.subjectCount, 2)
  clock = Date.UTC(2026, 1, 1, 0, 0, 10)
  // Any reading of the counts moves the windows (this key is unknown, so it is not rolled on the way).
  lim.usage({ keyId: randomUUID() })
  await until(() => lim.subjectCount === 0, { ms: 2_000, what: 'the new month\'s sweep' })
  t.equal(front.admit(call, 'm', 1), null, 'a thread still judges on the board')
  t.equal(front.admit(call, 'm', 1), null)
  // The thread's note (within 100 ms) brings the subjects back on the main thread.
  await until(() => lim.usage({ keyId: call.keyId }).minuteRequests === 2, { ms: 2_000, what: 'the main thread reading the board\'s two' })
  t.equal(lim.usage({ accountId: call.accountId }).minuteRequests, 2, 'the account\'s too')
  const more = [lim.count(call), lim.count(call), lim.count(call), lim.count(call)]
  t.same(more.map((r) => r?.code ?? 'ok'), ['ok', 'ok', 'ok', 'rate_limited'], 'and the main thread counts on the same slot: five in the minute')
})

t.test('holds: refused once the window\'s use and what is held reach the limit, and let go never below 0', async (t) => {
  const board = new RequestBoard(null, 64)
  const day = dayOf(Date.UTC(2026, 10, 29, 12))
  const month = monthOf(Date.UTC(2026, 10, 29, 12))
  const e = epochOf(Date.UTC(2026, 10, 29, 12))
  t.equal(month, 56 * 12 + 10, 'monthOf counts months from January 1970')
  const slot = board.add('key', randomUUID(), 100, 0, { tokens: 300, day, dayMicro: 1_000, month, monthMicro: 5_000, heldTokens: 50, heldMicro: 7, epoch: e })
  t.same([board.tokens(slot, 100), board.daySpent(slot, day), board.monthSpent(slot, month), board.heldTokens(slot, e), board.heldMicro(slot, e)], [300, 1_000, 5_000, 50, 7],
    'a new slot carries its use and holds from the start')
  board.release(slot, e, 50, 7)
  t.ok(board.holdTokens(slot, 100, e, 400, 1_000), '300 used, 0 held: room')
  t.ok(board.holdTokens(slot, 100, e, 400, 1_000), '300 used, 400 held: room')
  t.notOk(board.holdTokens(slot, 100, e, 400, 1_000), '300 used, 800 held: 1,100 reaches 1,000')
  t.equal(board.heldTokens(slot, e), 800, 'the refused hold is not held')
  t.ok(board.holdTokens(slot, 101, e, 100, 1_000), 'the next minute: its tokens start at 0, what is held still counts')
  t.notOk(board.holdTokens(slot, 101, e, 0, 900), 'a check without a hold: 900 held reaches 900')
  board.release(slot, e, 5_000, 0)
  t.equal(board.heldTokens(slot, e), 0, 'let go: never below 0')
  t.equal(board.holdMicro(slot, day, month, e, 299.2, 1_500, null), null, '1,000 spent today: room under 1,500')
  t.equal(board.heldMicro(slot, e), 300, 'held in whole micro-dollars, rounded up')
  t.equal(board.holdMicro(slot, day, month, e, 300, 1_300, null), 'day', '1,000 spent and 300 held reach the day\'s 1,300')
  t.equal(board.holdMicro(slot, day, month, e, 300, null, 5_300), 'month', 'and 5,000 and 300 the month\'s 5,300')
  t.equal(board.holdMicro(slot, day + 1, month, e, 1, 1_301, null), null, 'tomorrow\'s spend starts at 0')
  board.setUse(slot, 101, 900, day, 2_000, month, 6_000)
  t.same([board.tokens(slot, 101), board.tokens(slot, 100), board.daySpent(slot, day), board.monthSpent(slot, month + 1)], [900, 0, 2_000, 0], 'each word reads as 0 in another window')
})

t.test('a hold whose trace never came is gone 15 to 30 minutes later; a late release of it changes nothing', async (t) => {
  const board = new RequestBoard(null, 64)
  const e = epochOf(Date.UTC(2026, 10, 29, 12, 7))
  t.equal(HOLD_EPOCH_MS, 15 * 60_000)
  const slot = board.add('key', randomUUID(), 100, 0)
  board.hold(slot, e, 700, 0)
  t.ok(board.holdTokens(slot, 100, e + 1, 200, null), 'a hold in the next quarter')
  t.equal(board.heldTokens(slot, e + 1), 900, 'the next quarter still counts the last one\'s')
  t.equal(board.heldTokens(slot, e + 2), 200, 'two quarters on, the first quarter\'s 700 are gone')
  t.equal(board.heldTokens(slot, e + 3), 0, 'three on, the second\'s too')
  t.ok(board.holdTokens(slot, 100, e + 2, 50, 300), 'a hold in the third quarter takes the first one\'s word, starting again from 0')
  board.release(slot, e, 700, 0)
  t.equal(board.heldTokens(slot, e + 2), 250, 'releasing the expired hold takes nothing from the new one')
})

t.test('key and account hold together, in the main thread\'s order of checks, and a refusal takes back both', async (t) => {
  const board = new RequestBoard(null, 64)
  const at = { minute: 100, day: 20_000, month: 600, epoch: 9 }
  const k = board.add('key', randomUUID(), 100, 0)
  const a = board.add('account', randomUUID(), 100, 0)
  const none = { tpm: null, dayMicro: null, monthMicro: null }
  t.equal(board.holdBoth(k, a, { ...none, tpm: 1_000 }, none, at, 600, 40), null, 'held on both')
  t.same([board.heldTokens(k, 9), board.heldTokens(a, 9), board.heldMicro(k, 9), board.heldMicro(a, 9)], [600, 600, 40, 40])
  t.same(board.holdBoth(k, a, { ...none, tpm: 600 }, none, at, 600, 40), { whose: 'key', limit: 'tpm' }, 'the key\'s tpm: 600 held reach 600')
  t.same(board.holdBoth(k, a, none, { ...none, tpm: 600 }, at, 1, 1), { whose: 'account', limit: 'tpm' }, 'the account\'s tpm')
  t.same([board.heldTokens(k, 9), board.heldMicro(k, 9)], [600, 40], 'the key\'s hold taken back')
  board.setUse(k, 100, 0, 20_000, 0, 600, 2_000)
  board.setUse(a, 100, 0, 20_000, 500, 600, 0)
  t.same(board.holdBoth(k, a, { ...none, monthMicro: 2_000 }, { ...none, dayMicro: 500 }, at, 0, 1), { whose: 'account', limit: 'day' },
    'the key\'s month and the account\'s day both spent: the day is told, as the main thread checks days first')
  t.same([board.heldMicro(k, 9), board.heldMicro(a, 9)], [40, 40], 'nothing more held')
})

t.test('a front thread judges tokens per minute and budgets on the board, with the main thread\'s counts and holds', async (t) => {
  const clock = Date.UTC(2026, 5, 10, 12, 0, 5)
  const now = (): number => clock
  const board = new RequestBoard(null, 64)
  const lim = new Limiter({ now, board, hold: true })
  t.teardown(() => lim.close())
  let asked = 0
  const front = new FrontLimits({ admit: (c) => { asked++; return Promise.resolve(lim.count(c)) }, counted: (note) => { for (const [k, a, n] of note) lim.counted(k, a, n) } },
    new RequestBoard(board.buffer), now, { pricing: null, hold: true })
  t.teardown(() => { front.close() })
  const keyId = randomUUID()
  const accountId = randomUUID()
  const call = (): LimitCall & { held: { tok: number; micro: number; epoch: number } } => ({
    keyId, accountId, key: { ...NO_LIMITS, tpm: 1_000 }, account: NO_LIMITS, callId: randomUUID(), estimate: { promptTokens: 300, outputTokens: 100 }, held: { tok: 0, micro: 0, epoch: 0 },
  })
  const first = call()
  t.equal(await front.admit(first, 'm', 1), null, 'the first call asks the main thread, which puts key and account on the board')
  t.equal(asked, 1)
  t.same(first.held, { tok: 0, micro: 0, epoch: 0 }, 'and holds it there itself (a trace settles it by id)')
  const second = call()
  t.equal(front.admit(second, 'm', 1), null, 'the second is judged on the board: 400 held, room under 1,000')
  t.same(second.held, { tok: 400, micro: 0, epoch: epochOf(clock) }, 'and says what it holds and in which quarter, for its trace to carry')
  t.equal(front.admit(call(), 'm', 1), null, 'the third: 800 held')
  const refused = front.admit(call(), 'm', 1) as Refusal
  t.equal(refused?.code, 'rate_limited', 'the fourth: 1,200 held reach 1,000')
  t.match(refused.message, /The key's limit of 1000 tokens per minute is reached/)
  t.equal(asked, 1, 'none of them asked the main thread')
  t.same(lim.held({ keyId }), { tokens: 1_200, usd: 0 }, 'the main thread reads the holds on the board, its own included')
  t.same(lim.held({ accountId }), { tokens: 1_200, usd: 0 }, 'held for the account too')
  // The first call's trace: settled by id. The second's: its real cost counted, then its hold let go.
  lim.settle([first.callId!])
  lim.record(keyId, accountId, 350, 0, clock)
  lim.released(keyId, accountId, epochOf(clock), 400, 0)
  t.same(lim.held({ keyId }), { tokens: 400, usd: 0 }, 'two holds let go')
  t.equal(front.admit(call(), 'm', 1), null, '350 used and 400 held: room')
  const again = front.admit(call(), 'm', 1) as Refusal
  t.equal(again?.code, 'rate_limited', '350 used and 800 held: none')
  t.equal(again.headers['x-ratelimit-remaining-tokens'], '650', 'the headers count the tokens used, as the main thread\'s do')
  t.equal(lim.count(call())?.code, 'rate_limited', 'the main thread judges with the holds on the board too')

  // Spend: the main thread counts each trace's cost and writes the day's and month's totals on the board.
  const spender = { keyId: randomUUID(), accountId: randomUUID(), key: { ...NO_LIMITS, budgetDayUsd: 0.01 }, account: { ...NO_LIMITS, budgetMonthUsd: 1 } }
  t.equal(await front.admit({ ...spender }, 'm', 1), null, 'the main thread judges the first, and puts the spender on the board')
  lim.record(spender.keyId, spender.accountId, 0, 0.004, clock)
  t.equal(front.admit({ ...spender }, 'm', 1), null, '0.004 of 0.01 spent today: judged on the board')
  lim.record(spender.keyId, spender.accountId, 0, 0.006, clock)
  const spent = front.admit({ ...spender }, 'm', 1) as Refusal
  t.equal(spent?.code, 'budget_exceeded', '0.01 spent')
  t.match(spent.message, /The key's budget of 0.01 USD per day is spent; it resets at 00:00 UTC, in 11h59m55s/)
  t.equal(asked, 2, 'only the first asked the main thread')
  const other = { ...spender, keyId: randomUUID(), key: NO_LIMITS }
  await front.admit({ ...other }, 'm', 1)
  lim.record(other.keyId, other.accountId, 0, 0.99, clock)
  const month = front.admit({ ...other }, 'm', 1) as Refusal
  t.equal(month?.code, 'budget_exceeded', 'another key of the account: the account\'s month is spent (0.01 and 0.99 of 1)')
  t.match(month.message, /The account's budget of 1 USD per month is spent/)
})
