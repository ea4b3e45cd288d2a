// Two limiters sharing a real redis-server (Debian's, started here with a password and no persistence): one
// shared rpm limit held within the documented tolerance, Redis stopped mid-run (both fall back, warn once,
// keep counting) and started again empty (both recover, the counts made while away arrive once), and the
// password never in a warning; Redis losing its counts while connected (FLUSHALL, an evicted key) is
// restored from what the instances knew. Missing redis-server is a failure: CI installs it (.ci/run).
import { Redis } from 'ioredis'
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { RequestBoard } from '../../src/limits/board.js'
import { FrontLimits } from '../../src/limits/front.js'
import { Limiter, type LimitCall } from '../../src/limits/limiter.js'
import type { Refusal } from '../../src/limits/rules.js'
import { KEY_PREFIX, RedisCounters } from '../../src/limits/redis.js'
import type { SharedCounters, SyncBatch, SyncResult } from '../../src/limits/shared.js'
import { sleep, until, withTimeout } from '../helpers/wait.js'
import { PASSWORD, freshRedis, startRedis } from '../helpers/redis.js'

const SYNC_MS = 20
import { NO_LIMITS } from '../../src/domain/limits.js'

/**
 * The Redis counters, timing each sync: how far apart syncs start (the interval, plus the event loop's
 * lateness) and how long they take (the round trip), which together bound how stale one instance's view of
 * the other is.
 */
class TimedCounters implements SharedCounters {
  readonly #inner: RedisCounters
  #lastStart = 0
  maxGapMs = 0
  maxRoundTripMs = 0

  constructor (inner: RedisCounters) {
    this.#inner = inner
  }

