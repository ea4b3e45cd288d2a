// The live trace list: a WebSocket per signed-in page (session cookie, same origin, CSRF token),
// subscribed to its account's topic. The store worker reports rows once they are stored
// (StoreClient.onWritten), so what appears live is what a reload would show. It reports only the
// accounts that have a socket open (StoreClient.watch), already grouped by account and serialised, so
// the front thread hands each batch to uWS as it is and never parses or builds trace objects.
import { TracegateError } from '../errors.js'
import type { StoreClient } from '../store/client.js'
import type { LiveBatch } from '../store/trace-types.js'
import { uws, type TemplatedApp } from '../server/uws.js'
import type { WebSocket } from 'uWebSockets.js'
import type { Guards } from './guards.js'
import { errorReply, readRequest, send } from './http.js'

interface LiveData {
  readonly accountId: string
  readonly sid: string
  readonly userId: string
  readonly expiresAt: number
}

type Socket = WebSocket<LiveData>

export const LIVE_PATH = '/api/ui/live'

function topic (accountId: string): string {
  return `account:${accountId}`
}

export class LiveFeed {
  readonly #app: TemplatedApp
  readonly #sockets = new Map<Socket, NodeJS.Timeout>()
  /** Open sockets per account: the store is told when an account starts or stops being watched. */
  readonly #watchers = new Map<string, number>()
  readonly #store: StoreClient
  readonly #unsubscribe: () => void

  constructor (app: TemplatedApp, store: StoreClient, guards: Guards) {
    this.#app = app
    this.#store = store
    app.ws<LiveData>(LIVE_PATH, {
      compression: uws.DISABLED,
      // The client has nothing to say; anything large is a misuse.
      maxPayloadLength: 4 * 1024,
      idleTimeout: 60,
      sendPingsAutomatically: true,
      maxBackpressure: 4 * 1024 * 1024,
      upgrade: (res, ureq, context) => {
        const req = readRequest(res, ureq)
        const key = ureq.getHeader('sec-websocket-key')
        const protocol = ureq.getHeader('sec-websocket-protocol')
        const extensions = ureq.getHeader('sec-websocket-extensions')
        let data: LiveData
        try {
          // A browser always sends Origin on a WebSocket; a foreign one is cross-site hijacking. It cannot
          // add headers to the handshake, so the CSRF token comes in the query (?csrf=).
          guards.origin(req)
          const s = guards.session(req)
          if (!guards.sessions.checkCsrf(s, req.query.get('csrf') ?? undefined)) throw new TracegateError('csrf_failed')
          data = { accountId: s.accountId, sid: s.sid, userId: s.userId, expiresAt: s.expiresAt }
        } catch (err) {
          send(res, req.id, errorReply(err, req.id))
          return
        }
        res.upgrade(data, key, protocol, extensions, context)
      },
      open: (ws) => {
        const d = ws.getUserData()
        ws.subscribe(topic(d.accountId))
        // The socket does not outlive its session.
        const timer = setTimeout(() => { this.#end(ws) }, Math.max(0, d.expiresAt - Date.now()))
        timer.unref()
        this.#sockets.set(ws, timer)
        this.#watch(d.accountId, +1)
      },
      close: (ws) => {
        clearTimeout(this.#sockets.get(ws))
        this.#sockets.delete(ws)
        this.#watch(ws.getUserData().accountId, -1)
      },
    })
    this.#unsubscribe = store.onWritten((traces) => { this.#publish(traces) })
  }

  #watch (accountId: string, delta: number): void {
    const before = this.#watchers.get(accountId) ?? 0
    const after = Math.max(0, before + delta)
    if (after === 0) this.#watchers.delete(accountId)
    else this.#watchers.set(accountId, after)
    if ((before === 0) !== (after === 0)) this.#store.watch(this.#watchers.keys())
  }

  #publish (batches: readonly LiveBatch[]): void {
    for (const b of batches) {
      const name = topic(b.accountId)
      if (this.#app.numSubscribers(name) > 0) this.#app.publish(name, b.message)
    }
  }

  #end (ws: Socket): void {
    clearTimeout(this.#sockets.get(ws))
    if (this.#sockets.delete(ws)) ws.end(1000, 'session ended')
  }

  /** Closes the sockets of a signed-out session. */
  dropSession (sid: string): void {
    for (const ws of [...this.#sockets.keys()]) if (ws.getUserData().sid === sid) this.#end(ws)
  }

  /** Closes the sockets of every session of a user (a password reset). */
  dropUser (userId: string): void {
    for (const ws of [...this.#sockets.keys()]) if (ws.getUserData().userId === userId) this.#end(ws)
  }

  close (): void {
    this.#unsubscribe()
    for (const ws of [...this.#sockets.keys()]) {
      clearTimeout(this.#sockets.get(ws))
      this.#sockets.delete(ws)
      ws.end(1001, 'server closing')
    }
  }
}
