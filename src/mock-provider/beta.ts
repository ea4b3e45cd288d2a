// beta: Anthropic Messages (https://docs.anthropic.com/en/api/messages and, for the events,
// https://docs.anthropic.com/en/docs/build-with-claude/streaming).
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import { beta as wire } from '../providers/beta.js'
import { namedEvent } from '../providers/sse.js'
import { BaseCall, FixedCall, Rejection, type MockDialect } from './dialect.js'
import { randomId } from './ids.js'
import { chunkJson, fullText, outputTokens } from './text.js'

const REQUESTS_LIMIT = 4000
const TOKENS_LIMIT = 400_000

function requestId (): string {
  return `req_${randomId(24)}`
}

function error (status: number, message?: string): Rejection {
  const text = message ?? (status === 429 ? 'Number of requests has exceeded your rate limit.' : `Mock error ${status}.`)
  return new Rejection(status, { 'content-type': 'application/json', 'request-id': requestId() }, wire.errorBody(status, text))
}

// The last event never changes.
const STREAM_END = namedEvent('message_stop', '{"type":"message_stop"}')

class BetaCall extends BaseCall {
  #id = ''

  protected started (): void {
    this.#id = `msg_${randomId(24)}`
  }

  headers (): OutgoingHttpHeaders {
    return {
      'content-type': this.stream ? 'text/event-stream' : 'application/json',
      'cache-control': this.stream ? 'no-cache' : 'no-store',
      'request-id': requestId(),
      'anthropic-ratelimit-requests-limit': REQUESTS_LIMIT,
      'anthropic-ratelimit-requests-remaining': REQUESTS_LIMIT - 1,
      'anthropic-ratelimit-input-tokens-limit': TOKENS_LIMIT,
      'anthropic-ratelimit-input-tokens-remaining': TOKENS_LIMIT - this.inputTokens,
      'anthropic-ratelimit-output-tokens-limit': TOKENS_LIMIT,
      'anthropic-ratelimit-output-tokens-remaining': TOKENS_LIMIT,
    }
  }

  body (): string {
    return JSON.stringify({
      id: this.#id,
      type: 'message',
      role: 'assistant',
      model: this.model,
      content: [{ type: 'text', text: fullText(this.chunks) }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: {
        input_tokens: this.inputTokens,
        output_tokens: outputTokens(this.chunks),
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
      },
    })
  }

  head (): string {
    // message_start reports output_tokens 1 (the first token is counted already); message_delta has the total.
    const start = {
      type: 'message_start',
      message: {
        id: this.#id,
        type: 'message',
        role: 'assistant',
        model: this.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: this.inputTokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 },
      },
    }
    return namedEvent('message_start', JSON.stringify(start)) +
      namedEvent('content_block_start', '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}') +
      namedEvent('ping', '{"type": "ping"}')
  }

  chunk (k: number): string {
    return namedEvent('content_block_delta',
      `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":${chunkJson(k, this.chunks)}}}`)
  }

  tail (): string {
    return namedEvent('content_block_stop', '{"type":"content_block_stop","index":0}') +
      namedEvent('message_delta',
        `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":${outputTokens(this.chunks)}}}`) +
      STREAM_END
  }
}

export const mockDialect: MockDialect = {
  name: 'beta',
  matches: (path) => path === '/v1/messages' || path === '/v1/messages/count_tokens',

  admit (req: IncomingMessage): Rejection | null {
    const key = req.headers['x-api-key']
    if (typeof key !== 'string' || key === '') return error(401, 'x-api-key header is required')
    if (req.headers['anthropic-version'] === undefined) return error(400, 'anthropic-version: header is required')
    return null
  },

  parse (body, path) {
    const model = body.model
    if (typeof model !== 'string' || model === '') return error(400, 'model: Field required')
    // https://docs.anthropic.com/en/api/messages-count-tokens
    if (path === '/v1/messages/count_tokens') {
      return new FixedCall(model, { 'content-type': 'application/json', 'request-id': `req_${randomId(24)}` }, (n) => JSON.stringify({ input_tokens: n }))
    }
    return new BetaCall(model, body.stream === true)
  },

  error,
  invalidJson: () => error(400, 'There was an error parsing the body of your request. The body must be valid JSON.'),
  notFound: () => error(404, 'Not Found'),
}
