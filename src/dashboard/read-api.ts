// The read API for analytics tools: `Authorization: Bearer tgk_…` with a read-scope key, checked through
// the same key cache as the proxy (so a revocation in this process is seen at once). No cookie, no CSRF:
// a browser never attaches this header on its own.
import { hashKey, KEY_PATTERN } from '../auth/keys.js'
import type { KeyCache } from '../auth/cache.js'
import type { StoreClient } from '../store/client.js'
import type { KeyInfo } from '../store/protocol.js'
import { getTrace, listTraces, usage } from './data-routes.js'
import { HttpError, type Reply, type Req } from './http.js'

const CHALLENGE: ReadonlyArray<readonly [string, string]> = [['www-authenticate', 'Bearer realm="tracegate"']]

function refuse (code: 'unauthorized' | 'invalid_api_key' | 'expired_api_key' | 'revoked_api_key' | 'wrong_key_scope'): HttpError {
  return new HttpError(code, { headers: CHALLENGE })
}

export class ReadApi {
  readonly #store: StoreClient
  readonly #keys: KeyCache

  constructor (store: StoreClient, keys: KeyCache) {
    this.#store = store
    this.#keys = keys
  }

  /** The account of a valid read key, or the 401 that says what is wrong with it. */
  async #account (req: Req): Promise<string> {
    const header = req.headers.get('authorization')
    if (header === undefined || header === '') throw refuse('unauthorized')
    const m = /^Bearer +(\S+)\s*$/i.exec(header)
    if (m === null) throw refuse('unauthorized')
    const key = m[1]!
    if (!KEY_PATTERN.test(key)) throw refuse('invalid_api_key')
    const hash = hashKey(key)
    const cached = this.#keys.peek(hash)
    const info: KeyInfo | null = cached !== undefined ? cached : await this.#keys.fetch(hash)
    if (info === null) throw refuse('invalid_api_key')
    if (info.revoked) throw refuse('revoked_api_key')
    if (info.expiresAt !== null && info.expiresAt <= Date.now()) throw refuse('expired_api_key')
    if (info.scope !== 'read') throw refuse('wrong_key_scope')
    return info.accountId
  }

  traces = async (req: Req): Promise<Reply> => {
    const accountId = await this.#account(req)
    return { status: 200, body: await listTraces(this.#store, accountId, req.query) }
  }

  trace = async (req: Req): Promise<Reply> => {
    const accountId = await this.#account(req)
    return { status: 200, body: await getTrace(this.#store, accountId, req.params[0] ?? '') }
  }

  usage = async (req: Req): Promise<Reply> => {
    const accountId = await this.#account(req)
    return { status: 200, body: await usage(this.#store, accountId, req.query) }
  }
}