  get state (): SharedCounters['state'] { return this.#inner.state }
  get generation (): number { return this.#inner.generation }
  get lastError (): string | null { return this.#inner.lastError }

  async sync (batch: SyncBatch): Promise<SyncResult> {
    const start = performance.now()
    if (this.#lastStart !== 0) this.maxGapMs = Math.max(this.maxGapMs, start - this.#lastStart)
    this.#lastStart = start
    const result = await this.#inner.sync(batch)
    this.maxRoundTripMs = Math.max(this.maxRoundTripMs, performance.now() - start)
    return result
  }

  async close (): Promise<void> {
    await this.#inner.close()
  }

  resetTimings (): void {
    this.maxGapMs = this.maxRoundTripMs = 0
  }
}

/** A clock one second into a minute at the start, so the whole test stays in one minute window. */
function minuteClock (): () => number {
  const offset = (Date.now() % 60_000) - 1_000
  return () => Date.now() - offset
}

function call (keyId: string, rpm: number | null): LimitCall {
  return { keyId, accountId: 'acct-redis', key: { ...NO_LIMITS, rpm }, account: NO_LIMITS }
}

t.test('two limiters share one rpm limit through redis-server, fall back when it stops and recover when it is back', async (t) => {
  const fresh = await freshRedis(t)
  const { port, dir } = fresh
  let redis = fresh.redis
  const url = `redis://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${port}`
  const now = minuteClock()
  const warnings: string[] = []
  const counters: TimedCounters[] = []
  const limiter = (name: string): Limiter => {
    const timed = new TimedCounters(new RedisCounters(url, { maxReconnectDelayMs: 200 }))
    counters.push(timed)
    const lim = new Limiter({
      now,
      syncMs: SYNC_MS,
      shared: timed,
      warn: (msg, fields) => { warnings.push(`${name} ${msg} ${JSON.stringify(fields)}`) },
    })
    t.teardown(() => lim.close())
    return lim
  }
  const a = limiter('a')
  const b = limiter('b')
  await until(() => a.mode === 'shared' && b.mode === 'shared', { ms: 5_000, what: 'both limiters synced' })
  t.same(warnings, [], 'connecting is not an episode to warn about')

  // One shared limit: each instance tries a request every 5 ms until well past it.
  const limit = 100
  const shared = call('key-shared', limit)
  const admitted = { a: 0, b: 0 }
  let attempts = 0
  for (const c of counters) c.resetTimings()
  const started = performance.now()
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      attempts++
      if (a.admit(shared, 'm', 1) === null) admitted.a++
      if (b.admit(shared, 'm', 1) === null) admitted.b++
      if (attempts === 300) { clearInterval(timer); resolve() }
    }, 5)
  })
  const seconds = (performance.now() - started) / 1000
  const rate = attempts / seconds
  // Documented: over the limit by at most (instances - 1) x per-instance rate x how stale one instance's view
  // of the other can be: a count waits up to one sync interval to be sent, and the other reads it at its next
  // sync, each a round trip. Measured here rather than assumed, since a loaded machine stretches both.
  const gap = Math.max(...counters.map((c) => c.maxGapMs))
  const roundTrip = Math.max(...counters.map((c) => c.maxRoundTripMs))
  const tolerance = Math.ceil(rate * 2 * (gap + roundTrip) / 1000)
  const total = admitted.a + admitted.b
  t.ok(total >= limit, `the limit is reached (${total} admitted)`)
  t.ok(total <= limit + tolerance, `${total} admitted: at most ${limit} + ${tolerance} (${Math.round(rate)}/s per instance, ` +
    `syncs at most ${Math.round(gap)} ms apart, round trips at most ${Math.round(roundTrip)} ms)`)
  t.ok(total < limit * 1.5, 'the limit is shared: far under what two separate limits would admit')
  t.ok(admitted.a > 0 && admitted.b > 0, `both instances admitted some (${admitted.a} + ${admitted.b})`)
  await until(() => a.usage({ keyId: 'key-shared' }).minuteRequests === total && b.usage({ keyId: 'key-shared' }).minuteRequests === total,
    { ms: 5_000, what: 'both see the shared total' })
  t.not(a.admit(shared, 'm', 1), null, 'a refuses now')
  t.not(b.admit(shared, 'm', 1), null, 'b refuses now')

  // What Redis holds: namespaced, ids only, expiring.
  const inspect = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 })
  t.teardown(() => { inspect.disconnect() })
  await inspect.connect()
  const keys = await inspect.keys('*')
  t.ok(keys.length > 0 && keys.every((k) => k.startsWith(KEY_PREFIX)), 'every key is under tracegate:limits:')
  const requestsKey = keys.find((k) => k.startsWith(`${KEY_PREFIX}k:key-shared:requests:`))
  t.ok(requestsKey !== undefined)
  t.equal(Number(await inspect.get(requestsKey!)), total)
  const ttl = await inspect.pttl(requestsKey!)
  // Its window's end plus a minute's grace, on the limiters' clock (offset from Redis's own).
  const fake = now()
  const expected = fake - (fake % 60_000) + 120_000 - Date.now()
  t.ok(Math.abs(ttl - expected) < 1_000, `a minute's counter expires a minute after its window (${ttl} ms, expected ${expected})`)
  inspect.disconnect()

  // Redis stops: both fall back, warn once each, and go on counting their own requests.
  const outage = call('key-outage', null)
  for (let i = 0; i < 7; i++) t.equal(a.admit(outage, 'm', 1), null)
  await until(() => b.usage({ keyId: 'key-outage' }).minuteRequests === 7, { ms: 5_000, what: "b sees a's 7" })
  await redis.stop()
  await until(() => a.mode === 'fallback' && b.mode === 'fallback', { ms: 5_000, what: 'both in fallback' })
  for (let i = 0; i < 5; i++) t.equal(a.admit(outage, 'm', 1), null)
  for (let i = 0; i < 2; i++) t.equal(b.admit(outage, 'm', 1), null)
  t.equal(a.usage({ keyId: 'key-outage' }).minuteRequests, 12, 'a: the last shared total plus its own')
  t.equal(b.usage({ keyId: 'key-outage' }).minuteRequests, 9)
  await sleep(10 * SYNC_MS)
  t.equal(warnings.filter((w) => w.includes('unreachable')).length, 2, 'one warning per instance for the episode')
  t.ok(warnings.every((w) => w.startsWith('a ') || w.startsWith('b ')))

  // Redis is back, empty (no persistence): both recover, what was known comes back, the counts made while away arrive once.
  redis = await startRedis(t, port, dir)
  await until(() => a.mode === 'shared' && b.mode === 'shared', { ms: 10_000, what: 'both shared again' })
  await until(() => a.usage({ keyId: 'key-outage' }).minuteRequests === 14 && b.usage({ keyId: 'key-outage' }).minuteRequests === 14,
    { ms: 5_000, what: () => `both see 7 + 5 + 2 (a ${a.usage({ keyId: 'key-outage' }).minuteRequests}, b ${b.usage({ keyId: 'key-outage' }).minuteRequests})` })
  await until(() => a.usage({ keyId: 'key-shared' }).minuteRequests === total, { ms: 5_000, what: 'the shared limit restored after the restart' })
  t.not(b.admit(shared, 'm', 1), null, 'the shared limit still holds after Redis restarted empty')
  await sleep(10 * SYNC_MS)
  t.equal(a.usage({ keyId: 'key-outage' }).minuteRequests, 14, 'nothing counted twice')
  t.equal(warnings.filter((w) => w.includes('Redis is back')).length, 2, 'one "back" per instance')
  t.equal(warnings.length, 4)
  for (const w of warnings) {
    t.notOk(w.includes(PASSWORD) || w.includes(encodeURIComponent(PASSWORD)), `no password in: ${w}`)
  }
})

