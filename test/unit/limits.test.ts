// Per-key limits: reading a change, the model allowlist's patterns, and the limiter on an injected
// clock: each limit trips at its number and resets with its window, key and account both apply, the 429
// headers, budgets across UTC day and month ends, seeding, usage, and the sync's bookkeeping against an
// in-memory store of shared counters (the real Redis is in test/integration/limits-redis.test.ts).
import t from 'tap'
import { TracegateError } from '../../src/errors.js'
import { formatDuration, Limiter, type LimitCall } from '../../src/limits/limiter.js'
import type { Refusal } from '../../src/limits/rules.js'
import type { SharedCounters, SyncBatch, SyncResult } from '../../src/limits/shared.js'
import { applyPatch, modelMatcher, parseLimitsPatch } from '../../src/limits/types.js'
import { sleep, until } from '../helpers/wait.js'
import { NO_LIMITS, type Limits, type LimitsPatch } from '../../src/domain/limits.js'

const KEY_ID = 'key-7f3a9c'
const ACCOUNT_ID = 'acct-51b2e0'

function parse (input: Record<string, unknown>, forAccount = false): LimitsPatch {
  return parseLimitsPatch(input, { forAccount, code: 'invalid_argument' })
}

function refusedParam (input: Record<string, unknown>, forAccount = false, code: 'invalid_argument' | 'invalid_parameter' = 'invalid_argument'): string | null {
  try {
    parseLimitsPatch(input, { forAccount, code })
  } catch (err) {
    if (err instanceof TracegateError && err.code === code) return err.param
    throw err
  }
  throw new Error('accepted ' + JSON.stringify(input))
}

t.test('a patch: numbers or numeric strings, none removes, other members ignored', async (t) => {
  t.same(parse({ rpm: 60, tpm: '100000', budget_day: '5', budget_month: 12.5, models: ['gpt-4o*', 'claude-*'], max_body_bytes: '1048576' }), {
    rpm: 60, tpm: 100000, budgetDayUsd: 5, budgetMonthUsd: 12.5, models: ['gpt-4o*', 'claude-*'], maxBodyBytes: 1048576,
  })
  t.same(parse({ rpm: ' 7 ', 'budget-day': '0.000001', 'budget-month': '1000000000', 'max-body-bytes': 1 }), {
    rpm: 7, budgetDayUsd: 0.000001, budgetMonthUsd: 1e9, maxBodyBytes: 1,
  }, 'the CLI spellings, the smallest budget and the largest')
  t.same(parse({ models: ' gpt-4o , gpt-4o-mini,gpt-4o ' }), { models: ['gpt-4o', 'gpt-4o-mini'] }, 'a comma-separated list, trimmed, without repeats')
  for (const none of [null, 'none', 'NONE', ' None ', '']) {
    t.same(parse({ rpm: none, tpm: none, budget_day: none, budget_month: none, models: none, max_body_bytes: none }), {
      rpm: null, tpm: null, budgetDayUsd: null, budgetMonthUsd: null, models: null, maxBodyBytes: null,
    }, `${JSON.stringify(none)} removes every limit`)
  }
  t.same(parse({ models: [] }), { models: null }, 'an empty list allows any model')
  t.same(parse({ id: 'k1', name: 'ci', scope: 'proxy', rpm: undefined }), {}, 'absent and undefined fields change nothing')
  t.equal(parse({ rpm: 4294967295 }).rpm, 4294967295, 'the largest rpm fits the UInt32 column')
})

