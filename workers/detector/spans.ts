// The spans the injection detector judges: a request's segments labelled by who wrote them (the
// application, the user, or data the model is handed to read), text a user pastes after a framing line
// ("here is the email:", "Document:", a fenced block after "here's the file") split off as data, and
// consecutive pieces of one message and one label joined, since the model reads them as one text: an
// injection split over several parts is read whole, and a tiny part is judged in its context.
import { roleSource, type SpanSource } from '../../src/providers/types.js'
import type { Segment } from '../../src/detection/types.js'
import { TextCache } from './text-cache.js'

/** Who wrote a segment: as the walker said, else by its role (a document's text source is data). */
export function sourceOf (seg: Pick<Segment, 'role' | 'path' | 'source'>): SpanSource {
  if (seg.source !== undefined) return seg.source
  return seg.path.endsWith('.source.data') ? 'data' : roleSource(seg.role)
}

/** A stretch [start, end) of one segment's text, and where it starts in its span's text. */
export interface Piece {
  readonly segment: number
  readonly start: number
  readonly end: number
  readonly at: number
}

export interface Span {
  readonly source: SpanSource
  readonly message: number
  readonly text: string
  readonly pieces: readonly Piece[]
}

// What pasted text is called. A framing phrase must name one, so "here is my question:" stays the user's.
const NOUN = String.raw`(?:e-?mails?|mails?|messages?|documents?|docs?|texts?|pages?|web ?pages?|articles?|files?|contents?|transcripts?|reviews?|tickets?|logs?|snippets?|passages?|excerpts?|reports?|threads?|posts?|comments?|code|chats?|conversations?|notes?|letters?|essays?|paragraphs?|data|tables?|csv|json|xml|html|markdown|outputs?|results?|readme|stor(?:y|ies)|descriptions?|listings?|repl(?:y|ies)|responses?|websites?|sites?|sources?|memo|minutes|invoices?|contracts?|abstract|papers?|chapters?|sections?|script|config|spreadsheet|sheet|form|feedback|issues?|diff|patch|quotes?|emails? thread|newsletter|blog(?: post)?|tweets?|bio|resume|cv|policy|terms|manual|guide|instructions for users)`
const LEAD = String.raw`(?:(?:please|can you|could you|kindly|now|ok|okay|so|and)[, ]+)?`
const VERB = String.raw`(?:here(?:'s|’s| is| are)|below (?:is|are)|(?:the )?following (?:is|are)|i(?:'ve|’ve| have)? (?:pasted|copied|attached|included|received|got|found)|summari[sz]e|translate|proofread|review|analy[sz]e|classify|categori[sz]e|rewrite|rephrase|paraphrase|check|explain|extract\b[^\n:]{0,40}?\bfrom|reply to|respond to|answer|read|fix|edit|improve|shorten|tl;?dr(?: of)?|what does)`
/**
 * A framing line: at the start of the text, a line or a sentence, a phrase that names pasted text
 * ("Here is the email I got:", "Summarise this page:") or a bare label ("Document:", "Email 2:"),
 * ending in a colon, or in a line break before a fenced or quoted block.
 */
const CUE = new RegExp(
  String.raw`(?:^|\n|[.!?]\s+)[ \t>*#-]*(?:${LEAD}${VERB}\b[^\n:]{0,60}?\b${NOUN}\b[^\n:]{0,40}?|${NOUN}(?: #?\d+)?)[ \t]*(?::[ \t]*\n?|\n(?=[ \t]*(?:\x60{3}|~~~|"""|<[a-z])))`,
  'giu')