t.test('Redis loses its counts mid-minute (FLUSHALL, then one key evicted): restored from the instances, rpm=10 still admits 10', async (t) => {
  const { port } = await freshRedis(t)
  const url = `redis://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${port}`
  const now = minuteClock()
  const warnings: string[] = []
  const limiter = (name: string): Limiter => {
    const lim = new Limiter({ now, syncMs: SYNC_MS, shared: new RedisCounters(url), warn: (msg) => { warnings.push(`${name} ${msg}`) } })
    t.teardown(() => lim.close())
    return lim
  }
  const a = limiter('a')
  const b = limiter('b')
  await until(() => a.mode === 'shared' && b.mode === 'shared', { ms: 5_000, what: 'both limiters synced' })
  const rpm10 = call('key-flushed', 10)
  const seen = (n: number) => () => a.usage({ keyId: 'key-flushed' }).minuteRequests === n && b.usage({ keyId: 'key-flushed' }).minuteRequests === n
  for (let i = 0; i < 3; i++) t.equal(a.admit(rpm10, 'm', 1), null)
  for (let i = 0; i < 3; i++) t.equal(b.admit(rpm10, 'm', 1), null)
  await until(seen(6), { ms: 5_000, what: 'both see 6' })

  const inspect = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 })
  t.teardown(() => { inspect.disconnect() })
  await inspect.connect()
  await inspect.flushall()
  // The next syncs find the counters gone and put back what the instances knew, on the same connections.
  const requestsKey = async (): Promise<string | undefined> => (await inspect.keys(`${KEY_PREFIX}k:key-flushed:requests:*`))[0]
  await until(async () => { const k = await requestsKey(); return k !== undefined && Number(await inspect.get(k)) === 6 }, { ms: 5_000, what: 'the count restored in Redis' })
  t.pass('Redis holds 6 again')
  t.ok(warnings.some((w) => w.includes('Redis had lost shared counts')), `the loss is told (${warnings.join('; ')})`)
  for (let i = 0; i < 2; i++) t.equal(a.admit(rpm10, 'm', 1), null)
  await until(seen(8), { ms: 5_000, what: 'both see 8' })

  // One counter evicted alone: the same.
  await inspect.del((await requestsKey())!)
  await sleep(10 * SYNC_MS)
  // Each instance tries in turn, letting a sync pass between tries, until well past the limit.
  let admitted = 8
  for (let i = 0; i < 10; i++) {
    for (const lim of [a, b]) {
      if (lim.admit(rpm10, 'm', 1) === null) admitted++
      await sleep(3 * SYNC_MS)
    }
  }
  t.equal(admitted, 10, 'rpm=10 admitted 10 in the minute, Redis losing its counts twice')
  t.equal(Number(await inspect.get((await requestsKey())!)), 10, 'and Redis holds 10')
  t.equal(warnings.filter((w) => w.includes('unreachable')).length, 0, 'Redis never went away')
})

t.test('a front thread judging on the request board counts the other instance\'s requests once they are synced', async (t) => {
  const { port } = await freshRedis(t)
  const url = `redis://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${port}`
  const limiter = (board: RequestBoard | null): Limiter => {
    const lim = new Limiter({ syncMs: SYNC_MS, shared: new RedisCounters(url), board })
    t.teardown(() => lim.close())
    return lim
  }
  const a = limiter(new RequestBoard())
  const b = limiter(null)
  await until(() => a.mode === 'shared' && b.mode === 'shared', { ms: 5_000, what: 'both limiters synced' })
  // The board counts by the system clock's minute: all of this in one, with at least 10 s left.
  const left = 60_000 - Date.now() % 60_000
  if (left < 10_000) await sleep(left + 50)
  const c: LimitCall = { keyId: randomUUID(), accountId: randomUUID(), key: { ...NO_LIMITS, rpm: 10 }, account: NO_LIMITS }
  const front = new FrontLimits({ admit: (x) => Promise.resolve(a.count(x)), counted: (note) => { for (const [k, acc, n] of note) a.counted(k, acc, n) } }, new RequestBoard(a.boardBuffer))
  t.teardown(() => { front.close() })
  t.equal(a.admit(c, 'm', 1), null, 'the first call is counted by the main thread, which puts the key on the board')
  for (let i = 0; i < 3; i++) t.equal(front.admit(c, 'm', 1), null, 'judged on the board, at once')
  for (let i = 0; i < 4; i++) t.equal(b.admit(c, 'm', 1), null, 'the other instance admits some')
  const seen = (n: number) => () => a.usage({ keyId: c.keyId }).minuteRequests === n && b.usage({ keyId: c.keyId }).minuteRequests === n
  await until(seen(8), { ms: 5_000, what: 'both instances see 8' })
  const answers = Array.from({ length: 5 }, () => front.admit(c, 'm', 1))
  t.notOk(answers.some((x) => x instanceof Promise), 'every answer came from the board')
  t.equal(answers.filter((x) => x === null).length, 2, 'the board admits the 2 left of 10, the other instance\'s 4 counted')
  const refused = answers.filter((x): x is Refusal => x !== null && !(x instanceof Promise))
  t.same(refused.map((r) => [r.code, r.headers['x-ratelimit-remaining-requests']]), [['rate_limited', '0'], ['rate_limited', '0'], ['rate_limited', '0']], 'the rest refused, none left')
  await until(seen(10), { ms: 5_000, what: 'both instances see 10' })
})

