// What every provider module tells the rest of tracegate: how to aim and authenticate a request (the
// front thread), the texts a request carries (the detection worker and the dashboard), usage and text
// of an answer (the store worker and the dashboard). Everything here is pure, so the browser imports it
// too. Provider quirks live only in the provider modules; generic code calls this interface.
import type { ProviderName } from './index.js'
import { asArray, asObject, count, jsonStrings, type Json } from './json.js'

export type ParamType = 'string' | 'array' | 'number' | 'object'

export interface ParamRule {
  readonly name: string
  readonly type: ParamType
  /** Other types it may have (`input`: a string or an array). */
  readonly or?: ParamType
  readonly required: boolean
}

export interface UpstreamTarget {
  /** Path and query appended to the provider's base URL. */
  readonly path: string
  readonly streaming: boolean
}

/** What the generic code learnt from the body (or, on a native route, the path) that a dialect needs to aim the request. */
export interface RequestFacts {
  readonly model: string | null
  /** Gamma takes `stream` as a service field; the others read the provider's own `stream` parameter. */
  readonly stream: boolean
  /** The client's own query string on a native route ('' for none), less the key; absent on the contract route. */
  readonly query?: string
}

/** An error tracegate answers, as a native route writes it in the provider's own shape. */
export interface ClientError {
  readonly status: number
  /** tracegate's error type (errors.ts): invalid_request_error, authentication_error, … */
  readonly type: string
  /** tracegate's stable code. */
  readonly code: string
  readonly message: string
  readonly param: string | null
  readonly requestId: string
  /** More members (the findings of a blocked prompt). */
  readonly extra: Readonly<Record<string, unknown>> | null
}

/** A request header by lower-case name; '' when the request has none. */
export type HeaderReader = (name: string) => string

/** A response's status and JSON body. */
export interface ClientAnswer {
  readonly status: number
  readonly body: string
}

/** A model tracegate can price, as the models routes list it. */
export interface ListedModel {
  readonly id: string
  /** The day its price was taken (YYYY-MM-DD). */
  readonly asOf: string
}

/**
 * What tracegate does with a call on a native route: `generate` asks a model for an answer (every check,
 * the limits, detection, the trace and its cost); `embed` asks for embeddings (the same without
 * detection: an embedding gives a model no instructions); `relay` reads or counts without generating
 * (the key and plan checks, then forwarded as it came; not limited, priced or traced).
 */
export type CallKind = 'generate' | 'embed' | 'relay'

/** A call on a native route, as its path says. */
export interface RouteCall {
  readonly kind: CallKind
  /** The route as traces, metrics and the docs name it (`/v1/models/{model}:embedContent`). */
  readonly endpoint: string
  /** The path sent to the provider, without the query (the client's query follows, less the key); null: the dialect's `target`. */
  readonly upstream: string | null
  /** The model the path names, or null where the body names it. */
  readonly model: string | null
  /** Whether the path says the answer streams, or null where the body says. */
  readonly stream: boolean | null
  /** The top-level parameters checked instead of the dialect's `params` (an embeddings body is not a chat body); null: the dialect's. */
  readonly params: readonly ParamRule[] | null
  /** A relayed call that may come without a body (cancelling a stored response); any other POST needs its JSON. */
  readonly bodyless?: boolean
  /**
   * A call on what the provider stores under the provider key (a stored response): it needs the caller's
   * own key, as the server-side key is every account's and would reach other accounts' data by id.
   */
  readonly ownKey?: boolean
  /** Top-level members that name what the provider stores under the key (`previous_response_id`): present, the call needs the caller's own key. */
  readonly ownKeyWith?: readonly string[]
}

/** One more route of the provider's API beside `route`: its method, its uWS pattern and how a path on it resolves. */
export interface NativeRoute {
  readonly method: 'get' | 'post' | 'del'
  readonly pattern: string
  /** The route's calls as the docs and the 404 list name them (`GET /v1/responses/{id}`). */
  readonly names: readonly string[]
  /** The call a request makes, from its path and the pattern's parameters; null: tracegate does not serve it (404). */
  resolve (path: string, params: readonly string[]): RouteCall | null
}

