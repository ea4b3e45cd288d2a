// The tests' HTTP client: `send`, one request over a fresh connection with exact body bytes (node:http,
// so nothing is normalised), and two uploads a server must answer before the body is in: a POST whose
// body is never sent (the 413 decided from content-length) and a chunked POST written piece by piece
// that stops as soon as the server answers.
import { request as httpRequest, type ClientRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http'
import { performance } from 'node:perf_hooks'

/** UUIDv7: version nibble 7, RFC 9562 variant bits 10. */
export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

const ANSWER_TIMEOUT_MS = 5_000

export interface RawResponse {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: Buffer
  /** The body as UTF-8. */
  readonly text: string
  /** x-request-id, or '' when the answer carries none. */
  readonly requestId: string
  /** The body ended as its framing says. */
  readonly complete: boolean
  /** The client closed the connection itself (`onBody`). */
  readonly clientLeft: boolean
  /** performance.now() when the response ended (or broke off). */
  readonly endedAt: number
}

export interface SendOptions {
  /** Default POST. */
  readonly method?: string
  /** Exact bytes; a string is sent as UTF-8. */
  readonly body?: string | Buffer
  /** Added to `content-type: application/json`, which a request with a body gets unless it names its own. */
  readonly headers?: Record<string, string>
  /** Abort after this many ms (the client gives up): the promise rejects. */
  readonly timeoutMs?: number
  /** Sees the body so far after each piece; answering true makes the client leave (the answer is then incomplete). */
  readonly onBody?: (soFar: string) => boolean
  /** Resolve with `complete: false` when the answer breaks off after its head, instead of rejecting. */
  readonly acceptCut?: boolean
}

/** One request over a fresh connection; rejects when it fails before an answer, or when the answer breaks off (see acceptCut). */
export function send (url: string, o: SendOptions = {}): Promise<RawResponse> {
  const headers: Record<string, string> = o.body === undefined ? { ...o.headers } : { 'content-type': 'application/json', ...o.headers }
  return new Promise((resolve, reject) => {
    let left = false
    const req = httpRequest(url, {
      method: o.method ?? 'POST',
      headers,
      agent: false,
      ...(o.timeoutMs === undefined ? {} : { signal: AbortSignal.timeout(o.timeoutMs) }),
    }, (res) => {
      const parts: Buffer[] = []
      let settled = false
      const settle = (): void => {
        if (settled) return
        settled = true
        const body = Buffer.concat(parts)
        const id = res.headers['x-request-id']
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body,
          text: body.toString('utf8'),
          requestId: typeof id === 'string' ? id : '',
          complete: res.complete && !left,
          clientLeft: left,
          endedAt: performance.now(),
        })
      }
      const broken = (err: Error): void => {
        if (left || o.acceptCut === true) settle()
        else if (!settled) { settled = true; reject(err) }
      }
      res.on('data', (part: Buffer) => {
        parts.push(part)
        if (o.onBody !== undefined && !left && o.onBody(Buffer.concat(parts).toString('utf8'))) {
          left = true
          req.destroy()
          settle()
        }
      })
      res.on('end', settle)
      res.on('error', broken)
      res.on('aborted', () => { broken(new Error('response aborted')) })
      res.on('close', () => { if (!res.complete) broken(new Error('response closed before its end')) })
    })
    req.on('error', (err) => { if (!left) reject(err) })
    req.end(o.body)
  })
}

/** The body parsed as JSON (throws when it is not JSON). */
export function json (r: RawResponse): any {
  return JSON.parse(r.text)
}

function collect (res: IncomingMessage, done: (r: RawResponse) => void, fail: (err: Error) => void): void {
  const parts: Buffer[] = []
  res.on('data', (c: Buffer) => parts.push(c))
  res.on('end', () => {
    const body = Buffer.concat(parts)
    const id = res.headers['x-request-id']
    done({
      status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString('utf8'), requestId: typeof id === 'string' ? id : '',
      complete: res.complete, clientLeft: false, endedAt: performance.now(),
    })
  })
  res.on('error', fail)
}

/** Settles once; the request is destroyed after the answer so a half-sent body never lingers. */
function oneAnswer (req: ClientRequest, resolve: (r: RawResponse) => void, reject: (err: Error) => void, what: string): {
  readonly answered: () => boolean
} {
  let answered = false
  let settled = false
  const timer = setTimeout(() => {
    if (settled) return
    settled = true
    req.destroy()
    reject(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms (${what})`))
  }, ANSWER_TIMEOUT_MS)
  req.on('response', (res) => {
    answered = true
    collect(res, (r) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      req.destroy()
      resolve(r)
    }, (err) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      reject(err)
    })
  })
  // The server may close or reset the connection while the client still holds unsent body bytes:
  // that is expected once the answer is in.
  req.on('error', (err) => {
    if (settled || answered) return
    settled = true
    clearTimeout(timer)
    reject(err)
  })
  return { answered: () => answered }
}

/**
 * A POST that announces `contentLength` bytes and sends only the headers: a server that decides from
 * content-length answers without waiting for a body that never comes.
 */
export function postHeadersOnly (url: string, contentLength: number, headers: Record<string, string> = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(contentLength), ...headers },
      agent: false,
    })
    oneAnswer(req, resolve, reject, 'headers only, body never sent')
    req.flushHeaders()
  })
}

export interface ChunkedResponse extends RawResponse {
  /** How many chunks had been written when the answer arrived. */
  readonly chunksWritten: number
}

/** A chunked POST (no content-length), one chunk every `gapMs`, stopping as soon as an answer arrives. */
export function postChunked (url: string, chunks: readonly Buffer[], gapMs: number): Promise<ChunkedResponse> {
  return new Promise((resolve, reject) => {
    let written = 0
    const req = httpRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      agent: false,
    })
    const state = oneAnswer(req, (r) => { resolve({ ...r, chunksWritten: written }) }, reject, 'chunked body')
    const pump = async (): Promise<void> => {
      for (const chunk of chunks) {
        if (state.answered() || req.destroyed) return
        req.write(chunk)
        written++
        await new Promise((r) => setTimeout(r, gapMs))
      }
      if (!state.answered() && !req.destroyed) req.end()
    }
    void pump()
  })
}

