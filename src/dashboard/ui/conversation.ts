// The conversation of a stored request, per dialect, as parts the detail page renders by role.
//
// Findings point at text by segment index, in the order workers/detector/extract.ts walks the body.
// This walk visits the same texts in the same order and numbers them the same way (a text part counts
// only when it is a non-empty string), and adds what the detector does not read (images, thinking,
// empty tool results) as parts without a segment number. Keep the two in step.
// Tool-call arguments given as JSON (beta tool_use input, gamma functionCall args) are a segment of
// their strings joined by newlines, as the detector reads them; they are shown as JSON unless a finding
// points into them.
import { arr, obj, show, str, type Json } from './json.js'

export interface Part {
  /** The message's index in the request; -1 for a system prompt outside the list. */
  readonly message: number
  /** `system`, `user`, `assistant`, `tool`, `developer`, … (tool results carry `tool`). */
  readonly role: string
  /** What the part is when it is not plain message text: `tool call get_weather`, `image`, … */
  readonly label: string | null
  readonly text: string
  /** The detector's segment index when `text` is a segment, else null. */
  readonly segment: number | null
  /** Shown instead of `text` when no finding points into it (a function response as JSON). */
  readonly display: string | null
  /** Monospace: JSON or tool arguments. */
  readonly code: boolean
}

export type Provider = 'alpha' | 'beta' | 'gamma'

class Walk {
  readonly parts: Part[] = []
  #segment = 0

