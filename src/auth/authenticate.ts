// The key decision, in one place for every port: format, hash, cache (the store on a miss), revoked,
// expired, scope. The proxy and the read API ask it; each turns a refusal into its own 401.
import { TracegateError } from '../errors.js'
import type { KeyInfo } from '../domain/key-info.js'
import type { Scope } from '../domain/scope.js'
import type { KeyCache } from './cache.js'
import { keyStatus } from './key-status.js'
import { hashKey, KEY_PATTERN } from './keys.js'

/** A key's verdict: the caller, or the 401 that says what is wrong with the key. */
export type KeyVerdict = KeyInfo | TracegateError

/** The verdict on a known lookup result (null: no such key), at `now`. */
export function judgeKey (info: KeyInfo | null, scope: Scope, now: number): KeyVerdict {
  if (info === null) return new TracegateError('invalid_api_key')
  const status = keyStatus(info, now)
  if (status === 'revoked') return new TracegateError('revoked_api_key')
  if (status === 'expired') return new TracegateError('expired_api_key')
  if (info.scope !== scope) return new TracegateError('wrong_key_scope')
  return info
}

/**
 * Authenticates a tracegate key for `scope`. Synchronous when the cache knows the key (the proxy's hot
 * path stays on one tick); a promise when the store has to be asked. A store failure rejects.
 */
export function authenticate (keys: KeyCache, key: string, scope: Scope): KeyVerdict | Promise<KeyVerdict> {
  if (!KEY_PATTERN.test(key)) return new TracegateError('invalid_api_key')
  const hash = hashKey(key)
  const cached = keys.peek(hash)
  if (cached !== undefined) return judgeKey(cached, scope, Date.now())
  return keys.fetch(hash).then((info) => judgeKey(info, scope, Date.now()))
}
