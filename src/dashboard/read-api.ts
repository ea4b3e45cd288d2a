// The read API for analytics tools: `Authorization: Bearer tgk_…` with a read-scope key, checked through
// the same key cache as the proxy (so a revocation in this process is seen at once). No cookie, no CSRF:
// a browser never attaches this header on its own.
import { authenticate } from '../auth/authenticate.js'
import type { KeyCache } from '../auth/cache.js'
import { TracegateError } from '../errors.js'
import type { StoreClient } from '../store/client.js'
import { getSession, getTrace, listSessions, listTraces, traceTotals, usage } from './data-routes.js'
import { HttpError, type Reply, type Req } from './http.js'

const CHALLENGE: ReadonlyArray<readonly [string, string]> = [['www-authenticate', 'Bearer realm="tracegate"']]

type RefusalCode = 'unauthorized' | 'invalid_api_key' | 'expired_api_key' | 'revoked_api_key' | 'wrong_key_scope'

function refuse (code: RefusalCode): HttpError {
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
    const verdict = await authenticate(this.#keys, m[1]!, 'read')
    if (verdict instanceof TracegateError) throw refuse(verdict.code as RefusalCode)
    return verdict.accountId
  }

  /** The account of the request's read key (the export route's check). */
  account = (req: Req): Promise<string> => this.#account(req)

  /** A read route: the key's account, then `answer` for it, as 200 JSON. */
  #read (answer: (store: StoreClient, accountId: string, req: Req) => Promise<unknown>): (req: Req) => Promise<Reply> {
    return async (req) => {
      const accountId = await this.#account(req)
      return { status: 200, body: await answer(this.#store, accountId, req) }
    }
  }

  totals = this.#read((store, accountId, req) => traceTotals(store, accountId, req.query))
  traces = this.#read((store, accountId, req) => listTraces(store, accountId, req.query))
  trace = this.#read((store, accountId, req) => getTrace(store, accountId, req.params[0] ?? ''))
  usage = this.#read((store, accountId, req) => usage(store, accountId, req.query))
  sessions = this.#read((store, accountId, req) => listSessions(store, accountId, req.query))
  session = this.#read((store, accountId, req) => getSession(store, accountId, req.params[0] ?? '', req.query))
}
