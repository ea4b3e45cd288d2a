// The top-level scan and the cut: validity, member spans, escaped keys, and byte-exact removal.
import t from 'tap'
import { cutMembers, isValidJson, Kind, scanTopLevel } from '../../src/proxy/scan.js'

const b = (s: string): Buffer => Buffer.from(s, 'utf8')

function cut (s: string, names: string[]): string {
  const buf = b(s)
  const members = scanTopLevel(buf)!
  const idx = new Set(members.flatMap((m, i) => names.includes(m.name) ? [i] : []))
  return cutMembers(buf, members, idx).toString('utf8')
}

t.test('validity', async (t) => {
  t.ok(isValidJson(b('{"a":1}')))
  t.ok(isValidJson(b(' \n{ "a" : [1, {"b": "c\\"}"}] } ')))
  t.notOk(isValidJson(b('')))
  t.notOk(isValidJson(b('{"a":1')))
  t.notOk(isValidJson(b('{"a":1}}')))
  t.notOk(isValidJson(b("{'a':1}")))
  t.notOk(isValidJson(b('{"a":01}')))
  t.notOk(isValidJson(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])), 'invalid UTF-8 inside a string')
  t.notOk(isValidJson(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3, 0x22, 0x7d])), 'truncated UTF-8 sequence')
  t.ok(isValidJson(b('{"é":"日本語 😀"}')))
  t.ok(isValidJson(b('[1,2]')), 'valid JSON; the object check is the scanner\'s')
})

t.test('members and their spans', async (t) => {
  const s = '{ "model" : "gpt", "n":12345678901234567890,"messages":[{"content":"a}\\"]"}], "ok":true,"no":false,"z":null,"o":{"x":[1]} }'
  const buf = b(s)
  const ms = scanTopLevel(buf)!
  t.same(ms.map((m) => m.name), ['model', 'n', 'messages', 'ok', 'no', 'z', 'o'])
  t.same(ms.map((m) => m.kind), [Kind.String, Kind.Number, Kind.Array, Kind.True, Kind.False, Kind.Null, Kind.Object])
  t.same(ms.map((m) => buf.toString('utf8', m.valueStart, m.end)),
    ['"gpt"', '12345678901234567890', '[{"content":"a}\\"]"}]', 'true', 'false', 'null', '{"x":[1]}'])
  t.equal(buf.toString('utf8', ms[0]!.start, ms[0]!.end), '"model" : "gpt"')
  t.same(scanTopLevel(b('{}')), [])
  t.same(scanTopLevel(b(' { } ')), [])
  t.equal(scanTopLevel(b('[{"api_key":"x"}]')), null)
  t.equal(scanTopLevel(b('"str"')), null)
})

t.test('escaped key spellings decode to the same name', async (t) => {
  const ms = scanTopLevel(b('{"api\\u005fkey":"a","a\\\\b":1,"q\\"":2}'))!
  t.same(ms.map((m) => m.name), ['api_key', 'a\\b', 'q"'])
})

t.test('a string ending in escaped backslashes closes where it should', async (t) => {
  const ms = scanTopLevel(b('{"a":"x\\\\","b":"\\\\\\"","c":1}'))!
  t.same(ms.map((m) => m.name), ['a', 'b', 'c'])
})

t.test('cut keeps every other byte', async (t) => {
  t.equal(cut('{"api_key":"k","model":"m"}', ['api_key']), '{"model":"m"}')
  t.equal(cut('{"model":"m","api_key":"k"}', ['api_key']), '{"model":"m"}')
  t.equal(cut('{"model":"m", "api_key":"k" ,"x":1}', ['api_key']), '{"model":"m", "x":1}')
  t.equal(cut('{"api_key":"k"}', ['api_key']), '{}')
  t.equal(cut('{ "api_key" : "k" }', ['api_key']), '{  }')
  t.equal(cut('{"a":1,"k1":2,"k2":3}', ['k1', 'k2']), '{"a":1}')
  t.equal(cut('{"k1":2,"a":1,"k2":3}', ['k1', 'k2']), '{"a":1}')
  t.equal(cut('{"k1":2,"k2":3,"a":1}', ['k1', 'k2']), '{"a":1}')
  t.equal(cut('{"k1":2,"k2":3}', ['k1', 'k2']), '{}')
  const raw = '{\n  "seed": 12345678901234567890,\n  "api_key": "tgk_x",\n  "s": "caf\\u00e9 \\ud83d\\ude00",\n  "z":1.50e+10\n}'
  t.equal(cut(raw, ['api_key']), '{\n  "seed": 12345678901234567890,\n  "s": "caf\\u00e9 \\ud83d\\ude00",\n  "z":1.50e+10\n}')
  const out = cut(raw, ['api_key'])
  t.ok(isValidJson(b(out)), 'the cut body is still valid JSON')
})

t.test('cut bodies stay valid for every subset of members', async (t) => {
  const s = '{"a":1, "b":[2], "c":{"d":3} ,"e":"f"}'
  const buf = b(s)
  const ms = scanTopLevel(buf)!
  for (let mask = 0; mask < 1 << ms.length; mask++) {
    const idx = new Set<number>()
    for (let i = 0; i < ms.length; i++) if (mask & (1 << i)) idx.add(i)
    const out = cutMembers(buf, ms, idx)
    const parsed = JSON.parse(out.toString('utf8')) as Record<string, unknown>
    t.same(Object.keys(parsed), ms.filter((_, i) => !idx.has(i)).map((m) => m.name), `mask ${mask}`)
  }
})

t.test('numbers outside the 64-bit range are still valid JSON', async (t) => {
  for (const n of ['-12345678901234567890', '18446744073709551616', '1e400', '-0.0000000000000000000000000001']) {
    t.ok(isValidJson(b(`{"seed":${n}}`)), n)
  }
  t.notOk(isValidJson(b('{"seed":1e}')))
  t.notOk(isValidJson(b('{"seed":-}')))
  t.notOk(isValidJson(b('{"seed":NaN}')))
})
