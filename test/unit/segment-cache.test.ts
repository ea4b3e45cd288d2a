// The worker's cache of PII and secret findings per segment text (workers/detector/segment-cache.ts): a
// text seen before gives exactly what scanning it again would, placed at the segment and message where it
// appears this time, and the bound holds whatever is sent.
import t from 'tap'
import type { Segment } from '../../src/detection/types.js'
import { findPii } from '../../src/scan/pii.js'
import { findSecrets } from '../../src/scan/secrets.js'
import { findPiiAndSecrets, setSegmentCache } from '../../workers/detector/segment-cache.js'
import { TextCache } from '../../workers/detector/text-cache.js'

const TEXTS = [
  'Mail jane.doe@example.com or call +1 415 555 0100 about card 4111 1111 1111 1111.',
  'My key is sk-proj-Ab3dEf5gHi7jKl9mNo1pQr3sTu5vWx7yZa9bCd1eFg3hIj5kLm7nOp9 and the IBAN DE89370400440532013000.',
  'Nothing personal in this one, just a question about the weather in Paris.',
  'SSN 123-45-6789, token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl',
]

function segments (order: readonly number[]): Segment[] {
  return order.map((k, i) => ({ message: i * 2 + 1, role: i % 2 === 0 ? 'user' : 'assistant', path: `messages[${i * 2 + 1}].content`, text: TEXTS[k]! }))
}

t.test('a text seen before gives what a scan gives, at the segment and message it has this time', async (t) => {
  setSegmentCache(true)
  t.teardown(() => { setSegmentCache(true) })
  for (const order of [[0, 1, 2, 3], [3, 2, 1, 0], [1, 1, 0, 0], [2, 0, 3, 1, 0]]) {
    const segs = segments(order)
    const want = { pii: findPii(segs), secrets: findSecrets(segs) }
    t.same(findPiiAndSecrets(segs), want, `order ${order.join(',')}`)
    t.same(findPiiAndSecrets(segs), want, `order ${order.join(',')} again, from the cache`)
  }
  const pii = findPiiAndSecrets(segments([2, 0])).pii
  t.ok(pii.length > 0 && pii.every((i) => i.segment === 1 && i.message === 3), 'findings of a text moved to another segment carry the new place')
})

t.test('the cache can be turned off, and then every text is scanned', async (t) => {
  setSegmentCache(false)
  t.teardown(() => { setSegmentCache(true) })
  const segs = segments([0, 1])
  t.same(findPiiAndSecrets(segs), { pii: findPii(segs), secrets: findSecrets(segs) })
})

t.test('the bound: texts over the longest kept are computed every time, and old generations go', async (t) => {
  let made = 0
  const cache = new TextCache<number>(100, 20)
  const make = (s: string): number => { made++; return s.length }
  cache.get('a'.repeat(30), make)
  cache.get('a'.repeat(30), make)
  t.equal(made, 2, 'a text over 20 characters is not kept')
  cache.get('short one', make)
  cache.get('short one', make)
  t.equal(made, 3, 'a short text is kept')
  // 50 characters fill the young generation (half the budget): it becomes the old one; 50 more drop it.
  for (let i = 0; i < 10; i++) cache.get(`filler ${i}..`, make)
  cache.get('short one', make)
  t.equal(made, 13, 'still held after one turnover (moved back to the young generation)')
  for (let i = 0; i < 20; i++) cache.get(`other ${i}...`, make)
  cache.get('filler 0..', make)
  t.equal(made, 34, 'dropped after two turnovers without a hit')
})
