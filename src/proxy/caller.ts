// What a request says about itself in headers: on a native route the keys, where each SDK sends them;
// on every route the x-tracegate-* headers (the keys, confidential, and the labels its trace is stored with).
// Values are read while the uWS request is valid and checked later, at the schema step, so the check
// order is the contract's: a bad header is a 422 naming it, after the key is accepted.
import { isUtf8 } from 'node:buffer'
import { TracegateError } from '../errors.js'
import type { Dialect } from '../providers/index.js'
import type { HttpRequest } from '../server/uws.js'
import type { CallLabels } from '../store/trace-types.js'
import { CACHE_TTL_HEADER } from './response-cache.js'
import { HEADER_TOKEN } from './validate.js'

/** A tracegate key begins so; any other value in an SDK's key header is the provider key. */
const TRACEGATE_KEY_PREFIX = 'tgk_'
const BEARER = /^bearer[ \t]+(\S+)[ \t]*$/i

export const MAX_LABEL_CHARS = 256
export const MAX_TAGS = 32
export const MAX_TAG_CHARS = 64
export const MAX_METADATA_BYTES = 4096
export const MAX_METADATA_KEYS = 64
export const MAX_METADATA_KEY_CHARS = 64
/** Characters a metadata key may not hold: control characters (a tab is allowed). */
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f]/
/**
 * What user, session and tags may hold: printable ASCII. uWebSockets.js 20.30 drops non-ASCII bytes at
 * either end of a header value before tracegate sees it, so such text could not be kept whole; it
 * travels in x-tracegate-metadata, whose JSON can escape it.
 */
const PRINTABLE = /^[\t\x20-\x7e]*$/

/** The x-tracegate-* headers as sent ('' when absent), read byte for byte (latin1). */
export interface CallerHeaders {
  readonly tracegateKey: string
  readonly providerKey: string
  readonly confidential: string
  readonly user: string
  readonly session: string
  readonly tags: string
  readonly metadata: string
  readonly cacheTtl: string
}

export function readCallerHeaders (req: HttpRequest): CallerHeaders {
  return {
    tracegateKey: req.getHeader('x-tracegate-key'),
    providerKey: req.getHeader('x-tracegate-provider-key'),
    confidential: req.getHeader('x-tracegate-confidential'),
    user: req.getHeader('x-tracegate-user'),
    session: req.getHeader('x-tracegate-session'),
    tags: req.getHeader('x-tracegate-tags'),
    metadata: req.getHeader('x-tracegate-metadata'),
    cacheTtl: req.getHeader(CACHE_TTL_HEADER),
  }
}

/** The keys a native route found, and where the provider key came from (for the 422 that names it). */
export interface NativeKeys {
  readonly tracegateKey: string | null
  readonly providerKey: string | null
  readonly providerKeyFrom: string
  /** Set when the keys contradict each other: the 422 to answer once the request is read. */
  readonly conflict: TracegateError | null
}

/**
 * The SDK's key (its usual header, or gamma's `?key=`) is the tracegate key when it is one, and the
 * provider key otherwise; the other one comes from x-tracegate-key or x-tracegate-provider-key. The
 * SDK's key given in two of its places with different values is refused, naming the second place: a
 * key silently passed over could be the one the caller meant to pay with.
 */
export function readNativeKeys (dialect: Dialect, req: HttpRequest, query: URLSearchParams | null): NativeKeys {
  const given: Array<readonly [string, string]> = []
  for (const name of dialect.native.keyHeaders) {
    const value = req.getHeader(name)
    if (value !== '') given.push([name, name === 'authorization' ? BEARER.exec(value)?.[1] ?? value : value])
  }
  const keyQuery = dialect.native.keyQuery
  if (keyQuery !== null) {
    const value = query?.get(keyQuery) ?? ''
    if (value !== '') given.push([keyQuery, value])
  }
  const [from, sdkKey] = given[0] ?? ['', null]
  const other = given.find(([, value]) => value !== sdkKey)
  let conflict = other === undefined ? null : twice(other[0], `A key is given in ${from} and, differently, in ${other[0]}; send it once.`)
  const tracegateHeader = req.getHeader('x-tracegate-key')
  const providerHeader = req.getHeader('x-tracegate-provider-key')
  if (sdkKey !== null && sdkKey.startsWith(TRACEGATE_KEY_PREFIX)) {
    if (tracegateHeader !== '' && tracegateHeader !== sdkKey) conflict ??= twice('x-tracegate-key', `The tracegate key is given in ${from} and, differently, in x-tracegate-key.`)
    return { tracegateKey: sdkKey, providerKey: providerHeader === '' ? null : providerHeader, providerKeyFrom: 'x-tracegate-provider-key', conflict }
  }
  if (sdkKey !== null && providerHeader !== '') conflict ??= twice('x-tracegate-provider-key', `A provider key is given in ${from} and in x-tracegate-provider-key; send it in one of them.`)
  if (sdkKey !== null) return { tracegateKey: tracegateHeader === '' ? null : tracegateHeader, providerKey: sdkKey, providerKeyFrom: from, conflict }
  return { tracegateKey: tracegateHeader === '' ? null : tracegateHeader, providerKey: providerHeader === '' ? null : providerHeader, providerKeyFrom: 'x-tracegate-provider-key', conflict }
}