t.test('across a month\'s end, what a front thread counts on the board reaches Redis once', async (t) => {
  const { port } = await freshRedis(t)
  const url = `redis://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${port}`
  // Ahead of the real clock, so the counters' expiry (their window's end) is in Redis's future.
  let clock = Date.UTC(2027, 0, 31, 23, 59, 50)
  const now = (): number => clock
  const board = new RequestBoard()
  const a = new Limiter({ now, syncMs: SYNC_MS, shared: new RedisCounters(url), board })
  t.teardown(() => a.close())
  await until(() => a.mode === 'shared', { ms: 5_000, what: 'the limiter synced' })
  const c: LimitCall = { keyId: randomUUID(), accountId: randomUUID(), key: { ...NO_LIMITS, rpm: 100 }, account: NO_LIMITS }
  const front = new FrontLimits({ admit: (x) => Promise.resolve(a.count(x)), counted: (note) => { for (const [k, acc, n] of note) a.counted(k, acc, n) } }, new RequestBoard(board.buffer), now)
  t.teardown(() => { front.close() })
  t.equal(a.count(c), null, 'on the board')
  t.equal(front.admit(c, 'm', 1), null)
  await sleep(10 * SYNC_MS)
  clock = Date.UTC(2027, 1, 1, 0, 0, 5)
  // Another key's note is the first thing the main thread does in the new month: the month's sweep starts
  // before the sync has rolled this key's subjects.
  a.counted(randomUUID(), randomUUID(), 1)
  await sleep(50)
  for (let i = 0; i < 5; i++) t.equal(front.admit(c, 'm', 1), null, 'judged on the board in the new month')
  const inspect = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 })
  t.teardown(() => { inspect.disconnect() })
  await inspect.connect()
  const counter = `${KEY_PREFIX}k:${c.keyId}:requests:${Date.UTC(2027, 1, 1, 0, 0, 0)}`
  await until(async () => Number(await inspect.get(counter)) >= 5, { ms: 5_000, what: 'the five in Redis' })
  await sleep(10 * SYNC_MS)
  t.equal(Number(await inspect.get(counter)), 5, 'Redis holds the five once')
  t.equal(a.usage({ keyId: c.keyId }).minuteRequests, 5, 'and so does the limiter')
})

t.test('a wrong password: fallback, and neither password in the warning', async (t) => {
  const { port } = await freshRedis(t)
  const wrong = 'not-the-Password-42'
  const warnings: string[] = []
  const lim = new Limiter({
    syncMs: SYNC_MS,
    shared: new RedisCounters(`redis://:${wrong}@127.0.0.1:${port}`, { maxReconnectDelayMs: 200 }),
    warn: (msg, fields) => { warnings.push(`${msg} ${JSON.stringify(fields)}`) },
  })
  t.teardown(() => lim.close())
  await until(() => warnings.length > 0, { ms: 5_000, what: 'the warning' })
  t.equal(lim.mode, 'fallback')
  t.equal(lim.admit(call('k', 1), 'm', 1), null, 'requests are judged on own counts')
  t.not(lim.admit(call('k', 1), 'm', 1), null)
  await sleep(10 * SYNC_MS)
  t.equal(warnings.length, 1)
  t.notOk(warnings[0]!.includes(wrong) || warnings[0]!.includes(PASSWORD), warnings[0]!)
})

t.test('a Redis URL that is not one is refused without repeating it', async (t) => {
  t.throws(() => new RedisCounters('http://user:hunter2@example.com'), { message: /redis:\/\// })
  try {
    new RedisCounters('redis://:hunter2@[::1')
    t.fail('accepted')
  } catch (err) {
    t.notMatch(String(err), /hunter2/)
  }
})
