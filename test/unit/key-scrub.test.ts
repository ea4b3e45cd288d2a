// The store worker's tracegate-key scrub (src/store/worker/key-scrub.ts) on the bytes it is given: keys and
// cut keys replaced, as written, with JSON escapes, or split between stream deltas; JSON and events kept
// valid, every other byte (UTF-8 included) kept, no copy without a key.
import t from 'tap'
import { generateKey } from '../../src/auth/keys.js'
import { KEY_PLACEHOLDER, withoutTracegateKeys } from '../../src/store/worker/key-scrub.js'

const key = generateKey()
const text = (s: string): Buffer => Buffer.from(s, 'utf8')
const scrubbed = (s: string, streaming = false): string => Buffer.from(withoutTracegateKeys(text(s), streaming)).toString('utf8')

t.test('a text without a key is returned as it is, not copied', async (t) => {
  const b = text('{"messages":[{"role":"user","content":"café tgk_short and tgk_"}]}')
  t.equal(withoutTracegateKeys(b, false), b)
})

t.test('whole keys, keys cut to 16 characters and more, several in one text', async (t) => {
  const cut = key.slice(0, 4 + 16)
  const json = JSON.stringify({ content: `mine is ${key}, yours was ${cut}, not ${key.slice(0, 4 + 15)}. Zoë 😀 ${generateKey()}` })
  const out = scrubbed(json)
  t.notOk(out.includes(key.slice(4, 20)), 'no piece of the key is left')
  t.same(JSON.parse(out), { content: `mine is ${KEY_PLACEHOLDER}, yours was ${KEY_PLACEHOLDER}, not ${key.slice(0, 4 + 15)}. Zoë 😀 ${KEY_PLACEHOLDER}` }, 'valid JSON, the rest unchanged')
})

t.test('server-sent events stay events', async (t) => {
  const events = `data: {"delta":"${key}"}\n\ndata: [DONE]\n\n`
  t.equal(scrubbed(events), `data: {"delta":"${KEY_PLACEHOLDER}"}\n\ndata: [DONE]\n\n`)
  t.equal(scrubbed(events, true), `data: {"delta":"${KEY_PLACEHOLDER}"}\n\ndata: [DONE]\n\n`, 'read as a stream')
})

t.test('a view on a larger buffer is read within its bounds', async (t) => {
  const whole = text(`${key}|between|${key}`)
  const view = new Uint8Array(whole.buffer, whole.byteOffset + key.length, 9)
  t.equal(Buffer.from(withoutTracegateKeys(view, false)).toString('utf8'), '|between|')
})

