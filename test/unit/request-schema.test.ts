// Every text field of the three request formats reaches the detector, labelled by who wrote it.
// Below, each dialect's request schema is written out: every member that can hold text the model reads,
// nested, with the source it must be judged as; members that hold no text (ids, URLs, media types, type
// tags) are fixed values. A generator builds bodies that put a unique marker in every text field (every
// variant of every union at least once), and the test asserts that each marker lands in a segment with
// the right source, and that the dashboard's walk numbers the same texts.
import t from 'tap'
import { DIALECTS, type ProviderName, type RequestSink } from '../../src/providers/index.js'
import type { SpanSource } from '../../src/providers/types.js'
import { extractSegments } from '../../src/scan/extract.js'
import { sourceOf } from '../../workers/detector/spans.js'

type Node =
  | { readonly text: SpanSource }
  /** Text sent base64-encoded under a text media type (decoded before it is judged); `url`: as a data URL. */
  | { readonly b64: SpanSource, readonly url?: boolean }
  /** A JSON schema: its descriptions, titles, enum values and property names are read. */
  | { readonly schema: SpanSource }
  /** Free JSON (tool-call arguments, function responses): every string in it is read. */
  | { readonly json: SpanSource }
  | { readonly obj: Readonly<Record<string, Node | { readonly fixed: unknown }>> }
  | { readonly arr: Node }
  | { readonly oneOf: readonly Node[] }

const text = (s: SpanSource): Node => ({ text: s })
const fixed = (v: unknown): { readonly fixed: unknown } => ({ fixed: v })
const obj = (o: Record<string, Node | { readonly fixed: unknown }>): Node => ({ obj: o })
const arr = (n: Node): Node => ({ arr: n })
const oneOf = (...n: Node[]): Node => ({ oneOf: n })

// ---- alpha: OpenAI Chat Completions ----
const alphaContent = (s: SpanSource, ...parts: Node[]): Node => oneOf(text(s), arr(oneOf(obj({ type: fixed('text'), text: text(s) }), ...parts)))
const alphaFile = obj({ type: fixed('file'), file: obj({ filename: text('data'), file_data: { b64: 'data', url: true } }) })
const alphaFn = obj({ name: fixed('get_weather'), description: text('application'), parameters: { schema: 'application' } })
const ALPHA: Node = obj({
  model: fixed('gpt-4o'),
  messages: arr(oneOf(
    obj({ role: fixed('system'), content: alphaContent('application'), name: text('application') }),
    obj({ role: fixed('developer'), content: alphaContent('application'), name: text('application') }),
    obj({ role: fixed('user'), name: text('user'), content: alphaContent('user', obj({ type: fixed('image_url'), image_url: obj({ url: fixed('https://example.com/a.png') }) }), alphaFile) }),
    obj({
      role: fixed('assistant'),
      name: text('user'),
      refusal: text('user'),
      content: alphaContent('user', obj({ type: fixed('refusal'), refusal: text('user') })),
      tool_calls: arr(obj({ id: fixed('call_1'), type: fixed('function'), function: obj({ name: fixed('get_weather'), arguments: text('user') }) })),
      function_call: obj({ name: fixed('get_weather'), arguments: text('user') }),
    }),
    obj({ role: fixed('tool'), tool_call_id: fixed('call_1'), content: alphaContent('data') }),
    obj({ role: fixed('function'), name: text('application'), content: text('data') }),
  )),
  tools: arr(oneOf(
    obj({ type: fixed('function'), function: alphaFn }),
    obj({ type: fixed('custom'), custom: obj({ name: fixed('lookup'), description: text('application') }) }),
  )),
  functions: arr(alphaFn),
  response_format: obj({ type: fixed('json_schema'), json_schema: obj({ name: fixed('answer'), description: text('application'), schema: { schema: 'application' } }) }),
  prediction: obj({ type: fixed('content'), content: oneOf(text('data'), arr(obj({ type: fixed('text'), text: text('data') }))) }),
})

