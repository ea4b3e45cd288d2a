// PII at rest: for an account whose setting is `mask`, the e-mails, phone numbers, card numbers,
// IBANs, SSNs and secrets in the stored prompt and response become placeholders before the row is written.
// The scanners are the detector's own (src/scan/pii.ts, secrets.ts, which the detection worker runs too),
// so what is masked is what detection finds. Pure: runs in the store worker, never on the front thread.
//
// JSON stays valid: masking works on decoded string values, and a changed value is written back as one
// JSON string, so a placeholder never cuts an escape or a quote; every other byte is kept. A stream is
// masked on the text it assembles: the fragments at one JSON path across its events (a delta's content,
// text or tool arguments) are scanned joined, and a value split between events is removed from each,
// its placeholder standing where it starts.
import type { Issue, Segment } from '../../detection/types.js'
import type { ProviderName } from '../../providers/index.js'
import { forEachDataLine } from '../../providers/sse.js'
import { extractSegments } from '../../scan/extract.js'
import { findPii } from '../../scan/pii.js'
import { findSecrets } from '../../scan/secrets.js'
import type { TraceRecord } from './trace-record.js'

/** One value to mask: [start, end) in a text, and what stands in its place. */
export interface Mask {
  readonly start: number
  readonly end: number
  /** The detector's kind (`email`, `openai_key`, …), counted on the trace. */
  readonly kind: string
  readonly placeholder: string
}

/** Masked values by the detector's kind. */
export type MaskCounts = Record<string, number>

const PLACEHOLDERS: Readonly<Record<string, string>> = {
  email: '[EMAIL]', phone: '[PHONE]', payment_card: '[CARD]', iban: '[IBAN]', us_ssn: '[SSN]',
}
const placeholderOf = (f: Issue): string => f.category === 'secret' ? '[SECRET]' : PLACEHOLDERS[f.kind] ?? '[PII]'

/** The shortest text any scanner can match (`a@b.co`). */
const MIN_LENGTH = 6
const NONE: readonly Mask[] = Object.freeze([])

/** What the detector finds in one text, as masks sorted by start; overlapping findings become one. */
export function findMasks (text: string): readonly Mask[] {
  if (text.length < MIN_LENGTH) return NONE
  const segments: Segment[] = [{ message: 0, role: 'user', path: '', text }]
  const pii = findPii(segments)
  const secrets = findSecrets(segments)
  if (pii.length === 0 && secrets.length === 0) return NONE
  const found = pii.length === 0 ? secrets : secrets.length === 0 ? pii : pii.concat(secrets)
  found.sort((a, b) => a.span[0] - b.span[0] || b.span[1] - a.span[1])
  const out: Mask[] = []
  for (const f of found) {
    const last = out[out.length - 1]
    if (last !== undefined && f.span[0] < last.end) {
      if (f.span[1] > last.end) out[out.length - 1] = { ...last, end: f.span[1] }
      continue
    }
    out.push({ start: f.span[0], end: f.span[1], kind: f.kind, placeholder: placeholderOf(f) })
  }
  return out
}

function applyMasks (text: string, masks: readonly Mask[]): string {
  let out = ''
  let at = 0
  for (const m of masks) {
    out += text.slice(at, m.start) + m.placeholder
    at = m.end
  }
  return out + text.slice(at)
}

function count (counts: MaskCounts, masks: readonly Mask[]): void {
  for (const m of masks) counts[m.kind] = (counts[m.kind] ?? 0) + 1
}

/** Where offset `p` of a text lands once `masks` are applied; inside a masked value, at its placeholder's edge. */
export function mapOffset (masks: readonly Mask[], p: number, isEnd: boolean): number {
  let delta = 0
  for (const m of masks) {
    if (p <= m.start) break
    if (p < m.end) return m.start + delta + (isEnd ? m.placeholder.length : 0)
    delta += m.placeholder.length - (m.end - m.start)
  }
  return p + delta
}

// ---- JSON string values --------------------------------------------------------------------------

