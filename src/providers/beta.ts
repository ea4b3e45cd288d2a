// beta: Anthropic Messages.
import { count as n, asArray, asObject, asString, jsonStrings, show, type Json } from './json.js'
import { commonResponseHeader, contentText, schemaText, textOfBase64, toolCallText, type Dialect, type RequestSink, type ReportedUsage, type RouteCall, type SpanSource } from './types.js'

// Anthropic's error types by status (https://docs.anthropic.com/en/api/errors).
const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  504: 'timeout_error',
  529: 'overloaded_error',
}

const COUNT_TOKENS: RouteCall = { kind: 'relay', endpoint: '/v1/messages/count_tokens', upstream: '/v1/messages/count_tokens', model: null, stream: null, params: null }

/**
 * Content: a string or blocks. Text blocks, tool_result blocks (their content, as role `tool`), tool_use
 * input (its strings joined by newlines), thinking, and as data: documents (text, base64 text and
 * content sources, title and context), search results (title and content) and web search result titles.
 */
function blocks (sink: RequestSink, i: number, role: string, base: string, content: unknown, label: string | null = null, source?: SpanSource): void {
  if (typeof content === 'string') { sink.text(i, role, base, content, label, null, false, source); return }
  const full = sink.full
  asArray(content).forEach((b, j) => {
    const block = asObject(b)
    if (block === null) return
    const at = `${base}[${j}]`
    if (block.type === 'tool_result' || block.type === 'mcp_tool_result') {
      const id = asString(block.tool_use_id)
      const head = full ? `tool result${id !== null ? ` (${id})` : ''}${block.is_error === true ? ' — error' : ''}` : null
      const before = sink.size
      blocks(sink, i, 'tool', `${at}.content`, block.content, head)
      if (full && sink.size === before) sink.other(i, 'tool', head, '(empty)')
      return
    }
    if (block.type === 'tool_use' || block.type === 'server_tool_use' || block.type === 'mcp_tool_use') {
      const head = full ? `tool use ${asString(block.name) ?? ''} (${asString(block.id) ?? ''})` : null
      if (!sink.text(i, role, `${at}.input`, jsonStrings(block.input).join('\n'), head, full ? show(block.input ?? {}) : null, true, source)) {
        sink.other(i, role, head, block.input ?? {})
      }
      return
    }
    if (block.type === 'document') { document(sink, i, role, at, block); return }
    if (block.type === 'search_result') {
      const head = full ? `search result${asString(block.source) !== null ? ` ${asString(block.source)}` : ''}` : null
      sink.text(i, role, `${at}.title`, block.title, head, null, false, 'data')
      blocks(sink, i, role, `${at}.content`, block.content, head, 'data')
      return
    }
    if (block.type === 'web_search_tool_result') {
      asArray(block.content).forEach((r, k) => {
        const result = asObject(r)
        sink.text(i, 'tool', `${at}.content[${k}].title`, result?.title, full ? `web search result ${asString(result?.url) ?? ''}`.trim() : null, null, false, 'data')
      })
      return
    }
    if (block.type === 'thinking' && sink.text(i, role, `${at}.thinking`, block.thinking, full ? 'thinking' : null, null, false, source)) return
    const hadText = sink.text(i, role, `${at}.text`, block.text, label, null, false, source)
    const type = String(block.type ?? 'block')
    if (!full || hadText || type === 'text') return
    if (type === 'redacted_thinking') sink.other(i, role, 'redacted thinking', '…')
    else if (type === 'image') sink.other(i, role, type, asString(asObject(block.source)?.url) ?? asString(asObject(block.source)?.media_type) ?? '')
    else sink.other(i, role, type, block)
  })
}

/** A document block: its title and context, and its text (a text source, base64 of a text type, or content blocks), all data. */
function document (sink: RequestSink, i: number, role: string, at: string, block: Json): void {
  const full = sink.full
  const source = asObject(block.source)
  const head = full ? `document${asString(block.title) !== null ? ` ${asString(block.title)}` : ''}` : null
  sink.text(i, role, `${at}.title`, block.title, full ? 'document title' : null, null, false, 'data')
  sink.text(i, role, `${at}.context`, block.context, full ? 'document context' : null, null, false, 'data')
  const before = sink.size
  if (source?.type === 'text') sink.text(i, role, `${at}.source.data`, source.data, head, null, false, 'data')
  else if (source?.type === 'base64') sink.text(i, role, `${at}.source.data`, textOfBase64(source.media_type, source.data), head, null, false, 'data')
  else if (source?.type === 'content') blocks(sink, i, role, `${at}.source.content`, source.content, head, 'data')
  if (full && sink.size === before) sink.other(i, role, 'document', asString(source?.url) ?? asString(source?.media_type) ?? asString(source?.file_id) ?? '')
}

/** The application's tools: each description and input schema's text, after the messages. */
function tools (sink: RequestSink, list: unknown): void {
  asArray(list).forEach((t, j) => {
    const tool = asObject(t)
    if (tool === null) return
    const head = sink.full ? `tool ${asString(tool.name) ?? ''}`.trim() : null
    sink.text(-1, 'system', `tools[${j}].description`, tool.description, head)
    sink.text(-1, 'system', `tools[${j}].input_schema`, schemaText(tool.input_schema), sink.full ? `${head ?? ''} input schema` : null, sink.full ? show(tool.input_schema) : null, true)
  })
}