t.test('a patch: each field refuses what breaks its rule, naming the field as given', async (t) => {
  const bad: Array<[Record<string, unknown>, string]> = [
    [{ rpm: 0 }, 'rpm'], [{ rpm: -1 }, 'rpm'], [{ rpm: 1.5 }, 'rpm'], [{ rpm: '1e3' }, 'rpm'], [{ rpm: '0x10' }, 'rpm'],
    [{ rpm: 'ten' }, 'rpm'], [{ rpm: true }, 'rpm'], [{ rpm: 4294967296 }, 'rpm'], [{ rpm: [60] }, 'rpm'],
    [{ tpm: 0 }, 'tpm'], [{ tpm: '12.0' }, 'tpm'], [{ tpm: Number.MAX_SAFE_INTEGER + 2 }, 'tpm'], [{ tpm: NaN }, 'tpm'],
    [{ budget_day: 0 }, 'budget_day'], [{ budget_day: '-1' }, 'budget_day'], [{ budget_day: '1.1234567' }, 'budget_day'],
    [{ budget_day: 1e-7 }, 'budget_day'], [{ budget_day: Infinity }, 'budget_day'], [{ budget_day: 'five' }, 'budget_day'],
    [{ 'budget-month': '1e3' }, 'budget-month'], [{ budget_month: 1_000_000_001 }, 'budget_month'], [{ budget_month: 0.1 + 0.2 }, 'budget_month'],
    [{ models: 'gpt-4o,,claude-*' }, 'models'], [{ models: 'gpt-4o,' }, 'models'], [{ models: ['gpt 4o'] }, 'models'],
    [{ models: [42] }, 'models'], [{ models: ['x'.repeat(201)] }, 'models'], [{ models: ['tab\there'] }, 'models'],
    [{ models: Array.from({ length: 101 }, (_, i) => `m${i}`) }, 'models'], [{ models: 7 }, 'models'], [{ models: { a: 1 } }, 'models'],
    [{ max_body_bytes: 0 }, 'max_body_bytes'], [{ 'max-body-bytes': '1kb' }, 'max-body-bytes'],
    [{ budget_day: 1, 'budget-day': 1 }, 'budget_day'],
  ]
  for (const [input, param] of bad) t.equal(refusedParam(input), param, JSON.stringify(input))
  t.equal(refusedParam({ max_body_bytes: 100 }, true), 'max_body_bytes', 'an account has no body limit')
  t.equal(refusedParam({ max_body_bytes: null }, true), 'max_body_bytes', 'not even to remove it')
  t.same(parseLimitsPatch({ rpm: 5, models: 'a*' }, { forAccount: true, code: 'invalid_parameter' }), { rpm: 5, models: ['a*'] })
  t.equal(refusedParam({ tpm: -5 }, false, 'invalid_parameter'), 'tpm', "the caller's code is used")
  t.equal(parse({ models: Array.from({ length: 100 }, (_, i) => `m${i}`) }).models?.length, 100, 'a hundred patterns are allowed')
})

t.test('applyPatch: absent keeps, null removes, a value sets; the base is untouched', async (t) => {
  const base: Limits = applyPatch(NO_LIMITS, { rpm: 10, tpm: 500, models: ['a*'] })
  t.same(base, { ...NO_LIMITS, rpm: 10, tpm: 500, models: ['a*'] })
  const next = applyPatch(base, { rpm: null, budgetDayUsd: 2 })
  t.same(next, { ...NO_LIMITS, tpm: 500, models: ['a*'], budgetDayUsd: 2 })
  t.equal(base.rpm, 10)
  t.ok(Object.isFrozen(next) && Object.isFrozen(NO_LIMITS))
  t.same(NO_LIMITS, { rpm: null, tpm: null, budgetDayUsd: null, budgetMonthUsd: null, models: null, maxBodyBytes: null })
})