// ---- beta: Anthropic Messages ----
const betaText = (s: SpanSource): Node => obj({ type: fixed('text'), text: text(s) })
const betaSearch = obj({ type: fixed('search_result'), source: fixed('https://example.com/page'), title: text('data'), content: arr(betaText('data')) })
const betaDocument = obj({
  type: fixed('document'),
  title: text('data'),
  context: text('data'),
  source: oneOf(
    obj({ type: fixed('text'), media_type: fixed('text/plain'), data: text('data') }),
    obj({ type: fixed('base64'), media_type: fixed('text/plain'), data: { b64: 'data' } }),
    obj({ type: fixed('content'), content: oneOf(text('data'), arr(betaText('data'))) }),
  ),
})
const BETA: Node = obj({
  model: fixed('claude-sonnet-4-5'),
  max_tokens: fixed(100),
  system: oneOf(text('application'), arr(betaText('application'))),
  messages: arr(oneOf(
    obj({ role: fixed('user'), content: oneOf(text('user'), arr(oneOf(
      betaText('user'),
      obj({ type: fixed('image'), source: obj({ type: fixed('url'), url: fixed('https://example.com/a.png') }) }),
      betaDocument,
      betaSearch,
      obj({ type: fixed('tool_result'), tool_use_id: fixed('toolu_1'), content: oneOf(text('data'), arr(oneOf(betaText('data'), betaSearch, betaDocument))) }),
    ))) }),
    obj({ role: fixed('assistant'), content: oneOf(text('user'), arr(oneOf(
      betaText('user'),
      obj({ type: fixed('thinking'), thinking: text('user'), signature: fixed('sig') }),
      obj({ type: fixed('tool_use'), id: fixed('toolu_1'), name: fixed('get_weather'), input: { json: 'user' } }),
      obj({ type: fixed('server_tool_use'), id: fixed('srvtoolu_1'), name: fixed('web_search'), input: { json: 'user' } }),
      obj({ type: fixed('web_search_tool_result'), tool_use_id: fixed('srvtoolu_1'), content: arr(obj({ type: fixed('web_search_result'), url: fixed('https://example.com'), title: text('data'), encrypted_content: fixed('xyz') })) }),
    ))) }),
  )),
  tools: arr(obj({ name: fixed('get_weather'), description: text('application'), input_schema: { schema: 'application' } })),
})

// ---- gamma: Gemini generateContent ----
const gammaText = (s: SpanSource): Node => obj({ text: text(s) })
const GAMMA: Node = obj({
  model: fixed('gemini-2.5-flash'),
  systemInstruction: obj({ parts: arr(gammaText('application')) }),
  contents: arr(oneOf(
    obj({ role: fixed('user'), parts: arr(oneOf(
      gammaText('user'),
      obj({ inlineData: obj({ mimeType: fixed('text/plain'), data: { b64: 'data' } }) }),
      obj({ inlineData: obj({ mimeType: fixed('text/markdown'), data: { b64: 'data' } }) }),
      obj({ fileData: obj({ mimeType: fixed('application/pdf'), fileUri: fixed('https://example.com/f.pdf') }) }),
      obj({ functionResponse: obj({ name: fixed('get_weather'), response: { json: 'data' } }) }),
    )) }),
    obj({ role: fixed('model'), parts: arr(oneOf(
      gammaText('user'),
      obj({ text: text('user'), thought: fixed(true) }),
      obj({ functionCall: obj({ name: fixed('get_weather'), args: { json: 'user' } }) }),
      obj({ executableCode: obj({ language: fixed('PYTHON'), code: text('user') }) }),
      obj({ codeExecutionResult: obj({ outcome: fixed('OUTCOME_OK'), output: text('data') }) }),
    )) }),
  )),
  tools: arr(obj({ functionDeclarations: arr(obj({ name: fixed('get_weather'), description: text('application'), parameters: { schema: 'application' }, response: { schema: 'application' } })) })),
  generationConfig: obj({ responseSchema: { schema: 'application' } }),
})

const SCHEMAS: ReadonlyArray<readonly [ProviderName, Node]> = [['alpha', ALPHA], ['beta', BETA], ['gamma', GAMMA]]

/** A marker put in one text field, with the source it must be judged as and where it was put. */
interface Marker { readonly mark: string, readonly source: SpanSource, readonly where: string }

const width = (n: Node): number =>
  'oneOf' in n ? Math.max(n.oneOf.length, ...n.oneOf.map(width))
    : 'obj' in n ? Math.max(1, ...Object.values(n.obj).map((v) => ('fixed' in v ? 1 : width(v))))
      : 'arr' in n ? width(n.arr) : 1

/**
 * One body: a union outside an array takes variant `pick` (modulo its length), an array holds one item of
 * each variant of its union, and every text field gets a fresh marker.
 */