/** Any 8-character piece of the key's random part left in a text. */
const pieces = (out: string, k = key): string[] => {
  const found: string[] = []
  for (let i = 4; i + 8 <= k.length; i++) if (out.includes(k.slice(i, i + 8))) found.push(k.slice(i, i + 8))
  return found
}
/** A JSON string's inner text with every character from `from` to `to` written as a \u escape. */
const escaped = (s: string, from: number, to: number): string =>
  [...s].map((c, i) => i >= from && i < to ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` : c).join('')

t.test('a key written with JSON escapes is scrubbed in the decoded value, the JSON still valid', async (t) => {
  const forms = [
    escaped(key, 0, 1), // \u0074gk_…
    escaped(key, 3, 4), // tgk\u005f…
    escaped(key, 10, 12), // escapes inside the random part
    escaped(key, 0, key.length), // every character
    `${key.slice(0, 3)}\\u005F${key.slice(4)}`, // upper-case hex
  ]
  for (const form of forms) {
    const json = `{"messages":[{"role":"user","content":"caf\\u00e9 \\"quoted\\" ${form} end"}]}`
    const out = scrubbed(json)
    t.notOk(out.includes('tgk_') || pieces(out).length > 0, `${form.slice(0, 16)}…: no piece of the key`)
    t.same(JSON.parse(out), { messages: [{ role: 'user', content: `café "quoted" ${KEY_PLACEHOLDER} end` }] }, `${form.slice(0, 16)}…: valid JSON, the rest of the value as it was`)
  }
  const nested = JSON.stringify({ a: [{ b: `x${key}` }], c: { d: [1, `${key}!`] } }).replace(/tgk_/g, '\\u0074gk_')
  t.same(JSON.parse(scrubbed(nested)), { a: [{ b: `x${KEY_PLACEHOLDER}` }], c: { d: [1, `${KEY_PLACEHOLDER}!`] } }, 'values at any depth')
  t.same(JSON.parse(scrubbed(JSON.stringify({ [key]: `\u00e9${key}` }).replace('é', '\\u00e9'))), { [KEY_PLACEHOLDER]: `é${KEY_PLACEHOLDER}` }, 'a literal object key is scrubbed in the raw text')
})

/** An alpha stream whose content deltas are `parts`, as the provider sends it. */
const alphaStream = (parts: string[]): string => parts.map((p) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: p } }] })}\n\n`).join('') + 'data: [DONE]\n\n'
const contents = (sse: string): string => [...sse.matchAll(/^data: (\{.*)$/gm)].map((m) => JSON.parse(m[1]!).choices[0].delta.content).join('')

t.test('a key split between stream deltas is scrubbed in the text they assemble, every event still valid', async (t) => {
  const answer = `Your key is ${key} as asked.`
  const at = answer.indexOf('tgk_')
  const splits = [[at + 1], [at + 2], [at + 3], [at + 4], [at + 10], [at + 24], [at + 1, at + 2, at + 3], [at + 2, at + 20, at + 30]]
  for (const cuts of splits) {
    const parts: string[] = []
    let from = 0
    for (const c of cuts) { parts.push(answer.slice(from, c)); from = c }
    parts.push(answer.slice(from))
    const out = scrubbed(alphaStream(parts), true)
    t.same(pieces(out), [], `cut at ${cuts.map((c) => c - at).join(',')}: no piece of the key`)
    t.equal(contents(out), `Your key is ${KEY_PLACEHOLDER} as asked.`, `cut at ${cuts.map((c) => c - at).join(',')}: the answer with its placeholder`)
    t.equal(out.split('\n\n').length, alphaStream(parts).split('\n\n').length, 'every event kept')
  }
  const escapedParts = alphaStream([`Key: ${key.slice(0, 2)}`, key.slice(2, 9), `${key.slice(9)}.`]).replace('"gk_', '"\\u0067k_')
  t.equal(contents(scrubbed(escapedParts, true)), `Key: ${KEY_PLACEHOLDER}.`, 'split and escaped')
})

t.test('beta events and a gamma JSON-array stream: a split key scrubbed per path', async (t) => {
  const beta = [`Use ${key.slice(0, 3)}`, `${key.slice(3)} now`].map((p) => `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: p } })}\n\n`).join('')
  const betaOut = scrubbed(beta, true)
  t.same(pieces(betaOut), [])
  t.equal([...betaOut.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!).delta.text).join(''), `Use ${KEY_PLACEHOLDER} now`)
  const gamma = JSON.stringify([`Use ${key.slice(0, 1)}`, `${key.slice(1)} now`].map((p) => ({ candidates: [{ content: { role: 'model', parts: [{ text: p }] } }] })), null, 1)
  const gammaOut = scrubbed(gamma, true)
  t.same(pieces(gammaOut), [])
  t.equal(JSON.parse(gammaOut).map((c: any) => c.candidates[0].content.parts[0].text).join(''), `Use ${KEY_PLACEHOLDER} now`)
})

t.test('the cheap gate: texts that cannot hold a key are returned as they are, not decoded or copied', async (t) => {
  const python = text('{"messages":[{"role":"user","content":"caf\\u00e9 \\u00fcber \\u4e2d tgk short"}]}')
  t.equal(withoutTracegateKeys(python, false), python, 'escapes of characters no key has (\\u00e9, \\u4e2d)')
  const beta = text('event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"task_id"}}\n\n')
  t.equal(withoutTracegateKeys(beta, true), beta, 'a beta stream without a key')
  const underscore = text(alphaStream(['__init', '__ of tg', 'k_short']))
  t.equal(withoutTracegateKeys(underscore, true), underscore, 'a stream through the gate with no key in its text: the same bytes')
})
