// beta: Anthropic Messages.
import { commonResponseHeader, type Dialect } from './types.js'

export const beta: Dialect = {
  name: 'beta',
  route: '/api/beta_service/chat_completion',
  keyField: 'beta_api_key',
  ownFields: [],
  params: [
    { name: 'model', type: 'string', required: true },
    { name: 'messages', type: 'array', required: true },
    { name: 'max_tokens', type: 'number', required: true },
  ],
  target: (facts) => ({ path: '/v1/messages', streaming: facts.stream }),
  authHeaders: (key) => ({ 'x-api-key': key }),
  forwardHeaders: new Set(['anthropic-version', 'anthropic-beta']),
  // https://docs.anthropic.com/en/api/versioning: the API refuses a request without a version.
  defaultHeaders: { 'anthropic-version': '2023-06-01' },
  responseHeader (name) {
    if (name === 'request-id' || name.startsWith('anthropic-ratelimit-') || name === 'anthropic-organization-id') return name
    return commonResponseHeader(name)
  },
}
