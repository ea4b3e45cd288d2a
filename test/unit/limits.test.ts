// Per-key limits (issue 14): reading a change and the model allowlist's patterns.
import t from 'tap'
import { TracegateError } from '../../src/errors.js'
import { applyPatch, modelMatcher, NO_LIMITS, parseLimitsPatch, type Limits, type LimitsPatch } from '../../src/limits/types.js'

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
})
