// alpha: OpenAI Chat Completions (https://platform.openai.com/docs/api-reference/chat). Bodies, events
// and headers follow what api.openai.com sends today, so a proxy sees the real thing.
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import { alpha as wire } from '../providers/alpha.js'
import { isObject } from '../providers/json.js'
import { DONE_EVENT, dataEvent } from '../providers/sse.js'
import { BaseCall, FixedCall, Rejection, type Call, type MockDialect } from './dialect.js'
import { echoOf, embeddingInputs, embeddingsBody, inputItems, ResponsesCall, storedResponse } from './alpha-responses.js'
import { randomHex, randomId } from './ids.js'
import { chunkJson, fullText, outputTokens } from './text.js'

const FINGERPRINT = `fp_${randomHex(10)}`
const REQUESTS_LIMIT = 10_000
const TOKENS_LIMIT = 30_000_000

const INVALID_JSON = 'We could not parse the JSON body of your request. (HINT: This likely means you aren\'t using your ' +
  'HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)'

function requestId (): string {
  return `req_${randomHex(32)}`
}

function reject (status: number, message: string, code?: string | null): Rejection {
  return new Rejection(status, { 'content-type': 'application/json', 'x-request-id': requestId() }, wire.errorBody(status, message, code))
}

// OpenAI's default messages by status.
function error (status: number, message?: string): Rejection {
  switch (status) {
    case 401: return reject(status, message ?? 'Incorrect API key provided.')
    case 403: return reject(status, message ?? 'Country, region, or territory not supported')
    case 404: return reject(status, message ?? 'The model does not exist or you do not have access to it.')
    case 429: return reject(status, message ?? 'Rate limit reached for requests. Please try again in 7s.')
    case 503: return reject(status, message ?? 'The engine is currently overloaded, please try again later.')
  }
  if (status >= 500) return reject(status, message ?? 'The server had an error while processing your request. Sorry about that!')
  return reject(status, message ?? `Mock error ${status}.`)
}

class AlphaCall extends BaseCall {
  #id = ''
  #created = 0
  // The part every chunk event shares, up to the choices array; built once per streamed answer.
  #prefix = ''
  // `"usage":null` rides on every chunk once the client asked for usage, as OpenAI does.
  #usageNull = ''

  constructor (model: string, stream: boolean, private readonly includeUsage: boolean) {
    super(model, stream)
  }

  protected started (): void {
    this.#id = `chatcmpl-${randomId(29)}`
    this.#created = Math.floor(Date.now() / 1000)
    if (this.stream) {
      this.#prefix = `{"id":"${this.#id}","object":"chat.completion.chunk","created":${this.#created},` +
        `"model":${JSON.stringify(this.model)},"service_tier":"default","system_fingerprint":"${FINGERPRINT}","choices":[`
      this.#usageNull = this.includeUsage ? ',"usage":null' : ''
    }
  }

  headers (elapsedMs: number): OutgoingHttpHeaders {
    return {
      'content-type': this.stream ? 'text/event-stream' : 'application/json',
      'cache-control': this.stream ? 'no-cache' : 'no-store',
      'x-request-id': requestId(),
      'openai-processing-ms': elapsedMs,
      'openai-version': '2020-10-01',
      'x-ratelimit-limit-requests': REQUESTS_LIMIT,
      'x-ratelimit-remaining-requests': REQUESTS_LIMIT - 1,
      'x-ratelimit-limit-tokens': TOKENS_LIMIT,
      'x-ratelimit-remaining-tokens': TOKENS_LIMIT - this.inputTokens,
      'x-ratelimit-reset-requests': '6ms',
      'x-ratelimit-reset-tokens': '0s',
    }
  }

