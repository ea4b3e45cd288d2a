// Server-sent events (https://html.spec.whatwg.org/multipage/server-sent-events.html): the one reader
// of a stored or received stream, and the framings the mock provider writes. Pure.

export interface SseData {
  /** The parsed JSON payload; undefined when it is not JSON (an event cut at a capture limit). */
  readonly value: unknown
  /** Offset in the text just past the `data:` line. */
  readonly end: number
}

/**
 * The payload of every `data:` line in order. Empty payloads and OpenAI's `[DONE]` sentinel carry no
 * data and are skipped. One regular expression pass over the text; nothing is split or copied besides
 * the payloads.
 */
export function sseData (text: string): SseData[] {
  const out: SseData[] = []
  const re = /(?:^|\n)data: ?([^\r\n]*)/g
  let m: RegExpExecArray | null
  while ((m = re.exec(text)) !== null) {
    const payload = m[1]!.trim()
    if (payload === '' || payload === '[DONE]') continue
    let value: unknown
    try { value = JSON.parse(payload) } catch { value = undefined }
    out.push({ value, end: m.index + m[0].length })
  }
  return out
}

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
