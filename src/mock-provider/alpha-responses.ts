// alpha's Responses API (https://platform.openai.com/docs/api-reference/responses), embeddings and the
// calls that read or count without generating, as api.openai.com answers them: a response object, or
// its stream of named events ending in response.completed, which carries the whole response and usage.
import type { OutgoingHttpHeaders } from 'node:http'
import { asArray, asObject, asString, type Json } from '../providers/json.js'
import { namedEvent } from '../providers/sse.js'
import { BaseCall } from './dialect.js'
import { randomHex } from './ids.js'
import { chunkText, fullText, outputTokens } from './text.js'

/** Reasoning tokens a response reports when the request asks for reasoning (they count as output). */
export const REASONING_TOKENS = 16

/** The response's id and the request members a response object echoes. */
interface Echo {
  readonly instructions: string | null
  readonly maxOutputTokens: number | null
  readonly previousResponseId: string | null
  readonly reasoning: boolean
  /** The client asked to use the prompt cache (prompt_cache_key): half the input is reported as read from it. */
  readonly cached: boolean
  readonly store: boolean
  readonly metadata: Json
}

export function echoOf (body: Json): Echo {
  return {
    instructions: asString(body.instructions),
    maxOutputTokens: typeof body.max_output_tokens === 'number' ? body.max_output_tokens : null,
    previousResponseId: asString(body.previous_response_id),
    reasoning: asObject(body.reasoning) !== null,
    cached: typeof body.prompt_cache_key === 'string',
    store: body.store !== false,
    metadata: asObject(body.metadata) ?? {},
  }
}

const ECHO_NONE: Echo = { instructions: null, maxOutputTokens: null, previousResponseId: null, reasoning: false, cached: false, store: true, metadata: {} }

/** The response object as the API writes it, with `status`, its output and its usage (null while in progress). */
function responseObject (id: string, created: number, model: string, echo: Echo, status: string, output: unknown[], usage: object | null): Json {
  return {
    id,
    object: 'response',
    created_at: created,
    status,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: echo.instructions,
    max_output_tokens: echo.maxOutputTokens,
    model,
    output,
    parallel_tool_calls: true,
    previous_response_id: echo.previousResponseId,
    reasoning: { effort: echo.reasoning ? 'medium' : null, summary: null },
    service_tier: 'default',
    store: echo.store,
    temperature: 1,
    text: { format: { type: 'text' }, verbosity: 'medium' },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage,
    user: null,
    metadata: echo.metadata,
  }
}

export class ResponsesCall extends BaseCall {
  #id = ''
  #messageId = ''
  #created = 0
  #seq = 0

  constructor (model: string, stream: boolean, private readonly echo: Echo, private readonly baseHeaders: () => OutgoingHttpHeaders) {
    super(model, stream)
  }

  protected started (): void {
    this.#id = `resp_${randomHex(48)}`
    this.#messageId = `msg_${randomHex(48)}`
    this.#created = Math.floor(Date.now() / 1000)
    this.#seq = 0
  }

  headers (): OutgoingHttpHeaders {
    return { ...this.baseHeaders(), 'content-type': this.stream ? 'text/event-stream; charset=utf-8' : 'application/json' }
  }

