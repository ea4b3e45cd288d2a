// Per-key and per-account limits (issue 14): the values, a change to them, and how loosely typed input
// (CLI flags, admin-socket JSON, dashboard JSON) becomes a change. Shared by the store, the admin
// operations and the limiter; the design is /work/notes/limits-contract.md.
import { TracegateError } from '../errors.js'

export interface Limits {
  readonly rpm: number | null            // whole number >= 1, or null = no limit
  readonly tpm: number | null            // whole number >= 1
  readonly budgetDayUsd: number | null   // > 0, at most 6 decimals
  readonly budgetMonthUsd: number | null
  readonly models: readonly string[] | null  // null = any model; a non-empty list otherwise
  readonly maxBodyBytes: number | null   // keys only (always null on an account); whole number >= 1
}

export const NO_LIMITS: Limits = Object.freeze({
  rpm: null, tpm: null, budgetDayUsd: null, budgetMonthUsd: null, models: null, maxBodyBytes: null,
})

/** A change: a field absent = unchanged; null = remove that limit. */
export type LimitsPatch = { -readonly [K in keyof Limits]?: Limits[K] }

type Code = 'invalid_argument' | 'invalid_parameter'

// rpm is stored as UInt32; the other counts as UInt64, read back as JavaScript numbers.
const COUNTS = [
  { name: 'rpm', field: 'rpm', max: 4_294_967_295 },
  { name: 'tpm', field: 'tpm', max: Number.MAX_SAFE_INTEGER },
  { name: 'max_body_bytes', field: 'maxBodyBytes', max: Number.MAX_SAFE_INTEGER },
] as const
const BUDGETS = [
  { name: 'budget_day', field: 'budgetDayUsd' },
  { name: 'budget_month', field: 'budgetMonthUsd' },
] as const
const MAX_USD = 1e12
const MAX_MODELS = 100
const MAX_PATTERN = 200

function removes (v: unknown): boolean {
  return v === null || v === '' || (typeof v === 'string' && v.trim().toLowerCase() === 'none')
}

function refuse (code: Code, param: string, rule: string): never {
  throw new TracegateError(code, { param, message: `${param} ${rule}` })
}

function count (v: unknown, name: string, max: number, code: Code): number {
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\s*\d+\s*$/.test(v) ? Number(v) : NaN
  if (!Number.isInteger(n) || n < 1 || n > max) refuse(code, name, `must be a whole number from 1 to ${max}, or none`)
  return n
}

function usd (v: unknown, name: string, code: Code): number {
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(v) ? Number(v) : NaN
  // At most 6 decimals (a micro-dollar): what the CLI prints back is what was stored.
  if (!Number.isFinite(n) || n <= 0 || n > MAX_USD || Math.round(n * 1e6) / 1e6 !== n) {
    refuse(code, name, 'must be an amount in USD above 0 with at most 6 decimals, or none')
  }
  return n
}

function modelList (v: unknown, code: Code): string[] {
  const items = Array.isArray(v) ? v : typeof v === 'string' ? v.split(',') : null
  if (items === null || items.some((m) => typeof m !== 'string')) refuse(code, 'models', 'must be a list of model names or patterns')
  const list = [...new Set((items as string[]).map((m) => m.trim()).filter((m) => m !== ''))]
  if (list.length === 0) refuse(code, 'models', 'must name at least one model or pattern, or be none')
  if (list.length > MAX_MODELS) refuse(code, 'models', `may hold at most ${MAX_MODELS} names or patterns`)
  if (list.some((m) => m.length > MAX_PATTERN || /\s/.test(m))) refuse(code, 'models', `entries are names without spaces, at most ${MAX_PATTERN} characters`)
  return list
}

/**
 * Reads a patch from loosely typed input (CLI strings, admin-socket JSON, dashboard JSON). Accepts numbers or
 * numeric strings; 'none' / '' / null removes a limit; models as an array or a comma-separated string.
 * Throws TracegateError(code, { param: <field name as given>, message }) naming the field and the rule;
 * `code` is the caller's ('invalid_argument' for the CLI, 'invalid_parameter' for the dashboard).
 * `forAccount`: maxBodyBytes is refused there.
 */
export function parseLimitsPatch (input: Record<string, unknown>, opts: { forAccount: boolean; code: Code }): LimitsPatch {
  const patch: LimitsPatch = {}
  for (const { name, field, max } of COUNTS) {
    const v = input[name]
    if (v === undefined) continue
    if (field === 'maxBodyBytes' && opts.forAccount) refuse(opts.code, name, 'is a limit of keys only, not of an account')
    patch[field] = removes(v) ? null : count(v, name, max, opts.code)
  }
  for (const { name, field } of BUDGETS) {
    const v = input[name]
    if (v !== undefined) patch[field] = removes(v) ? null : usd(v, name, opts.code)
  }
  const models = input.models
  if (models !== undefined) patch.models = removes(models) ? null : modelList(models, opts.code)
  return patch
}

export function applyPatch (base: Limits, patch: LimitsPatch): Limits {
  const next: LimitsPatch = { ...base }
  for (const [field, value] of Object.entries(patch) as Array<[keyof Limits, unknown]>) {
    if (value !== undefined) (next as Record<string, unknown>)[field] = value
  }
  return Object.freeze(next as Limits)
}

/** Compiled once per list; used on the hot path. */
export function modelMatcher (patterns: readonly string[] | null): (model: string) => boolean {
  if (patterns === null) return () => true
  const exact = new Set(patterns.filter((p) => !p.includes('*')))
  const globs = patterns.filter((p) => p.includes('*'))
  if (globs.length === 0) return (model) => exact.has(model)
  // `*` is any run of characters; everything else is literal; the whole name must match.
  const source = globs.map((g) => g.split('*').map((part) => part.replace(/[\\^$.|?+()[\]{}]/g, '\\$&')).join('[\\s\\S]*')).join('|')
  const re = new RegExp(`^(?:${source})$`)
  return (model) => exact.has(model) || re.test(model)
}
