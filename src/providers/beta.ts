// beta: Anthropic Messages.
import { count as n, asArray, asObject, asString, jsonStrings, show, type Json } from './json.js'
import { commonResponseHeader, contentText, toolCallText, type Dialect, type RequestSink, type ReportedUsage } from './types.js'

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

/**
 * Content: a string or blocks. Text blocks, tool_result blocks (their content, as role `tool`),
 * tool_use input (its strings joined by newlines), and text documents.
 */
function blocks (sink: RequestSink, i: number, role: string, base: string, content: unknown, label: string | null = null): void {
  if (typeof content === 'string') { sink.text(i, role, base, content, label); return }
  const full = sink.full
  asArray(content).forEach((b, j) => {
    const block = asObject(b)
    if (block === null) return
    if (block.type === 'tool_result') {
      const id = asString(block.tool_use_id)
      const head = full ? `tool result${id !== null ? ` (${id})` : ''}${block.is_error === true ? ' — error' : ''}` : null
      const before = sink.size
      blocks(sink, i, 'tool', `${base}[${j}].content`, block.content, head)
      if (full && sink.size === before) sink.other(i, 'tool', head, '(empty)')
      return
    }
    if (block.type === 'tool_use') {
      const head = full ? `tool use ${asString(block.name) ?? ''} (${asString(block.id) ?? ''})` : null
      if (!sink.text(i, role, `${base}[${j}].input`, jsonStrings(block.input).join('\n'), head, full ? show(block.input ?? {}) : null, true)) {
        sink.other(i, role, head, block.input ?? {})
      }
      return
    }
    const hadText = sink.text(i, role, `${base}[${j}].text`, block.text, label)
    const source = asObject(block.source)
    if (block.type === 'document' && source?.type === 'text') {
      sink.text(i, role, `${base}[${j}].source.data`, source.data, full ? `document${asString(block.title) !== null ? ` ${asString(block.title)}` : ''}` : null)
      return
    }
    const type = String(block.type ?? 'block')
    if (!full || hadText || type === 'text') return
    if (type === 'server_tool_use') sink.other(i, role, `tool use ${asString(block.name) ?? ''} (${asString(block.id) ?? ''})`, block.input ?? {})
    else if (type === 'thinking') sink.other(i, role, 'thinking', asString(block.thinking) ?? '')
    else if (type === 'redacted_thinking') sink.other(i, role, 'redacted thinking', '…')
    else if (type === 'image' || type === 'document') sink.other(i, role, type, asString(source?.url) ?? asString(source?.media_type) ?? '')
    else sink.other(i, role, type, block)
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
    if (name === 'request-id' || name.startsWith('anthropic-ratelimit-') || name === 'anthropic-organization-id') return name
    return commonResponseHeader(name)
  },

  walkRequest (body, sink) {
    blocks(sink, -1, 'system', 'system', body.system)
    asArray(body.messages).forEach((m, i) => {
      const msg = asObject(m)
      if (msg !== null) blocks(sink, i, String(msg.role ?? 'user'), `messages[${i}].content`, msg.content)
    })
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
