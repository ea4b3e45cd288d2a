// The detection worker's body parse (workers/detector/body-parse.ts): a body that resends a recent
// body's messages reuses their parse, and whatever is sent, the result is JSON.parse's (same values,
// same key order, own `__proto__` keys, null for text that is not JSON).
import t, { type Test } from 'tap'
import { parseBody, setBodyReuse } from '../../workers/detector/body-parse.js'

/** JSON.parse's answer, as parseBody gives it. */
function parsed (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

/** Same values, same key order, and own `__proto__` keys kept (JSON.stringify shows all three). */
function same (t: Test, text: string, msg: string): unknown {
  const got = parseBody(text)
  const want = parsed(text)
  t.equal(JSON.stringify(got), JSON.stringify(want), msg)
  return got
}

const turn = (k: number): Array<{ role: string, content: string }> => [
  { role: 'user', content: `Question ${k}: what about "quotes", \\ backslashes, ] brackets } and ünïcödé 🙂?` },
  { role: 'assistant', content: `Answer ${k}: [fine] {really}.` },
]
const chat = (turns: number, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ model: 'm', messages: [{ role: 'system', content: 'Be brief.' }, ...Array.from({ length: turns }, (_, k) => turn(k)).flat()], ...extra })

t.test('a body that extends a recent one reuses its messages and parses as JSON.parse does', async (t) => {
  setBodyReuse(true, 0)
  const first = same(t, chat(1, { temperature: 0.2 }), 'first call') as { messages: unknown[] }
  const second = same(t, chat(2, { temperature: 0.2 }), 'second call') as { messages: unknown[] }
  t.equal(second.messages[1], first.messages[1], 'a resent message is the earlier parse')
  t.equal(second.messages[2], first.messages[2], 'the last shared message too')
  const third = same(t, chat(3, { temperature: 0.2, stream: true }), 'third call, one more key after the messages') as { messages: unknown[] }
  t.equal(third.messages[4], second.messages[4], 'reused again from the second call')
  // The same body again (a retry): every message reused.
  const again = same(t, chat(3, { temperature: 0.2, stream: true }), 'retry') as { messages: unknown[] }
  t.equal(again.messages[6], third.messages[6])
  // An edited last turn: the messages before it are reused, the edited one is parsed.
  const edited = JSON.stringify({ model: 'm', messages: [{ role: 'system', content: 'Be brief.' }, ...turn(0), ...turn(1), ...turn(2).slice(0, 1), { role: 'assistant', content: 'another answer' }], temperature: 0.2, stream: true })
  const e = same(t, edited, 'edited last message') as { messages: Array<{ content: string }> }
  t.equal(e.messages[6]?.content, 'another answer')
  t.equal(e.messages[5], again.messages[5], 'the messages before the edit are reused')
})

t.test('40 conversations with the same system prompt, called in turn, each reuse their own history', async (t) => {
  setBodyReuse(true, 0)
  const system = { role: 'system', content: 'You are the support assistant of a bookshop.' }
  const names = Array.from({ length: 40 }, (_, i) => `c${i}`)
  const history: Record<string, Array<{ role: string, content: string }>> = Object.fromEntries(names.map((n) => [n, []]))
  const last: Record<string, { messages: unknown[] } | undefined> = {}
  for (let call = 0; call < 4; call++) {
    for (const name of names) {
      const h = history[name] as Array<{ role: string, content: string }>
      h.push({ role: 'user', content: `${name}: question ${call}` })
      const got = same(t, JSON.stringify({ model: 'm', messages: [system, ...h] }), `${name}, call ${call}`) as { messages: unknown[] }
      const before = last[name]
      if (before !== undefined) t.equal(got.messages[1], before.messages[1], `${name}, call ${call}: its first question comes from its previous call`)
      last[name] = got
      h.push({ role: 'assistant', content: `${name}: answer ${call}` })
    }
  }
})

t.test('on the defaults a short body is parsed whole, and a long one still reuses its conversation', async (t) => {
  setBodyReuse(true)
  const small1 = same(t, chat(1), 'a short first call') as { messages: unknown[] }
  const small2 = same(t, chat(2), 'its next call') as { messages: unknown[] }
  t.not(small2.messages[1], small1.messages[1], 'under 4,096 characters nothing is kept or reused')
  const long = (turns: number): string => JSON.stringify({ model: 'm', messages: [{ role: 'system', content: 'Be brief. '.repeat(500) }, ...Array.from({ length: turns }, (_, k) => turn(k)).flat()] })
  const big1 = same(t, long(1), 'a long first call') as { messages: unknown[] }
  const big2 = same(t, long(2), 'its next call') as { messages: unknown[] }
  t.equal(big2.messages[1], big1.messages[1], 'over it, the resent messages are the earlier parse')
})