  #usage (): object {
    const completion = outputTokens(this.chunks)
    return {
      prompt_tokens: this.inputTokens,
      completion_tokens: completion,
      total_tokens: this.inputTokens + completion,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    }
  }

  body (): string {
    return JSON.stringify({
      id: this.#id,
      object: 'chat.completion',
      created: this.#created,
      model: this.model,
      choices: [{
        index: 0,
        message: { role: 'assistant', content: fullText(this.chunks), refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: 'stop',
      }],
      usage: this.#usage(),
      service_tier: 'default',
      system_fingerprint: FINGERPRINT,
    })
  }

  #event (choice: string): string {
    return dataEvent(`${this.#prefix}${choice}]${this.#usageNull}}`)
  }

  head (): string {
    return this.#event('{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}')
  }

  chunk (k: number): string {
    return this.#event(`{"index":0,"delta":{"content":${chunkJson(k, this.chunks)}},"logprobs":null,"finish_reason":null}`)
  }

  tail (): string {
    const finish = this.#event('{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}')
    // With stream_options.include_usage, one more chunk with no choices carries the usage.
    const usage = this.includeUsage ? dataEvent(`${this.#prefix}],"usage":${JSON.stringify(this.#usage())}}`) : ''
    return finish + usage + DONE_EVENT
  }
}

/** The headers of every answer: a request id, the processing time, the rate limits. */
function baseHeaders (): OutgoingHttpHeaders {
  return { 'content-type': 'application/json', 'x-request-id': requestId(), 'openai-processing-ms': 1, 'openai-version': '2020-10-01' }
}

const POST_PATHS: ReadonlySet<string> = new Set(['/v1/chat/completions', '/v1/responses', '/v1/responses/input_tokens', '/v1/embeddings'])
/** `/v1/responses/{id}`, `/v1/responses/{id}/cancel` and `/v1/responses/{id}/input_items`: the id and the rest. */
const STORED = /^\/v1\/responses\/(resp_[A-Za-z0-9]+)(\/cancel|\/input_items)?$/

/** A call on a stored response: read (GET), its input items (GET), deleted (DELETE) or cancelled (POST). */
function stored (method: string, path: string): Call | Rejection {
  const m = STORED.exec(path)
  if (m === null) return reject(404, `Invalid URL (${method} ${path})`, null)
  const [, id, rest] = m as unknown as [string, string, string | undefined]
  const body = method === 'DELETE' && rest === undefined
    ? () => JSON.stringify({ id, object: 'response.deleted', deleted: true })
    : method === 'GET' && rest === '/input_items' ? inputItems
      : method === 'GET' && rest === undefined ? () => storedResponse(id, 'completed')
        : method === 'POST' && rest === '/cancel' ? () => storedResponse(id, 'cancelled') : null
  return body === null ? reject(404, `Invalid URL (${method} ${path})`, null) : new FixedCall('', baseHeaders(), body)
}

export const mockDialect: MockDialect = {
  name: 'alpha',
  matches: (path) => POST_PATHS.has(path) || STORED.test(path),
  serves: (method, path) => (method === 'GET' || method === 'DELETE' || method === 'POST') && STORED.test(path),

  admit (req: IncomingMessage): Rejection | null {
    const auth = req.headers.authorization
    if (typeof auth === 'string' && auth.startsWith('Bearer ') && auth.length > 7) return null
    return error(401, "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
  },

  parse (body, path, query, method) {
    if (STORED.test(path)) return stored(method, path)
    const model = body.model
    if (path === '/v1/responses/input_tokens') {
      return new FixedCall(typeof model === 'string' ? model : '', baseHeaders(), (n) => JSON.stringify({ object: 'response.input_tokens', input_tokens: n }))
    }
    if (typeof model !== 'string' || model === '') return reject(400, 'you must provide a model parameter')
    if (path === '/v1/embeddings') {
      const inputs = embeddingInputs(body.input)
      if (inputs.length === 0) return reject(400, "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.")
      return new FixedCall(model, baseHeaders(), (n) => embeddingsBody(model, inputs, body.encoding_format === 'base64', n))
    }
    const stream = body.stream === true
    if (path === '/v1/responses') return new ResponsesCall(model, stream, echoOf(body), baseHeaders)
    const options = body.stream_options
    return new AlphaCall(model, stream, stream && isObject(options) && options.include_usage === true)
  },

  error,

  invalidJson: () => reject(400, INVALID_JSON),

  notFound: (method, path) => reject(404, `Invalid URL (${method} ${path})`, null),
}