  #usage (): object {
    const reasoning = this.echo.reasoning ? REASONING_TOKENS : 0
    const output = outputTokens(this.chunks) + reasoning
    return {
      input_tokens: this.inputTokens,
      input_tokens_details: { cached_tokens: this.echo.cached ? Math.floor(this.inputTokens / 2) : 0 },
      output_tokens: output,
      output_tokens_details: { reasoning_tokens: reasoning },
      total_tokens: this.inputTokens + output,
    }
  }

  #message (status: string, text: string | null): Json {
    return {
      id: this.#messageId, type: 'message', status, role: 'assistant',
      content: text === null ? [] : [{ type: 'output_text', annotations: [], logprobs: [], text }],
    }
  }

  #response (status: string, output: unknown[], usage: object | null): Json {
    return responseObject(this.#id, this.#created, this.model, this.echo, status, output, usage)
  }

  body (): string {
    return JSON.stringify(this.#response('completed', [this.#message('completed', fullText(this.chunks))], this.#usage()))
  }

  #event (type: string, data: Json): string {
    return namedEvent(type, JSON.stringify({ type, sequence_number: this.#seq++, ...data }))
  }

  head (): string {
    const part = { type: 'output_text', annotations: [], logprobs: [], text: '' }
    return this.#event('response.created', { response: this.#response('in_progress', [], null) }) +
      this.#event('response.in_progress', { response: this.#response('in_progress', [], null) }) +
      this.#event('response.output_item.added', { output_index: 0, item: this.#message('in_progress', null) }) +
      this.#event('response.content_part.added', { item_id: this.#messageId, output_index: 0, content_index: 0, part })
  }

  chunk (k: number): string {
    return this.#event('response.output_text.delta', { item_id: this.#messageId, output_index: 0, content_index: 0, delta: chunkText(k, this.chunks), logprobs: [] })
  }

  tail (): string {
    const text = fullText(this.chunks)
    const part = { type: 'output_text', annotations: [], logprobs: [], text }
    const done = this.#message('completed', text)
    return this.#event('response.output_text.done', { item_id: this.#messageId, output_index: 0, content_index: 0, text, logprobs: [] }) +
      this.#event('response.content_part.done', { item_id: this.#messageId, output_index: 0, content_index: 0, part }) +
      this.#event('response.output_item.done', { output_index: 0, item: done }) +
      this.#event('response.completed', { response: this.#response('completed', [done], this.#usage()) })
  }
}

/** A stored response read back (GET), or cancelled: the API answers with the response object. */
export function storedResponse (id: string, status: string): string {
  const text = fullText(8)
  const output = [{ id: `msg_${randomHex(48)}`, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', annotations: [], logprobs: [], text }] }]
  return JSON.stringify(responseObject(id, Math.floor(Date.now() / 1000), 'gpt-4o-mini', ECHO_NONE, status, output, {
    input_tokens: 12, input_tokens_details: { cached_tokens: 0 }, output_tokens: outputTokens(8), output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 12 + outputTokens(8),
  }))
}

/** A stored response's input items (GET …/input_items). */
export function inputItems (): string {
  const id = `msg_${randomHex(48)}`
  return JSON.stringify({
    object: 'list',
    data: [{ id, type: 'message', status: 'completed', role: 'user', content: [{ type: 'input_text', text: 'Say hello.' }] }],
    first_id: id,
    last_id: id,
    has_more: false,
  })
}

/** The embedding of one input: DIMENSIONS floats, the same for the same text. */
const DIMENSIONS = 8
function vector (text: string): number[] {
  let h = 2166136261
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619)
  return Array.from({ length: DIMENSIONS }, (_, i) => (((h >>> (i * 3)) & 0xff) - 128) / 128)
}

/** The inputs of an embeddings body: a string, strings, or token arrays (each one input). */
export function embeddingInputs (input: unknown): string[] {
  if (typeof input === 'string') return [input]
  return asArray(input).map((x) => (typeof x === 'string' ? x : JSON.stringify(x)))
}

/** POST /v1/embeddings: one embedding per input, as floats or, with encoding_format base64 (the SDK's default), little-endian float32 in base64. */
export function embeddingsBody (model: string, inputs: readonly string[], base64: boolean, inputTokens: number): string {
  return JSON.stringify({
    object: 'list',
    data: inputs.map((text, index) => {
      const v = vector(text)
      return { object: 'embedding', index, embedding: base64 ? Buffer.from(new Float32Array(v).buffer).toString('base64') : v }
    }),
    model,
    usage: { prompt_tokens: inputTokens, total_tokens: inputTokens },
  })
}

export { vector as embeddingVector }
