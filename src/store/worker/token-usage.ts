// Token usage of an answer, from a whole JSON answer or from its event stream, and the text of prompt
// and answer for the tokenizer when the provider reported none; what each provider reports where is in
// its module (src/providers). Runs in the store worker, never on the front thread. A whole answer given
// as bytes is not decoded to find its usage: the provider's usage key is searched in the bytes.
import { DIALECTS, type ProviderName, type ReportedUsage } from '../../providers/index.js'
import { asObject, type Json } from '../../providers/json.js'
import { sseData } from '../../providers/sse.js'

export type { ReportedUsage }

export interface ResponseReading {
  usage: ReportedUsage | null
  /** The generated text (for estimates when no usage came); worked out only when asked for. */
  text: () => string
  /** Offset in the stream text where the first event with generated text ends; null if none. */
  firstTokenEnd: number | null
}

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
      try { return asObject(JSON.parse(text.slice(i, j + 1))) } catch { return null }
    }
  }
  return null
}

function parsed (text: string): Json | null {
  try { return asObject(JSON.parse(text)) } catch { return null }
}

/** The answer's text, or its UTF-8 bytes (then a whole answer's usage is found without decoding it all). */
export function readResponse (provider: ProviderName, streaming: boolean, answer: string | Buffer): ResponseReading {
  const start = typeof answer === 'string' ? answer.slice(0, 64) : answer.toString('latin1', 0, 64)
  // Gemini's streamGenerateContent without alt=sse streams one JSON array: read as a whole answer.
  if ((!streaming && !/^(event|data):/m.test(start)) || (streaming && /^\s*\[/.test(start))) return readWhole(provider, answer)
  const dialect = DIALECTS[provider]
  const u: ReportedUsage = { input: 0, output: 0, cached: 0, cacheWrite: 0 }
  let found = false
  let out = ''
  let firstTokenEnd: number | null = null
  for (const ev of sseData(typeof answer === 'string' ? answer : answer.toString('utf8'))) {
    const data = asObject(ev.value)
    if (data === null) continue
    if (dialect.readUsage(data, u)) found = true
    const t = dialect.generatedText(data)
    if (t !== '') {
      out += t
      firstTokenEnd ??= ev.end
    }
  }
  return { usage: found ? u : null, text: () => out, firstTokenEnd }
}

/** The usage object under the last usage key of a whole answer's text, read alone; null if not found. */
function usageAtEnd (provider: ProviderName, text: string): ReportedUsage | null {
  const dialect = DIALECTS[provider]
  const usageObject = lastObjectAt(text, dialect.usageKey)
  const u: ReportedUsage = { input: 0, output: 0, cached: 0, cacheWrite: 0 }
  return usageObject !== null && dialect.readUsage({ [dialect.usageKey.slice(1, -1)]: usageObject }, u) ? u : null
}

/**
 * A whole answer: its usage from the object at its end when it can be found, else from the whole
 * answer parsed (a cut or non-JSON answer has none). Given as bytes, the key is found by a native search
 * and only the text from there on is decoded; the whole answer is decoded and parsed only when that
 * fails or an estimate asks for the text.
 */
function readWhole (provider: ProviderName, answer: string | Buffer): ResponseReading {
  const dialect = DIALECTS[provider]
  let text = typeof answer === 'string' ? answer : null
  const decoded = (): string => (text ??= answer.toString('utf8'))
  let usage: ReportedUsage | null
  if (typeof answer === 'string') {
    usage = usageAtEnd(provider, answer)
  } else {
    const at = answer.lastIndexOf(dialect.usageKey)
    // From the byte before the key, so the escaped-quote check sees it.
    usage = at > 0 ? usageAtEnd(provider, answer.toString('utf8', at - 1)) : null
  }
  let data: Json | null | undefined
  if (usage === null) {
    data = parsed(decoded())
    const u: ReportedUsage = { input: 0, output: 0, cached: 0, cacheWrite: 0 }
    if (data !== null && dialect.readUsage(data, u)) usage = u
  }
  return {
    usage,
    text: () => {
      data ??= parsed(decoded())
      return data === null ? '' : dialect.generatedText(data)
    },
    firstTokenEnd: null,
  }
}

export function promptText (provider: ProviderName, body: string): string {
  try {
    const b = asObject(JSON.parse(body))
    return b === null ? '' : DIALECTS[provider].promptText(b)
  } catch {
    return ''
  }
}