/**
 * The provider's own API, served as a drop-in base URL: an SDK pointed at tracegate sends what it sends
 * to the provider, with its key in its usual header, and reads errors in the provider's own shape.
 */
export interface NativeApi {
  /** The uWS pattern of the POST route (`/v1/chat/completions`; gamma's last segment holds model and method). */
  readonly route: string
  /** How the route's path shows the docs and the 404 list (`/v1beta/models/{model}:generateContent`). */
  readonly routeNames: readonly string[]
  /** Where the SDK sends its key, in order: lower-case header names (`authorization` is read as a Bearer token). */
  readonly keyHeaders: readonly string[]
  /** A query parameter that may carry the key instead (gamma's `?key=`), or null. */
  readonly keyQuery: string | null
  /**
   * The call a path on `route` makes, from the pattern's parameters (gamma: the version and the model
   * segment, which names the method), or null when it names none tracegate serves. Absent: every path
   * on `route` is a generation whose model and streaming the body names.
   */
  resolve? (path: string, params: readonly string[]): RouteCall | null
  /** The provider's other routes (the Responses API, token counting, embeddings). */
  readonly more?: readonly NativeRoute[]
  /**
   * Whether the request's headers show that the provider's own SDK sent it, where several providers
   * share a path (`GET /v1/models`). Absent on the provider that takes every request the others do not
   * claim (alpha: any OpenAI-compatible client).
   */
  sentBySdk? (header: HeaderReader): boolean
  /** The GET path that lists models. */
  readonly modelsRoute: string
  /** Other GET paths the same list is at (gamma's other API versions). */
  readonly moreModelsRoutes?: readonly string[]
  /** The models list in the provider's own shape. */
  modelList (models: readonly ListedModel[]): string
  /** One of tracegate's errors in the provider's shape and status conventions, still carrying tracegate's code and request id. */
  clientError (e: ClientError): ClientAnswer
}

/** Token usage as the provider reports it. */
export interface ReportedUsage {
  /** All input tokens, cache reads and writes included. */
  input: number
  /** All output tokens, reasoning tokens included. */
  output: number
  /** The part of `input` read from the prompt cache. */
  cached: number
  /** The part of `input` written to the prompt cache (beta reports it). */
  cacheWrite: number
}

/**
 * Who wrote a text: the application (system and developer prompts, tool and schema descriptions), the
 * user (the sender's own words, and what the client says the assistant wrote), or data the model is
 * handed to read (tool and function results, documents, search results, files). The detector judges
 * each by what its writer can do.
 */
export type SpanSource = 'application' | 'user' | 'data'

/** The source a role implies; the walkers name it only where it differs (a document in a user message). */
export function roleSource (role: string): SpanSource {
  return role === 'system' || role === 'developer' ? 'application' : role === 'tool' ? 'data' : 'user'
}

/**
 * Receives the texts of a request in order. The detector numbers them as segments and the dashboard
 * shows them, so both walk a body through the same function and the numbers always agree.
 */
export interface RequestSink {
  /** False for the detector: labels, displays and what is not text are not worked out. */
  readonly full: boolean
  /** How many parts were recorded so far (a message with none is shown as empty). */
  readonly size: number
  /** A text the detector reads, at its JSON path; false (nothing recorded) unless a non-empty string. */
  text (message: number, role: string, path: string, text: unknown, label?: string | null, display?: string | null, code?: boolean, source?: SpanSource): boolean
  /** Something shown that the detector does not read (images, redacted thinking, empty results); full sinks only. */
  other (message: number, role: string, label: string | null, value: unknown): void
}

/** Collects the answer's text per choice or candidate index, for the dashboard. */
export interface AnswerSink {
  add (index: unknown, text: string | null): void
  /** A streamed tool call starts: its arguments follow in pieces. */
  openCall (index: unknown, name: unknown): void
  closeCall (index: unknown): void
}

