// The mock's options, resolved once at start, and the per-request behaviour a client picks through the
// model name, so that a client talking to a proxy in front of the mock can still choose it.
import type { MockProviderOptions } from './types.js'

export interface ResolvedOptions {
  readonly host: string
  readonly port: number
  readonly ttftMs: number
  readonly chunks: number
  readonly gapMs: number
  readonly recordLimit: number
}

export const DEFAULTS: ResolvedOptions = Object.freeze({
  host: '127.0.0.1',
  port: 0,
  ttftMs: 0,
  chunks: 8,
  gapMs: 0,
  recordLimit: 1000,
})

// setTimeout clamps anything above 2^31-1 ms to 1 ms; clamp to the largest delay it really waits.
const MAX_DELAY_MS = 2 ** 31 - 1
const MAX_CHUNKS = 100_000

function whole (value: number | undefined, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`mock provider option ${name} must be a whole number from ${min} to ${max}, got ${String(value)}`)
  }
  return value
}

export function resolveOptions (opts: MockProviderOptions = {}): ResolvedOptions {
  const host = opts.host ?? DEFAULTS.host
  if (typeof host !== 'string' || host === '') throw new TypeError('mock provider option host must be a non-empty string')
  return Object.freeze({
    host,
    port: whole(opts.port, 'port', DEFAULTS.port, 0, 65535),
    ttftMs: whole(opts.ttftMs, 'ttftMs', DEFAULTS.ttftMs, 0, MAX_DELAY_MS),
    chunks: whole(opts.chunks, 'chunks', DEFAULTS.chunks, 1, MAX_CHUNKS),
    gapMs: whole(opts.gapMs, 'gapMs', DEFAULTS.gapMs, 0, MAX_DELAY_MS),
    recordLimit: whole(opts.recordLimit, 'recordLimit', DEFAULTS.recordLimit, 0, Number.MAX_SAFE_INTEGER),
  })
}

/**
 * normal: a full answer. error: `status` with the provider's error body. hang: read the request and
 * never answer. drop: start the answer, send about half of it, then cut the connection.
 */
export type Mode = 'normal' | 'error' | 'hang' | 'drop'

export interface Behaviour {
  readonly mode: Mode
  /** The status of an `error` answer; 200 otherwise. */
  readonly status: number
  readonly ttftMs: number
  readonly chunks: number
  readonly gapMs: number
}

const ERROR = /error-(\d{3})/
const TTFT = /ttft-(\d+)/
const CHUNKS = /chunks-(\d+)/
const GAP = /gap-(\d+)/

function number (model: string, pattern: RegExp, fallback: number, min: number, max: number): number {
  const digits = pattern.exec(model)?.[1]
  if (digits === undefined) return fallback
  return Math.min(Math.max(Number(digits), min), max)
}

/**
 * Reads the behaviour from substrings anywhere in the model name: `error-NNN` (400 to 599), `hang`,
 * `drop`, and `ttft-N`, `chunks-N`, `gap-N` overriding the options. When several modes appear, error
 * wins over hang and hang over drop.
 */
export function parseBehaviour (model: string, defaults: ResolvedOptions): Behaviour {
  const code = Number(ERROR.exec(model)?.[1] ?? 0)
  const isError = code >= 400 && code <= 599
  const mode: Mode = isError ? 'error' : model.includes('hang') ? 'hang' : model.includes('drop') ? 'drop' : 'normal'
  return Object.freeze({
    mode,
    status: isError ? code : 200,
    ttftMs: number(model, TTFT, defaults.ttftMs, 0, MAX_DELAY_MS),
    chunks: number(model, CHUNKS, defaults.chunks, 1, MAX_CHUNKS),
    gapMs: number(model, GAP, defaults.gapMs, 0, MAX_DELAY_MS),
  })
}

// Benchmarks send the same few model names thousands of times a second; parse each name once.
const CACHE_LIMIT = 1024

export class Behaviours {
  readonly #defaults: ResolvedOptions
  readonly #cache = new Map<string, Behaviour>()

  constructor (defaults: ResolvedOptions) {
    this.#defaults = defaults
  }

  get (model: string): Behaviour {
    let behaviour = this.#cache.get(model)
    if (behaviour === undefined) {
      behaviour = parseBehaviour(model, this.#defaults)
      if (this.#cache.size >= CACHE_LIMIT) this.#cache.clear()
      this.#cache.set(model, behaviour)
    }
    return behaviour
  }
}
