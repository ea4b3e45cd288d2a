// The text each dialect carries, as segments with their message index, role and JSON path: system
// prompts, user and assistant messages, content parts, tool and function results, Gemini
// systemInstruction and contents parts, and the arguments a model gave its tool calls (alpha
// tool_calls and function_call, beta tool_use input, gamma functionCall args): a conversation sent back
// carries them, and an injected tool call is as much the attacker's text as a tool result.
import type { Segment } from '../../src/detection/types.js'

type Json = Record<string, unknown>
const obj = (v: unknown): Json | null => (typeof v === 'object' && v !== null && !Array.isArray(v) ? v as Json : null)
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])

function push (out: Segment[], message: number, role: string, path: string, text: unknown): void {
  if (typeof text === 'string' && text !== '') out.push({ message, role, path, text })
}

/** A JSON value that is not plain text (tool arguments, function responses): its strings, joined. */
function strings (v: unknown, acc: string[] = []): string[] {
  if (typeof v === 'string') acc.push(v)
  else if (Array.isArray(v)) for (const x of v) strings(x, acc)
  else if (obj(v) !== null) for (const x of Object.values(v as Json)) strings(x, acc)
  return acc
}

/** OpenAI-style content: a string or a list of parts ({type: text, text}, tool output parts). */
function openAiContent (out: Segment[], i: number, role: string, base: string, content: unknown): void {
  if (typeof content === 'string') { push(out, i, role, base, content); return }
  arr(content).forEach((p, j) => {
    const part = obj(p)
    if (part !== null) push(out, i, role, `${base}[${j}].text`, part.text)
  })
}

/** Anthropic content: a string or blocks (text, tool_result with string or block content, document text). */
function anthropicContent (out: Segment[], i: number, role: string, base: string, content: unknown): void {
  if (typeof content === 'string') { push(out, i, role, base, content); return }
  arr(content).forEach((b, j) => {
    const block = obj(b)
    if (block === null) return
    if (block.type === 'tool_result') {
      anthropicContent(out, i, 'tool', `${base}[${j}].content`, block.content)
      return
    }
    if (block.type === 'tool_use') {
      push(out, i, role, `${base}[${j}].input`, strings(block.input).join('\n'))
      return
    }
    push(out, i, role, `${base}[${j}].text`, block.text)
    const source = obj(block.source)
    if (block.type === 'document' && source?.type === 'text') push(out, i, role, `${base}[${j}].source.data`, source.data)
  })
}

function geminiParts (out: Segment[], i: number, role: string, base: string, parts: unknown): void {
  arr(parts).forEach((p, j) => {
    const part = obj(p)
    if (part === null) return
    push(out, i, role, `${base}[${j}].text`, part.text)
    const fr = obj(part.functionResponse)
    if (fr !== null) push(out, i, 'tool', `${base}[${j}].functionResponse.response`, strings(fr.response).join('\n'))
    const fc = obj(part.functionCall)
    if (fc !== null) push(out, i, role, `${base}[${j}].functionCall.args`, strings(fc.args).join('\n'))
  })
}

export function extractSegments (provider: 'alpha' | 'beta' | 'gamma', body: unknown): Segment[] {
  const b = obj(body)
  const out: Segment[] = []
  if (b === null) return out
  if (provider === 'alpha') {
    arr(b.messages).forEach((m, i) => {
      const msg = obj(m)
      if (msg === null) return
      const role = msg.role === 'function' ? 'tool' : String(msg.role ?? 'user')
      openAiContent(out, i, role, `messages[${i}].content`, msg.content)
      arr(msg.tool_calls).forEach((c, j) => {
        push(out, i, role, `messages[${i}].tool_calls[${j}].function.arguments`, obj(obj(c)?.function)?.arguments)
      })
      // The legacy single call of the functions API.
      push(out, i, role, `messages[${i}].function_call.arguments`, obj(msg.function_call)?.arguments)
    })
  } else if (provider === 'beta') {
    anthropicContent(out, -1, 'system', 'system', b.system)
    arr(b.messages).forEach((m, i) => {
      const msg = obj(m)
      if (msg !== null) anthropicContent(out, i, String(msg.role ?? 'user'), `messages[${i}].content`, msg.content)
    })
  } else {
    geminiParts(out, -1, 'system', 'systemInstruction.parts', obj(b.systemInstruction ?? b.system_instruction)?.parts)
    arr(b.contents).forEach((c, i) => {
      const content = obj(c)
      if (content === null) return
      const role = content.role === 'model' ? 'assistant' : String(content.role ?? 'user')
      geminiParts(out, i, role, `contents[${i}].parts`, content.parts)
    })
  }
  return out
}
