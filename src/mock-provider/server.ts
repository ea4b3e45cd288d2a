// The mock model provider: a real node:http server speaking every registered provider's dialect (the
// module each provider names), for tests, benchmarks and `tracegate serve --mock-providers`. It reads
// every body whole (and records it), picks the dialect by path, and lets the model name choose the
// behaviour (see options.ts).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { dialectForPath, DIALECTS, PROVIDERS, type ProviderName } from '../providers/index.js'
import { isObject } from '../providers/json.js'
import { Rejection, type MockDialect } from './dialect.js'
import { Behaviours, resolveOptions, type ResolvedOptions } from './options.js'
import { Reply, respond } from './reply.js'
import { inputTokens } from './text.js'
import type { MockProvider, MockProviderOptions, MockStats, RecordedRequest } from './types.js'

const DEFAULT_WAIT_MS = 5000
// Longer than the usual client and load-balancer idle timeouts (60 s), so the mock never closes a
// kept-alive connection under a client that is about to reuse it.
const KEEP_ALIVE_MS = 65_000

interface Waiter {
  readonly stat: 'received' | 'aborted'
  readonly n: number
  readonly resolve: () => void
  readonly reject: (err: Error) => void
  readonly timer: NodeJS.Timeout
}

function noop (): void {}

/** Each registered provider's mock dialect, from the module the provider names. */
async function loadDialects (): Promise<ReadonlyMap<ProviderName, MockDialect>> {
  const loaded = await Promise.all(PROVIDERS.map(async (p) => {
    const { mockDialect } = await import(DIALECTS[p].mockModule) as { mockDialect?: MockDialect }
    if (mockDialect?.name !== p) throw new Error(`${DIALECTS[p].mockModule} exports no mockDialect for ${p}`)
    return [p, mockDialect] as const
  }))
  return new Map(loaded)
}

function headerOf (req: IncomingMessage): (name: string) => string {
  return (name) => {
    const value = req.headers[name]
    return Array.isArray(value) ? value.join(', ') : value ?? ''
  }
}

