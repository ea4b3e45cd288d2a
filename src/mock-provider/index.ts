// The mock model provider: a real HTTP server speaking each registered provider's own API (alpha: OpenAI
// Chat Completions, beta: Anthropic Messages, gamma: Gemini generateContent), with behaviour chosen by
// the model name.
export { startMockProvider } from './server.js'
export { parseBehaviour, type Behaviour, type Mode } from './options.js'
export { chunkText, fullText, WORDS_PER_CHUNK } from './text.js'
export type { MockProvider, MockProviderOptions, MockStats, RecordedRequest } from './types.js'
