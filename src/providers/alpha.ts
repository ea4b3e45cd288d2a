// alpha: OpenAI Chat Completions (any OpenAI-compatible server can stand behind it).
import { commonResponseHeader, type Dialect } from './types.js'

export const alpha: Dialect = {
  name: 'alpha',
  route: '/api/alpha_service/chat_completion',
  keyField: 'alpha_api_key',
  ownFields: [],
  params: [
    { name: 'model', type: 'string', required: true },
    { name: 'messages', type: 'array', required: true },
  ],
  target: (facts) => ({ path: '/v1/chat/completions', streaming: facts.stream }),
  authHeaders: (key) => ({ authorization: `Bearer ${key}` }),
  forwardHeaders: new Set(['openai-organization', 'openai-project', 'openai-beta', 'idempotency-key']),
  defaultHeaders: {},
  responseHeader (name) {
    // Our own x-request-id is the trace id; the provider's keeps its value under another name.
    if (name === 'x-request-id') return 'x-upstream-request-id'
    if (name.startsWith('x-ratelimit-') || name === 'openai-processing-ms' || name === 'openai-version') return name
    return commonResponseHeader(name)
  },
}
