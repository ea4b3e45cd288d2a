// alpha: OpenAI Chat Completions (any OpenAI-compatible server can stand behind it).
import { count as n, asArray, asObject, asString, epochSeconds, show, type Json } from './json.js'
import { commonResponseHeader, contentText, schemaText, setUsage, textOfBase64, toolCallText, type AnswerSink, type Dialect, type NativeRoute, type ParamRule, type RequestSink, type ReportedUsage, type RouteCall } from './types.js'

// OpenAI's error `type` and `code` by status (https://platform.openai.com/docs/guides/error-codes).
const ERRORS: Readonly<Record<number, readonly [string, string | null]>> = {
  401: ['invalid_request_error', 'invalid_api_key'],
  403: ['request_forbidden', 'unsupported_country_region_territory'],
  404: ['invalid_request_error', 'model_not_found'],
  429: ['requests', 'rate_limit_exceeded'],
}

// A file sent as bare base64 is read as text when its name says it is text.
const TEXT_NAMES: Readonly<Record<string, string>> = { txt: 'text/plain', md: 'text/markdown', csv: 'text/csv', tsv: 'text/tab-separated-values', json: 'application/json', html: 'text/html', htm: 'text/html', xml: 'application/xml', yaml: 'application/yaml', yml: 'application/yaml', log: 'text/plain' }
const typeOfName = (name: string | null): string | null => TEXT_NAMES[name?.slice(name.lastIndexOf('.') + 1).toLowerCase() ?? ''] ?? null

/** An image part's URL; a data URL is shortened to its header and length. */
function media (part: Json): string {
  const url = asString(asObject(part.image_url)?.url) ?? asString(part.image_url) ?? ''
  if (url === '') return ''
  return url.startsWith('data:') ? `${url.slice(0, url.indexOf(',') + 1)}… (${url.length.toLocaleString('en-US')} characters)` : url
}

/**
 * Every text the model reads, with who wrote it: messages (string content or parts: text, refusal,
 * file contents when their type is text), the sender `name`, an assistant's refusal, the arguments of
 * tool_calls and of the legacy functions API's function_call, then the application's texts after the
 * messages (tool and function descriptions and parameter schemas, the response format's schema) and
 * the predicted output, so the messages keep their segment numbers. A `function` message is a tool result.
 */
