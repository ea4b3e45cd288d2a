// alpha: OpenAI Chat Completions (any OpenAI-compatible server can stand behind it).
import { count as n, asArray, asObject, asString, epochSeconds, show, type Json } from './json.js'
import { commonResponseHeader, contentText, schemaText, setUsage, textOfBase64, toolCallText, type Dialect, type RequestSink, type ReportedUsage } from './types.js'

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

export const alpha: Dialect = {
  name: 'alpha',
  route: '/api/alpha_service/chat_completion',
  native: {
    route: '/v1/chat/completions',
    routeNames: ['POST /v1/chat/completions'],
    keyHeaders: ['authorization'],
    keyQuery: null,
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
  maxTokens: { within: null, members: ['max_completion_tokens', 'max_tokens'] },
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

  walkRequest,

  promptText (b) {
    let s = ''
    for (const m of asArray(b.messages)) s += contentText(asObject(m)?.content)
    return s
  },

  usageKey: '"usage"',

  readUsage (d: Json, u: ReportedUsage) {
    const usage = asObject(d.usage)
    return usage !== null && setUsage(u, usage.prompt_tokens, usage.completion_tokens, asObject(usage.prompt_tokens_details)?.cached_tokens)
  },

  generatedText (d) {
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

  readAnswer (v, t) {
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
