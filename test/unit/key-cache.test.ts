// The key cache in front of the store: positive and negative answers, one store call per key at a
// time, refresh ahead of the TTL for keys in use, and invalidation.
import t from 'tap'
import { KeyCache } from '../../src/auth/cache.js'
import { sleep } from '../helpers/wait.js'
import type { KeyInfo } from '../../src/domain/key-info.js'
import { NO_LIMITS } from '../../src/domain/limits.js'
import { DEFAULT_DETECTION } from '../../src/domain/detection-policy.js'

const INFO: KeyInfo = { keyId: 'k', accountId: 'a', scope: 'proxy', expiresAt: null, revoked: false, plan: 'pro', serverSideKeys: false, limits: NO_LIMITS, accountLimits: NO_LIMITS, detection: DEFAULT_DETECTION }

function counting (answer: () => KeyInfo | null): { lookups: string[]; lookup (hash: string): Promise<KeyInfo | null> } {
  const lookups: string[] = []
  return { lookups, lookup: async (hash) => { lookups.push(hash); await sleep(10); return answer() } }
}

t.test('answers are cached, positive and negative, and concurrent misses share one lookup', async (t) => {
  const store = counting(() => INFO)
  const cache = new KeyCache(store.lookup, { ttlMs: 10_000, max: 100 })
  t.equal(cache.peek('h'), undefined)
  const [a, b] = await Promise.all([cache.fetch('h'), cache.fetch('h')])
  t.same(a, INFO)
  t.same(b, INFO)
  t.same(store.lookups, ['h'])
  t.same(cache.peek('h'), INFO)
  const missing = new KeyCache(counting(() => null).lookup, { ttlMs: 10_000, max: 100 })
  t.equal(await missing.fetch('x'), null)
  t.equal(missing.peek('x'), null, 'a negative answer is cached as null, not a miss')
})

t.test('a key in use is refreshed after half its TTL without a miss', async (t) => {
  let revoked = false
  const store = counting(() => ({ ...INFO, revoked }))
  const cache = new KeyCache(store.lookup, { ttlMs: 200, max: 100 })
  await cache.fetch('h')
  revoked = true
  await sleep(120)
  t.same(cache.peek('h'), INFO, 'past half the TTL the cached answer is still served')
  t.equal(store.lookups.length, 2, 'and a refresh started')
  await sleep(30)
  t.equal(cache.peek('h')?.revoked, true, 'the refreshed answer replaces it')
})

t.test('an entry unused past its TTL expires', async (t) => {
  const store = counting(() => INFO)
  const cache = new KeyCache(store.lookup, { ttlMs: 50, max: 100 })
  await cache.fetch('h')
  await sleep(80)
  t.equal(cache.peek('h'), undefined)
})

t.test('invalidate drops the entry and keeps an in-flight answer out of the cache', async (t) => {
  const store = counting(() => INFO)
  const cache = new KeyCache(store.lookup, { ttlMs: 10_000, max: 100 })
  await cache.fetch('h')
  cache.invalidate('h')
  t.equal(cache.peek('h'), undefined)
  const pending = cache.fetch('h')
  cache.invalidate('h')
  t.same(await pending, INFO, 'callers of the in-flight lookup still get an answer')
  t.equal(cache.peek('h'), undefined, 'but it is not cached')
})

t.test('a TTL of 0 disables the cache', async (t) => {
  const store = counting(() => INFO)
  const cache = new KeyCache(store.lookup, { ttlMs: 0, max: 100 })
  await cache.fetch('h')
  t.equal(cache.peek('h'), undefined)
})

t.test('invalidateAccount drops every key of that account, and nothing else', async (t) => {
  const infos: Record<string, KeyInfo | null> = {
    a1: { ...INFO, keyId: 'a1', accountId: 'a' },
    a2: { ...INFO, keyId: 'a2', accountId: 'a' },
    b1: { ...INFO, keyId: 'b1', accountId: 'b' },
    gone: null,
  }
  const lookups: string[] = []
  let release: () => void = () => {}
  const gate = new Promise<void>((resolve) => { release = resolve })
  const cache = new KeyCache(async (hash) => {
    lookups.push(hash)
    if (hash === 'a3') await gate
    return hash === 'a3' ? { ...INFO, keyId: 'a3', accountId: 'a' } : infos[hash] ?? null
  }, { ttlMs: 10_000, max: 100 })
  for (const hash of Object.keys(infos)) await cache.fetch(hash)
  const pending = cache.fetch('a3')

  cache.invalidateAccount('a')
  t.equal(cache.peek('a1'), undefined, "the account's keys are dropped")
  t.equal(cache.peek('a2'), undefined)
  t.equal(cache.peek('b1')?.keyId, 'b1', "another account's key stays")
  t.equal(cache.peek('gone'), null, 'a cached unknown key stays unknown')
  release()
  t.equal((await pending)?.keyId, 'a3', 'a lookup in flight still answers its callers')
  t.equal(cache.peek('a3'), undefined, 'but its answer, possibly older than the change, is not cached')
  t.same(lookups, ['a1', 'a2', 'b1', 'gone', 'a3'])
})