function walkRequest (body: Json, sink: RequestSink): void {
  const full = sink.full
  asArray(body.messages).forEach((m, i) => {
    const msg = asObject(m)
    if (msg === null) return
    const role = msg.role === 'function' ? 'tool' : String(msg.role ?? 'user')
    const before = sink.size
    let label: string | null = null
    if (full) {
      const who = asString(msg.name)
      const callId = asString(msg.tool_call_id)
      label = role === 'tool' ? `result${who !== null ? ` of ${who}` : ''}${callId !== null ? ` (${callId})` : ''}` : who
    }
    const base = `messages[${i}].content`
    const content = msg.content
    if (typeof content === 'string') {
      sink.text(i, role, base, content, label)
    } else {
      asArray(content).forEach((p, j) => {
        const part = asObject(p)
        if (part === null) return
        if (sink.text(i, role, `${base}[${j}].text`, part.text, label)) return
        if (part.type === 'refusal' && sink.text(i, role, `${base}[${j}].refusal`, part.refusal, full ? 'refusal' : null)) return
        const file = asObject(part.file)
        if (part.type === 'file' && file !== null) {
          const name = asString(file.filename)
          sink.text(i, role, `${base}[${j}].file.filename`, name, full ? 'file name' : null, null, false, 'data')
          const text = textOfBase64(typeOfName(name), file.file_data)
          if (sink.text(i, role, `${base}[${j}].file.file_data`, text, full ? `file${name !== null ? ` ${name}` : ''}` : null, null, false, 'data') || !full) return
          sink.other(i, role, 'file', name ?? asString(file.file_id) ?? '')
          return
        }
        if (!full) return
        const type = String(part.type ?? 'part')
        if (type === 'text') return
        sink.other(i, role, type === 'image_url' ? 'image' : type, type === 'image_url' ? media(part) : part)
      })
    }
    // A tool or function message's name is the application's function; another message's, its sender's.
    sink.text(i, role, `messages[${i}].name`, msg.name, full ? 'name' : null, null, false, role === 'tool' ? 'application' : undefined)
    sink.text(i, role, `messages[${i}].refusal`, msg.refusal, full ? 'refusal' : null)
    asArray(msg.tool_calls).forEach((c, j) => {
      const call = asObject(c)
      const fn = asObject(call?.function)
      const name = full ? `tool call ${asString(fn?.name) ?? ''}${asString(call?.id) !== null ? ` (${asString(call?.id)})` : ''}`.trim() : null
      if (!sink.text(i, role, `messages[${i}].tool_calls[${j}].function.arguments`, fn?.arguments, name, null, true) && call !== null) {
        sink.other(i, role, name, fn?.arguments ?? call)
      }
    })
    const legacy = asObject(msg.function_call)
    const legacyName = full ? `function call ${asString(legacy?.name) ?? ''}`.trim() : null
    if (!sink.text(i, role, `messages[${i}].function_call.arguments`, legacy?.arguments, legacyName, null, true) && legacy !== null) {
      sink.other(i, role, legacyName, legacy.arguments ?? legacy)
    }
    if (full && sink.size === before) sink.other(i, role, label, '(empty)')
  })
  const declare = (path: string, fn: Json | null, what: string): void => {
    if (fn === null) return
    const head = full ? `${what} ${asString(fn.name) ?? ''}`.trim() : null
    sink.text(-1, 'system', `${path}.description`, fn.description, head)
    sink.text(-1, 'system', `${path}.parameters`, schemaText(fn.parameters), full ? `${head ?? ''} parameters` : null, full ? show(fn.parameters) : null, true)
  }
  asArray(body.tools).forEach((t, j) => {
    const tool = asObject(t)
    declare(`tools[${j}].function`, asObject(tool?.function), 'tool')
    declare(`tools[${j}].custom`, asObject(tool?.custom), 'tool')
  })
  asArray(body.functions).forEach((f, j) => { declare(`functions[${j}]`, asObject(f), 'function') })
  const format = asObject(asObject(body.response_format)?.json_schema)
  if (format !== null) {
    const head = full ? `response format ${asString(format.name) ?? ''}`.trim() : null
    sink.text(-1, 'system', 'response_format.json_schema.description', format.description, head)
    sink.text(-1, 'system', 'response_format.json_schema.schema', schemaText(format.schema), full ? `${head ?? ''} schema` : null, full ? show(format.schema) : null, true)
  }
  const prediction = asObject(body.prediction)?.content
  if (typeof prediction === 'string') sink.text(-1, 'system', 'prediction.content', prediction, full ? 'predicted output' : null, null, false, 'data')
  else {
    asArray(prediction).forEach((p, j) => {
      sink.text(-1, 'system', `prediction.content[${j}].text`, asObject(p)?.text, full ? 'predicted output' : null, null, false, 'data')
    })
  }
}

/**
 * A Responses API body's texts (https://platform.openai.com/docs/api-reference/responses/create): the
 * `input` (a string, or items: messages with text, refusal and file parts, function and custom tool
 * calls, their outputs as data, reasoning summaries), numbered by item, then the `instructions` and
 * the tools and text format the application declares. An embeddings body's `input` (a string or
 * strings) walks the same way.
 */
