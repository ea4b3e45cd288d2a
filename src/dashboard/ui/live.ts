// The live feed: a WebSocket on /api/ui/live that the server fills with the account's traces once they
// are stored. Reconnects with backoff (1 s doubling to 15 s) while the page wants it.
import { csrfToken } from './api.js'
import type { TraceListItem } from './types.js'

export type LiveState = 'connecting' | 'live' | 'offline'

export interface LiveHandlers {
  traces (items: TraceListItem[]): void
  state (s: LiveState): void
  /** After a reconnect: traces stored while the socket was down were not sent, the page may refetch. */
  reconnected (): void
}

export class Live {
  readonly #on: LiveHandlers
  #ws: WebSocket | null = null
  #timer: ReturnType<typeof setTimeout> | null = null
  #delay = 1000
  #closed = false
  #wasOpen = false

  constructor (on: LiveHandlers) {
    this.#on = on
    this.#connect()
  }

  #connect (): void {
    if (this.#closed) return
    this.#on.state('connecting')
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws'
    // Browsers cannot add headers to a WebSocket handshake, so the CSRF token rides in the query.
    const ws = new WebSocket(`${scheme}://${location.host}/api/ui/live?csrf=${encodeURIComponent(csrfToken())}`)
    this.#ws = ws
    ws.addEventListener('open', () => {
      this.#delay = 1000
      this.#on.state('live')
      if (this.#wasOpen) this.#on.reconnected()
      this.#wasOpen = true
    })
    ws.addEventListener('message', (e) => {
      if (typeof e.data !== 'string') return
      let msg: unknown
      try { msg = JSON.parse(e.data) } catch { return }
      const m = msg as { type?: unknown, traces?: unknown }
      if (m.type === 'traces' && Array.isArray(m.traces)) this.#on.traces(m.traces as TraceListItem[])
    })
    ws.addEventListener('close', () => {
      if (this.#ws !== ws) return
      this.#ws = null
      if (this.#closed) return
      this.#on.state('offline')
      this.#timer = setTimeout(() => { this.#timer = null; this.#connect() }, this.#delay)
      this.#delay = Math.min(this.#delay * 2, 15_000)
    })
  }

  close (): void {
    this.#closed = true
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#ws?.close(1000)
    this.#ws = null
  }
}