/** A string value in a JSON text: its token [start, close), and whether its closing quote is there (a capture limit can cut it). */
interface Token {
  readonly start: number
  readonly close: number
  readonly closed: boolean
  readonly value: string
  /** A cut escape at the end of a cut string (`\u00`), kept as it was. */
  readonly rest: string
  /** Where the value sits (`choices[0].delta.content`); '' unless paths were asked for. */
  readonly path: string
  /** False for a stream payload that is not JSON: written back as plain text. */
  readonly json: boolean
  masks: readonly Mask[]
}

const ESCAPES: Readonly<Record<string, string>> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' }
const HEX4 = /^[0-9a-fA-F]{4}$/

/** A string token's inner text decoded as JSON.parse would; an escape the text ends inside is left in `rest`. */
function unescape (inner: string): { value: string, rest: string } {
  let b = inner.indexOf('\\')
  if (b === -1) return { value: inner, rest: '' }
  let out = ''
  let last = 0
  while (b !== -1) {
    out += inner.slice(last, b)
    const c = inner[b + 1]
    if (c === undefined) return { value: out, rest: inner.slice(b) }
    if (c === 'u') {
      const hex = inner.slice(b + 2, b + 6)
      if (hex.length < 4) return { value: out, rest: inner.slice(b) }
      if (HEX4.test(hex)) {
        out += String.fromCharCode(parseInt(hex, 16))
        last = b + 6
      } else {
        // Not JSON; read leniently so the value can still be masked.
        out += 'u'
        last = b + 2
      }
    } else {
      out += ESCAPES[c] ?? c
      last = b + 2
    }
    b = inner.indexOf('\\', last)
  }
  return { value: out + inner.slice(last), rest: '' }
}

/** The index just past the closing quote of the string opening at `i`, or -1 when the text ends first. */
function stringEnd (text: string, i: number, to: number): number {
  let from = i + 1
  for (;;) {
    const q = text.indexOf('"', from)
    if (q === -1 || q >= to) return -1
    let b = q - 1
    while (text.charCodeAt(b) === 0x5c) b--
    if ((q - 1 - b) % 2 === 0) return q + 1
    from = q + 1
  }
}

/** An open object or array; `base` is its own path, so a value's path is one concatenation. */
interface Frame { readonly array: boolean, readonly base: string, key: string, index: number }

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09

const childPath = (f: Frame | undefined): string => f === undefined ? '' : f.array ? `${f.base}[${f.index}]` : `${f.base}.${f.key}`

/**
 * The string values (not keys) of the JSON text in [from, to), in order. Tolerant: a text cut short
 * still gives the values before the cut and the cut one. `paths` names each value's place, leaving out
 * the first `skip` levels (the top array of a stream sent as one JSON array).
 */
function stringValues (text: string, from: number, to: number, paths: boolean, skip = 0): Token[] {
  const out: Token[] = []
  const stack: Frame[] = []
  let i = from
  while (i < to) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      const end = stringEnd(text, i, to)
      const close = end === -1 ? to : end
      const top = stack[stack.length - 1]
      let k = close
      while (k < to && isSpace(text.charCodeAt(k))) k++
      const inner = text.slice(i + 1, end === -1 ? to : end - 1)
      if (end !== -1 && top !== undefined && !top.array && text.charCodeAt(k) === 0x3a) {
        if (paths) top.key = inner.indexOf('\\') === -1 ? inner : unescape(inner).value
      } else {
        const { value, rest } = unescape(inner)
        out.push({ start: i, close, closed: end !== -1, value, rest, path: paths && stack.length > skip ? childPath(top) : '', json: true, masks: NONE })
      }
      i = close
      continue
    }
    if (c === 0x7b || c === 0x5b) {
      const top = stack[stack.length - 1]
      stack.push({ array: c === 0x5b, base: paths && stack.length > skip ? childPath(top) : '', key: '', index: 0 })
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop()
    } else if (c === 0x2c) {
      const top = stack[stack.length - 1]
      if (top?.array === true) top.index++
    }
    i++
  }
  return out
}