function walkResponsesRequest (body: Json, sink: RequestSink): void {
  const full = sink.full
  const input = body.input
  if (typeof input === 'string') sink.text(0, 'user', 'input', input)
  asArray(input).forEach((it, i) => {
    const at = `input[${i}]`
    if (typeof it === 'string') { sink.text(i, 'user', at, it); return }
    const item = asObject(it)
    if (item === null) return
    const type = asString(item.type) ?? 'message'
    const before = sink.size
    if (type === 'function_call_output' || type === 'custom_tool_call_output') {
      const id = asString(item.call_id)
      const head = full ? `result${id !== null ? ` (${id})` : ''}` : null
      const output = item.output
      if (typeof output === 'string') sink.text(i, 'tool', `${at}.output`, output, head)
      else responseParts(sink, i, 'tool', `${at}.output`, output, head)
    } else if (type === 'function_call' || type === 'custom_tool_call') {
      const name = full ? `tool call ${asString(item.name) ?? ''}${asString(item.call_id) !== null ? ` (${asString(item.call_id)})` : ''}`.trim() : null
      const member = type === 'function_call' ? 'arguments' : 'input'
      if (!sink.text(i, 'assistant', `${at}.${member}`, item[member], name, null, true) && full) sink.other(i, 'assistant', name, item[member] ?? item)
    } else if (type === 'reasoning') {
      asArray(item.summary).forEach((p, j) => { sink.text(i, 'assistant', `${at}.summary[${j}].text`, asObject(p)?.text, full ? 'reasoning summary' : null) })
    } else if (type === 'message') {
      const role = String(item.role ?? 'user')
      if (typeof item.content === 'string') sink.text(i, role, `${at}.content`, item.content)
      else responseParts(sink, i, role, `${at}.content`, item.content, null)
    } else if (full) {
      sink.other(i, 'user', type, item)
      return
    }
    if (full && sink.size === before) sink.other(i, type === 'message' ? String(item.role ?? 'user') : 'tool', null, '(empty)')
  })
  sink.text(-1, 'system', 'instructions', body.instructions, full ? 'instructions' : null)
  // A stored prompt's variables are filled into it: the model reads them as it reads the input.
  const variables = asObject(asObject(body.prompt)?.variables)
  for (const name in variables ?? {}) {
    const value = variables![name]
    const head = full ? `prompt variable ${name}` : null
    if (typeof value === 'string') sink.text(-1, 'user', `prompt.variables.${name}`, value, head)
    else responseParts(sink, -1, 'user', `prompt.variables.${name}`, [value], head)
  }
  asArray(body.tools).forEach((t, j) => {
    const tool = asObject(t)
    if (tool === null || (tool.type !== 'function' && tool.type !== 'custom')) return
    const head = full ? `tool ${asString(tool.name) ?? ''}`.trim() : null
    sink.text(-1, 'system', `tools[${j}].description`, tool.description, head)
    if (tool.parameters !== undefined) sink.text(-1, 'system', `tools[${j}].parameters`, schemaText(tool.parameters), full ? `${head ?? ''} parameters` : null, full ? show(tool.parameters) : null, true)
  })
  const format = asObject(asObject(body.text)?.format)
  if (format !== null && format.type === 'json_schema') {
    const head = full ? `response format ${asString(format.name) ?? ''}`.trim() : null
    sink.text(-1, 'system', 'text.format.description', format.description, head)
    sink.text(-1, 'system', 'text.format.schema', schemaText(format.schema), full ? `${head ?? ''} schema` : null, full ? show(format.schema) : null, true)
  }
}

/** A Responses item's content parts: input, output and refusal text, and a file's name and text contents as data. */
function responseParts (sink: RequestSink, i: number, role: string, base: string, content: unknown, label: string | null): void {
  const full = sink.full
  asArray(content).forEach((p, j) => {
    const part = asObject(p)
    if (part === null) return
    const at = `${base}[${j}]`
    if (sink.text(i, role, `${at}.text`, part.text, label)) return
    if (part.type === 'refusal' && sink.text(i, role, `${at}.refusal`, part.refusal, full ? 'refusal' : null)) return
    if (part.type === 'input_file') {
      const name = asString(part.filename)
      sink.text(i, role, `${at}.filename`, name, full ? 'file name' : null, null, false, 'data')
      const text = textOfBase64(typeOfName(name), part.file_data)
      if (sink.text(i, role, `${at}.file_data`, text, full ? `file${name !== null ? ` ${name}` : ''}` : null, null, false, 'data') || !full) return
      sink.other(i, role, 'file', name ?? asString(part.file_id) ?? asString(part.file_url) ?? '')
      return
    }
    if (!full) return
    const type = String(part.type ?? 'part')
    if (type === 'input_text' || type === 'output_text') return
    sink.other(i, role, type === 'input_image' ? 'image' : type, type === 'input_image' ? asString(part.image_url) ?? asString(part.file_id) ?? '' : part)
  })
}

/** A Responses answer's text: the output messages' text (a whole response), or one text delta (a stream event). */
function responsesText (d: Json): string {
  if (d.type === 'response.output_text.delta') return asString(d.delta) ?? ''
  let s = ''
  for (const it of asArray(d.output)) {
    const item = asObject(it)
    if (item?.type !== 'message') continue
    for (const p of asArray(item.content)) {
      const part = asObject(p)
      if (part?.type === 'output_text' && typeof part.text === 'string') s += part.text
    }
  }
  return s
}

