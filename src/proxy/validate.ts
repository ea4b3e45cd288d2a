// The body checks of the proxy contract, split at the points where authentication and
// the plan check come between them: `readServiceFields` is steps 2–3, `checkSchema` is step 6.
import { TracegateError } from '../errors.js'
import type { Dialect, ParamRule, RequestFacts } from '../providers/index.js'
import { PROVIDER_KEY_FIELDS } from '../providers/index.js'
import { isValidJson, Kind, scanTopLevel, stringValue, type Member } from './scan.js'

const COMMON_SERVICE_FIELDS: readonly string[] = ['api_key', 'is_confidential', ...PROVIDER_KEY_FIELDS]

export interface ServiceFields {
  readonly members: readonly Member[]
  /** The tracegate key: the body's api_key, or the x-tracegate-key header when the body has none. */
  readonly apiKey: string
  /** Indexes of the members cut out before forwarding. */
  readonly cut: ReadonlySet<number>
  /** Set when api_key and x-tracegate-key name different keys: the 422 answered at the schema step. */
  readonly conflict: TracegateError | null
}

export interface CheckedRequest extends RequestFacts {
  readonly isConfidential: boolean
  /** The caller's own provider key, when given. */
  readonly providerKey: string | null
}

function serviceFieldsOf (dialect: Dialect): ReadonlySet<string> {
  return new Set([...COMMON_SERVICE_FIELDS, ...dialect.ownFields])
}

const SERVICE_FIELDS = new WeakMap<Dialect, ReadonlySet<string>>()

function serviceFields (dialect: Dialect): ReadonlySet<string> {
  let s = SERVICE_FIELDS.get(dialect)
  if (s === undefined) { s = serviceFieldsOf(dialect); SERVICE_FIELDS.set(dialect, s) }
  return s
}

/** A JSON object body's top-level members (step 2). */
function jsonMembers (body: Buffer): Member[] {
  if (body.length === 0 || !isValidJson(body)) throw new TracegateError('invalid_json')
  const members = scanTopLevel(body)
  if (members === null) throw new TracegateError('invalid_json', { message: 'The request body must be a JSON object.' })
  return members
}

/**
 * Steps 2 and 3: JSON validity, duplicate service fields, the tracegate key. `headerKey` is the
 * x-tracegate-key header ('' when absent): it stands in for an absent api_key, and a different one
 * beside api_key is refused once the key is checked (which of two keys the caller meant is unknown).
 */
export function readServiceFields (body: Buffer, dialect: Dialect, headerKey = ''): ServiceFields {
  const members = jsonMembers(body)
  const names = serviceFields(dialect)
  const cut = new Set<number>()
  const seen = new Set<string>()
  let apiKey: Member | null = null
  for (let i = 0; i < members.length; i++) {
    const m = members[i]!
    if (!names.has(m.name)) continue
    if (seen.has(m.name)) {
      throw new TracegateError('duplicate_field', { param: m.name, message: `The service field ${m.name} appears more than once.` })
    }
    seen.add(m.name)
    cut.add(i)
    if (m.name === 'api_key') apiKey = m
  }
  if (apiKey === null) {
    if (headerKey === '') throw new TracegateError('missing_api_key', { param: 'api_key' })
    return { members, apiKey: headerKey, cut, conflict: null }
  }
  if (apiKey.kind !== Kind.String) {
    throw new TracegateError('invalid_field', { param: 'api_key', message: 'api_key must be a string.' })
  }
  const key = stringValue(body, apiKey)
  const conflict = headerKey !== '' && headerKey !== key
    ? new TracegateError('invalid_field', { param: 'x-tracegate-key', message: 'The tracegate key is given in api_key and, differently, in x-tracegate-key.' })
    : null
  return { members, apiKey: key, cut, conflict }
}

const NATIVE_REFUSED: ReadonlySet<string> = new Set(COMMON_SERVICE_FIELDS)

/**
 * Step 2 on a native route: the body is the provider's and is forwarded as it came, so a contract
 * service field in it is refused rather than sent on (a key there would reach the provider and the
 * trace). The answer names the field, never its value.
 */
