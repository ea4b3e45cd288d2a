// Per-key and per-account limits (their values are in domain/limits.ts): how a change is read from loose
// input (the CLI, the admin socket, the dashboard), and the model allowlist's matcher. Shared by the limiter
// and the store.
import { TracegateError } from '../errors.js'
import type { Limits, LimitsPatch } from '../domain/limits.js'

/** rpm is stored as UInt32; the other whole numbers must stay exact in a double. */
const MAX_RPM = 4_294_967_295
/** Budgets are counted in micro-dollars in a double, which stays exact far beyond this. */
const MAX_BUDGET_USD = 1_000_000_000
const MAX_MODELS = 100
const MAX_PATTERN_LENGTH = 200
/** Printable, no whitespace, no comma (a list must survive the CLI's comma-separated form). */
const PATTERN = /^[^\s,\p{Cc}]+$/u
const WHOLE = /^\d+$/
const DECIMAL = /^\d+(?:\.\d{1,6})?$/

type Field = keyof Limits

/** Input names for each field: the JSON member first, then the CLI flag's spelling. */
const NAMES: ReadonlyArray<readonly [Field, readonly string[]]> = [
  ['rpm', ['rpm']],
  ['tpm', ['tpm']],
  ['budgetDayUsd', ['budget_day', 'budget-day']],
  ['budgetMonthUsd', ['budget_month', 'budget-month']],
  ['models', ['models']],
  ['maxBodyBytes', ['max_body_bytes', 'max-body-bytes']],
]

/** The error a refused argument gets: `invalid_argument` from the CLI and admin socket, `invalid_parameter` from the dashboard. */
export type Code = 'invalid_argument' | 'invalid_parameter'

/** A value that removes a setting: null, '' or 'none' (any case, spaces around). */
export const isNone = (v: unknown): boolean => v === null || (typeof v === 'string' && (v.trim() === '' || v.trim().toLowerCase() === 'none'))

/** The one of `names` the input gives a value under, or null; refused when it gives it under two. */
export function givenName (input: Record<string, unknown>, names: readonly string[], code: Code): string | null {
  const given = names.filter((n) => Object.hasOwn(input, n) && input[n] !== undefined)
  if (given.length === 0) return null
  const name = given[0]!
  if (given.length > 1) throw refuse(code, name, `${name} is given twice (as ${given.join(' and ')})`)
  return name
}

/**
 * Reads a patch from loosely typed input (CLI strings, admin-socket JSON, dashboard JSON). Accepts numbers or
 * numeric strings; 'none' / '' / null removes a limit; models as an array or a comma-separated string.
 * Members that are not limit fields are ignored (the input also carries the id, the name...).
 * Throws TracegateError(code, { param: <field name as given>, message }) naming the field and the rule.
 * `forAccount`: maxBodyBytes is refused there.
 */
export function parseLimitsPatch (input: Record<string, unknown>, opts: { forAccount: boolean; code: Code }): LimitsPatch {
  const patch: LimitsPatch = {}
  for (const [field, names] of NAMES) {
    const name = givenName(input, names, opts.code)
    if (name === null) continue
    if (field === 'maxBodyBytes' && opts.forAccount) throw refuse(opts.code, name, `${name} is a limit of keys only; an account has none`)
    const value = input[name]
    if (isNone(value)) {
      patch[field] = null
      continue
    }
    switch (field) {
      case 'rpm': patch.rpm = whole(value, MAX_RPM, name, opts.code); break
      case 'tpm': patch.tpm = whole(value, Number.MAX_SAFE_INTEGER, name, opts.code); break
      case 'maxBodyBytes': patch.maxBodyBytes = whole(value, Number.MAX_SAFE_INTEGER, name, opts.code); break
      case 'budgetDayUsd': patch.budgetDayUsd = usd(value, name, opts.code); break
      case 'budgetMonthUsd': patch.budgetMonthUsd = usd(value, name, opts.code); break
      case 'models': patch.models = models(value, name, opts.code); break
    }
  }
  return patch
}

