// Raw HTTP clients for the proxy contract tests: a request of any method, a POST whose body is never
// sent (the 413 decided from content-length), and a chunked POST written piece by piece that stops as
// soon as the server answers (the server closes the connection after a 413).
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http'
import type { RawResponse } from './helpers.js'

/** UUIDv7: version nibble 7, RFC 9562 variant bits 10. */
export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

const ANSWER_TIMEOUT_MS = 5_000

function collect (res: IncomingMessage, done: (r: RawResponse) => void, fail: (err: Error) => void): void {
  const chunks: Buffer[] = []
  res.on('data', (c: Buffer) => chunks.push(c))
  res.on('end', () => { done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }) })
  res.on('error', fail)
}

/** A request with any method over a fresh connection. */
export function send (method: string, url: string, body?: string | Buffer, headers: Record<string, string> = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers, agent: false }, (res) => { collect(res, resolve, reject) })
    req.on('error', reject)
    req.end(body)
  })
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

/** `json` with extra raw members spliced in before its closing brace (duplicate keys, escapes). */
export function withRawMembers (value: Record<string, unknown>, raw: string): string {
  const text = JSON.stringify(value)
  return text === '{}' ? `{${raw}}` : `${text.slice(0, -1)},${raw}}`
}

/** A copy of `value` without the named members. */
export function without (value: Record<string, unknown>, ...names: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) if (!names.includes(k)) out[k] = v
  return out
}

/** `n` bytes split into chunks of `size`. */
export function split (buf: Buffer, size: number): Buffer[] {
  const out: Buffer[] = []
  for (let i = 0; i < buf.length; i += size) out.push(buf.subarray(i, i + size))
  return out
}
