// The local admin socket: a loopback-only listener through which the CLI reaches the running server
// (chDB allows one process per data directory, so a second process cannot open the store). Its port
// and a random token are written to <data>/admin.json, readable by the owner only.
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { AdminOps } from './ops.js'
import { bodyTooLarge, TracegateError } from '../errors.js'
import { newRequestId } from '../ids.js'
import { readBody } from '../server/body.js'
import { asTracegateError, sendError, sendJson } from '../server/respond.js'
import { listen, uws, type TemplatedApp } from '../server/uws.js'

export interface AdminEndpoint {
  readonly pid: number
  readonly port: number
  readonly token: string
}

export function adminFile (dataDir: string): string {
  return join(dataDir, 'admin.json')
}

const ADMIN_BODY_LIMIT = 64 * 1024

type Handler = (ops: AdminOps, args: Record<string, unknown>) => Promise<unknown>

const HANDLERS: Record<string, Handler> = {
  'account.create': (ops, a) => ops.createAccount(a),
  'user.create': (ops, a) => ops.createUser(a),
  'key.create': (ops, a) => ops.createKey(a),
  'key.revoke': (ops, a) => ops.revokeKey(a),
  'key.update': (ops, a) => ops.updateKey(a),
  'account.update': (ops, a) => ops.updateAccount(a),
  'key.list': (ops, a) => ops.listKeys(a),
  migrate: (ops) => ops.migrate(),
  'account.list': (ops) => ops.listAccounts(),
  'user.reset-password': (ops, a) => ops.resetPassword(a),
  status: (ops) => ops.status(),
}

export class AdminServer {
  readonly #app: TemplatedApp
  readonly #token = randomBytes(32).toString('base64url')
  #socket: unknown = null
  #file: string | null = null

  constructor (ops: AdminOps) {
    this.#app = uws.App()
    const expected = Buffer.from(`Bearer ${this.#token}`)
    // Answers come from the one error table (respond.ts): the CLI reads `error.code` and `error.message`.
    this.#app.post('/admin/:op', (res, req) => {
      const id = newRequestId()
      const op = req.getParameter(0) ?? ''
      const auth = Buffer.from(req.getHeader('authorization'))
      let aborted = false
      res.onAborted(() => { aborted = true })
      const lengthHeader = req.getHeader('content-length')
      const fail = (err: unknown, close = false): void => { if (!aborted) sendError(res, asTracegateError(err), id, close) }
      readBody(res, lengthHeader === '' ? -1 : Number(lengthHeader), ADMIN_BODY_LIMIT, (r) => {
        if (aborted) return
        if (!r.ok) {
          fail(bodyTooLarge(ADMIN_BODY_LIMIT, 'the admin socket\'s'), true)
          return
        }
        if (auth.length !== expected.length || !timingSafeEqual(auth, expected)) {
          fail(new TracegateError('unauthorized', { message: 'The admin token is not valid.' }))
          return
        }
        const handler = HANDLERS[op]
        if (handler === undefined) {
          fail(new TracegateError('not_found', { message: `No admin operation ${op}.` }))
          return
        }
        let args: Record<string, unknown>
        try {
          args = JSON.parse(r.body.toString('utf8') || '{}') as Record<string, unknown>
        } catch {
          fail(new TracegateError('invalid_json', { message: 'The admin body must be JSON.' }))
          return
        }
        // Checks inside an operation may throw before its first await: keep them on the promise path.
        Promise.resolve().then(() => handler(ops, args)).then(
          (value) => { if (!aborted) sendJson(res, 200, JSON.stringify({ value }), id) },
          fail,
        )
      })
    })
    this.#app.any('/*', (res) => { sendError(res, 'not_found', newRequestId()) })
  }

  async start (dataDir: string): Promise<AdminEndpoint> {
    const { socket, port } = await listen(this.#app, '127.0.0.1', 0)
    this.#socket = socket
    const endpoint: AdminEndpoint = { pid: process.pid, port, token: this.#token }
    this.#file = adminFile(dataDir)
    writeFileSync(this.#file, JSON.stringify(endpoint), { mode: 0o600 })
    return endpoint
  }

  close (): void {
    if (this.#socket !== null) uws.us_listen_socket_close(this.#socket as never)
    this.#socket = null
    if (this.#file !== null) rmSync(this.#file, { force: true })
    this.#file = null
  }
}