export function readNativeBody (body: Buffer): Member[] {
  const members = jsonMembers(body)
  for (const m of members) {
    if (!NATIVE_REFUSED.has(m.name)) continue
    const instead = m.name === 'is_confidential'
      ? 'send x-tracegate-confidential: true instead'
      : 'send the tracegate key as the SDK\'s API key or in x-tracegate-key, a provider key in x-tracegate-provider-key'
    throw new TracegateError('service_field_not_allowed', { param: m.name, message: `${m.name} belongs to tracegate's contract endpoints, not a provider route's body: ${instead}.` })
  }
  return members
}

/** What a provider key may hold: it travels in a header, where anything else is refused or mangled. */
export const HEADER_TOKEN = /^[\x21-\x7e]+$/
/** A header value passed on from the client: visible ASCII, spaces and tabs (RFC 9110 §5.5, no obs-text). */
export const HEADER_VALUE = /^[\t\x20-\x7e]*$/

const KIND_NAMES: Record<Kind, string> = {
  [Kind.String]: 'string', [Kind.Number]: 'number', [Kind.Object]: 'object', [Kind.Array]: 'array',
  [Kind.True]: 'boolean', [Kind.False]: 'boolean', [Kind.Null]: 'null',
}

function invalid (param: string, message: string): TracegateError {
  return new TracegateError('invalid_field', { param, message })
}

/**
 * What a native route's path says (gamma: the model and whether it streams; null where the body says
 * it). On a native route the body is the provider's alone: no member of it is a service field.
 */
export interface PathFacts {
  readonly model: string | null
  readonly stream: boolean | null
}

const typeName = (t: string): string => `${t === 'array' ? 'an' : 'a'} ${t}`
/** A rule's types as the error names them: `a string`, `a string or an array`. */
const typeNames = (rule: ParamRule): string => typeName(rule.type) + (rule.or === undefined ? '' : ` or ${typeName(rule.or)}`)

/**
 * Step 6: service field types, the provider's parameters the dialect requires, or those of the native
 * route's call (`params`: an embeddings body is not a chat body).
 */
export function checkSchema (body: Buffer, members: readonly Member[], dialect: Dialect, path: PathFacts | null = null, params: readonly ParamRule[] | null = null): CheckedRequest {
  const rules = params ?? dialect.params
  let isConfidential = false
  let providerKey: string | null = null
  let model: string | null = path?.model ?? null
  let stream = path?.stream ?? false
  const present = new Set<string>()
  if (model !== null) {
    present.add('model')
    if (dialect.validModel !== undefined && !dialect.validModel(model)) throw invalid('model', 'The model in the path is not a valid model name.')
  }
  for (const m of members) {
    const kind = m.kind
    if (path !== null && ((m.name === 'model' && path.model !== null) || (m.name === 'stream' && path.stream !== null))) continue
    if (m.name === 'is_confidential') {
      if (kind !== Kind.True && kind !== Kind.False) throw invalid('is_confidential', 'is_confidential must be a boolean.')
      isConfidential = kind === Kind.True
      continue
    }
    if (PROVIDER_KEY_FIELDS.includes(m.name)) {
      if (m.name !== dialect.keyField) {
        throw invalid(m.name, `${m.name} is not accepted on the ${dialect.name} endpoint; use ${dialect.keyField}.`)
      }
      if (kind !== Kind.String) throw invalid(m.name, `${m.name} must be a string.`)
      providerKey = stringValue(body, m)
      if (!HEADER_TOKEN.test(providerKey)) {
        throw invalid(m.name, `${m.name} must be a non-empty string of printable ASCII characters without spaces (it is sent in a header).`)
      }
      continue
    }
    if (m.name === 'stream') {
      if (kind !== Kind.True && kind !== Kind.False) throw invalid('stream', 'stream must be a boolean.')
      stream = kind === Kind.True
      continue
    }
    const rule = rules.find((p) => p.name === m.name)
    if (rule === undefined) continue
    const type = KIND_NAMES[kind]
    if (type !== rule.type && type !== rule.or) throw invalid(rule.name, `${rule.name} must be ${typeNames(rule)}.`)
    present.add(rule.name)
    if (rule.name === 'model') {
      model = stringValue(body, m)
      if (model === '' || (dialect.validModel !== undefined && !dialect.validModel(model))) {
        throw invalid('model', 'model is not a valid model name.')
      }
    }
  }
  for (const rule of rules) {
    if (rule.required && !present.has(rule.name)) {
      throw new TracegateError('missing_parameter', { param: rule.name, message: `The ${dialect.name} endpoint needs ${rule.name}.` })
    }
  }
  return { isConfidential, providerKey, model, stream }
}
