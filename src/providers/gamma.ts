// gamma: Google Gemini generateContent. The path carries the model, so gamma takes `model` and `stream`
// from the body as service fields and moves them into the upstream URL.
import { count as n, asArray, asObject, asString, jsonStrings, show, type Json } from './json.js'
import { commonResponseHeader, partsText, schemaText, setUsage, textOfBase64, toolCallText, type CallKind, type Dialect, type ParamRule, type RequestSink, type ReportedUsage, type RouteCall } from './types.js'

// Gemini model ids (`gemini-2.5-flash`, `gemini-1.5-pro-002`, tuned `tunedModels/x` is not a models/ path).
const MODEL = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

// google.rpc.Code names by HTTP status (https://cloud.google.com/apis/design/errors#handling_errors).
const STATUSES: Readonly<Record<number, string>> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'ABORTED',
  429: 'RESOURCE_EXHAUSTED',
  499: 'CANCELLED',
  500: 'INTERNAL',
  501: 'UNIMPLEMENTED',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
}

function bareModel (model: string): string {
  return model.startsWith('models/') ? model.slice(7) : model
}

/** The API versions served, each forwarded under its own name: SDKs send `v1beta` or, newer ones, `v1`. */
const VERSIONS: readonly string[] = ['v1', 'v1beta', 'v1alpha']

const CACHED_CONTENT: readonly string[] = ['cachedContent', 'cached_content']
const EMBED_CONTENT: readonly ParamRule[] = [{ name: 'content', type: 'object', required: true }]
const BATCH_EMBED: readonly ParamRule[] = [{ name: 'requests', type: 'array', required: true }]

/** The methods on a model path, and what each call is. */
const METHODS: Readonly<Record<string, { readonly kind: CallKind, readonly stream: boolean | null, readonly params: readonly ParamRule[] | null }>> = {
  generateContent: { kind: 'generate', stream: false, params: null },
  streamGenerateContent: { kind: 'generate', stream: true, params: null },
  countTokens: { kind: 'relay', stream: null, params: null },
  embedContent: { kind: 'embed', stream: false, params: EMBED_CONTENT },
  batchEmbedContents: { kind: 'embed', stream: false, params: BATCH_EMBED },
}

/** `/{version}/models/{model}:{method}`: the version from the path, the model and method from its last segment. */
function resolveModelPath (path: string, params: readonly string[]): RouteCall | null {
  const version = path.slice(1, path.indexOf('/', 1))
  const segment = params[0] ?? ''
  const colon = segment.lastIndexOf(':')
  const name = segment.slice(colon + 1)
  const method = Object.hasOwn(METHODS, name) ? METHODS[name]! : null
  if (!VERSIONS.includes(version) || colon <= 0 || method === null) return null
  const model = segment.slice(0, colon)
  return {
    // A context cache is stored under the provider key: naming one needs the caller's own.
    ownKeyWith: method.kind === 'generate' ? CACHED_CONTENT : undefined,
    kind: method.kind,
    endpoint: `/${version}/models/{model}:${name}`,
    upstream: `/${version}/models/${encodeURIComponent(bareModel(model))}:${name}`,
    model,
    stream: method.stream,
    params: method.params,
  }
}

const modelPathNames = (version: string): string[] => Object.keys(METHODS).map((m) => `POST /${version}/models/{model}:${m}`)

/** A member under its REST name or its proto (snake_case) name: the API takes both. */
const member = (o: Json | null, camel: string, snake: string): unknown => o?.[camel] ?? o?.[snake]

/**
 * Parts: text, functionResponse (as role `tool`: its response's strings and its parts), functionCall
 * args, executable code, and as data: inline data of a text type (base64, decoded) and code results.
 */
