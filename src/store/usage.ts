// Token usage as each dialect reports it, from a whole JSON answer or from its event stream, and the
// text of prompt and answer for the tokenizer when the provider reported none. Runs in the store
// worker, never on the front thread.
import type { ProviderName } from '../config.js'

export interface ReportedUsage {
  input: number
  output: number
  cached: number
}

type Json = Record<string, unknown>

const n = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0)
const obj = (v: unknown): Json | null => (typeof v === 'object' && v !== null && !Array.isArray(v) ? v as Json : null)
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])

/** The JSON payloads of an SSE stream's `data:` lines, in order, with the offset where each event ends. */
export function sseEvents (text: string): Array<{ data: Json; end: number }> {
  const out: Array<{ data: Json; end: number }> = []
  const re = /(?:^|\n)data: ?([^\r\n]*)/g
  let m: RegExpExecArray | null
  while ((m = re.exec(text)) !== null) {
    const payload = m[1]!
    if (payload === '' || payload === '[DONE]') continue
    try {
      const data = obj(JSON.parse(payload))
      if (data !== null) out.push({ data, end: m.index + m[0].length })
    } catch { /* a partial event at a cut: skipped */ }
  }
  return out
}

/** Per dialect: usage from one answer object or stream event (merged over a stream), text, and content. */
interface Reader {
  /** Folds one JSON object (a whole answer, or one stream event) into `u`; true if it carried usage. */
  usage (data: Json, u: ReportedUsage): boolean
  /** The generated text in a whole answer or a stream event. */
  text (data: Json): string
  /** Text of the prompt's messages, system prompts and tool results. */
  prompt (body: Json): string
}

function partsText (parts: unknown): string {
  let s = ''
  for (const p of arr(parts)) {
    if (typeof p === 'string') s += p + '\n'
    const o = obj(p)
    if (o === null) continue
    if (typeof o.text === 'string') s += o.text + '\n'
    if (o.content !== undefined) s += contentText(o.content)
    const fr = obj(o.functionResponse)
    if (fr !== null) s += JSON.stringify(fr.response ?? '') + '\n'
  }
  return s
}

function contentText (content: unknown): string {
  return typeof content === 'string' ? content + '\n' : partsText(content)
}

const READERS: Record<ProviderName, Reader> = {
  alpha: {
    usage (d, u) {
      const usage = obj(d.usage)
      if (usage === null) return false
      u.input = n(usage.prompt_tokens)
      u.output = n(usage.completion_tokens)
      u.cached = n(obj(usage.prompt_tokens_details)?.cached_tokens)
      return true
    },
    text (d) {
      let s = ''
      for (const c of arr(d.choices)) {
        const co = obj(c)
        const msg = obj(co?.message) ?? obj(co?.delta)
        if (msg !== null && typeof msg.content === 'string') s += msg.content
      }
      return s
    },
    prompt (b) {
      let s = ''
      for (const m of arr(b.messages)) s += contentText(obj(m)?.content)
      return s
    },
  },
  beta: {
    usage (d, u) {
      // A whole message, or in a stream message_start (input side) and message_delta (output so far,
      // cumulative; newer API versions repeat the input side there too).
      const usage = obj(d.usage) ?? obj(obj(d.message)?.usage)
      if (usage === null) return false
      if (usage.input_tokens !== undefined) {
        const cacheRead = n(usage.cache_read_input_tokens)
        u.input = n(usage.input_tokens) + n(usage.cache_creation_input_tokens) + cacheRead
        u.cached = cacheRead
      }
      if (usage.output_tokens !== undefined) u.output = n(usage.output_tokens)
      return true
    },
    text (d) {
      const delta = obj(d.delta)
      if (delta !== null && typeof delta.text === 'string') return delta.text
      let s = ''
      for (const c of arr(d.content)) { const co = obj(c); if (co !== null && typeof co.text === 'string') s += co.text }
      return s
    },
    prompt (b) {
      let s = contentText(b.system)
      for (const m of arr(b.messages)) s += contentText(obj(m)?.content)
      return s
    },
  },
  gamma: {
    usage (d, u) {
      const usage = obj(d.usageMetadata)
      if (usage === null) return false
      u.input = n(usage.promptTokenCount)
      u.output = n(usage.candidatesTokenCount) + n(usage.thoughtsTokenCount)
      u.cached = n(usage.cachedContentTokenCount)
      return true
    },
    text (d) {
      let s = ''
      for (const c of arr(d.candidates)) s += partsText(obj(obj(c)?.content)?.parts).replace(/\n$/, '')
      return s
    },
    prompt (b) {
      let s = partsText(obj(b.systemInstruction)?.parts)
      for (const c of arr(b.contents)) s += partsText(obj(c)?.parts)
      return s
    },
  },
}