export const beta: Dialect = {
  name: 'beta',
  route: '/api/beta_service/chat_completion',
  native: {
    route: '/v1/messages',
    routeNames: ['POST /v1/messages'],
    // The SDK sends apiKey as x-api-key, and authToken as a Bearer token.
    keyHeaders: ['x-api-key', 'authorization'],
    keyQuery: null,
    // The SDK sends anthropic-version on every request, and its key as x-api-key.
    sentBySdk: (header) => header('anthropic-version') !== '' || header('x-api-key') !== '',
    // Token counting: relayed after the key check (https://docs.anthropic.com/en/api/messages-count-tokens).
    more: [{
      method: 'post',
      pattern: '/v1/messages/count_tokens',
      names: ['POST /v1/messages/count_tokens'],
      resolve: () => COUNT_TOKENS,
    }],
    modelsRoute: '/v1/models',
    modelList (models) {
      const data = models.map((m) => ({ type: 'model', id: m.id, display_name: m.id, created_at: `${m.asOf}T00:00:00Z` }))
      return JSON.stringify({ data, has_more: false, first_id: data[0]?.id ?? null, last_id: data[data.length - 1]?.id ?? null })
    },
    clientError (e) {
      // Anthropic answers a bad parameter with 400 (it has no 422).
      const status = e.status === 422 ? 400 : e.status
      const type = ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error')
      // The SDK reads error.type, error.message and error.details.error_code (APIError.errorCode).
      const details = { error_code: e.code, param: e.param, request_id: e.requestId, ...e.extra }
      return { status, body: JSON.stringify({ type: 'error', error: { type, message: e.message, details }, request_id: e.requestId }) }
    },
  },
  defaultBaseUrl: 'https://api.anthropic.com',
  priceProvider: 'anthropic',
  otelSystem: 'anthropic',
  mockModule: new URL('../mock-provider/beta.js', import.meta.url).href,
  maxTokens: { within: null, members: ['max_tokens'] },
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
    // Our request-id is the trace id (the SDK reads it); Anthropic's keeps its value under another name.
    if (name === 'request-id') return 'x-upstream-request-id'
    if (name.startsWith('anthropic-ratelimit-') || name === 'anthropic-organization-id') return name
    return commonResponseHeader(name)
  },

  sampleBody: (text, system) => ({
    max_tokens: 64, ...(system === undefined ? {} : { system }), messages: [{ role: 'user', content: text }],
  }),

  walkRequest (body, sink) {
    blocks(sink, -1, 'system', 'system', body.system)
    asArray(body.messages).forEach((m, i) => {
      const msg = asObject(m)
      if (msg !== null) blocks(sink, i, String(msg.role ?? 'user'), `messages[${i}].content`, msg.content)
    })
    tools(sink, body.tools)
  },

  promptText (b) {
    let s = contentText(b.system)
    for (const m of asArray(b.messages)) s += contentText(asObject(m)?.content)
    return s
  },

  usageKey: '"usage"',

  readUsage (d: Json, u: ReportedUsage) {
    // A whole message, or in a stream message_start (input side) and message_delta (output so far,
    // cumulative; newer API versions repeat the input side there too).
    const usage = asObject(d.usage) ?? asObject(asObject(d.message)?.usage)
    if (usage === null) return false
    if (usage.input_tokens !== undefined) {
      const cacheRead = n(usage.cache_read_input_tokens)
      u.input = n(usage.input_tokens) + n(usage.cache_creation_input_tokens) + cacheRead
      u.cached = cacheRead
      u.cacheWrite = n(usage.cache_creation_input_tokens)
    }
    if (usage.output_tokens !== undefined) u.output = n(usage.output_tokens)
    return true
  },

  generatedText (d) {
    const delta = asObject(d.delta)
    if (delta !== null && typeof delta.text === 'string') return delta.text
    let s = ''
    for (const c of asArray(d.content)) { const co = asObject(c); if (co !== null && typeof co.text === 'string') s += co.text }
    return s
  },

  errorBody (status, message) {
    const type = ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error')
    return JSON.stringify({ type: 'error', error: { type, message } })
  },

  readAnswer (v, t, streamEvent) {
    if (!streamEvent) {
      for (const b of asArray(v.content)) {
        const block = asObject(b)
        if (block?.type === 'text') t.add(0, asString(block.text))
        else if (block?.type === 'tool_use') t.add(0, toolCallText(block.name, block.input))
      }
    } else if (v.type === 'content_block_start') {
      const block = asObject(v.content_block)
      if (block?.type === 'tool_use') t.openCall(0, block.name)
      else if (block?.type === 'text') t.add(0, asString(block.text))
    } else if (v.type === 'content_block_delta') {
      const d = asObject(v.delta)
      if (d?.type === 'text_delta') t.add(0, asString(d.text))
      else if (d?.type === 'input_json_delta') t.add(0, asString(d.partial_json))
    } else if (v.type === 'content_block_stop') {
      t.closeCall(0)
    }
  },
}
