// What the registry answers for generic code, from the provider modules alone: which provider a request
// on a shared path is meant for (the models route, the mock's 404s), each provider's mock dialect and
// span name, and a minimal request in each provider's own shape (the detection warm-up). Runs with the
// test provider delta registered (test-providers.ts), so a fourth provider is held to the same rules.
import '../fixtures/providers/test-providers.js'
import t from 'tap'
import { dialectForPath, dialectForRequest, DIALECTS, modelsRouteOwners, PROVIDERS, registerProvider, type RequestSink } from '../../src/providers/index.js'
import type { MockDialect } from '../../src/mock-provider/dialect.js'
import { forEachDataLine, sseData } from '../../src/providers/sse.js'

const headers = (h: Record<string, string>) => (name: string): string => h[name] ?? ''

t.test('GET /v1/models: Anthropic\'s SDK headers pick beta, Gemini\'s gamma, anything else alpha', async (t) => {
  const owners = modelsRouteOwners('/v1/models')
  t.same(owners.map((d) => d.name), ['alpha', 'beta', 'gamma'])
  t.equal(dialectForRequest(owners, headers({ 'x-goog-api-key': 'k' }))?.name, 'gamma')
  t.equal(dialectForRequest(owners, headers({ 'anthropic-version': '2023-06-01' }))?.name, 'beta')
  t.equal(dialectForRequest(owners, headers({ 'x-api-key': 'k' }))?.name, 'beta')
  t.equal(dialectForRequest(owners, headers({ authorization: 'Bearer k', 'anthropic-version': '2023-06-01' }))?.name, 'beta')
  t.equal(dialectForRequest(owners, headers({ authorization: 'Bearer k' }))?.name, 'alpha')
  t.equal(dialectForRequest(owners, headers({}))?.name, 'alpha', 'no key at all: the provider that claims no headers')
  t.same(modelsRouteOwners('/v1beta/models').map((d) => d.name), ['gamma'])
  t.same(modelsRouteOwners('/v1alpha/models').map((d) => d.name), ['gamma'])
  t.same(modelsRouteOwners('/delta/v2/models').map((d) => d.name), ['delta'])
  t.equal(dialectForRequest(modelsRouteOwners('/nowhere'), headers({})), null)
})

t.test('a path no provider serves: the provider whose routes share its first segment, then its SDK headers', async (t) => {
  t.equal(dialectForPath('/v1beta/models/gemini-2.5-flash:countTokens', headers({})).name, 'gamma')
  t.equal(dialectForPath('/v1/embeddings', headers({})).name, 'alpha')
  t.equal(dialectForPath('/v1/embeddings', headers({ 'x-api-key': 'k' })).name, 'beta')
  t.equal(dialectForPath('/delta/v1/old', headers({})).name, 'delta')
  t.equal(dialectForPath('/elsewhere', headers({ 'x-goog-api-key': 'k' })).name, 'gamma')
  t.equal(dialectForPath('/elsewhere', headers({ 'x-delta-key': 'k' })).name, 'delta')
  t.equal(dialectForPath('/', headers({})).name, 'alpha')
})

t.test('every provider names its mock dialect and its span name', async (t) => {
  t.same(PROVIDERS, ['alpha', 'beta', 'gamma', 'delta'])
  for (const p of PROVIDERS) {
    const { mockDialect } = await import(DIALECTS[p].mockModule) as { mockDialect: MockDialect }
    t.equal(mockDialect.name, p, `${p}: its mock module serves it`)
    t.match(DIALECTS[p].otelSystem, /^[a-z][a-z0-9.]*$/, `${p}: span name ${DIALECTS[p].otelSystem}`)
  }
  t.same(PROVIDERS.map((p) => DIALECTS[p].otelSystem).slice(0, 3), ['openai', 'anthropic', 'gcp.gemini'], 'the conventions\' names')
  t.throws(() => { registerProvider(DIALECTS.alpha) }, /registered already/)
})

t.test('a sample body is in the provider\'s own shape: its walk finds the system prompt, then the question', async (t) => {
  for (const p of PROVIDERS) {
    const texts: Array<[string, string]> = []
    const sink: RequestSink = {
      full: false,
      get size () { return texts.length },
      text (_m, role, _path, text) {
        if (typeof text !== 'string' || text === '') return false
        texts.push([role, text])
        return true
      },
      other () {},
    }
    DIALECTS[p].walkRequest(DIALECTS[p].sampleBody('warm up', 'Answer briefly.'), sink)
    t.same(texts, [['system', 'Answer briefly.'], ['user', 'warm up']], p)
    t.equal(DIALECTS[p].promptText(DIALECTS[p].sampleBody('warm up')).trim(), 'warm up', `${p}: prompt text`)
  }
  t.same(DIALECTS[PROVIDERS[0]!].sampleBody('warm up'), { messages: [{ role: 'user', content: 'warm up' }] }, 'the warm-up body')
})

t.test('data lines: one reader for the payload offsets and the parsed events', async (t) => {
  const text = 'data: {"a":1}\n\nid: 2\nevent: x\ndata:{"b":2}\r\n\r\n: comment\ndata: [DONE]\n\ndata: \n\n'
  const spans: string[] = []
  forEachDataLine(text, (start, end) => { spans.push(text.slice(start, end)) })
  t.same(spans, ['{"a":1}', '{"b":2}', '[DONE]', ''])
  t.same(sseData(text).map((e) => e.value), [{ a: 1 }, { b: 2 }], 'the sentinel and empty payloads carry no data')
  t.equal(sseData(text)[0]!.end, text.indexOf('\n'), 'end: just past the data line')
})