  /** A text the detector reads too. */
  text (message: number, role: string, text: unknown, label: string | null = null, opts: { display?: string, code?: boolean } = {}): boolean {
    if (typeof text !== 'string' || text === '') return false
    this.parts.push({ message, role, label, text, segment: this.#segment++, display: opts.display ?? null, code: opts.code ?? false })
    return true
  }

  /** Something shown that the detector does not read. */
  other (message: number, role: string, label: string | null, value: unknown = ''): void {
    this.parts.push({ message, role, label, text: show(value), segment: null, display: null, code: typeof value !== 'string' })
  }
}

/** The strings of a JSON value joined by newlines: the detector's text of a Gemini function response. */
function strings (v: unknown, acc: string[] = []): string[] {
  if (typeof v === 'string') acc.push(v)
  else if (Array.isArray(v)) for (const x of v) strings(x, acc)
  else if (obj(v) !== null) for (const x of Object.values(v as Json)) strings(x, acc)
  return acc
}

function media (part: Json): string {
  const url = str(obj(part.image_url)?.url) ?? str(part.image_url) ?? ''
  if (url === '') return ''
  return url.startsWith('data:') ? `${url.slice(0, url.indexOf(',') + 1)}… (${url.length.toLocaleString('en-US')} characters)` : url
}

function alpha (w: Walk, body: Json): void {
  arr(body.messages).forEach((m, i) => {
    const msg = obj(m)
    if (msg === null) return
    const role = msg.role === 'function' ? 'tool' : String(msg.role ?? 'user')
    const before = w.parts.length
    const who = str(msg.name)
    const callId = str(msg.tool_call_id)
    const label = role === 'tool' ? `result${who !== null ? ` of ${who}` : ''}${callId !== null ? ` (${callId})` : ''}` : who
    const content = msg.content
    if (typeof content === 'string') {
      w.text(i, role, content, label)
    } else {
      arr(content).forEach((p) => {
        const part = obj(p)
        if (part === null) return
        if (w.text(i, role, part.text, label)) return
        const type = String(part.type ?? 'part')
        if (type === 'text') return
        w.other(i, role, type === 'image_url' ? 'image' : type, type === 'image_url' ? media(part) : part)
      })
    }
    arr(msg.tool_calls).forEach((c) => {
      const call = obj(c)
      const fn = obj(call?.function)
      const name = `tool call ${str(fn?.name) ?? ''}${str(call?.id) !== null ? ` (${str(call?.id)})` : ''}`.trim()
      if (!w.text(i, role, fn?.arguments, name, { code: true }) && call !== null) w.other(i, role, name, fn?.arguments ?? call)
    })
    const legacy = obj(msg.function_call)
    const legacyName = `function call ${str(legacy?.name) ?? ''}`.trim()
    if (!w.text(i, role, legacy?.arguments, legacyName, { code: true }) && legacy !== null) w.other(i, role, legacyName, legacy.arguments ?? legacy)
    if (str(msg.refusal) !== null) w.other(i, role, 'refusal', msg.refusal)
    if (w.parts.length === before) w.other(i, role, label, '(empty)')
  })
}

function anthropicContent (w: Walk, i: number, role: string, content: unknown, label: string | null = null): void {
  if (typeof content === 'string') { w.text(i, role, content, label); return }
  arr(content).forEach((b) => {
    const block = obj(b)
    if (block === null) return
    const type = String(block.type ?? 'block')
    if (type === 'tool_result') {
      const id = str(block.tool_use_id)
      const head = `tool result${id !== null ? ` (${id})` : ''}${block.is_error === true ? ' — error' : ''}`
      const before = w.parts.length
      anthropicContent(w, i, 'tool', block.content, head)
      if (w.parts.length === before) w.other(i, 'tool', head, '(empty)')
      return
    }
    if (type === 'tool_use') {
      const head = `tool use ${str(block.name) ?? ''} (${str(block.id) ?? ''})`
      if (!w.text(i, role, strings(block.input).join('\n'), head, { display: show(block.input ?? {}), code: true })) w.other(i, role, head, block.input ?? {})
      return
    }
    const hadText = w.text(i, role, block.text, label)
    const source = obj(block.source)
    if (type === 'document' && source?.type === 'text') {
      w.text(i, role, source.data, `document${str(block.title) !== null ? ` ${str(block.title)}` : ''}`)
      return
    }
    if (hadText || type === 'text') return
    if (type === 'server_tool_use') w.other(i, role, `tool use ${str(block.name) ?? ''} (${str(block.id) ?? ''})`, block.input ?? {})
    else if (type === 'thinking') w.other(i, role, 'thinking', str(block.thinking) ?? '')
    else if (type === 'redacted_thinking') w.other(i, role, 'redacted thinking', '…')
    else if (type === 'image' || type === 'document') w.other(i, role, type, str(source?.url) ?? str(source?.media_type) ?? '')
    else w.other(i, role, type, block)
  })
}

function beta (w: Walk, body: Json): void {
  anthropicContent(w, -1, 'system', body.system)
  arr(body.messages).forEach((m, i) => {
    const msg = obj(m)
    if (msg !== null) anthropicContent(w, i, String(msg.role ?? 'user'), msg.content)
  })
}

function geminiParts (w: Walk, i: number, role: string, parts: unknown): void {
  arr(parts).forEach((p) => {
    const part = obj(p)
    if (part === null) return
    const label = part.thought === true ? 'thought' : null
    w.text(i, role, part.text, label)
    const fr = obj(part.functionResponse)
    if (fr !== null) {
      const head = `function response ${str(fr.name) ?? ''}`.trim()
      if (!w.text(i, 'tool', strings(fr.response).join('\n'), head, { display: show(fr.response ?? null), code: true })) {
        w.other(i, 'tool', head, fr.response ?? null)
      }
    }
    const fc = obj(part.functionCall)
    if (fc !== null) {
      const head = `function call ${str(fc.name) ?? ''}`.trim()
      if (!w.text(i, role, strings(fc.args).join('\n'), head, { display: show(fc.args ?? {}), code: true })) w.other(i, role, head, fc.args ?? {})
    }
    const inline = obj(part.inlineData ?? part.inline_data)
    if (inline !== null) w.other(i, role, 'inline data', str(inline.mimeType ?? inline.mime_type) ?? '')
    const file = obj(part.fileData ?? part.file_data)
    if (file !== null) w.other(i, role, 'file', str(file.fileUri ?? file.file_uri) ?? '')
    if (obj(part.executableCode) !== null) w.other(i, role, 'code', str(obj(part.executableCode)?.code) ?? '')
    if (obj(part.codeExecutionResult) !== null) w.other(i, role, 'code result', str(obj(part.codeExecutionResult)?.output) ?? '')
  })
}

function gamma (w: Walk, body: Json): void {
  geminiParts(w, -1, 'system', obj(body.systemInstruction ?? body.system_instruction)?.parts)
  arr(body.contents).forEach((c, i) => {
    const content = obj(c)
    if (content === null) return
    const role = content.role === 'model' ? 'assistant' : String(content.role ?? 'user')
    geminiParts(w, i, role, content.parts)
  })
}

/** The request's parts in order, or null when the body is not a JSON object (cut, or not JSON). */
export function conversation (provider: string, body: unknown): Part[] | null {
  const b = obj(body)
  if (b === null) return null
  const w = new Walk()
  if (provider === 'alpha') alpha(w, b)
  else if (provider === 'beta') beta(w, b)
  else if (provider === 'gamma') gamma(w, b)
  else return null
  return w.parts
}

/** Parts grouped into messages: consecutive parts of one message index and one role. */
export function messages (parts: readonly Part[]): Array<{ message: number, role: string, parts: Part[] }> {
  const out: Array<{ message: number, role: string, parts: Part[] }> = []
  for (const p of parts) {
    const last = out[out.length - 1]
    if (last !== undefined && last.message === p.message && last.role === p.role) last.parts.push(p)
    else out.push({ message: p.message, role: p.role, parts: [p] })
  }
  return out
}
