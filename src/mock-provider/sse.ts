// Server-sent events framing (https://html.spec.whatwg.org/multipage/server-sent-events.html). The
// providers differ only in what they put around the data: OpenAI sends bare `data:` lines and ends with
// `[DONE]`, Anthropic names every event, Gemini ends events with CRLF.

export function dataEvent (json: string): string {
  return `data: ${json}\n\n`
}

export function namedEvent (type: string, json: string): string {
  return `event: ${type}\ndata: ${json}\n\n`
}

export function crlfDataEvent (json: string): string {
  return `data: ${json}\r\n\r\n`
}

/** OpenAI's end-of-stream sentinel. */
export const DONE_EVENT = 'data: [DONE]\n\n'
