// The public shapes of the mock provider, shared by the server and its callers (tests, benchmarks,
// `tracegate serve --mock-providers`). Imported with `import type` everywhere.

export interface MockProviderOptions {
  /** Interface to listen on; default 127.0.0.1. */
  host?: string
  /** Port to listen on; default 0 (ephemeral, read it back from `port`). */
  port?: number
  /** Delay before the first byte of an answer, in ms; default 0. */
  ttftMs?: number
  /** Number of content chunks in an answer (a streamed one sends them one by one); default 8. */
  chunks?: number
  /** Delay between streamed content chunks, in ms; default 0. */
  gapMs?: number
  /** How many recent requests `requests` keeps; default 1000, 0 keeps none (benchmarks). */
  recordLimit?: number
}

export interface RecordedRequest {
  readonly method: string
  readonly url: string
  readonly headers: Record<string, string | string[] | undefined>
  readonly rawHeaders: string[]
  /** The body bytes exactly as received. */
  readonly body: Buffer
  /** Date.now() when the request arrived. */
  readonly receivedAt: number
}

export interface MockStats {
  /** Requests whose body has been read (they are in `requests` when recording is on). */
  received: number
  /** Answers sent to the end. */
  completed: number
  /** The client closed the connection before the mock finished its answer. */
  aborted: number
}

export interface MockProvider {
  readonly port: number
  /** Origin to point a client at, e.g. http://127.0.0.1:43210. */
  readonly url: string
  /** Recent requests, newest last. */
  readonly requests: RecordedRequest[]
  readonly stats: MockStats
  /** Resolves once `stats.received` reaches n; rejects after timeoutMs (default 5000). */
  waitForRequests (n: number, timeoutMs?: number): Promise<void>
  /** Resolves once `stats.aborted` reaches n; rejects after timeoutMs (default 5000). */
  waitForAborted (n: number, timeoutMs?: number): Promise<void>
  /** Clears `requests` and `stats`. */
  reset (): void
  /** Stops listening and closes every open socket, hanging ones included. */
  close (): Promise<void>
}
