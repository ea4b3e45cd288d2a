// The request board (limits/board.ts): subjects are found by id in the table the main thread fills,
// worker threads racing for a limit's last requests admit exactly the limit between them, and the main
// thread's Limiter keeps reading a slot after the month's sweep dropped its subject.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { Worker } from 'node:worker_threads'
import { moduleFile } from '../../src/paths.js'
import { minuteOf, RequestBoard } from '../../src/limits/board.js'
import { FrontLimits } from '../../src/limits/front.js'
import { Limiter, type LimitCall } from '../../src/limits/limiter.js'
import { NO_LIMITS } from '../../src/domain/limits.js'
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

t.test('four threads racing for 100,000 requests admit exactly 100,000 between them', async (t) => {
  const board = new RequestBoard()
  const slot = board.add('key', randomUUID(), 42, 0)
  // Every thread waits on the gate, so they all ask at once, for longer than a time slice.
  const gate = new Int32Array(new SharedArrayBuffer(4))
  const code = `
    const { workerData, parentPort } = require('node:worker_threads')
    import(workerData.board).then(({ RequestBoard }) => {
      const board = new RequestBoard(workerData.buffer)
      const gate = new Int32Array(workerData.gate)
      parentPort.postMessage('ready')
      Atomics.wait(gate, 0, 0)
      let admitted = 0
      for (let i = 0; i < 60_000; i++) if (board.admit(workerData.slot, 42, 100_000) > 0) admitted++
      parentPort.postMessage(admitted)
    })`
  const workers = Array.from({ length: 4 }, () => new Worker(code, { eval: true, workerData: { board: BOARD, buffer: board.buffer, slot, gate: gate.buffer } }))
  t.teardown(() => Promise.all(workers.map((w) => w.terminate())))
  const next = (w: Worker): Promise<unknown> => new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
  await Promise.all(workers.map(next))
  const done = workers.map(next) as Array<Promise<number>>
  Atomics.store(gate, 0, 1)
  Atomics.notify(gate, 0)
  const admitted = await Promise.all(done)
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