function generate (n: Node, pick: number, where: string, marks: Marker[]): unknown {
  const mark = (source: SpanSource, at: string): string => {
    const m = `zqmark${String(marks.length).padStart(4, '0')}x`
    marks.push({ mark: m, source, where: at })
    return m
  }
  if ('text' in n) return `Some words then ${mark(n.text, where)} here.`
  if ('b64' in n) {
    const encoded = Buffer.from(`A text file.\n${mark(n.b64, where)}\n`).toString('base64')
    return n.url === true ? `data:text/plain;base64,${encoded}` : encoded
  }
  if ('json' in n) return { q: mark(n.json, `${where}.q`), list: [mark(n.json, `${where}.list[0]`), 3, { deep: mark(n.json, `${where}.list[2].deep`) }] }
  if ('schema' in n) {
    return {
      type: 'object',
      title: mark(n.schema, `${where}.title`),
      description: mark(n.schema, `${where}.description`),
      properties: {
        [mark(n.schema, `${where}.properties (name)`)]: { type: 'string', description: mark(n.schema, `${where}.properties.*.description`), enum: [mark(n.schema, `${where}.properties.*.enum`)] },
        rows: { type: 'array', items: { type: 'object', properties: { cell: { type: 'string', description: mark(n.schema, `${where}.items.properties.cell.description`) } } } },
      },
      required: ['rows'],
    }
  }
  if ('obj' in n) {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(n.obj)) out[k] = 'fixed' in v ? v.fixed : generate(v, pick, `${where}.${k}`, marks)
    return out
  }
  if ('arr' in n) {
    const items = 'oneOf' in n.arr ? n.arr.oneOf : [n.arr]
    return items.map((item, k) => generate(item, pick, `${where}[${k}]`, marks))
  }
  const variant = n.oneOf[pick % n.oneOf.length] as Node
  return generate(variant, pick, `${where}|${pick % n.oneOf.length}`, marks)
}

class Numbered implements RequestSink {
  readonly full = true
  readonly texts: string[] = []
  size = 0
  text (_m: number, _r: string, _p: string, text: unknown): boolean {
    if (typeof text !== 'string' || text === '') return false
    this.texts.push(text)
    this.size++
    return true
  }

  other (): void { this.size++ }
}

/** The body with every member name in snake_case, as Gemini's API also takes it (`system_instruction`, `inline_data`, …). */
function snake (v: unknown): unknown {
  if (Array.isArray(v)) return v.map(snake)
  if (typeof v !== 'object' || v === null) return v
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), snake(x)]))
}

const RUNS: ReadonlyArray<readonly [ProviderName, Node, string, (body: unknown) => unknown]> = [
  ...SCHEMAS.map(([p, n]) => [p, n, '', (b: unknown) => b] as const),
  ['gamma', GAMMA, ' (snake_case members)', snake],
]

for (const [provider, schema, variant, shape] of RUNS) {
  t.test(`${provider}${variant}: every text field of the request schema is read, labelled by its writer`, async (t) => {
    let checked = 0
    const bySource: Record<SpanSource, number> = { application: 0, user: 0, data: 0 }
    for (let pick = 0; pick < width(schema); pick++) {
      const marks: Marker[] = []
      const body = shape(generate(schema, pick, provider, marks)) as Record<string, unknown>
      const segments = extractSegments(provider, body)
      for (const m of marks) {
        const found = segments.filter((s) => s.text.includes(m.mark))
        t.ok(found.length > 0, `${m.where}: read`)
        t.same(found.map((s) => sourceOf(s)), found.map(() => m.source), `${m.where}: judged as ${m.source}`)
        checked++
        bySource[m.source]++
      }
      const full = new Numbered()
      DIALECTS[provider].walkRequest(body, full)
      t.same(full.texts, segments.map((s) => s.text), 'the dashboard walks the same texts in the same order')
    }
    t.ok(checked > 20 && bySource.application > 0 && bySource.user > 0 && bySource.data > 0, `${checked} fields checked (${JSON.stringify(bySource)})`)
  })
}

t.test('a file sent as bare base64 is read when its name says it is text', async (t) => {
  const data = Buffer.from('zqmark notes').toString('base64')
  const read = (filename: string): string[] => extractSegments('alpha', { messages: [{ role: 'user', content: [{ type: 'file', file: { filename, file_data: data } }] }] }).map((s) => s.text)
  t.same(read('notes.md'), ['notes.md', 'zqmark notes'])
  t.same(read('scan.pdf'), ['scan.pdf'], 'a PDF is not decoded')
})

t.test('a base64 payload of a type that is not text is not decoded into a segment', async (t) => {
  const png = Buffer.from('zqmark binary').toString('base64')
  t.same(extractSegments('gamma', { contents: [{ role: 'user', parts: [{ inlineData: { mimeType: 'image/png', data: png } }] }] }), [])
  t.same(extractSegments('beta', { messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: png } }] }] }), [])
  t.same(extractSegments('alpha', { messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: `data:application/pdf;base64,${png}` } }] }] }), [])
})