export interface Dialect {
  readonly name: ProviderName
  readonly route: string
  /** The provider's own API, served as drop-in routes. */
  readonly native: NativeApi
  /** Where the provider's API lives unless TRACEGATE_<NAME>_BASE_URL says otherwise. */
  readonly defaultBaseUrl: string
  /** The provider's id in @pydantic/genai-prices, whose prices and model matching cost its calls. */
  readonly priceProvider: string
  /** gen_ai.provider.name (and the older gen_ai.system) of its calls' spans, as the OpenTelemetry GenAI conventions spell it. */
  readonly otelSystem: string
  /** URL of the module whose `mockDialect` export is the mock provider's side of this provider. */
  readonly mockModule: string
  /** Where a request caps its output tokens: top-level members, or members of the object `within` (first one set wins). */
  readonly maxTokens: { readonly within: string | null, readonly members: readonly string[] }
  /** The body field carrying the caller's own key for this provider. */
  readonly keyField: string
  /** On the contract route: top-level members naming data stored under the provider key (gamma's cachedContent); present, the call needs the caller's own key. */
  readonly ownKeyWith?: readonly string[]
  /** Fields the dialect takes out of the body besides the common service fields (gamma: model, stream). */
  readonly ownFields: readonly string[]
  /** The provider's own top-level parameters tracegate checks before forwarding (type and presence). */
  readonly params: readonly ParamRule[]
  /** Extra model rule (gamma puts the model in the URL path). */
  validModel? (model: string): boolean
  /** The model as the routes file names it (gamma's without its optional `models/` prefix); absent: as sent. */
  bareModel? (model: string): string
  /**
   * For a provider that names the model in the upstream path (gamma): that path asking `model` instead.
   * Absent: the body's top-level `model` names it, and a fallback rewrites that.
   */
  pathAsking? (path: string, model: string): string
  target (facts: RequestFacts): UpstreamTarget
  /** The provider's auth header(s) for a provider key. */
  authHeaders (key: string): Record<string, string>
  /** Lower-case client request headers passed on to the provider. */
  readonly forwardHeaders: ReadonlySet<string>
  /** Headers sent when the client did not send them. */
  readonly defaultHeaders: Readonly<Record<string, string>>
  /** The name under which a provider response header reaches the client, or null to drop it. */
  responseHeader (name: string): string | null

  /**
   * The provider's own members of a minimal request (no model): one user message asking `text`, after a
   * system prompt when one is given. The detection warm-up walks one; the tests build theirs from it.
   */
  sampleBody (text: string, system?: string): Json
  /** Walks a request body's texts (system prompts, messages, parts, tool calls and results) into `sink`. */
  walkRequest (body: Json, sink: RequestSink): void
  /** Text of the prompt's messages, system prompts and tool results, for the tokenizer. */
  promptText (body: Json): string
  /** The key a whole answer's usage sits under, as it appears in the JSON text (quoted). */
  readonly usageKey: string
  /** Folds one JSON object (a whole answer, or one stream event) into `u`; true if it carried usage. */
  readUsage (data: Json, u: ReportedUsage): boolean
  /** The generated text of a whole answer or a stream event, for the tokenizer. */
  generatedText (data: Json): string
  /** The answer as the dashboard shows it (text and tool calls) from a whole answer or a stream event. */
  readAnswer (data: Json, sink: AnswerSink, streamEvent: boolean): void
  /**
   * The provider's own error body for a status, as the mock provider answers. `code` replaces the
   * provider's usual code for that status where the provider sends another (alpha's `code`).
   */
  errorBody (status: number, message: string, code?: string | null): string
}

/** Sets a whole answer's or an event's counts, as the provider reports them, into `u`; true (it carried usage). */
export function setUsage (u: ReportedUsage, input: unknown, output: unknown, cached: unknown): true {
  u.input = count(input)
  u.output = count(output)
  u.cached = count(cached)
  return true
}

