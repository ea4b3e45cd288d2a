// Raw requests with broken heads and what the front end does with each (uWebSockets.js 20.30, measured):
// `answer` — tracegate answers 400 malformed_request and closes, before uWS parses the bytes after the
// head (server/respond.ts closingBody); `close` — uWS closes at once without an answer; `held` — uWS
// sends nothing and its idle timer closes the connection 10-14 s later.
export type Fate = 'answer' | 'close' | 'held'

export interface HeadCase {
  readonly name: string
  readonly fate: Fate
  /** The request's bytes for a path and a body. */
  readonly bytes: (path: string, body: string) => string
}

const len = (b: string): number => Buffer.byteLength(b)
const line = (path: string): string => `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n`

export const HEAD_CASES: readonly HeadCase[] = [
  // Answered by tracegate: the framing is ambiguous (or a content-length not a plain number), and uWS hands the request to the route.
  { name: 'two different content-length', fate: 'answer', bytes: (p, b) => `${line(p)}content-length: ${len(b)}\r\ncontent-length: ${len(b) + 40}\r\n\r\n${b}` },
  { name: 'the same content-length twice', fate: 'answer', bytes: (p, b) => `${line(p)}content-length: ${len(b)}\r\ncontent-length: ${len(b)}\r\n\r\n${b}` },
  { name: 'an empty content-length', fate: 'answer', bytes: (p, b) => `${line(p)}content-length: \r\n\r\n${b}` },
  { name: 'transfer-encoding identity', fate: 'answer', bytes: (p) => `${line(p)}transfer-encoding: identity\r\n\r\n` },
  { name: 'transfer-encoding identity and a body', fate: 'answer', bytes: (p, b) => `${line(p)}transfer-encoding: identity\r\n\r\n${b}` },
  { name: 'transfer-encoding gzip, chunked', fate: 'answer', bytes: (p, b) => `${line(p)}transfer-encoding: gzip, chunked\r\n\r\n${len(b).toString(16)}\r\n${b}\r\n0\r\n\r\n` },
  { name: 'transfer-encoding chunked, gzip', fate: 'answer', bytes: (p, b) => `${line(p)}transfer-encoding: chunked, gzip\r\n\r\n${len(b).toString(16)}\r\n${b}\r\n0\r\n\r\n` },
  { name: 'transfer-encoding chunked twice', fate: 'answer', bytes: (p, b) => `${line(p)}transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n${len(b).toString(16)}\r\n${b}\r\n0\r\n\r\n` },
  { name: 'two host headers', fate: 'answer', bytes: (p, b) => `POST ${p} HTTP/1.1\r\nhost: a\r\nhost: b\r\ncontent-type: application/json\r\ncontent-length: ${len(b)}\r\n\r\n${b}` },
  { name: 'content-length +N', fate: 'answer', bytes: (p, b) => `${line(p)}content-length: +${len(b)}\r\n\r\n${b}` },
  { name: 'content-length list', fate: 'answer', bytes: (p, b) => `${line(p)}content-length: ${len(b)}, ${len(b) + 4}\r\n\r\n${b}` },
  { name: 'content-length with junk', fate: 'answer', bytes: (p, b) => `${line(p)}content-length: ${len(b)}x\r\n\r\n${b}` },
  // Closed by uWS at once, the route never called or its answer dropped.
  { name: 'HTTP/1.1 without host', fate: 'close', bytes: (p, b) => `POST ${p} HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: ${len(b)}\r\n\r\n${b}` },
  { name: 'transfer-encoding with content-length', fate: 'close', bytes: (p, b) => `${line(p)}content-length: ${len(b)}\r\ntransfer-encoding: chunked\r\n\r\n${len(b).toString(16)}\r\n${b}\r\n0\r\n\r\n` },
  { name: 'content-length of 10 digits', fate: 'close', bytes: (p, b) => `${line(p)}content-length: 1000000000\r\n\r\n${b}` },
  { name: 'a chunk extension', fate: 'close', bytes: (p, b) => `${line(p)}transfer-encoding: chunked\r\n\r\n${len(b).toString(16)};x=y\r\n${b}\r\n0\r\n\r\n` },
  { name: 'a bad chunk size', fate: 'close', bytes: (p, b) => `${line(p)}transfer-encoding: chunked\r\n\r\nzz\r\n${b}\r\n0\r\n\r\n` },
  { name: 'a lower-case method', fate: 'close', bytes: (p, b) => `post ${p} HTTP/1.1\r\nhost: x\r\ncontent-length: ${len(b)}\r\n\r\n${b}` },
  // Held by uWS until its idle timer: nothing can answer them in this build.
  { name: 'HTTP/1.0', fate: 'held', bytes: (p, b) => `POST ${p} HTTP/1.0\r\nhost: x\r\ncontent-length: ${len(b)}\r\n\r\n${b}` },
  { name: 'a header line without colon', fate: 'held', bytes: (p, b) => `${line(p)}x-broken\r\ncontent-length: ${len(b)}\r\n\r\n${b}` },
  { name: 'obs-fold', fate: 'held', bytes: (p, b) => `${line(p)}x-a: one\r\n two\r\ncontent-length: ${len(b)}\r\n\r\n${b}` },
  { name: 'a control character in a header value', fate: 'held', bytes: (p, b) => `${line(p)}x-a: a\x01b\r\ncontent-length: ${len(b)}\r\n\r\n${b}` },
  { name: 'a NUL in a header value', fate: 'held', bytes: (p, b) => `${line(p)}x-a: a\x00b\r\ncontent-length: ${len(b)}\r\n\r\n${b}` },
  { name: '120 headers', fate: 'held', bytes: (p, b) => `${line(p)}${Array.from({ length: 120 }, (_, i) => `x-h${i}: v\r\n`).join('')}content-length: ${len(b)}\r\n\r\n${b}` },
  { name: 'bare LF line endings', fate: 'held', bytes: (p, b) => `POST ${p} HTTP/1.1\nhost: x\ncontent-length: ${len(b)}\n\n${b}` },
  { name: 'a space before the colon', fate: 'held', bytes: (p, b) => `${line(p)}content-length : ${len(b)}\r\n\r\n${b}` },
  { name: 'a space in a header name', fate: 'held', bytes: (p, b) => `${line(p)}x a: b\r\ncontent-length: ${len(b)}\r\n\r\n${b}` },
  { name: 'a garbage request line', fate: 'held', bytes: () => 'HELLO\r\n\r\n' },
  { name: 'HTTP/0.9', fate: 'held', bytes: (p) => `GET ${p}\r\n` },
  { name: 'a PROXY v1 line', fate: 'held', bytes: (p, b) => `PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n${line(p)}content-length: ${len(b)}\r\n\r\n${b}` },
  { name: 'HTTP/1.2', fate: 'held', bytes: (p, b) => `POST ${p} HTTP/1.2\r\nhost: x\r\ncontent-length: ${len(b)}\r\n\r\n${b}` },
  { name: 'an absolute URI', fate: 'held', bytes: (p, b) => `POST http://x${p} HTTP/1.1\r\nhost: x\r\ncontent-length: ${len(b)}\r\n\r\n${b}` },
]

/** uWS 20.30's idle timer: 10 s, checked every 4 s. */
export const HELD_MIN_MS = 8_000
export const HELD_MAX_MS = 16_000
/** What the issue asks of every refusal, and what the immediate ones meet. */
export const PROMPT_MS = 1_000