class MockServer implements MockProvider {
  readonly port: number
  readonly url: string
  readonly requests: RecordedRequest[] = []
  readonly stats: MockStats = { received: 0, completed: 0, aborted: 0 }
  readonly #server: Server
  readonly #options: ResolvedOptions
  readonly #behaviours: Behaviours
  readonly #waiters: Waiter[] = []
  readonly #dialects: ReadonlyMap<ProviderName, MockDialect>
  readonly #list: readonly MockDialect[]
  #closing: Promise<void> | null = null
  readonly #replyClosed = (reply: Reply): void => {
    if (reply.res.writableFinished) {
      this.stats.completed++
    } else if (!reply.dropped && this.#closing === null) {
      this.stats.aborted++
      this.#notify()
    }
  }

  constructor (server: Server, options: ResolvedOptions, dialects: ReadonlyMap<ProviderName, MockDialect>) {
    this.#server = server
    this.#dialects = dialects
    this.#list = [...dialects.values()]
    this.#options = options
    this.#behaviours = new Behaviours(options)
    const address = server.address() as AddressInfo
    this.port = address.port
    // A wildcard address is not something a client can connect to; loopback reaches it.
    const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host
    this.url = `http://${host.includes(':') ? `[${host}]` : host}:${this.port}`
    server.on('request', (req: IncomingMessage, res: ServerResponse) => { this.#accept(req, res) })
  }

  #accept (req: IncomingMessage, res: ServerResponse): void {
    const reply = new Reply(res, Date.now(), this.#replyClosed)
    const parts: Buffer[] = []
    req.on('data', (part: Buffer) => { parts.push(part) })
    req.on('end', () => {
      const body = parts.length === 1 ? parts[0] ?? Buffer.alloc(0) : Buffer.concat(parts)
      this.#record(req, body, reply.receivedAt)
      this.#dispatch(req, reply, body)
    })
    // A client that leaves mid-body makes the request emit an error; its 'close' is counted by Reply.
    req.on('error', noop)
  }

  #record (req: IncomingMessage, body: Buffer, receivedAt: number): void {
    this.stats.received++
    const limit = this.#options.recordLimit
    if (limit > 0) {
      this.requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, body, receivedAt })
      if (this.requests.length > limit) this.requests.shift()
    }
    this.#notify()
  }

  #dispatch (req: IncomingMessage, reply: Reply, body: Buffer): void {
    const url = req.url ?? '/'
    const q = url.indexOf('?')
    const path = q === -1 ? url : url.slice(0, q)
    const query = q === -1 ? '' : url.slice(q + 1)
    const method = req.method ?? 'GET'
    const dialect = method === 'POST' ? this.#list.find((d) => d.matches(path)) : this.#list.find((d) => d.serves?.(method, path) === true)
    if (dialect === undefined) {
      // Answered in the shape of the provider the client seems to be talking to.
      reply.reject(this.#dialects.get(dialectForPath(path, headerOf(req)).name)!.notFound(method, path))
      return
    }
    const denied = dialect.admit(req, query)
    if (denied !== null) {
      reply.reject(denied)
      return
    }
    let json: unknown
    try {
      // A GET, a DELETE or a bodiless POST (a cancel) is read as an empty object.
      json = body.length === 0 && (method !== 'POST' || dialect.serves?.(method, path) === true) ? {} : JSON.parse(body.toString('utf8'))
    } catch {
      json = undefined
    }
    if (!isObject(json)) {
      reply.reject(dialect.invalidJson())
      return
    }
    const call = dialect.parse(json, path, query, method)
    if (call instanceof Rejection) {
      reply.reject(call)
      return
    }
    const behaviour = this.#behaviours.get(call.model)
    call.begin(inputTokens(body.length), behaviour.chunks)
    const failure = behaviour.mode === 'error' ? dialect.error(behaviour.status) : null
    respond(reply, call, behaviour, failure).catch(() => { reply.res.destroy() })
  }

  #notify (): void {
    const waiters = this.#waiters
    for (let i = waiters.length - 1; i >= 0; i--) {
      const w = waiters[i]
      if (w !== undefined && this.stats[w.stat] >= w.n) {
        waiters.splice(i, 1)
        clearTimeout(w.timer)
        w.resolve()
      }
    }
  }

  #waitFor (stat: 'received' | 'aborted', n: number, timeoutMs: number): Promise<void> {
    if (this.stats[stat] >= n) return Promise.resolve()
    if (this.#closing !== null) return Promise.reject(new Error('mock provider is closed'))
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const i = this.#waiters.indexOf(waiter)
        if (i !== -1) this.#waiters.splice(i, 1)
        reject(new Error(`mock provider: waited ${timeoutMs} ms for ${n} ${stat}, have ${this.stats[stat]}`))
      }, timeoutMs)
      const waiter: Waiter = { stat, n, resolve, reject, timer }
      this.#waiters.push(waiter)
    })
  }

  waitForRequests (n: number, timeoutMs = DEFAULT_WAIT_MS): Promise<void> {
    return this.#waitFor('received', n, timeoutMs)
  }

  waitForAborted (n: number, timeoutMs = DEFAULT_WAIT_MS): Promise<void> {
    return this.#waitFor('aborted', n, timeoutMs)
  }

  reset (): void {
    this.requests.length = 0
    this.stats.received = 0
    this.stats.completed = 0
    this.stats.aborted = 0
  }

  close (): Promise<void> {
    if (this.#closing !== null) return this.#closing
    this.#closing = new Promise((resolve) => {
      this.#server.close(() => { resolve() })
      // Idle kept-alive sockets and hanging answers would otherwise hold close() open for good.
      this.#server.closeAllConnections()
    })
    for (const w of this.#waiters.splice(0)) {
      clearTimeout(w.timer)
      w.reject(new Error('mock provider closed'))
    }
    return this.#closing
  }
}

export async function startMockProvider (opts?: MockProviderOptions): Promise<MockProvider> {
  const options = resolveOptions(opts)
  const dialects = await loadDialects()
  const server = createServer({ noDelay: true })
  server.keepAliveTimeout = KEEP_ALIVE_MS
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port, options.host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  return new MockServer(server, options, dialects)
}