t.test('model patterns: exact, *, prefix, suffix, middle; whole-string, case-sensitive, nothing but * is special', async (t) => {
  const cases: Array<[string[] | null, string, boolean]> = [
    [null, 'anything', true],
    [['*'], 'gpt-4o', true], [['**'], '', true],
    [['gpt-4o'], 'gpt-4o', true], [['gpt-4o'], 'gpt-4o-mini', false], [['gpt-4o'], 'my-gpt-4o', false], [['gpt-4o'], 'GPT-4o', false],
    [['gpt-4o*'], 'gpt-4o', true], [['gpt-4o*'], 'gpt-4o-mini-2024-07-18', true], [['gpt-4o*'], 'gpt-4', false], [['gpt-4o*'], 'Gpt-4o', false],
    [['*-mini'], 'gpt-4o-mini', true], [['*-mini'], 'gpt-4o-mini-2024', false],
    [['claude-*-sonnet*'], 'claude-3-5-sonnet-20240620', true], [['claude-*-sonnet*'], 'claude-sonnet-4', false], [['claude-*-sonnet*'], 'claude--sonnet', true],
    [['a*b*c'], 'abc', true], [['a*b*c'], 'aXbYc', true], [['a*b*c'], 'acb', false], [['a*b*c'], 'abcb', false],
    [['ab*ba'], 'aba', false], [['ab*ba'], 'abba', true], [['a**b'], 'ab', true],
    [['gpt.4'], 'gpt-4', false], [['gpt.4'], 'gpt.4', true], [['a+'], 'aa', false], [['a+'], 'a+', true],
    [['(x|y)*'], 'x', false], [['(x|y)*'], '(x|y)-1', true], [['[abc]'], 'a', false], [['^gpt$'], 'gpt', false], [['a?'], 'ab', false],
    [['gpt-4o', 'claude-*'], 'claude-3-haiku', true], [['gpt-4o', 'claude-*'], 'gemini-pro', false],
  ]
  for (const [patterns, model, expected] of cases) t.equal(modelMatcher(patterns)(model), expected, `${JSON.stringify(patterns)} ~ ${model}`)
  const one = modelMatcher(['gpt-4o*', 'claude-3-haiku'])
  const asked = ['gpt-4o', 'gpt-4o', 'gpt-4', 'gpt-4', 'claude-3-haiku', 'gpt-4', 'claude-3-haiku', 'claude-3-haik', 'gpt-4o-mini']
  t.same(asked.map((m) => one(m)), [true, true, false, false, true, false, true, false, true], 'one matcher asked in turn (it keeps its last answer)')
})

t.test('formatDuration is OpenAI\'s reset format', async (t) => {
  t.equal(formatDuration(20), '20ms')
  t.equal(formatDuration(0.2), '1ms')
  t.equal(formatDuration(999), '999ms')
  t.equal(formatDuration(1000), '1s')
  t.equal(formatDuration(59_500), '59.5s')
  t.equal(formatDuration(12_345), '12.345s')
  t.equal(formatDuration(60_000), '1m0s')
  t.equal(formatDuration(360_000), '6m0s')
  t.equal(formatDuration(3_723_000), '1h2m3s')
})

/** A limiter on a clock the test moves. */
function limiter (start: number): { lim: Limiter; clock: { t: number } } {
  const clock = { t: start }
  return { lim: new Limiter({ now: () => clock.t }), clock }
}

function call (key: Partial<Limits> = {}, account: Partial<Limits> = {}, keyId = KEY_ID, accountId = ACCOUNT_ID): LimitCall {
  return { keyId, accountId, key: { ...NO_LIMITS, ...key }, account: { ...NO_LIMITS, ...account } }
}

function refused (r: Refusal | null): Refusal {
  if (r === null) throw new Error('admitted, expected a refusal')
  return r
}

const T0 = Date.UTC(2024, 5, 12, 10, 20, 30, 500) // 30.5 s into a minute

