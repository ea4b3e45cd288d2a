// The conversation on a span, only when the operator opts in (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)
// and never for a confidential call: `gen_ai.input.messages` and `gen_ai.output.messages` as the GenAI
// conventions shape them (JSON text: [{role, parts: [{type: "text", content}]}]). The texts are those the
// detector and the dashboard read, walked by the provider module; a request or answer cut at the trace's
// capture limit gives what the kept bytes hold (a cut JSON body gives nothing).
import { DIALECTS, type AnswerSink, type ProviderName, type RequestSink } from '../../providers/index.js'
import { asObject } from '../../providers/json.js'
import { sseData } from '../../providers/sse.js'

interface Message { role: string; parts: Array<{ type: 'text'; content: string }> }

/** Groups the walked texts into messages: consecutive texts of one message index and role. */
class Messages implements RequestSink {
  readonly full = false
  readonly messages: Message[] = []
  #index = Number.NaN

  get size (): number { return this.messages.length }

  text (message: number, role: string, _path: string, text: unknown): boolean {
    if (typeof text !== 'string' || text === '') return false
    const last = this.messages[this.messages.length - 1]
    if (last !== undefined && this.#index === message && last.role === role) last.parts.push({ type: 'text', content: text })
    else this.messages.push({ role, parts: [{ type: 'text', content: text }] })
    this.#index = message
    return true
  }

  other (): void {}
}

/** The answer's text per choice (or candidate) index, tool calls written as `name(arguments)`. */
class Answers implements AnswerSink {
  readonly by = new Map<number, string[]>()

  add (index: unknown, text: string | null): void {
    if (text === null || text === '') return
    const i = typeof index === 'number' ? index : 0
    const list = this.by.get(i)
    if (list === undefined) this.by.set(i, [text])
    else list.push(text)
  }

  /** Indexes with a streamed tool call whose arguments are still arriving. */
  readonly #open = new Set<number>()

  openCall (index: unknown, name: unknown): void {
    this.closeCall(index)
    this.add(index, `${typeof name === 'string' ? name : 'tool'}(`)
    this.#open.add(typeof index === 'number' ? index : 0)
  }

  /** Called by the provider module before any streamed text, open call or not: closes only an open one. */
  closeCall (index: unknown): void {
    if (this.#open.delete(typeof index === 'number' ? index : 0)) this.add(index, ')')
  }

  /** The texts per index, any call still open closed. */
  texts (): Map<number, string> {
    for (const i of [...this.#open]) this.closeCall(i)
    return new Map([...this.by].map(([i, parts]) => [i, parts.join('')]))
  }
}

export function inputMessages (provider: ProviderName, request: string): string | null {
  let body: unknown
  try { body = JSON.parse(request) } catch { return null }
  const o = asObject(body)
  if (o === null) return null
  const sink = new Messages()
  DIALECTS[provider].walkRequest(o, sink)
  return sink.messages.length === 0 ? null : JSON.stringify(sink.messages)
}

export function outputMessages (provider: ProviderName, streaming: boolean, response: string): string | null {
  const dialect = DIALECTS[provider]
  const sink = new Answers()
  // A stream is SSE, except gamma's streamGenerateContent without alt=sse: a JSON array of chunks.
  const events = streaming ? sseData(response) : []
  if (events.length > 0) {
    for (const e of events) {
      const o = asObject(e.value)
      if (o !== null) dialect.readAnswer(o, sink, true)
    }
  } else {
    let body: unknown
    try { body = JSON.parse(response) } catch { return null }
    for (const item of Array.isArray(body) ? body : [body]) {
      const o = asObject(item)
      if (o !== null) dialect.readAnswer(o, sink, streaming)
    }
  }
  const texts = sink.texts()
  if (texts.size === 0) return null
  const out: Message[] = [...texts.keys()].sort((a, b) => a - b)
    .map((i) => ({ role: 'assistant', parts: [{ type: 'text' as const, content: texts.get(i)! }] }))
  return JSON.stringify(out)
}