/** Response headers every dialect passes back. */
export function commonResponseHeader (name: string): string | null {
  return name === 'content-type' || name === 'retry-after' ? name : null
}

/** A tool call as the dashboard writes it: `→ name(arguments)`. */
export function toolCallText (name: unknown, args: unknown): string {
  return `\n→ ${typeof name === 'string' ? name : 'tool'}(${typeof args === 'string' ? args : JSON.stringify(args ?? {})})\n`
}

/**
 * The loose text of a content value for the tokenizer: a string, or parts with `text`, nested
 * `content` or a Gemini `functionResponse`.
 */
export function contentText (content: unknown): string {
  return typeof content === 'string' ? content + '\n' : partsText(content)
}

export function partsText (parts: unknown): string {
  let s = ''
  for (const p of asArray(parts)) {
    if (typeof p === 'string') s += p + '\n'
    const o = asObject(p)
    if (o === null) continue
    if (typeof o.text === 'string') s += o.text + '\n'
    if (o.content !== undefined) s += contentText(o.content)
    const fr = asObject(o.functionResponse)
    if (fr !== null) s += JSON.stringify(fr.response ?? '') + '\n'
  }
  return s
}

/** Schema members whose strings the model reads: descriptions, titles and example values (not `type`, `format`, `pattern`). */
const SCHEMA_TEXT = new Set(['description', 'title'])
const SCHEMA_VALUES = new Set(['enum', 'const', 'default', 'examples', 'example'])

/**
 * The text a JSON schema shows the model (tool parameters, a response format), one string a line:
 * descriptions, titles, example and enum values, and property names, at any depth.
 */
export function schemaText (schema: unknown): string {
  const out: string[] = []
  const walk = (v: unknown, depth: number): void => {
    if (depth > 64) return
    if (Array.isArray(v)) { for (const x of v) walk(x, depth + 1); return }
    const o = asObject(v)
    if (o === null) return
    for (const [k, x] of Object.entries(o)) {
      if (SCHEMA_TEXT.has(k) && typeof x === 'string') out.push(x)
      else if (SCHEMA_VALUES.has(k)) jsonStrings(x, out)
      else if ((k === 'properties' || k === 'patternProperties' || k === '$defs' || k === 'definitions') && asObject(x) !== null) {
        for (const [name, sub] of Object.entries(x as Json)) { out.push(name); walk(sub, depth + 1) }
      } else if (typeof x === 'object') walk(x, depth + 1)
    }
  }
  walk(schema, 0)
  return out.join('\n')
}

/**
 * A base64 payload's text when its media type is text (text/*, JSON, XML, CSV, YAML, Markdown), else
 * null. A data URL (`data:text/plain;base64,…`, as OpenAI's file_data) names its own type.
 */
export function textOfBase64 (mediaType: unknown, data: unknown): string | null {
  if (typeof data !== 'string' || data === '') return null
  let type = typeof mediaType === 'string' ? mediaType : ''
  let payload = data
  const comma = data.startsWith('data:') ? data.indexOf(',') : -1
  if (comma > 0) {
    const head = data.slice(5, comma)
    type = head.split(';')[0] || type
    payload = data.slice(comma + 1)
    if (!head.endsWith(';base64')) return isTextType(type) ? safeDecodeUri(payload) : null
  }
  if (!isTextType(type)) return null
  try {
    const bin = atob(payload.replace(/\s+/g, ''))
    const bytes = new Uint8Array(bin.length)
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i)
    return new TextDecoder().decode(bytes)
  } catch {
    return null
  }
}

const TEXT_TYPE = /^(?:text\/[\w.+-]+|application\/(?:[\w.+-]*\+)?(?:json|xml|yaml|x-yaml|csv|markdown|x-ndjson|javascript|x-sh|sql))$/i
const isTextType = (type: string): boolean => TEXT_TYPE.test(type.trim())

function safeDecodeUri (s: string): string | null {
  try { return decodeURIComponent(s) } catch { return null }
}
