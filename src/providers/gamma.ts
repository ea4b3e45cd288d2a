// gamma: Google Gemini generateContent. The path carries the model, so gamma takes `model` and `stream`
// from the body as service fields and moves them into the upstream URL.
import { commonResponseHeader, type Dialect } from './types.js'

// Gemini model ids (`gemini-2.5-flash`, `gemini-1.5-pro-002`, tuned `tunedModels/x` is not a models/ path).
const MODEL = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

function bareModel (model: string): string {
  return model.startsWith('models/') ? model.slice(7) : model
}

export const gamma: Dialect = {
  name: 'gamma',
  route: '/api/gamma_service/chat_completion',
  keyField: 'gamma_api_key',
  ownFields: ['model', 'stream'],
  params: [
    { name: 'model', type: 'string', required: true },
    { name: 'contents', type: 'array', required: true },
  ],
  validModel: (model) => MODEL.test(bareModel(model)),
  target (facts) {
    const model = encodeURIComponent(bareModel(facts.model ?? ''))
    return facts.stream
      ? { path: `/v1beta/models/${model}:streamGenerateContent?alt=sse`, streaming: true }
      : { path: `/v1beta/models/${model}:generateContent`, streaming: false }
  },
  authHeaders: (key) => ({ 'x-goog-api-key': key }),
  forwardHeaders: new Set(['x-goog-user-project']),
  defaultHeaders: {},
  responseHeader (name) {
    if (name === 'x-goog-request-id' || name === 'server-timing') return name
    return commonResponseHeader(name)
  },
}