/** The text with every masked token written back (as a JSON string unless it is plain); other bytes as they were. Tokens in text order. */
function rewrite (text: string, tokens: readonly Token[]): string {
  let out = ''
  let at = 0
  for (const t of tokens) {
    if (t.masks.length === 0) continue
    const masked = applyMasks(t.value, t.masks)
    out += text.slice(at, t.start) + (t.json ? '"' + JSON.stringify(masked).slice(1, -1) + (t.closed ? '"' : t.rest) : masked)
    at = t.close
  }
  return at === 0 ? text : out + text.slice(at)
}

/** What to mask in one decoded text: the detector's findings, or another scanner's (key-scrub.ts). */
export type MaskFinder = (text: string) => readonly Mask[]

/** A whole JSON text: each string value masked on its own. */
function maskJson (text: string, counts: MaskCounts, find: MaskFinder): string {
  const tokens = stringValues(text, 0, text.length, false)
  let any = false
  for (const t of tokens) {
    t.masks = find(t.value)
    if (t.masks.length > 0) {
      any = true
      count(counts, t.masks)
    }
  }
  return any ? rewrite(text, tokens) : text
}

/**
 * The values of a stream, grouped by path across events, each group scanned as the text it assembles.
 * A group whose fragments are all the same (an id or model name repeated in every event) is scanned
 * once per fragment instead, so values that merely repeat are never read as one run.
 */
function maskFragments (tokens: readonly Token[], counts: MaskCounts, find: MaskFinder): boolean {
  const groups = new Map<string, Token[]>()
  for (const t of tokens) {
    const g = groups.get(t.path)
    if (g === undefined) groups.set(t.path, [t])
    else g.push(t)
  }
  let any = false
  for (const g of groups.values()) {
    const first = g[0]!.value
    if (g.every((t) => t.value === first)) {
      const masks = find(first)
      if (masks.length === 0) continue
      any = true
      for (const t of g) {
        t.masks = masks
        count(counts, masks)
      }
      continue
    }
    let joined = ''
    for (const t of g) joined += t.value
    const masks = find(joined)
    if (masks.length === 0) continue
    any = true
    count(counts, masks)
    spread(g, masks)
  }
  return any
}

/** Gives each fragment the part of each mask it holds: the placeholder where the value starts, nothing in the fragments it runs on into. */
function spread (fragments: readonly Token[], masks: readonly Mask[]): void {
  const local: Mask[][] = fragments.map(() => [])
  let k = 0
  let offset = 0
  for (const m of masks) {
    while (k < fragments.length && offset + fragments[k]!.value.length <= m.start) offset += fragments[k++]!.value.length
    let j = k
    let at = offset
    while (j < fragments.length && at < m.end) {
      const len = fragments[j]!.value.length
      if (len > 0) {
        const start = Math.max(0, m.start - at)
        local[j]!.push({ start, end: Math.min(len, m.end - at), kind: m.kind, placeholder: start === m.start - at ? m.placeholder : '' })
      }
      at += len
      j++
    }
  }
  fragments.forEach((t, i) => { if (local[i]!.length > 0) t.masks = local[i]! })
}

/** An event stream: the JSON payload of every `data:` line, masked as one assembled text per path; other payloads as text. */
function maskEvents (text: string, counts: MaskCounts, find: MaskFinder): string {
  const tokens: Token[] = []
  let plain = false
  forEachDataLine(text, (start, end) => {
    const payload = text.slice(start, end)
    const lead = payload.trimStart().charCodeAt(0)
    if (lead === 0x7b || lead === 0x5b) {
      for (const t of stringValues(text, start, end, true)) tokens.push(t)
    } else if (payload.length >= MIN_LENGTH) {
      const masks = find(payload)
      if (masks.length > 0) {
        count(counts, masks)
        plain = true
        tokens.push({ start, close: end, closed: true, value: payload, rest: '', path: '', json: false, masks })
      }
    }
  })
  // Plain payloads are masked already and keep out of the path groups.
  const any = maskFragments(plain ? tokens.filter((t) => t.json) : tokens, counts, find)
  return any || plain ? rewrite(text, tokens) : text
}

