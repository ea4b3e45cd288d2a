// What a call may cost at most, read from its request before it is let through: its prompt counted as
// one token per body byte (a text token is at least one byte, so this is above what the provider counts
// for text) and its output cap (the request's own, else DEFAULT_OUTPUT_TOKENS). A key or account with a
// budget or tpm holds this for each call in flight, so parallel calls cannot all pass an exhausted limit.
import type { Dialect } from '../providers/index.js'
import type { CallKind } from '../providers/types.js'
import { Kind, type Member } from '../proxy/scan.js'
import type { Limits } from '../domain/limits.js'

/** Output tokens held for a call that names no cap of its own. */
export const DEFAULT_OUTPUT_TOKENS = 4096

export interface Estimate {
  readonly promptTokens: number
  readonly outputTokens: number
}

/** A whole number >= 0 from a JSON number's text, else null. */
function count (text: string): number | null {
  const n = Number(text)
  return Number.isSafeInteger(n) && n >= 0 ? n : null
}

/** The request's output cap: the first of the dialect's members that holds a whole number. */
export function outputCap (dialect: Dialect, body: Buffer, members: readonly Member[]): number | null {
  const { within, members: names } = dialect.maxTokens
  if (within === null) {
    for (const name of names) {
      const m = members.find((x) => x.name === name && x.kind === Kind.Number)
      if (m !== undefined) return count(body.toString('latin1', m.valueStart, m.end))
    }
    return null
  }
  const holder = members.find((x) => x.name === within && x.kind === Kind.Object)
  if (holder === undefined) return null
  let inner: Record<string, unknown>
  try {
    inner = JSON.parse(body.toString('utf8', holder.valueStart, holder.end)) as Record<string, unknown>
  } catch {
    return null
  }
  for (const name of names) {
    const v = inner[name]
    if (typeof v === 'number') return count(String(v))
  }
  return null
}

const holds = (l: Limits): boolean => l.tpm !== null || l.budgetDayUsd !== null || l.budgetMonthUsd !== null

/**
 * The estimate of a call under these limits; none is worked out when neither key nor account has a budget
 * or tpm. An embeddings call writes no output tokens, so it holds its prompt alone.
 */
export function estimateOf (dialect: Dialect, body: Buffer, members: readonly Member[], key: Limits, account: Limits, kind: CallKind = 'generate'): Estimate | undefined {
  if (!holds(key) && !holds(account)) return undefined
  if (kind === 'embed') return { promptTokens: body.length, outputTokens: 0 }
  return { promptTokens: body.length, outputTokens: outputCap(dialect, body, members) ?? DEFAULT_OUTPUT_TOKENS }
}
