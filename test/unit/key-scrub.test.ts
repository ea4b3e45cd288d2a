// The store worker's tracegate-key scrub (src/store/worker/key-scrub.ts) on the bytes it is given: keys and
// cut keys replaced, JSON and events kept valid, every other byte (UTF-8 included) kept, no copy without a key.
import t from 'tap'
import { generateKey } from '../../src/auth/keys.js'
import { KEY_PLACEHOLDER, withoutTracegateKeys } from '../../src/store/worker/key-scrub.js'

const key = generateKey()
const text = (s: string): Buffer => Buffer.from(s, 'utf8')
const scrubbed = (s: string): string => Buffer.from(withoutTracegateKeys(text(s))).toString('utf8')

t.test('a text without a key is returned as it is, not copied', async (t) => {
  const b = text('{"messages":[{"role":"user","content":"café tgk_short and tgk_"}]}')
  t.equal(withoutTracegateKeys(b), b)
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
})

t.test('a view on a larger buffer is read within its bounds', async (t) => {
  const whole = text(`${key}|between|${key}`)
  const view = new Uint8Array(whole.buffer, whole.byteOffset + key.length, 9)
  t.equal(Buffer.from(withoutTracegateKeys(view)).toString('utf8'), '|between|')
})