t.test('rpm trips at its number, a refusal is not counted, and the next minute starts afresh', async (t) => {
  const { lim, clock } = limiter(T0)
  const c = call({ rpm: 3 })
  for (let i = 0; i < 3; i++) t.equal(lim.admit(c, 'gpt-4o', 100), null, `request ${i + 1}`)
  const r = refused(lim.admit(c, 'gpt-4o', 100))
  t.equal(r.code, 'rate_limited')
  t.equal(r.retryAfterMs, 29_500)
  t.same(r.headers, {
    'retry-after': '30', 'retry-after-ms': '29500',
    'x-ratelimit-limit-requests': '3', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '29.5s',
  }, 'only the requests have a limit, so only they get headers')
  t.match(r.message, /key's limit of 3 requests per minute/)
  t.notMatch(r.message, new RegExp(`${KEY_ID}|${ACCOUNT_ID}`))
  refused(lim.admit(c, 'gpt-4o', 100))
  t.equal(lim.usage({ keyId: KEY_ID }).minuteRequests, 3, 'refused requests are not counted')
  clock.t = Date.UTC(2024, 5, 12, 10, 20, 59, 999)
  refused(lim.admit(c, 'gpt-4o', 100))
  t.equal(refused(lim.admit(c, 'gpt-4o', 100)).headers['retry-after'], '1', 'retry-after is at least 1 s')
  clock.t = Date.UTC(2024, 5, 12, 10, 21, 0, 0)
  t.equal(lim.admit(c, 'gpt-4o', 100), null, 'the minute is aligned to the clock, not to the first request')
  t.equal(lim.usage({ keyId: KEY_ID }).minuteRequests, 1)
  t.equal(lim.mode, 'local')
})

t.test('tpm counts recorded tokens and refuses once they reach it', async (t) => {
  const { lim, clock } = limiter(T0)
  const c = call({ tpm: 100 })
  t.equal(lim.admit(c, 'm', 1), null)
  lim.record(KEY_ID, ACCOUNT_ID, 99, 0, T0)
  t.equal(lim.admit(c, 'm', 1), null, '99 of 100')
  lim.record(KEY_ID, ACCOUNT_ID, 1, 0, T0)
  const r = refused(lim.admit(c, 'm', 1))
  t.equal(r.code, 'rate_limited')
  t.same(r.headers, {
    'retry-after': '30', 'retry-after-ms': '29500',
    'x-ratelimit-limit-tokens': '100', 'x-ratelimit-remaining-tokens': '0', 'x-ratelimit-reset-tokens': '29.5s',
  })
  t.match(r.message, /key's limit of 100 tokens per minute/)
  clock.t = T0 + 60_000
  t.equal(lim.admit(c, 'm', 1), null)
  lim.record(KEY_ID, ACCOUNT_ID, 150, 0, T0)
  t.equal(lim.usage({ keyId: KEY_ID }).minuteTokens, 150, 'a trace arriving after its minute counts in the current one')
  refused(lim.admit(c, 'm', 1))
})

t.test('key and account both apply; the headers show the more restrictive of each kind', async (t) => {
  const { lim } = limiter(T0)
  const account = { rpm: 4 }
  const a = call({ rpm: 10 }, account, 'key-a')
  const b = call({ rpm: 10, tpm: 10 }, account, 'key-b')
  t.equal(lim.admit(a, 'm', 1), null)
  t.equal(lim.admit(a, 'm', 1), null)
  t.equal(lim.admit(b, 'm', 1), null)
  lim.record('key-b', ACCOUNT_ID, 10, 0, T0)
  // key-b: rpm 10 used 1 (9 left), tpm 10 used 10; the account: rpm 4 used 3 (1 left).
  const r = refused(lim.admit(b, 'm', 1))
  t.match(r.message, /key's limit of 10 tokens per minute/)
  t.same(r.headers, {
    'retry-after': '30', 'retry-after-ms': '29500',
    'x-ratelimit-limit-requests': '4', 'x-ratelimit-remaining-requests': '1', 'x-ratelimit-reset-requests': '29.5s',
    'x-ratelimit-limit-tokens': '10', 'x-ratelimit-remaining-tokens': '0', 'x-ratelimit-reset-tokens': '29.5s',
  })
  t.equal(lim.admit(a, 'm', 1), null, 'the fourth request of the account')
  const acct = refused(lim.admit(a, 'm', 1))
  t.match(acct.message, /account's limit of 4 requests per minute/)
  t.notMatch(acct.message, /key-a|acct-/)
  t.equal(acct.headers['x-ratelimit-limit-requests'], '4')
  t.equal(lim.usage({ accountId: ACCOUNT_ID }).minuteRequests, 4)
  t.equal(lim.usage({ keyId: 'key-a' }).minuteRequests, 3)
  // Equal remaining: the smaller limit is shown.
  const { lim: l2 } = limiter(T0)
  t.equal(l2.admit(call({ rpm: 2 }, { rpm: 3 }), 'm', 1), null)
  t.equal(l2.admit(call({ rpm: 2 }, { rpm: 3 }), 'm', 1), null)
  l2.admit(call({}, { rpm: 3 }, 'other'), 'm', 1)
  t.equal(refused(l2.admit(call({ rpm: 2 }, { rpm: 3 }), 'm', 1)).headers['x-ratelimit-limit-requests'], '2')
})

t.test('the day budget: spent from recorded cost, refused at its amount, reset at 00:00 UTC', async (t) => {
  const start = Date.UTC(2024, 5, 12, 23, 59, 0)
  const { lim, clock } = limiter(start)
  const c = call({ budgetDayUsd: 0.5 }, {}, KEY_ID)
  t.equal(lim.admit(c, 'm', 1), null)
  lim.record(KEY_ID, ACCOUNT_ID, 10, 0.3, start)
  t.equal(lim.admit(c, 'm', 1), null)
  lim.record(KEY_ID, ACCOUNT_ID, 10, 0.199999, start)
  t.equal(lim.admit(c, 'm', 1), null, 'a micro-dollar under the budget')
  lim.record(KEY_ID, ACCOUNT_ID, 10, 0.000001, start)
  const r = refused(lim.admit(c, 'm', 1))
  t.equal(r.code, 'budget_exceeded')
  t.equal(r.period, 'day')
  t.equal(r.limitUsd, 0.5)
  t.equal(r.retryAfterMs, 60_000, 'until midnight UTC')
  t.same(r.headers, { 'retry-after': '60', 'retry-after-ms': '60000' }, 'no rate limits, so no x-ratelimit headers')
  t.match(r.message, /key's budget of 0\.5 USD per day/)
  t.equal(lim.usage({ keyId: KEY_ID }).dayUsd, 0.5)
  clock.t = Date.UTC(2024, 5, 13, 0, 0, 0)
  t.equal(lim.admit(c, 'm', 1), null, 'a new UTC day')
  t.equal(lim.usage({ keyId: KEY_ID }).dayUsd, 0)
  t.equal(lim.usage({ keyId: KEY_ID }).monthUsd, 0.5, 'the month keeps it')
  lim.record(KEY_ID, ACCOUNT_ID, 0, 0.25, start)
  t.equal(lim.usage({ keyId: KEY_ID }).dayUsd, 0, "a call started yesterday does not count in today's budget")
  t.equal(lim.usage({ keyId: KEY_ID }).monthUsd, 0.75, 'but in the month it started in')
})

t.test('the month budget across a leap-year February and a year end', async (t) => {
  const feb = Date.UTC(2024, 1, 29, 23, 59, 59, 0)
  const { lim, clock } = limiter(feb)
  const c = call({}, { budgetMonthUsd: 10 })
  t.equal(lim.usage({ accountId: ACCOUNT_ID }).monthResetMs, Date.UTC(2024, 2, 1), 'the 29th is in February')
  t.equal(lim.usage({ accountId: ACCOUNT_ID }).dayResetMs, Date.UTC(2024, 2, 1))
  lim.record('k1', ACCOUNT_ID, 0, 6, Date.UTC(2024, 1, 3))
  lim.record('k2', ACCOUNT_ID, 0, 4, feb)
  const r = refused(lim.admit(c, 'm', 1))
  t.equal(r.code, 'budget_exceeded')
  t.equal(r.period, 'month')
  t.equal(r.limitUsd, 10)
  t.equal(r.retryAfterMs, 1000)
  t.match(r.message, /account's budget of 10 USD per month/)
  clock.t = Date.UTC(2024, 2, 1)
  t.equal(lim.admit(c, 'm', 1), null, 'March starts afresh')
  t.equal(lim.usage({ accountId: ACCOUNT_ID }).monthResetMs, Date.UTC(2024, 3, 1))
  clock.t = Date.UTC(2023, 1, 28, 12)
  t.equal(lim.usage({}).monthResetMs, Date.UTC(2023, 2, 1), 'February 2023 has 28 days')
  clock.t = Date.UTC(2024, 11, 31, 23, 0)
  t.equal(lim.usage({}).monthResetMs, Date.UTC(2025, 0, 1), 'December ends with the year')
  lim.record('k1', ACCOUNT_ID, 0, 10, clock.t)
  refused(lim.admit(c, 'm', 1))
  clock.t = Date.UTC(2025, 0, 1)
  t.equal(lim.admit(c, 'm', 1), null)
})

t.test('the allowlist and the body limit come first, refuse with their own codes and count nothing', async (t) => {
  const { lim } = limiter(T0)
  const c = call({ models: ['gpt-4o*'], maxBodyBytes: 1000, rpm: 1 }, { models: ['gpt-4o-mini*', 'claude-*'] })
  const m = refused(lim.admit(c, 'gpt-4', 5000))
  t.same({ code: m.code, param: m.param, headers: m.headers, retryAfterMs: m.retryAfterMs }, { code: 'model_not_allowed', param: 'model', headers: {}, retryAfterMs: null })
  t.match(m.message, /key's allowed models/)
  const am = refused(lim.admit(c, 'gpt-4o', 10))
  t.equal(am.code, 'model_not_allowed')
  t.match(am.message, /account's allowed models/)
  const b = refused(lim.admit(c, 'gpt-4o-mini', 1001))
  t.same({ code: b.code, param: b.param, headers: b.headers }, { code: 'body_too_large', param: null, headers: {} })
  t.equal(lim.usage({ keyId: KEY_ID }).minuteRequests, 0)
  t.equal(lim.admit(c, 'gpt-4o-mini', 1000), null, 'a body at the limit passes')
  t.equal(refused(lim.admit(c, 'gpt-4o-mini', 10)).code, 'rate_limited')
  t.equal(lim.admit(call({ models: ['x'] }), null, 10), null, 'no model named: the allowlist does not apply')
})

t.test('seed: the stored use of the current windows counts, for the key and summed for the account', async (t) => {
  const { lim } = limiter(T0)
  lim.seed([
    { accountId: ACCOUNT_ID, keyId: 'k1', minuteRequests: 5, minuteTokens: 700, dayUsd: 1.25, monthUsd: 30 },
    { accountId: ACCOUNT_ID, keyId: 'k2', minuteRequests: 1, minuteTokens: 50, dayUsd: 0.5, monthUsd: 2 },
    { accountId: 'other', keyId: 'k3', minuteRequests: 0, minuteTokens: 0, dayUsd: 0, monthUsd: 0.000001 },
  ])
  t.same(lim.usage({ keyId: 'k1' }), {
    minuteRequests: 5, minuteTokens: 700, dayUsd: 1.25, monthUsd: 30,
    minuteResetMs: Date.UTC(2024, 5, 12, 10, 21), dayResetMs: Date.UTC(2024, 5, 13), monthResetMs: Date.UTC(2024, 6, 1),
  })
  const acct = lim.usage({ accountId: ACCOUNT_ID })
  t.same([acct.minuteRequests, acct.minuteTokens, acct.dayUsd, acct.monthUsd], [6, 750, 1.75, 32])
  t.equal(lim.usage({ accountId: 'other' }).monthUsd, 0.000001)
  t.equal(refused(lim.admit(call({ rpm: 5 }, {}, 'k1'), 'm', 1)).code, 'rate_limited', 'seeded requests count against rpm')
  t.equal(refused(lim.admit(call({}, { budgetDayUsd: 1.75 }, 'k9'), 'm', 1)).code, 'budget_exceeded', "and seeded spend against the account's budget")
  const unknown = lim.usage({ keyId: 'never-seen' })
  t.same([unknown.minuteRequests, unknown.minuteTokens, unknown.dayUsd, unknown.monthUsd], [0, 0, 0, 0], 'an unknown key has no use')
})

t.test('subjects whose every window has ended are dropped when a month starts', async (t) => {
  const { lim, clock } = limiter(Date.UTC(2024, 0, 31, 23, 59))
  for (let i = 0; i < 25; i++) lim.admit(call({}, {}, `one-off-${i}`, `acct-${i % 5}`), 'm', 1)
  t.equal(lim.subjectCount, 30)
  clock.t = Date.UTC(2024, 1, 1, 0, 0, 1)
  lim.admit(call({}, {}, 'one-off-0', 'acct-0'), 'm', 1)
  await until(() => lim.subjectCount === 2, { ms: 2000, what: 'the sweep' })
  t.equal(lim.usage({ keyId: 'one-off-0' }).minuteRequests, 1, 'the one in use this month stays')
  await lim.close()
})

/** An in-memory store of shared counters, whose state the test switches to play Redis going away. */
class MemoryCounters implements SharedCounters {
  readonly counters = new Map<string, number>()
  state: 'connecting' | 'ready' | 'down' = 'ready'
  generation = 1
  lastError: string | null = null
  /** Set to make the next syncs fail after (true) or before (false) applying. */
  failing: { sent: boolean } | null = null
  syncs = 0

  async sync (batch: SyncBatch): Promise<SyncResult> {
    this.syncs++
    if (this.failing !== null && !this.failing.sent) return { ok: false, sent: false, reason: 'not connected' }
    const totals: number[] = []
    for (let i = 0; i < batch.names.length; i++) {
      const name = batch.names[i]!
      if (batch.floors[i]! > 0 && !this.counters.has(name)) this.counters.set(name, batch.floors[i]!)
      const total = (this.counters.get(name) ?? 0) + batch.adds[i]!
      if (batch.adds[i]! > 0 || this.counters.has(name)) this.counters.set(name, total)
      totals.push(total)
    }
    if (this.failing !== null) return { ok: false, sent: true, reason: 'timeout' }
    return { ok: true, totals }
  }

  async close (): Promise<void> {}

  get (name: string): number {
    return this.counters.get(name) ?? 0
  }
}

t.test('the sync: deltas sent once, totals read back, fallback and recovery told once, floors after a restart', async (t) => {
  const store = new MemoryCounters()
  const warnings: Array<[string, object]> = []
  const clock = { t: T0 }
  const options = { now: () => clock.t, shared: store, syncMs: 5, warn: (msg: string, fields: object) => { warnings.push([msg, fields]) } }
  const a = new Limiter(options)
  const b = new Limiter(options)
  t.teardown(async () => { await a.close(); await b.close() })
  const c = call({ rpm: 10 })
  const minute = Date.UTC(2024, 5, 12, 10, 20)
  const requestsName = `k:${KEY_ID}:requests:${minute}`
  await until(() => a.mode === 'shared' && b.mode === 'shared', { ms: 2000, what: 'first sync' })
  for (let i = 0; i < 3; i++) t.equal(a.admit(c, 'm', 1), null)
  for (let i = 0; i < 2; i++) t.equal(b.admit(c, 'm', 1), null)
  a.record(KEY_ID, ACCOUNT_ID, 40, 0.0000015, T0)
  await until(() => store.get(requestsName) === 5 && a.usage({ keyId: KEY_ID }).minuteRequests === 5 && b.usage({ keyId: KEY_ID }).minuteRequests === 5,
    { ms: 2000, what: 'shared total of 5, read back by both' })
  t.equal(a.usage({ keyId: KEY_ID }).minuteTokens, 40)
  await until(() => b.usage({ keyId: KEY_ID }).minuteTokens === 40, { ms: 2000, what: 'tokens shared' })
  t.equal(store.get(`k:${KEY_ID}:day_microusd:${Date.UTC(2024, 5, 12)}`), 1, 'whole micro-dollars are sent, the fraction is kept')
  t.equal(store.get(`a:${ACCOUNT_ID}:month_microusd:${Date.UTC(2024, 5, 1)}`), 1)
  t.equal(a.usage({ keyId: KEY_ID }).dayUsd, 0.000002, 'locally the fraction still counts (rounded to micro-dollars for show)')
  for (const name of store.counters.keys()) t.notMatch(name, /tgk_/)

  // Redis away: nothing is sent; each instance goes on with the last totals plus its own counts.
  store.state = 'down'
  store.lastError = 'connect ECONNREFUSED'
  await until(() => a.mode === 'fallback' && b.mode === 'fallback', { ms: 2000, what: 'fallback' })
  for (let i = 0; i < 3; i++) t.equal(a.admit(c, 'm', 1), null)
  t.equal(a.usage({ keyId: KEY_ID }).minuteRequests, 8)
  t.equal(b.usage({ keyId: KEY_ID }).minuteRequests, 5, 'b does not see them while Redis is away')
  const syncs = store.syncs
  await sleep(50)
  t.equal(store.syncs, syncs, 'no sync is attempted while down')
  t.equal(warnings.length, 2, 'one warning per instance for the episode')
  t.same(warnings[0], ['limits: Redis is unreachable; each instance enforces the limits on its own counts until it is back', { reason: 'connect ECONNREFUSED' }])

  // Back, but empty (a restart without persistence), on a new connection: the floors restore what was known.
  store.counters.clear()
  store.generation = 2
  store.state = 'ready'
  await until(() => a.mode === 'shared' && b.mode === 'shared', { ms: 2000, what: 'recovery' })
  await until(() => b.usage({ keyId: KEY_ID }).minuteRequests === 8, { ms: 2000, what: "a's counts made while away reach b" })
  t.equal(store.get(requestsName), 8, 'the 3 made while away were sent once, on top of the restored 5')
  t.equal(warnings.length, 4)
  t.equal(warnings[2]![0], 'limits: Redis is back; limits are shared across instances again')

  // A sync that was written but not answered is never sent again, and the limiter does not forget it.
  store.failing = { sent: true }
  t.equal(a.admit(c, 'm', 1), null)
  await until(() => a.mode === 'fallback', { ms: 2000, what: 'lost answer' })
  t.equal(store.get(requestsName), 9, 'it was applied')
  t.equal(a.usage({ keyId: KEY_ID }).minuteRequests, 9)
  store.failing = null
  await until(() => a.mode === 'shared', { ms: 2000, what: 'answers again' })
  t.equal(store.get(requestsName), 9, 'and not applied twice')
  // A sync refused before sending keeps its deltas for the next one.
  store.failing = { sent: false }
  t.equal(a.admit(c, 'm', 1), null)
  await until(() => a.mode === 'fallback', { ms: 2000, what: 'not sent' })
  t.equal(store.get(requestsName), 9)
  store.failing = null
  await until(() => store.get(requestsName) === 10, { ms: 2000, what: 'sent once back' })
  await until(() => b.usage({ keyId: KEY_ID }).minuteRequests === 10, { ms: 2000, what: 'b sees 10' })
  t.equal(refused(b.admit(c, 'm', 1)).code, 'rate_limited', 'the shared limit holds on the other instance')
  t.equal(b.usage({ keyId: KEY_ID }).minuteRequests, 10)
})

t.test('a shared limiter that never connected stays in fallback without a warning; close sends the last counts', async (t) => {
  const store = new MemoryCounters()
  store.state = 'connecting'
  const warnings: string[] = []
  const lim = new Limiter({ shared: store, syncMs: 5, warn: (msg) => { warnings.push(msg) } })
  t.equal(lim.mode, 'fallback')
  t.equal(lim.admit(call({ rpm: 1 }), 'm', 1), null)
  await sleep(50)
  t.equal(store.syncs, 0, 'no sync while connecting')
  t.same(warnings, [])
  store.state = 'ready'
  await lim.close()
  t.equal(store.syncs, 1, 'close made one last sync')
  t.equal([...store.counters.entries()].filter(([n]) => n.startsWith(`k:${KEY_ID}:requests:`)).map(([, v]) => v)[0], 1)
})