/**
 * The contract route's provider key: the body's field, else x-tracegate-provider-key. Given in both it
 * is refused, as two provider keys are on a native route.
 */
export function contractProviderKey (bodyKey: string | null, header: string, field: string): string | null {
  if (header === '') return bodyKey
  if (bodyKey !== null) throw twice('x-tracegate-provider-key', `A provider key is given in ${field} and in x-tracegate-provider-key; send it in one of them.`)
  return checkHeaderKey(header, 'x-tracegate-provider-key')
}

function twice (param: string, message: string): TracegateError {
  return new TracegateError('invalid_field', { param, message })
}

/** A provider key from a header goes into the provider's own header: printable ASCII, no spaces. */
export function checkHeaderKey (key: string, from: string): string {
  if (!HEADER_TOKEN.test(key)) {
    throw new TracegateError('invalid_field', { param: from, message: `The provider key in ${from} must be printable ASCII without spaces.` })
  }
  return key
}

/** x-tracegate-confidential: true or false (any case); absent is false. */
export function confidentialHeader (value: string): boolean {
  const v = value.trim().toLowerCase()
  if (v === '' || v === 'false') return false
  if (v === 'true') return true
  throw new TracegateError('invalid_field', { param: 'x-tracegate-confidential', message: 'x-tracegate-confidential must be true or false.' })
}

/** x-tracegate-cache-ttl: whole seconds up to `maxS` (TRACEGATE_CACHE_MAX_TTL_S); absent or 0: the cache is not asked. */
export function cacheTtlHeader (value: string, maxS: number): number {
  const v = value.trim()
  if (v === '') return 0
  if (!/^\d{1,10}$/.test(v) || Number(v) > maxS) throw bad(CACHE_TTL_HEADER, `${CACHE_TTL_HEADER} must be a whole number of seconds from 0 to ${maxS}.`)
  return Number(v)
}

function bad (header: string, message: string): TracegateError {
  return new TracegateError('invalid_field', { param: header, message })
}

/** A header value as text: its bytes (uWS hands them as latin1) read as UTF-8, which they must be. */
function utf8 (header: string, value: string): string {
  const bytes = Buffer.from(value, 'latin1')
  if (!isUtf8(bytes)) throw bad(header, `${header} must be UTF-8 text.`)
  return bytes.toString('utf8')
}

function label (header: string, raw: string, max: number): string {
  if (!PRINTABLE.test(raw)) throw bad(header, `${header} must be printable ASCII (other text can go in x-tracegate-metadata as JSON escapes).`)
  const text = raw.trim()
  if (text.length > max) throw bad(header, `${header} must be at most ${max} characters.`)
  return text
}

function tagList (raw: string): string[] {
  const tags: string[] = []
  for (const part of raw.split(',')) {
    const tag = label('x-tracegate-tags', part, MAX_TAG_CHARS)
    if (tag !== '' && !tags.includes(tag)) tags.push(tag)
  }
  if (tags.length > MAX_TAGS) throw bad('x-tracegate-tags', `x-tracegate-tags must hold at most ${MAX_TAGS} tags.`)
  return tags
}

/** A JSON object whose values are strings, numbers or booleans (stored as text), within the bounds. */
function metadataObject (raw: string): Record<string, string> {
  const header = 'x-tracegate-metadata'
  if (Buffer.byteLength(raw, 'latin1') > MAX_METADATA_BYTES) throw bad(header, `${header} must be at most ${MAX_METADATA_BYTES} bytes.`)
  let parsed: unknown
  try {
    parsed = JSON.parse(utf8(header, raw))
  } catch (err) {
    if (err instanceof TracegateError) throw err
    throw bad(header, `${header} must be a JSON object.`)
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw bad(header, `${header} must be a JSON object.`)
  const out: Record<string, string> = Object.create(null) as Record<string, string>
  const entries = Object.entries(parsed)
  if (entries.length > MAX_METADATA_KEYS) throw bad(header, `${header} must have at most ${MAX_METADATA_KEYS} keys.`)
  for (const [key, value] of entries) {
    if (key === '' || [...key].length > MAX_METADATA_KEY_CHARS || CONTROL.test(key)) {
      throw bad(header, `Each ${header} key must be 1 to ${MAX_METADATA_KEY_CHARS} characters without control characters.`)
    }
    if (typeof value === 'string') out[key] = value
    else if (typeof value === 'number' || typeof value === 'boolean') out[key] = String(value)
    else throw bad(header, `The value of ${header} key ${JSON.stringify(key)} must be a string, a number or a boolean.`)
  }
  return out
}

/** The labels the caller sent, or null when it sent none. */
export function callLabels (h: CallerHeaders): CallLabels | null {
  if (h.user === '' && h.session === '' && h.tags === '' && h.metadata === '') return null
  return {
    user: h.user === '' ? '' : label('x-tracegate-user', h.user, MAX_LABEL_CHARS),
    session: h.session === '' ? '' : label('x-tracegate-session', h.session, MAX_LABEL_CHARS),
    tags: h.tags === '' ? [] : tagList(h.tags),
    metadata: h.metadata === '' ? {} : metadataObject(h.metadata),
  }
}