/**
 * A stored prompt or response with its PII and secrets masked, in the form it has: an event stream, a
 * stream sent as one JSON array (Gemini without alt=sse), a JSON text, or plain text (an error page).
 * `find` says what to mask in each decoded value (or assembled stream text); the detector's PII and secrets by default.
 */
export function maskText (text: string, streaming: boolean, counts: MaskCounts, find: MaskFinder = findMasks): string {
  let i = 0
  while (i < text.length && isSpace(text.charCodeAt(i))) i++
  const lead = text.charCodeAt(i)
  if (streaming && lead === 0x5b) {
    const tokens = stringValues(text, 0, text.length, true, 1)
    return maskFragments(tokens, counts, find) ? rewrite(text, tokens) : text
  }
  if (/^(?:event|data):/m.test(text.slice(0, 64))) return maskEvents(text, counts, find)
  if (lead === 0x7b || lead === 0x5b) return maskJson(text, counts, find)
  const masks = find(text)
  if (masks.length === 0) return text
  count(counts, masks)
  return applyMasks(text, masks)
}

// ---- the trace record ----------------------------------------------------------------------------

/**
 * The findings' spans moved onto the masked prompt: each segment of the stored prompt walked as the
 * dashboard walks it, and a span inside a masked value set on its placeholder. A prompt cut at the
 * capture limit cannot be walked; its spans stay as detection gave them. `prompt` is the text before
 * masking, `find` what was masked in it.
 */
export function remapIssues (issues: string, provider: ProviderName, prompt: string, find: MaskFinder = findMasks): string {
  let body: unknown
  let list: Issue[]
  try {
    body = JSON.parse(prompt)
    list = JSON.parse(issues) as Issue[]
  } catch {
    return issues
  }
  if (!Array.isArray(list)) return issues
  const segments = extractSegments(provider, body)
  const bySegment = new Map<number, readonly Mask[]>()
  let moved = false
  const out = list.map((f) => {
    const seg = segments[f.segment]
    if (seg === undefined || !Array.isArray(f.span)) return f
    let masks = bySegment.get(f.segment)
    if (masks === undefined) bySegment.set(f.segment, masks = find(seg.text))
    if (masks.length === 0) return f
    moved = true
    return { ...f, span: [mapOffset(masks, f.span[0], false), mapOffset(masks, f.span[1], true)] }
  })
  return moved ? JSON.stringify(out) : issues
}

/** The detection JSON with what was masked: `pii_at_rest: "mask"` and the counts by kind in prompt and response. */
function withMasking (detection: string, prompt: MaskCounts, response: MaskCounts): string {
  const extra = `"pii_at_rest":"mask","pii_masked":${JSON.stringify({ prompt, response })}`
  const d = detection.trimEnd()
  if (d === '') return `{${extra}}`
  return d.endsWith('{}') ? `${d.slice(0, -1)}${extra}}` : `${d.slice(0, -1)},${extra}}`
}

const text = (bytes: Uint8Array): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')

/**
 * The record of a call whose account masks PII at rest: prompt and response masked, the findings' spans
 * on the masked prompt, and the detection JSON saying so. A confidential call stores no text and is
 * never passed here.
 */
export function maskRecord (r: TraceRecord, provider: ProviderName, streaming: boolean): TraceRecord {
  const promptCounts: MaskCounts = {}
  const responseCounts: MaskCounts = {}
  const prompt = text(r.prompt)
  const maskedPrompt = maskText(prompt, false, promptCounts)
  const response = text(r.response)
  const maskedResponse = maskText(response, streaming, responseCounts)
  return {
    ...r,
    prompt: maskedPrompt === prompt ? r.prompt : Buffer.from(maskedPrompt),
    response: maskedResponse === response ? r.response : Buffer.from(maskedResponse),
    detection: withMasking(r.detection, promptCounts, responseCounts),
    issues: r.issues === '' || maskedPrompt === prompt ? r.issues : remapIssues(r.issues, provider, prompt),
  }
}
