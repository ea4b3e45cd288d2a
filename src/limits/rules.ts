// The limits judged without a count: the models a key and its account allow, and the key's body size. A
// pure function of the call, so the Limiter and a front thread (front.ts) judge them alike, and neither
// holds state for them. Also the refusal every limit answers with, and which limits need a count.
import { modelMatcher } from './types.js'
import type { Limits } from '../domain/limits.js'

export interface Refusal {
  readonly code: 'rate_limited' | 'budget_exceeded' | 'model_not_allowed' | 'model_not_priced' | 'body_too_large'
  /** Names the limit ("the key's limit of 60 requests per minute"), never a key. */
  readonly message: string
  readonly param: string | null
  readonly period: 'day' | 'month' | null
  readonly limitUsd: number | null
  readonly retryAfterMs: number | null
  /** The 429 headers ({} for a 403 or a 413). */
  readonly headers: Readonly<Record<string, string>>
}

export const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({})

export function refusal (code: Refusal['code'], message: string, param: string | null, period: 'day' | 'month' | null, limitUsd: number | null, retryAfterMs: number | null, headers: Readonly<Record<string, string>>): Refusal {
  return { code, message, param, period, limitUsd, retryAfterMs, headers }
}

/** True when a call under these limits must be counted to be judged (requests, tokens or spend). */
export function hasCounters (l: Limits): boolean {
  return l.rpm !== null || l.tpm !== null || l.budgetDayUsd !== null || l.budgetMonthUsd !== null
}

/**
 * One matcher per allowlist, for as long as the list lives: a key's limits are one object while its
 * cache entry lives, so a call matches without building a matcher.
 */
const matchers = new WeakMap<readonly string[], (model: string) => boolean>()

function allows (patterns: readonly string[], model: string): boolean {
  let match = matchers.get(patterns)
  if (match === undefined) {
    match = modelMatcher(patterns)
    matchers.set(patterns, match)
  }
  return match(model)
}

/** Whether the key's and the account's allowlists both allow `model` (a model route's steps are held to them too). */
export function modelAllowed (key: Limits, account: Limits, model: string): boolean {
  return (key.models === null || allows(key.models, model)) && (account.models === null || allows(account.models, model))
}

/** The models allowed (key's, then account's) and the key's body size. null = they pass. */
export function checkRules (key: Limits, account: Limits, model: string | null, bodyBytes: number): Refusal | null {
  // No model named (nothing to check it against): the allowlist does not apply.
  if (model !== null) {
    if (key.models !== null && !allows(key.models, model)) return modelRefusal('key', model)
    if (account.models !== null && !allows(account.models, model)) return modelRefusal('account', model)
  }
  if (key.maxBodyBytes !== null && bodyBytes > key.maxBodyBytes) {
    return refusal('body_too_large', `The request body is ${bodyBytes} bytes, over the key's limit of ${key.maxBodyBytes} bytes.`, null, null, null, null, NO_HEADERS)
  }
  return null
}

function modelRefusal (whose: 'key' | 'account', model: string): Refusal {
  const shown = model.length > 100 ? `${model.slice(0, 100)}…` : model
  return refusal('model_not_allowed', `The model ${JSON.stringify(shown)} is not among the ${whose}'s allowed models.`, 'model', null, null, null, NO_HEADERS)
}
