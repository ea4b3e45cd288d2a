// The detector (src/scan/extract.ts) and the dashboard's conversation view
// (src/dashboard/ui/conversation.ts) both walk a request through the provider module's walkRequest: the
// detector with a sink that only takes texts, the dashboard with one that also takes labels, displays
// and what is not text. A finding names its text by segment index, so the full walk must read exactly
// the texts the detector reads, in the same order. This walks bodies of every provider, with content
// parts, tool calls and results, images and empty parts, both ways and compares them.
import t from 'tap'
import { DIALECTS, type ProviderName, type RequestSink } from '../../src/providers/index.js'
import { extractSegments } from '../../src/scan/extract.js'

interface Seen { readonly message: number; readonly role: string; readonly text: string; readonly segment: number | null }

class FullSink implements RequestSink {
  readonly full = true
  readonly seen: Seen[] = []
  #segment = 0
  get size (): number { return this.seen.length }
  text (message: number, role: string, _path: string, text: unknown): boolean {
    if (typeof text !== 'string' || text === '') return false
    this.seen.push({ message, role, text, segment: this.#segment++ })
    return true
  }

  other (message: number, role: string): void {
    this.seen.push({ message, role, text: '', segment: null })
  }
}

const BODIES: Array<[ ProviderName, string, unknown ]> = [
  ['alpha', 'messages, content parts, tool calls and results', { messages: [
    { role: 'system', content: 'sys' },
    { role: 'developer', content: [{ type: 'text', text: 'dev1' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }, { type: 'text', text: '' }, { type: 'input_text', text: 'dev2' }] },
    { role: 'assistant', content: 'a', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"x":1}' } }, { id: 'c2', function: { name: 'g', arguments: '' } }] },
    { role: 'tool', tool_call_id: 'c1', content: [{ type: 'text', text: 'res' }] },
    { role: 'function', name: 'old', content: 'fres' },
    { role: 'user', content: null }, 'junk', { role: 'user' },
  ] }],
  ['alpha', 'legacy function_call', { messages: [
    { role: 'assistant', content: null, function_call: { name: 'f', arguments: '{"q":"x"}' } },
    { role: 'assistant', function_call: { name: 'g', arguments: '' } },
  ] }],
  ['beta', 'system blocks, documents, thinking, tool use and results', { system: [{ type: 'text', text: 's1' }, { type: 'text', text: 's2' }], messages: [
    { role: 'user', content: [{ type: 'document', source: { type: 'text', data: 'doc' }, title: 'T' }, { type: 'image', source: { type: 'base64' } }, { type: 'text', text: 'u' }] },
    { role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm' }, { type: 'tool_use', id: 't', name: 'n', input: { a: 'one', b: ['two', 3] } }, { type: 'tool_use', id: 'u', name: 'm', input: {} }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [{ type: 'text', text: 'r1' }, { type: 'text', text: 'r2' }] }, { type: 'tool_result', tool_use_id: 'x', content: 'r3' }, { type: 'tool_result', tool_use_id: 'y' }] },
  ] }],
  ['gamma', 'system instruction, inline data, function calls and responses', { system_instruction: { parts: [{ text: 'si' }] }, contents: [
    { role: 'user', parts: [{ text: 'q' }, { inlineData: { mimeType: 'image/png', data: 'x' } }] },
    { role: 'model', parts: [{ functionCall: { name: 'f', args: { a: 'v' } } }, { text: 'm' }, { text: 't', functionCall: { name: 'g', args: { k: 'w' } } }] },
    { parts: [{ functionResponse: { name: 'f', response: { out: 'o', n: 2, deep: ['x', { y: 'z' }] } } }, { functionResponse: { name: 'e', response: {} } }] },
  ] }],
]

for (const [provider, what, body] of BODIES) {
  t.test(`${provider}: ${what}`, async (t) => {
    const segments = extractSegments(provider, body)
    t.ok(segments.length > 0, `the detector reads ${segments.length} texts`)
    const sink = new FullSink()
    DIALECTS[provider].walkRequest(body as Record<string, unknown>, sink)
    t.ok(sink.seen.some((p) => p.segment === null), 'the full walk also shows what the detector does not read')
    const numbered = sink.seen.filter((p) => p.segment !== null)
    t.same(numbered.map((p) => ({ segment: p.segment, message: p.message, role: p.role, text: p.text })),
      segments.map((s, i) => ({ segment: i, message: s.message, role: s.role, text: s.text })),
      'same texts, same order, same numbers, same messages and roles')
  })
}