export interface ResponseReading {
  usage: ReportedUsage | null
  /** The generated text (for estimates when no usage came); worked out only when asked for. */
  text: () => string
  /** Offset in the stream text where the first event with generated text ends; null if none. */
  firstTokenEnd: number | null
}

/** The key each dialect reports a whole answer's usage under, as it appears in the JSON text. */
const USAGE_KEYS: Record<ProviderName, string> = { alpha: '"usage"', beta: '"usage"', gamma: '"usageMetadata"' }

/**
 * The object under the last `key` in a JSON text, parsed alone, or null when it cannot be told apart
 * cheaply (the caller then parses the whole answer). Usage sits at the end of every dialect's answer,
 * so this reads a few hundred bytes instead of the whole body. An escaped occurrence (inside a string)
 * or one not followed by `:` and an object is not taken.
 */
function lastObjectAt (text: string, key: string): Json | null {
  const at = text.lastIndexOf(key)
  if (at <= 0 || text.charCodeAt(at - 1) === 0x5c) return null
  let i = at + key.length
  while (i < text.length && text.charCodeAt(i) <= 0x20) i++
  if (text.charCodeAt(i) !== 0x3a) return null
  i++
  while (i < text.length && text.charCodeAt(i) <= 0x20) i++
  if (text.charCodeAt(i) !== 0x7b) return null
  let depth = 0
  let inString = false
  for (let j = i; j < text.length; j++) {
    const c = text.charCodeAt(j)
    if (inString) {
      if (c === 0x5c) j++
      else if (c === 0x22) inString = false
    } else if (c === 0x22) {
      inString = true
    } else if (c === 0x7b) {
      depth++
    } else if (c === 0x7d && --depth === 0) {
      try { return obj(JSON.parse(text.slice(i, j + 1))) } catch { return null }
    }
  }
  return null
}

function parsed (text: string): Json | null {
  try { return obj(JSON.parse(text)) } catch { return null }
}

/** The answer's text, or its UTF-8 bytes (then a whole answer's usage is found without decoding it all). */
export function readResponse (provider: ProviderName, streaming: boolean, answer: string | Buffer): ResponseReading {
  const start = typeof answer === 'string' ? answer.slice(0, 64) : answer.toString('latin1', 0, 64)
  if (!streaming && !/^(event|data):/m.test(start)) return readWhole(provider, answer)
  const reader = READERS[provider]
  const u: ReportedUsage = { input: 0, output: 0, cached: 0 }
  let found = false
  let out = ''
  let firstTokenEnd: number | null = null
  for (const ev of sseEvents(typeof answer === 'string' ? answer : answer.toString('utf8'))) {
    if (reader.usage(ev.data, u)) found = true
    const t = reader.text(ev.data)
    if (t !== '') {
      out += t
      firstTokenEnd ??= ev.end
    }
  }
  return { usage: found ? u : null, text: () => out, firstTokenEnd }
}

/** The usage object under the last usage key of a whole answer's text, read alone; null if not found. */
function usageAtEnd (provider: ProviderName, text: string): ReportedUsage | null {
  const key = USAGE_KEYS[provider]
  const usageObject = lastObjectAt(text, key)
  const u: ReportedUsage = { input: 0, output: 0, cached: 0 }
  return usageObject !== null && READERS[provider].usage({ [key.slice(1, -1)]: usageObject }, u) ? u : null
}

/**
 * A whole answer: its usage from the object at its end when it can be found, else from the whole
 * answer parsed (a cut or non-JSON answer has none). Given as bytes, the key is found by a native search
 * and only the text from there on is decoded; the whole answer is decoded and parsed only when that
 * fails or an estimate asks for the text.
 */
function readWhole (provider: ProviderName, answer: string | Buffer): ResponseReading {
  const reader = READERS[provider]
  let text = typeof answer === 'string' ? answer : null
  const decoded = (): string => (text ??= answer.toString('utf8'))
  let usage: ReportedUsage | null
  if (typeof answer === 'string') {
    usage = usageAtEnd(provider, answer)
  } else {
    const at = answer.lastIndexOf(USAGE_KEYS[provider])
    // From the byte before the key, so the escaped-quote check sees it.
    usage = at > 0 ? usageAtEnd(provider, answer.toString('utf8', at - 1)) : null
  }
  let data: Json | null | undefined
  if (usage === null) {
    data = parsed(decoded())
    const u: ReportedUsage = { input: 0, output: 0, cached: 0 }
    if (data !== null && reader.usage(data, u)) usage = u
  }
  return {
    usage,
    text: () => {
      data ??= parsed(decoded())
      return data === null ? '' : reader.text(data)
    },
    firstTokenEnd: null,
  }
}

export function promptText (provider: ProviderName, body: string): string {
  try {
    const b = obj(JSON.parse(body))
    return b === null ? '' : READERS[provider].prompt(b)
  } catch {
    return ''
  }
}