function parts (sink: RequestSink, i: number, role: string, base: string, list: unknown): void {
  const full = sink.full
  asArray(list).forEach((p, j) => {
    const part = asObject(p)
    if (part === null) return
    sink.text(i, role, `${base}[${j}].text`, part.text, part.thought === true ? 'thought' : null)
    const fr = asObject(member(part, 'functionResponse', 'function_response'))
    if (fr !== null) {
      const head = full ? `function response ${asString(fr.name) ?? ''}`.trim() : null
      if (!sink.text(i, 'tool', `${base}[${j}].functionResponse.response`, jsonStrings(fr.response).join('\n'), head, full ? show(fr.response ?? null) : null, true)) {
        sink.other(i, 'tool', head, fr.response ?? null)
      }
      parts(sink, i, 'tool', `${base}[${j}].functionResponse.parts`, fr.parts)
    }
    const fc = asObject(member(part, 'functionCall', 'function_call'))
    if (fc !== null) {
      const head = full ? `function call ${asString(fc.name) ?? ''}`.trim() : null
      if (!sink.text(i, role, `${base}[${j}].functionCall.args`, jsonStrings(fc.args).join('\n'), head, full ? show(fc.args ?? {}) : null, true)) {
        sink.other(i, role, head, fc.args ?? {})
      }
    }
    const inline = asObject(member(part, 'inlineData', 'inline_data'))
    const mime = asString(member(inline, 'mimeType', 'mime_type'))
    const decoded = inline === null ? null : textOfBase64(mime, inline.data)
    if (!sink.text(i, role, `${base}[${j}].inlineData.data`, decoded, full ? `inline data ${mime ?? ''}`.trim() : null, null, false, 'data') && full && inline !== null) {
      sink.other(i, role, 'inline data', mime ?? '')
    }
    const code = asObject(member(part, 'executableCode', 'executable_code'))
    sink.text(i, role, `${base}[${j}].executableCode.code`, code?.code, full ? 'code' : null, null, true)
    const result = asObject(member(part, 'codeExecutionResult', 'code_execution_result'))
    sink.text(i, role, `${base}[${j}].codeExecutionResult.output`, result?.output, full ? 'code result' : null, null, true, 'data')
    if (!full) return
    const file = asObject(member(part, 'fileData', 'file_data'))
    if (file !== null) sink.other(i, role, 'file', asString(member(file, 'fileUri', 'file_uri')) ?? '')
  })
}

/** The application's function declarations (description, parameter and response schemas) and the response schema, after the contents. */
function declarations (sink: RequestSink, body: Json): void {
  const full = sink.full
  const schema = (path: string, value: unknown, head: string | null): void => {
    if (value !== undefined) sink.text(-1, 'system', path, schemaText(value), head, full ? show(value) : null, true)
  }
  asArray(body.tools).forEach((t, j) => {
    asArray(member(asObject(t), 'functionDeclarations', 'function_declarations')).forEach((d, k) => {
      const fn = asObject(d)
      if (fn === null) return
      const at = `tools[${j}].functionDeclarations[${k}]`
      const head = full ? `function ${asString(fn.name) ?? ''}`.trim() : null
      sink.text(-1, 'system', `${at}.description`, fn.description, head)
      schema(`${at}.parameters`, fn.parameters, head)
      schema(`${at}.parametersJsonSchema`, member(fn, 'parametersJsonSchema', 'parameters_json_schema'), head)
      schema(`${at}.response`, fn.response, head)
      schema(`${at}.responseJsonSchema`, member(fn, 'responseJsonSchema', 'response_json_schema'), head)
    })
  })
  const config = asObject(member(body, 'generationConfig', 'generation_config'))
  schema('generationConfig.responseSchema', member(config, 'responseSchema', 'response_schema'), full ? 'response schema' : null)
  schema('generationConfig.responseJsonSchema', member(config, 'responseJsonSchema', 'response_json_schema'), full ? 'response schema' : null)
}

