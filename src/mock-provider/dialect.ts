// What the server needs from each provider dialect. The mock's side of each provider (paths it serves,
// auth it checks, answer JSON, headers, default error messages) lives in the module its provider names
// (Dialect.mockModule: alpha.ts, beta.ts, gamma.ts here), exported as `mockDialect`; the error bodies and
// event framings are the provider modules' own (src/providers). server.ts and reply.ts only call this
// interface.
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import type { ProviderName } from '../providers/index.js'

/** A complete error answer in the provider's shape; reply.ts adds content-length. */
export class Rejection {
  readonly status: number
  readonly headers: OutgoingHttpHeaders
  readonly body: string

  constructor (status: number, headers: OutgoingHttpHeaders, body: string) {
    this.status = status
    this.headers = headers
    this.body = body
    // Providers ask rate-limited and overloaded clients to come back later.
    if (status === 429 || status === 503) headers['retry-after'] = '7'
  }
}

/** One accepted request; builds the parts of a 200 answer on demand. */
export interface Call {
  readonly model: string
  readonly stream: boolean
  /** Fixes what every part of the answer shares (ids, token counts); called once, before the rest. */
  begin (inputTokens: number, chunks: number): void
  headers (elapsedMs: number): OutgoingHttpHeaders
  /** The whole non-streamed answer. */
  body (): string
  /** Streamed: what goes before the first content chunk ('' for none). */
  head (): string
  /** Streamed: the event carrying content chunk k. */
  chunk (k: number): string
  /** Streamed: what goes after the last content chunk ('' for none). */
  tail (): string
}

/** What every call keeps: the model and stream it was asked for, and the counts begin() fixes. */
export abstract class BaseCall implements Call {
  readonly model: string
  readonly stream: boolean
  protected inputTokens = 0
  protected chunks = 0

  constructor (model: string, stream: boolean) {
    this.model = model
    this.stream = stream
  }

  begin (inputTokens: number, chunks: number): void {
    this.inputTokens = inputTokens
    this.chunks = chunks
    this.started()
  }

  /** Fixes the answer's ids and the parts its events share, once the counts are known. */
  protected abstract started (): void
  abstract headers (elapsedMs: number): OutgoingHttpHeaders
  abstract body (): string
  abstract head (): string
  abstract chunk (k: number): string
  abstract tail (): string
}

/**
 * An answer that generates nothing (a token count, embeddings, a stored response read back): one JSON
 * body, never streamed; the behaviours that delay or fail a call apply to it as to any other.
 */
export class FixedCall extends BaseCall {
  readonly #headers: OutgoingHttpHeaders
  readonly #body: (inputTokens: number) => string
  #text = ''

  constructor (model: string, headers: OutgoingHttpHeaders, body: (inputTokens: number) => string) {
    super(model, false)
    this.#headers = headers
    this.#body = body
  }

  protected started (): void {
    this.#text = this.#body(this.inputTokens)
  }

  headers (): OutgoingHttpHeaders { return { ...this.#headers } }
  body (): string { return this.#text }
  head (): string { return '' }
  chunk (): string { return '' }
  tail (): string { return '' }
}

export interface MockDialect {
  readonly name: ProviderName
  /** Whether this dialect serves the POST path (query string already cut off). */
  matches (path: string): boolean
  /** Whether it serves a GET or DELETE of the path (stored responses); parse() then gets an empty body. */
  serves? (method: string, path: string): boolean
  /** Checks the headers (and gamma's query) before the body is looked at. */
  admit (req: IncomingMessage, query: string): Rejection | null
  /** Reads the parsed body (a JSON object) and the path into a call, or rejects it. */
  parse (body: Record<string, unknown>, path: string, query: string, method: string): Call | Rejection
  /** The provider's error answer for this status. */
  error (status: number, message?: string): Rejection
  /** The provider's answer to a body that is not a JSON object. */
  invalidJson (): Rejection
  /** The provider's answer to a path or method it does not serve. */
  notFound (method: string, path: string): Rejection
}
