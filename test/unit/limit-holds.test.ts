// What a call holds while in flight: its estimate read from the request (each dialect's output cap), and the
// limiter holding it under a budget or tpm until the call's trace is settled, on the library's prices.
import t from 'tap'
import { Limiter, type LimitCall } from '../../src/limits/limiter.js'
import { DEFAULT_OUTPUT_TOKENS, estimateOf, outputCap } from '../../src/limits/reserve.js'
import { Pricing } from '../../src/pricing/index.js'
import { DIALECTS } from '../../src/providers/index.js'
import { scanTopLevel } from '../../src/proxy/scan.js'
import { NO_LIMITS, type Limits } from '../../src/domain/limits.js'

const pricing = new Pricing()

function cap (provider: 'alpha' | 'beta' | 'gamma', body: unknown): number | null {
  const raw = Buffer.from(JSON.stringify(body))
  return outputCap(DIALECTS[provider], raw, scanTopLevel(raw)!)
}

t.test('each dialect\'s output cap', async (t) => {
  t.equal(cap('alpha', { model: 'm', max_tokens: 50, max_completion_tokens: 70 }), 70, 'alpha: max_completion_tokens first')
  t.equal(cap('alpha', { model: 'm', max_tokens: 50 }), 50)
  t.equal(cap('alpha', { model: 'm', max_tokens: 'x' }), null, 'not a number: none')
  t.equal(cap('beta', { max_tokens: 1024, model: 'c' }), 1024)
  t.equal(cap('gamma', { contents: [], generationConfig: { temperature: 0, maxOutputTokens: 300 } }), 300)
  t.equal(cap('gamma', { contents: [], generationConfig: { temperature: 0 } }), null)
  t.equal(cap('gamma', { maxOutputTokens: 5 }), null, 'gamma reads it inside generationConfig only')
  const raw = Buffer.from(JSON.stringify({ model: 'm', messages: [] }))
  const limited: Limits = { ...NO_LIMITS, budgetDayUsd: 1 }
  t.same(estimateOf(DIALECTS.alpha, raw, scanTopLevel(raw)!, limited, NO_LIMITS), { promptTokens: raw.length, outputTokens: DEFAULT_OUTPUT_TOKENS }, 'no cap: the default')
  t.equal(estimateOf(DIALECTS.alpha, raw, scanTopLevel(raw)!, { ...NO_LIMITS, rpm: 5 }, NO_LIMITS), undefined, 'nothing held under rpm alone')
  const embed = Buffer.from(JSON.stringify({ model: 'text-embedding-3-small', input: 'hello' }))
  t.same(estimateOf(DIALECTS.alpha, embed, scanTopLevel(embed)!, limited, NO_LIMITS, 'embed'), { promptTokens: embed.length, outputTokens: 0 }, 'embeddings write no output: the prompt alone is held')
})

let next = 0
function call (key: Partial<Limits>, model: string | null, promptTokens: number, outputTokens: number, account: Partial<Limits> = {}): LimitCall {
  return {
    keyId: 'key-1', accountId: 'acct-1', key: { ...NO_LIMITS, ...key }, account: { ...NO_LIMITS, ...account },
    callId: `call-${next++}`, provider: 'alpha', model, estimate: { promptTokens, outputTokens },
  }
}

t.test('a budget: calls pass while spend plus holds is below it; a settled hold makes room, its cost counts', async (t) => {
  const lim = new Limiter({ pricing, hold: true })
  t.teardown(() => lim.close())
  // gpt-4o-mini: 1,000 tokens in at 0.15 and 1,000 out at 0.6 USD per million hold 0.00075 USD.
  const calls = [0, 1, 2, 3].map(() => call({ budgetDayUsd: 0.002 }, 'gpt-4o-mini', 1000, 1000))
  t.equal(lim.count(calls[0]!), null)
  t.equal(lim.count(calls[1]!), null)
  t.equal(lim.count(calls[2]!), null, '0.0015 held is below 0.002: the third passes')
  t.equal(lim.count(calls[3]!)?.code, 'budget_exceeded', '0.00225 held: the fourth is refused')
  t.equal(lim.holding, 3)
  lim.record('key-1', 'acct-1', 100, 0.0001, Date.now())
  lim.settle([calls[0]!.callId!, 'an-id-that-held-nothing'])
  t.equal(lim.holding, 2)
  t.equal(lim.usage({ keyId: 'key-1' }).dayUsd, 0.0001, 'the settled call\'s real cost counts')
  t.equal(lim.count(calls[3]!), null, '0.0001 spent + 0.0015 held: room again')
  lim.settle(calls.map((c) => c.callId!))
  t.equal(lim.holding, 0, 'every hold settled')
})

t.test('an account\'s budget holds its keys\' calls together', async (t) => {
  const lim = new Limiter({ pricing, hold: true })
  t.teardown(() => lim.close())
  const a = { ...call({}, 'gpt-4o-mini', 1000, 1000, { budgetMonthUsd: 0.001 }), keyId: 'key-a' }
  const b = { ...call({}, 'gpt-4o-mini', 1000, 1000, { budgetMonthUsd: 0.001 }), keyId: 'key-b' }
  t.equal(lim.count(a), null)
  t.equal(lim.count(b), null, '0.00075 held is below 0.001')
  t.equal(lim.count({ ...b, callId: 'third' })?.code, 'budget_exceeded', 'the account holds both keys\' calls')
})

t.test('tpm holds tokens', async (t) => {
  const lim = new Limiter({ pricing, hold: true })
  t.teardown(() => lim.close())
  t.equal(lim.count(call({ tpm: 3000 }, 'gpt-4o-mini', 1000, 1000)), null)
  t.equal(lim.count(call({ tpm: 3000 }, 'gpt-4o-mini', 1000, 1000)), null, '2,000 held is below 3,000')
  t.equal(lim.count(call({ tpm: 3000 }, 'gpt-4o-mini', 1000, 1000))?.code, 'rate_limited')
  t.equal(lim.count(call({ tpm: 3000 }, 'no-such-model', 1000, 1000))?.code, 'rate_limited', 'tpm needs no price')
})

t.test('a model with no price: refused under a budget only; nothing held without traces', async (t) => {
  const lim = new Limiter({ pricing, hold: false })
  t.teardown(() => lim.close())
  const r = lim.count(call({ budgetDayUsd: 10 }, 'no-such-model', 10, 10))
  t.equal(r?.code, 'model_not_priced')
  t.equal(r?.param, 'model')
  t.equal(lim.count(call({}, 'no-such-model', 10, 10, { budgetDayUsd: 10 }))?.code, 'model_not_priced', 'the account\'s budget')
  t.equal(lim.count(call({ rpm: 10 }, 'no-such-model', 10, 10)), null, 'no budget: admitted')
  t.equal(lim.count(call({ budgetDayUsd: 10 }, 'o1-pro', 10, 10)), null)
  t.equal(lim.holding, 0, 'hold off (traces off): nothing held')
})