export const gamma: Dialect = {
  name: 'gamma',
  route: '/api/gamma_service/chat_completion',
  native: {
    route: '/v1beta/models/:model',
    routeNames: modelPathNames('v1beta'),
    keyHeaders: ['x-goog-api-key'],
    keyQuery: 'key',
    resolve: resolveModelPath,
    more: ['v1', 'v1alpha'].map((version) => ({ method: 'post' as const, pattern: `/${version}/models/:model`, names: modelPathNames(version), resolve: resolveModelPath })),
    sentBySdk: (header) => header('x-goog-api-key') !== '',
    modelsRoute: '/v1beta/models',
    // Recent SDKs list under v1, as they call it: there the key header tells Gemini's request from OpenAI's and Anthropic's.
    moreModelsRoutes: ['/v1/models', '/v1alpha/models'],
    modelList: (models) => JSON.stringify({
      models: models.map((m) => ({
        name: `models/${m.id}`,
        baseModelId: m.id,
        displayName: m.id,
        supportedGenerationMethods: ['generateContent', 'streamGenerateContent'],
      })),
    }),
    clientError (e) {
      // Google answers a bad argument with 400 INVALID_ARGUMENT (it has no 422); the code travels as an ErrorInfo reason.
      const status = e.status === 422 ? 400 : e.status
      const metadata: Record<string, string> = { request_id: e.requestId }
      if (e.param !== null) metadata.param = e.param
      const details = [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: e.code, domain: 'tracegate', metadata }]
      const name = STATUSES[status] ?? (status >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION')
      return { status, body: JSON.stringify({ error: { code: status, message: e.message, status: name, details, ...e.extra } }) }
    },
  },
  defaultBaseUrl: 'https://generativelanguage.googleapis.com',
  priceProvider: 'google',
  otelSystem: 'gcp.gemini',
  mockModule: new URL('../mock-provider/gamma.js', import.meta.url).href,
  maxTokens: { within: 'generationConfig', members: ['maxOutputTokens'] },
  keyField: 'gamma_api_key',
  ownKeyWith: CACHED_CONTENT,
  ownFields: ['model', 'stream'],
  params: [
    { name: 'model', type: 'string', required: true },
    { name: 'contents', type: 'array', required: true },
  ],
  validModel: (model) => MODEL.test(bareModel(model)),
  bareModel,
  pathAsking: (path, model) => path.replace(/\/models\/[^/:?]+:/, `/models/${encodeURIComponent(bareModel(model))}:`),
  target (facts) {
    const model = encodeURIComponent(bareModel(facts.model ?? ''))
    // The contract route always streams as server-sent events; a native route passes the client's query on.
    return facts.stream
      ? { path: `/v1beta/models/${model}:streamGenerateContent${facts.query ?? '?alt=sse'}`, streaming: true }
      : { path: `/v1beta/models/${model}:generateContent${facts.query ?? ''}`, streaming: false }
  },
  authHeaders: (key) => ({ 'x-goog-api-key': key }),
  forwardHeaders: new Set(['x-goog-user-project']),
  defaultHeaders: {},
  responseHeader (name) {
    if (name === 'x-goog-request-id' || name === 'server-timing') return name
    return commonResponseHeader(name)
  },

  sampleBody: (text, system) => ({
    ...(system === undefined ? {} : { systemInstruction: { parts: [{ text: system }] } }), contents: [{ role: 'user', parts: [{ text }] }],
  }),

  walkRequest (body, sink) {
    parts(sink, -1, 'system', 'systemInstruction.parts', asObject(body.systemInstruction ?? body.system_instruction)?.parts)
    asArray(body.contents).forEach((c, i) => {
      const content = asObject(c)
      if (content === null) return
      const role = content.role === 'model' ? 'assistant' : String(content.role ?? 'user')
      parts(sink, i, role, `contents[${i}].parts`, content.parts)
    })
    // The texts an embeddings call embeds, shown as the user's (detection does not run on them).
    parts(sink, 0, 'user', 'content.parts', asObject(body.content)?.parts)
    asArray(body.requests).forEach((r, i) => { parts(sink, i, 'user', `requests[${i}].content.parts`, asObject(asObject(r)?.content)?.parts) })
    declarations(sink, body)
  },

  promptText (b) {
    let s = partsText(asObject(b.systemInstruction)?.parts)
    for (const c of asArray(b.contents)) s += partsText(asObject(c)?.parts)
    // embedContent's one content, batchEmbedContents' requests.
    s += partsText(asObject(b.content)?.parts)
    for (const r of asArray(b.requests)) s += partsText(asObject(asObject(r)?.content)?.parts)
    return s
  },

  usageKey: '"usageMetadata"',

  readUsage (d: Json, u: ReportedUsage) {
    const usage = asObject(d.usageMetadata)
    return usage !== null && setUsage(u, usage.promptTokenCount, n(usage.candidatesTokenCount) + n(usage.thoughtsTokenCount), usage.cachedContentTokenCount)
  },

  generatedText (d) {
    let s = ''
    for (const c of asArray(d.candidates)) s += partsText(asObject(asObject(c)?.content)?.parts).replace(/\n$/, '')
    return s
  },

  errorBody (status, message) {
    const name = STATUSES[status] ?? (status >= 500 ? 'INTERNAL' : 'FAILED_PRECONDITION')
    return JSON.stringify({ error: { code: status, message, status: name } })
  },

  readAnswer (v, t) {
    for (const c of asArray(v.candidates)) {
      const cand = asObject(c)
      for (const p of asArray(asObject(cand?.content)?.parts)) {
        const part = asObject(p)
        if (part === null || part.thought === true) continue
        t.add(cand?.index, asString(part.text))
        const fc = asObject(part.functionCall)
        if (fc !== null) t.add(cand?.index, toolCallText(fc.name, fc.args))
      }
    }
  },
}