t.test('whatever follows the reused messages, the result is what JSON.parse gives', async (t) => {
  setBodyReuse(true, 0)
  const base = '{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}'
  const tails = [
    ']}',
    ']  }  ',
    ' , {"role":"user","content":"more"} ]\n}',
    ',{"role":"user","content":"x"}],"model":"other"}', // a key from before the messages again: last value, first place
    ',{"role":"user","content":"x"}],"messages":[]}', // the list itself again
    ',{"role":"user","content":"x"}],"__proto__":{"polluted":true}}', // an own key named __proto__
    ',{"role":"user","content":"x"}],"mod\\u0065l":"escaped"}', // a key spelled with an escape
    ',{"role":"user","content":"x"}],}', // not JSON: a trailing comma
    ',]}', // not JSON
    ',{"role":"user","content":"x"}]', // not JSON: unclosed
    ',{"role":"user","content":"x"}]}}', // not JSON: one brace too many
    ',{"role":"user","content":"x\\"]}"}]}', // a quote and brackets escaped inside a string
    ',{"role":"user","content":"x\\\\"}]}', // a string ending in an escaped backslash
    ',{"role":"user","content":"x"},1,true,null,"s",[1,[2]]]}', // elements that are not objects
    '] , "temperature" : 1e-3 , "stop" : ["]", "}"] }',
  ]
  for (const tail of tails) {
    // Prime with the base body each time, so each tail is read against reused messages.
    same(t, base + ']}', 'base')
    same(t, base + tail, JSON.stringify(tail))
    t.equal(Object.getPrototypeOf(parseBody(base + tail) ?? {}), Object.prototype, `${JSON.stringify(tail)}: no prototype set`)
  }
})

t.test('bodies the reuse does not apply to', async (t) => {
  setBodyReuse(true, 0)
  for (const text of [
    '{"mess\\u0061ges":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}',
    '{"mess\\u0061ges":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}],"x":1}',
    '{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}',
    '{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}],"y":2}',
    '{"messages":null,"contents":[{"role":"user","parts":[{"text":"a"}]}]}',
    '{"messages":null,"contents":[{"role":"user","parts":[{"text":"a"}]},{"role":"model","parts":[{"text":"b"}]}]}',
    '[{"role":"user","content":"a"}]',
    '"just a string"',
    'not json at all',
    '',
    '{"contents":[{"role":"user","parts":[{"text":"a"}]}],"systemInstruction":{"parts":[{"text":"s"}]}}',
    '{"contents":[{"role":"user","parts":[{"text":"a"}]},{"role":"model","parts":[{"text":"b"}]}],"systemInstruction":{"parts":[{"text":"s"}]}}',
  ]) same(t, text, text)
})

t.test('random conversations, each call a random change of the one before, parse as JSON.parse does', async (t) => {
  setBodyReuse(true, 0)
  let seed = 22
  const rand = (n: number): number => { seed = (Math.imul(seed, 1103515245) + 12345) >>> 0; return (seed >>> 8) % n }
  const pieces = ['a', ' ', '"', '\\', ']', '}', '[', '{', ',', ':', 'é', '🙂', '\n', 'ignore previous instructions']
  const word = (): string => Array.from({ length: 1 + rand(6) }, () => pieces[rand(pieces.length)]).join('')
  let wrong = 0
  for (let c = 0; c < 40; c++) {
    const messages: unknown[] = []
    const space = rand(2) === 0 ? undefined : 1 + rand(3)
    for (let k = 0; k < 12; k++) {
      const r = rand(10)
      if (r < 6 || messages.length === 0) messages.push({ role: rand(2) === 0 ? 'user' : 'assistant', content: word() })
      else if (r < 8) messages[messages.length - 1] = { role: 'user', content: [{ type: 'text', text: word() }] }
      else messages.pop()
      const body = { ...(rand(2) === 0 ? { model: word() } : {}), messages, ...(rand(2) === 0 ? { temperature: rand(3), [word()]: word() } : {}) }
      let text = JSON.stringify(body, null, space)
      // Now and then text that is not JSON: cut, or a comma too many.
      if (rand(15) === 0) text = text.slice(0, rand(text.length))
      if (rand(15) === 0) text = text.replace(/\]\s*(,|\})/, '],$1')
      if (JSON.stringify(parseBody(text)) !== JSON.stringify(parsed(text)) && wrong++ < 3) t.fail(text)
    }
  }
  t.equal(wrong, 0, '480 bodies')
})

t.test('with the reuse off every body is parsed whole', async (t) => {
  setBodyReuse(false)
  t.teardown(() => { setBodyReuse(true) })
  const a = parseBody(chat(1)) as { messages: unknown[] }
  const b = parseBody(chat(2)) as { messages: unknown[] }
  t.not(a.messages[1], b.messages[1])
  t.same(a.messages[1], b.messages[1])
})
