// Server-sent events (https://html.spec.whatwg.org/multipage/server-sent-events.html): the one reader
// of a stored or received stream, and the framings the mock provider writes. Pure.

export interface SseData {
  /** The parsed JSON payload; undefined when it is not JSON (an event cut at a capture limit). */
  readonly value: unknown
  /** Offset in the text just past the `data:` line. */
  readonly end: number
}

/**
 * Calls `visit` with the offsets of every `data:` line's payload in order: from after `data:` and one
 * optional space to the line's end. One regular expression pass over the text; nothing is copied.
 */
export function forEachDataLine (text: string, visit: (start: number, end: number) => void): void {
  const re = /(?:^|\n)data: ?([^\r\n]*)/g
  let m: RegExpExecArray | null
  while ((m = re.exec(text)) !== null) {
    const end = m.index + m[0].length
    visit(end - m[1]!.length, end)
  }
}

/**
 * The payload of every `data:` line in order. Empty payloads and OpenAI's `[DONE]` sentinel carry no
 * data and are skipped; nothing is split or copied besides the payloads.
 */
export function sseData (text: string): SseData[] {
  const out: SseData[] = []
  forEachDataLine(text, (start, end) => {
    const payload = text.slice(start, end).trim()
    if (payload === '' || payload === '[DONE]') return
    let value: unknown
    try { value = JSON.parse(payload) } catch { value = undefined }
    out.push({ value, end })
  })
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
