// The assistant's answer from a stored response: a JSON body or an SSE stream of chunks, each object
// read by the provider module's readAnswer. The stored response can be cut at the capture limit: a cut
// JSON body is shown raw, a cut stream gives the text of its whole events.
import { parse, show } from './json.js'
import { DIALECTS, isProviderName, type AnswerSink } from './providers/index.js'
import { asObject as obj, asString as str, type Json } from './providers/json.js'
import { sseData } from './providers/sse.js'

export interface Answer {
  /** The assistant's text (tool calls written as `→ name(arguments)`), an error message, or the raw text. */
  readonly text: string
  readonly kind: 'text' | 'error' | 'raw'
  /** Why the text may be incomplete or raw. */
  readonly note: string | null
}

/** Collects text per choice or candidate index, in arrival order. */
class Texts implements AnswerSink {
  readonly #by = new Map<number, string[]>()
  /** Indexes with a streamed tool call whose arguments are still arriving. */
  readonly #open = new Set<number>()

  add (index: unknown, text: string | null): void {
    if (text === null || text === '') return
    const i = typeof index === 'number' ? index : 0
    let list = this.#by.get(i)
    if (list === undefined) { list = []; this.#by.set(i, list) }
    list.push(text)
  }

  /** A streamed tool call starts: its arguments follow in pieces. */
  openCall (index: unknown, name: unknown): void {
    const i = typeof index === 'number' ? index : 0
    this.closeCall(i)
    this.add(i, `\n→ ${str(name) ?? 'tool'}(`)
    this.#open.add(i)
  }

  closeCall (index: unknown): void {
    const i = typeof index === 'number' ? index : 0
    if (this.#open.delete(i)) this.add(i, ')\n')
  }

  join (): string {
    for (const i of [...this.#open]) this.closeCall(i)
    const keys = [...this.#by.keys()].sort((a, b) => a - b)
    if (keys.length === 1) return this.#by.get(keys[0]!)!.join('')
    return keys.map((k) => `[${k}] ${this.#by.get(k)!.join('')}`).join('\n\n')
  }
}

/** A provider's or tracegate's error body: `{error: {message}}` (alpha, gamma, tracegate) or `{type: 'error', error}` (beta). */
function errorOf (v: Json): string | null {
  const e = obj(v.error)
  if (e === null) return typeof v.error === 'string' ? v.error : null
  const code = str(e.code) ?? str(e.type) ?? str(e.status) ?? (typeof e.code === 'number' ? String(e.code) : null)
  const message = str(e.message) ?? show(e)
  return code !== null ? `${code}: ${message}` : message
}

function fromJson (provider: string, v: unknown, t: Texts, streamEvent: boolean): string | null {
  for (const item of Array.isArray(v) ? v : [v]) {
    const o = obj(item)
    if (o === null) continue
    const err = errorOf(o)
    if (err !== null) return err
    if (isProviderName(provider)) DIALECTS[provider].readAnswer(o, t, streamEvent)
  }
  return null
}

export function answer (provider: string, response: string, truncated: boolean): Answer | null {
  if (response === '') return null
  const start = response.trimStart()
  if (start.startsWith('{') || start.startsWith('[')) {
    const p = parse(response)
    if (!p.ok) {
      return { text: response, kind: 'raw', note: truncated ? 'The stored response was cut at the capture limit; shown as stored.' : 'Not valid JSON; shown as stored.' }
    }
    const t = new Texts()
    const err = fromJson(provider, p.value, t, false)
    if (err !== null) return { text: err, kind: 'error', note: null }
    return { text: t.join().trim(), kind: 'text', note: null }
  }
  // Server-sent events: the data of each event, whole lines only.
  const t = new Texts()
  let events = 0
  let partial = false
  for (const ev of sseData(response)) {
    if (ev.value === undefined) { partial = true; continue }
    events++
    const err = fromJson(provider, ev.value, t, true)
    if (err !== null) {
      const before = t.join().trim()
      return { text: before === '' ? err : `${before}\n\n${err}`, kind: 'error', note: events > 1 ? 'The stream ended with an error.' : null }
    }
  }
  if (events === 0) return { text: response, kind: 'raw', note: truncated ? 'The stored response was cut at the capture limit; shown as stored.' : null }
  return {
    text: t.join().trim(),
    kind: 'text',
    note: truncated || partial ? 'The stored stream was cut at the capture limit: this is the text up to the cut. The raw capture is below.' : null,
  }
}
