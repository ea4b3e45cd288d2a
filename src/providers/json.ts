// Readers for JSON values of unknown shape (provider bodies, answers, stream events). Pure: the
// detection worker, the store worker, the mock provider and the browser dashboard all import them.

export type Json = Record<string, unknown>

export function isObject (value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The value as an object, or null. */
export const asObject = (v: unknown): Json | null => (isObject(v) ? v : null)
/** The value as an array, or an empty one. */
export const asArray = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])
export const asString = (v: unknown): string | null => (typeof v === 'string' ? v : null)

/** A count as providers report it: a non-negative whole number, else 0. */
export const count = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0)

/** The strings inside a JSON value (tool arguments, function responses), depth first. */
export function jsonStrings (v: unknown, acc: string[] = []): string[] {
  if (typeof v === 'string') acc.push(v)
  else if (Array.isArray(v)) for (const x of v) jsonStrings(x, acc)
  else if (isObject(v)) for (const x of Object.values(v)) jsonStrings(x, acc)
  return acc
}

/** Readable JSON of a value already parsed (tool arguments and the like). */
export function show (v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v, null, 2) ?? String(v)
}

/** A calendar day (YYYY-MM-DD, UTC) as Unix seconds; 0 when it is not one. */
export function epochSeconds (day: string): number {
  const ms = Date.parse(`${day}T00:00:00Z`)
  return Number.isFinite(ms) ? ms / 1000 : 0
}
