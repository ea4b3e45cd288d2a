// The detection pool's fair queue (src/detection/fair-queue.ts): one line per account taken round-robin,
// answered requests skipped, a refused candidate kept first; and the shares that decide which account
// gives up a request when the pool's bound is reached.
import t from 'tap'
import { FairQueue, Shares } from '../../src/detection/fair-queue.js'

class Item {
  settled = false
  constructor (readonly account: string, readonly name: string, readonly bytes = 1) {}
}

function drain (q: FairQueue<Item>): string[] {
  const out: string[] = []
  for (let item = q.take(); item !== null; item = q.take()) out.push(item.name)
  return out
}

t.test('accounts take turns, whatever one of them has waiting', async (t) => {
  const q = new FairQueue<Item>()
  for (let i = 1; i <= 5; i++) q.push(new Item('a', `a${i}`))
  q.push(new Item('b', 'b1'))
  q.push(new Item('b', 'b2'))
  q.push(new Item('c', 'c1'))
  t.same(drain(q), ['a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'a4', 'a5'])
  t.equal(q.take(), null, 'empty')
})

t.test('an account that comes back after its line emptied waits for its turn at the back', async (t) => {
  const q = new FairQueue<Item>()
  q.push(new Item('a', 'a1'))
  q.push(new Item('a', 'a2'))
  q.push(new Item('b', 'b1'))
  t.equal(q.take()?.name, 'a1')
  t.equal(q.take()?.name, 'b1')
  q.push(new Item('b', 'b2'))
  q.push(new Item('c', 'c1'))
  t.same(drain(q), ['a2', 'b2', 'c1'])
})

t.test('answered requests are skipped and never counted as the newest', async (t) => {
  const q = new FairQueue<Item>()
  const items = ['a1', 'a2', 'a3'].map((n) => new Item('a', n))
  for (const item of items) q.push(item)
  items[0]!.settled = true
  items[2]!.settled = true
  t.equal(q.newest('a')?.name, 'a2', 'the latest still waiting')
  t.same([...q.waiting()].map((i) => i.name), ['a2'])
  t.same(drain(q), ['a2'])
  t.equal(q.newest('a'), null)
})

t.test('a candidate that does not fit stays first in its line and keeps its turn', async (t) => {
  const q = new FairQueue<Item>()
  q.push(new Item('a', 'big', 100))
  q.push(new Item('b', 'small', 1))
  t.equal(q.take((i) => i.bytes < 10), null, 'refused: the batch ends')
  t.equal(q.take()?.name, 'big', 'still first')
  t.equal(q.take()?.name, 'small')
})

t.test('a long line is compacted as it is served and keeps its order', async (t) => {
  const q = new FairQueue<Item>()
  for (let i = 0; i < 500; i++) q.push(new Item('a', `a${i}`))
  const taken: string[] = []
  for (let i = 0; i < 300; i++) taken.push(q.take()!.name)
  for (let i = 500; i < 600; i++) q.push(new Item('a', `a${i}`))
  taken.push(...drain(q))
  t.same(taken, Array.from({ length: 600 }, (_, i) => `a${i}`))
})

t.test('shares count waiting requests per account and name the largest', async (t) => {
  const s = new Shares()
  t.equal(s.largest(), null)
  s.add('a'); s.add('a'); s.add('b')
  t.equal(s.total, 3)
  t.equal(s.of('a'), 2)
  t.equal(s.largest(), 'a')
  s.remove('a'); s.remove('a')
  t.equal(s.of('a'), 0)
  t.equal(s.largest(), 'b')
  t.equal(s.total, 1)
})