export function applyPatch (base: Limits, patch: LimitsPatch): Limits {
  const pick = <K extends Field>(k: K): Limits[K] => (patch[k] === undefined ? base[k] : patch[k]) as Limits[K]
  return Object.freeze({
    rpm: pick('rpm'),
    tpm: pick('tpm'),
    budgetDayUsd: pick('budgetDayUsd'),
    budgetMonthUsd: pick('budgetMonthUsd'),
    models: pick('models'),
    maxBodyBytes: pick('maxBodyBytes'),
  })
}

/**
 * Compiled once per list; used on the hot path. `*` matches any run of characters (also none), nothing else
 * is special (no regular expression is built, so `gpt.4` or `a+` are plain text); whole-string and
 * case-sensitive. null = any model. The last answer is kept: a key's calls mostly name the same model.
 */
export function modelMatcher (patterns: readonly string[] | null): (model: string) => boolean {
  if (patterns === null) return () => true
  const exact = new Set<string>()
  const globs: Glob[] = []
  for (const p of patterns) {
    if (!p.includes('*')) exact.add(p)
    else if (/^\*+$/.test(p)) return () => true
    else globs.push(glob(p))
  }
  let lastModel: string | null = null
  let lastAnswer = false
  return (model) => {
    if (model === lastModel) return lastAnswer
    let answer = exact.has(model)
    for (let i = 0; !answer && i < globs.length; i++) answer = globMatch(globs[i]!, model)
    lastModel = model
    lastAnswer = answer
    return answer
  }
}

/** A pattern split at its stars: the text must start with `prefix`, end with `suffix`, and hold the middles in order between. */
interface Glob {
  readonly prefix: string
  readonly suffix: string
  readonly middles: readonly string[]
  readonly minLength: number
}

function glob (pattern: string): Glob {
  const parts = pattern.split('*')
  const prefix = parts[0]!
  const suffix = parts[parts.length - 1]!
  return { prefix, suffix, middles: parts.slice(1, -1).filter((m) => m !== ''), minLength: prefix.length + suffix.length }
}

/** Taking each middle at its leftmost place is optimal when `*` is the only wildcard, so this never backtracks. */
function globMatch (g: Glob, text: string): boolean {
  if (text.length < g.minLength || !text.startsWith(g.prefix) || !text.endsWith(g.suffix)) return false
  let at = g.prefix.length
  const end = text.length - g.suffix.length
  for (const part of g.middles) {
    const found = text.indexOf(part, at)
    if (found === -1 || found + part.length > end) return false
    at = found + part.length
  }
  return true
}

export function refuse (code: Code, param: string, message: string): TracegateError {
  return new TracegateError(code, { param, message })
}

function whole (value: unknown, max: number, name: string, code: Code): number {
  const n = typeof value === 'number' ? value : typeof value === 'string' && WHOLE.test(value.trim()) ? Number(value.trim()) : NaN
  if (!Number.isInteger(n) || n < 1 || n > max) {
    throw refuse(code, name, `${name} must be a whole number from 1 to ${max}, or none to remove the limit`)
  }
  return n
}

function usd (value: unknown, name: string, code: Code): number {
  // A number is judged by its shortest decimal spelling, so 0.1 has one decimal and 1e-7 is refused.
  const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim() : ''
  const n = DECIMAL.test(text) ? Number(text) : NaN
  if (!(n > 0 && n <= MAX_BUDGET_USD)) {
    throw refuse(code, name, `${name} must be an amount of USD above 0 and at most ${MAX_BUDGET_USD}, with at most 6 decimals, or none to remove the limit`)
  }
  return n
}

function models (value: unknown, name: string, code: Code): readonly string[] | null {
  const rule = `${name} must be a list of model names or patterns with *, each 1 to ${MAX_PATTERN_LENGTH} characters without spaces or commas, at most ${MAX_MODELS} of them, or none to allow any model`
  let items: unknown[]
  if (typeof value === 'string') items = value.split(',').map((s) => s.trim())
  else if (Array.isArray(value)) items = value.map((v) => (typeof v === 'string' ? v.trim() : v))
  else throw refuse(code, name, rule)
  if (items.length === 0) return null
  const seen = new Set<string>()
  for (const item of items) {
    if (typeof item !== 'string' || item.length === 0 || item.length > MAX_PATTERN_LENGTH || !PATTERN.test(item)) throw refuse(code, name, rule)
    seen.add(item)
  }
  if (seen.size > MAX_MODELS) throw refuse(code, name, rule)
  return Object.freeze([...seen])
}