/**
 * A Responses answer as the dashboard shows it, all under index 0: a whole response's messages and
 * function calls; in a stream, the text and refusal deltas and each function call opened, its
 * argument pieces, and closed (the `response.completed` event repeats the whole answer and is skipped).
 */
function readResponsesAnswer (v: Json, t: AnswerSink, streamEvent: boolean): void {
  if (streamEvent) {
    const item = asObject(v.item)
    if (v.type === 'response.output_text.delta' || v.type === 'response.refusal.delta' || v.type === 'response.function_call_arguments.delta') t.add(0, asString(v.delta))
    else if (v.type === 'response.output_item.added' && item?.type === 'function_call') t.openCall(0, item.name)
    else if (v.type === 'response.output_item.done' && item?.type === 'function_call') t.closeCall(0)
    return
  }
  for (const it of asArray(v.output)) {
    const item = asObject(it)
    if (item?.type === 'function_call') { t.add(0, toolCallText(item.name, item.arguments)); continue }
    if (item?.type !== 'message') continue
    for (const p of asArray(item.content)) {
      const part = asObject(p)
      t.add(0, asString(part?.text) ?? asString(part?.refusal))
    }
  }
}

/** A Responses or chat request: a Responses body has `input`, `instructions` or a stored `prompt`, and no `messages`. */
const isResponses = (b: Json): boolean => b.messages === undefined && (b.input !== undefined || b.instructions !== undefined || b.prompt !== undefined)
/** A Responses answer or stream event: it has `output`, or a `response.*` event type. */
const isResponsesAnswer = (d: Json): boolean => d.choices === undefined && (d.output !== undefined || (typeof d.type === 'string' && d.type.startsWith('response.')))

/** A stored response's id as the Responses API writes it (`resp_…`): anything else is not forwarded into a path. */
const RESPONSE_ID = /^[A-Za-z0-9_-]{1,200}$/

const RESPONSES_PARAMS: readonly ParamRule[] = [
  { name: 'model', type: 'string', required: true },
  { name: 'input', type: 'string', or: 'array', required: false },
  { name: 'instructions', type: 'string', required: false },
]
const EMBEDDINGS_PARAMS: readonly ParamRule[] = [
  { name: 'model', type: 'string', required: true },
  { name: 'input', type: 'string', or: 'array', required: true },
]

/** A route with no parameter: always the one call. */
function fixed (method: NativeRoute['method'], pattern: string, call: Omit<RouteCall, 'endpoint' | 'upstream' | 'model' | 'stream'>): NativeRoute {
  const resolved: RouteCall = { ...call, endpoint: pattern, upstream: pattern, model: null, stream: null }
  return { method, pattern, names: [`${method === 'del' ? 'DELETE' : method.toUpperCase()} ${pattern}`], resolve: () => resolved }
}

/** A relayed route on one stored response (`/v1/responses/:id…`): forwarded to the same path when the id is one. */
function storedResponse (method: NativeRoute['method'], pattern: string): NativeRoute {
  const endpoint = pattern.replace(':id', '{id}')
  return {
    method,
    pattern,
    names: [`${method === 'del' ? 'DELETE' : method.toUpperCase()} ${endpoint}`],
    resolve: (path, params) => RESPONSE_ID.test(params[0] ?? '') ? { kind: 'relay', endpoint, upstream: path, model: null, stream: null, params: null, bodyless: true, ownKey: true } : null,
  }
}