const FENCE = /^[ \t]*(```|~~~|""")/
/** The user's own question after unfenced pasted text: a last paragraph labelled as one ("Q:", "Question:", "Task:"). */
const QUESTION = /\n[ \t]*\n[ \t]*(?:q|question|my question|task|instruction)[ \t]*:[^]*$/i

/** The data ranges [start, end) of a user's text: what follows each framing line, to its closing fence, else to a labelled question after it or the end. */
export function pastedRanges (text: string): ReadonlyArray<readonly [number, number]> {
  // Every framing line ends in a colon or a line break: most chat turns have neither and skip the scan.
  if (text.indexOf(':') < 0 && text.indexOf('\n') < 0) return NO_RANGES
  const out: Array<readonly [number, number]> = []
  CUE.lastIndex = 0
  let m: RegExpExecArray | null
  while ((m = CUE.exec(text)) !== null) {
    let start = m.index + m[0].length
    while (start < text.length && /\s/.test(text[start] as string)) start++
    if (start >= text.length) break
    const fence = FENCE.exec(text.slice(start, start + 8))
    let end = text.length
    if (fence !== null) {
      const close = text.indexOf(fence[1] as string, start + fence[0].length)
      if (close >= 0) end = close + (fence[1] as string).length
    } else {
      const question = QUESTION.exec(text.slice(start))
      if (question !== null && question.index > 0) end = start + question.index
    }
    out.push([start, end])
    if (end >= text.length) break
    CUE.lastIndex = end
  }
  return out.length === 0 ? NO_RANGES : out
}

/** What a text without pasted ranges gives: one frozen list, not an empty one kept per cached text. */
const NO_RANGES: ReadonlyArray<readonly [number, number]> = Object.freeze([])

/**
 * Pasted ranges by text: a chat resends its earlier user turns with every call, and the framing scan
 * is a large expression run over each of them; the ranges are a pure function of the text.
 */
const RANGES = new TextCache<ReadonlyArray<readonly [number, number]>>(4_000_000, 65_536)

/**
 * The request's spans in order. A user segment with pasted text gives a user piece, a data piece and,
 * after a closed fence, another user piece. Pieces of one message and label in a row are joined by a
 * space into one span, as the model reads consecutive parts (the space keeps two fields' words apart).
 */
export function spansOf (segments: readonly Segment[]): Span[] {
  const b = new SpanBuilder()
  segments.forEach((seg, i) => {
    const source = sourceOf(seg)
    const text = seg.text
    if (source !== 'user' || seg.role !== 'user') { b.add(i, seg.message, source, text, 0, text.length); return }
    let at = 0
    for (const [s, e] of RANGES.get(text, pastedRanges)) {
      b.add(i, seg.message, 'user', text, at, s)
      b.add(i, seg.message, 'data', text, s, e)
      at = e
    }
    b.add(i, seg.message, 'user', text, at, text.length)
  })
  return b.done()
}

/**
 * Joins pieces into spans. A span of one piece, as most are (a message's text), takes its text and a
 * one-element piece list without the growing arrays a joined span needs: a chat resends every message
 * with every call, so this runs for each of them every time.
 */
class SpanBuilder {
  readonly #out: Span[] = []
  #source: SpanSource = 'user'
  #message = Number.NaN
  #first: Piece | null = null
  #firstText = ''
  /** Pieces and texts from the second piece on, with the joining spaces; empty for a span of one piece. */
  #pieces: Piece[] = []
  #parts: string[] = []
  #length = 0

  add (segment: number, message: number, source: SpanSource, text: string, start: number, end: number): void {
    if (end <= start) return
    const part = start === 0 && end === text.length ? text : text.slice(start, end)
    if (this.#first !== null && source === this.#source && message === this.#message) {
      if (this.#pieces.length === 0) {
        this.#pieces.push(this.#first)
        this.#parts.push(this.#firstText)
      }
      this.#parts.push(' ')
      this.#length++
      this.#pieces.push({ segment, start, end, at: this.#length })
      this.#parts.push(part)
    } else {
      this.#flush()
      this.#source = source
      this.#message = message
      this.#first = { segment, start, end, at: 0 }
      this.#firstText = part
    }
    this.#length += end - start
  }

  done (): Span[] {
    this.#flush()
    return this.#out
  }

  #flush (): void {
    if (this.#first === null) return
    if (this.#pieces.length === 0) this.#out.push({ source: this.#source, message: this.#message, text: this.#firstText, pieces: [this.#first] })
    else {
      this.#out.push({ source: this.#source, message: this.#message, text: this.#parts.join(''), pieces: this.#pieces })
      this.#parts = []
      this.#pieces = []
    }
    this.#first = null
    this.#firstText = ''
    this.#length = 0
  }
}

/** A span [s, e) of a span's text as the segment it starts in and the span within that segment's text. */
export function toSegment (span: Span, s: number, e: number): { readonly segment: number, readonly span: readonly [number, number] } {
  const pieces = span.pieces
  let k = pieces.length - 1
  while (k > 0 && (pieces[k] as Piece).at > s) k--
  let p = pieces[k] as Piece
  // A start on the space between two pieces belongs to the next.
  if (s >= p.at + (p.end - p.start) && k + 1 < pieces.length) p = pieces[k + 1] as Piece
  const start = p.start + Math.max(0, s - p.at)
  const end = Math.min(p.end, Math.max(start, p.start + (e - p.at)))
  return { segment: p.segment, span: [Math.min(start, p.end), end] }
}
