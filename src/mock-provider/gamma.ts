// gamma: Google Gemini generateContent (https://ai.google.dev/api/generate-content). The model is in
// the path, not the body. streamGenerateContent sends SSE with `?alt=sse` (events end in CRLF, as
// Google's servers send them) and otherwise one JSON array written element by element.
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import { gamma as wire } from '../providers/gamma.js'
import { crlfDataEvent } from '../providers/sse.js'
import { BaseCall, FixedCall, Rejection, type MockDialect } from './dialect.js'
import { embeddingVector } from './alpha-responses.js'
import { asArray, asObject } from '../providers/json.js'
import { randomId } from './ids.js'
import { chunkJson, fullText, outputTokens } from './text.js'

const PREFIXES = ['/v1beta/models/', '/v1/models/', '/v1alpha/models/'] as const
const METHODS = ['generateContent', 'streamGenerateContent', 'countTokens', 'embedContent', 'batchEmbedContents'] as const
type Method = typeof METHODS[number]

function error (status: number, message?: string): Rejection {
  const text = message ?? (status === 429 ? 'Resource has been exhausted (e.g. check quota).' : `Mock error ${status}.`)
  return new Rejection(
    status,
    { 'content-type': 'application/json; charset=UTF-8', vary: 'Origin, X-Origin, Referer' },
    wire.errorBody(status, text),
  )
}

/** The model segment and method of a path this dialect serves, or null. */
function split (path: string): { model: string; method: Method } | null {
  const prefix = PREFIXES.find((p) => path.startsWith(p))
  if (prefix === undefined) return null
  const colon = path.lastIndexOf(':')
  if (colon <= prefix.length) return null
  const method = METHODS.find((m) => m === path.slice(colon + 1))
  if (method === undefined) return null
  return { model: path.slice(prefix.length, colon), method }
}

/** An embedding's values: the same text, the same vector. */
function values (content: unknown): number[] {
  return embeddingVector(JSON.stringify(asObject(content)?.parts ?? null))
}

const JSON_HEADERS = { 'content-type': 'application/json; charset=UTF-8', vary: 'Origin, X-Origin, Referer' }

/**
 * countTokens (https://ai.google.dev/api/tokens), embedContent and batchEmbedContents
 * (https://ai.google.dev/api/embeddings): an embedding answer carries no usage.
 */
function fixed (method: Method, model: string, body: Record<string, unknown>): FixedCall | Rejection {
  if (method === 'countTokens') {
    return new FixedCall(model, JSON_HEADERS, (n) => JSON.stringify({ totalTokens: n, promptTokensDetails: [{ modality: 'TEXT', tokenCount: n }] }))
  }
  if (method === 'embedContent') {
    if (asObject(body.content) === null) return error(400, '* EmbedContentRequest.content: contents is not specified')
    return new FixedCall(model, JSON_HEADERS, () => JSON.stringify({ embedding: { values: values(body.content) } }))
  }
  const requests = asArray(body.requests)
  if (requests.length === 0) return error(400, '* BatchEmbedContentsRequest.requests: at least one request is required')
  return new FixedCall(model, JSON_HEADERS, () => JSON.stringify({ embeddings: requests.map((r) => ({ values: values(asObject(r)?.content) })) }))
}

function queryParam (query: string, name: string): string | null {
  return query === '' ? null : new URLSearchParams(query).get(name)
}

class GammaCall extends BaseCall {
  #responseId = ''
  // Closes every streamed chunk after its candidates; built once per answer.
  #suffix = ''

  /** `sse`: streamed as server-sent events (`?alt=sse`), else as one JSON array. */
  constructor (model: string, stream: boolean, private readonly sse: boolean) {
    super(model, stream)
  }

  protected started (): void {
    this.#responseId = randomId(23)
    if (this.stream) this.#suffix = `,"modelVersion":${JSON.stringify(this.model)},"responseId":"${this.#responseId}"}`
  }

  headers (elapsedMs: number): OutgoingHttpHeaders {
    return {
      'content-type': this.stream && this.sse ? 'text/event-stream' : 'application/json; charset=UTF-8',
      vary: 'Origin, X-Origin, Referer',
      'server-timing': `gfet4t7; dur=${elapsedMs}`,
    }
  }

  #usage (candidates: number): string {
    return `{"promptTokenCount":${this.inputTokens},"candidatesTokenCount":${candidates},"totalTokenCount":${this.inputTokens + candidates}}`
  }

  body (): string {
    const candidates = outputTokens(this.chunks)
    return JSON.stringify({
      candidates: [{ content: { parts: [{ text: fullText(this.chunks) }], role: 'model' }, finishReason: 'STOP', index: 0 }],
      usageMetadata: { promptTokenCount: this.inputTokens, candidatesTokenCount: candidates, totalTokenCount: this.inputTokens + candidates },
      modelVersion: this.model,
      responseId: this.#responseId,
    })
  }

  head (): string {
    return this.sse ? '' : '['
  }

  chunk (k: number): string {
    // Gemini sends usageMetadata on every chunk, with the candidates counted so far.
    const finish = k === this.chunks - 1 ? ',"finishReason":"STOP"' : ''
    const json = `{"candidates":[{"content":{"parts":[{"text":${chunkJson(k, this.chunks)}}],"role":"model"}${finish},"index":0}],` +
      `"usageMetadata":${this.#usage(outputTokens(k + 1))}${this.#suffix}`
    if (this.sse) return crlfDataEvent(json)
    return k === 0 ? json : `,\r\n${json}`
  }

  tail (): string {
    return this.sse ? '' : ']'
  }
}

export const mockDialect: MockDialect = {
  name: 'gamma',
  matches: (path) => split(path) !== null,

  admit (req: IncomingMessage, query: string): Rejection | null {
    const key = req.headers['x-goog-api-key']
    if (typeof key === 'string' && key !== '') return null
    if (queryParam(query, 'key')) return null
    return error(403, 'Method doesn\'t allow unregistered callers (callers without established identity). ' +
      'Please use API Key or other form of API consumer identity to call this API.')
  },

  parse (body, path, query) {
    const target = split(path)
    if (target === null) return error(404, 'Not found')
    let model: string
    try {
      model = decodeURIComponent(target.model)
    } catch {
      return error(400, 'Invalid model name in the request path.')
    }
    if (model === '') return error(400, 'A model name is required.')
    if (target.method !== 'generateContent' && target.method !== 'streamGenerateContent') return fixed(target.method, model, body)
    const stream = target.method === 'streamGenerateContent'
    return new GammaCall(model, stream, stream && queryParam(query, 'alt') === 'sse')
  },

  error,
  invalidJson: () => error(400, 'Invalid JSON payload received.'),
  notFound: (method, path) => error(404, `The requested URL ${path} was not found on this server.`),
}