export const alpha: Dialect = {
  name: 'alpha',
  route: '/api/alpha_service/chat_completion',
  native: {
    route: '/v1/chat/completions',
    routeNames: ['POST /v1/chat/completions'],
    keyHeaders: ['authorization'],
    keyQuery: null,
    more: [
      fixed('post', '/v1/responses', { kind: 'generate', params: RESPONSES_PARAMS, ownKeyWith: ['previous_response_id', 'conversation'] }),
      fixed('post', '/v1/responses/input_tokens', { kind: 'relay', params: null }),
      storedResponse('get', '/v1/responses/:id'),
      storedResponse('del', '/v1/responses/:id'),
      storedResponse('post', '/v1/responses/:id/cancel'),
      storedResponse('get', '/v1/responses/:id/input_items'),
      fixed('post', '/v1/embeddings', { kind: 'embed', params: EMBEDDINGS_PARAMS }),
    ],
    modelsRoute: '/v1/models',
    modelList: (models) => JSON.stringify({
      object: 'list',
      data: models.map((m) => ({ id: m.id, object: 'model', created: epochSeconds(m.asOf), owned_by: 'tracegate' })),
    }),
    // OpenAI's shape is tracegate's own: the SDK reads message, type, param and code.
    clientError: (e) => ({
      status: e.status,
      body: JSON.stringify({ error: { message: e.message, type: e.type, param: e.param, code: e.code, request_id: e.requestId, ...e.extra } }),
    }),
  },
  defaultBaseUrl: 'https://api.openai.com',
  priceProvider: 'openai',
  otelSystem: 'openai',
  mockModule: new URL('../mock-provider/alpha.js', import.meta.url).href,
  maxTokens: { within: null, members: ['max_completion_tokens', 'max_tokens', 'max_output_tokens'] },
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

  sampleBody: (text, system) => ({
    messages: system === undefined ? [{ role: 'user', content: text }] : [{ role: 'system', content: system }, { role: 'user', content: text }],
  }),

  walkRequest: (body, sink) => { if (isResponses(body)) walkResponsesRequest(body, sink); else walkRequest(body, sink) },

  promptText (b) {
    if (isResponses(b)) {
      let s = typeof b.instructions === 'string' ? b.instructions + '\n' : ''
      const variables = asObject(asObject(b.prompt)?.variables)
      for (const name in variables ?? {}) s += typeof variables![name] === 'string' ? variables![name] + '\n' : contentText([variables![name]])
      if (typeof b.input === 'string') return s + b.input + '\n'
      for (const it of asArray(b.input)) {
        const item = asObject(it)
        s += typeof it === 'string' ? it + '\n' : contentText(item?.content ?? item?.output)
      }
      return s
    }
    let s = ''
    for (const m of asArray(b.messages)) s += contentText(asObject(m)?.content)
    return s
  },

  usageKey: '"usage"',

  // Chat completions and embeddings: prompt and completion tokens. The Responses API: input and output
  // tokens (reasoning included), in a whole response or the stream's response.completed event.
  readUsage (d: Json, u: ReportedUsage) {
    const usage = asObject(d.usage) ?? asObject(asObject(d.response)?.usage)
    if (usage === null) return false
    if (usage.input_tokens !== undefined) return setUsage(u, usage.input_tokens, usage.output_tokens, asObject(usage.input_tokens_details)?.cached_tokens)
    return setUsage(u, usage.prompt_tokens, usage.completion_tokens, asObject(usage.prompt_tokens_details)?.cached_tokens)
  },

  generatedText (d) {
    if (isResponsesAnswer(d)) return responsesText(d)
    let s = ''
    for (const c of asArray(d.choices)) {
      const co = asObject(c)
      const msg = asObject(co?.message) ?? asObject(co?.delta)
      if (msg !== null && typeof msg.content === 'string') s += msg.content
    }
    return s
  },

  errorBody (status, message, code) {
    const [type, usual] = ERRORS[status] ?? (status >= 500 ? ['server_error', null] : ['invalid_request_error', null])
    return JSON.stringify({ error: { message, type, param: null, code: code === undefined ? usual : code } })
  },

  readAnswer (v, t, streamEvent) {
    if (isResponsesAnswer(v)) { readResponsesAnswer(v, t, streamEvent); return }
    for (const c of asArray(v.choices)) {
      const choice = asObject(c)
      const msg = asObject(choice?.message) ?? asObject(choice?.delta)
      if (msg === null) { t.add(choice?.index, asString(choice?.text)); continue }
      const streamed = choice?.delta !== undefined
      if (streamed && asString(msg.content) !== null && asString(msg.content) !== '') t.closeCall(choice?.index)
      t.add(choice?.index, asString(msg.content))
      t.add(choice?.index, asString(msg.refusal))
      for (const tc of asArray(msg.tool_calls)) {
        const fn = asObject(asObject(tc)?.function)
        // A stream sends the name once, then pieces of the arguments.
        if (streamed) {
          if (asString(fn?.name) !== null) t.openCall(choice?.index, fn?.name)
          t.add(choice?.index, asString(fn?.arguments))
        } else {
          t.add(choice?.index, toolCallText(fn?.name, fn?.arguments))
        }
      }
    }
  },
}
