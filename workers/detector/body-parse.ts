// JSON.parse of a request body that reuses what a recent body of the same conversation parsed. A chat
// resends its whole history with every call, so a body usually starts with the bytes of one this worker
// judged a moment ago, up to the end of some message, and adds a message or two. Those messages are
// taken from the earlier parse (the same objects, so their strings are the ones the per-text caches
// already hold and hash), and only the rest is parsed.
//
// The result is what JSON.parse of the whole body gives, or the body is parsed whole: the reused part is
// the same text as before, and the rest is parsed by JSON.parse in three pieces (the keys before the
// message array, the new messages, the keys after it) that are valid exactly when the body is; anything
// unexpected on the way means a whole parse. Reused message objects are shared between results:
// nothing may change a parsed body.

/** Top-level keys whose array is a conversation: `messages` (alpha, beta) and `contents` (gamma). */
const LISTS: ReadonlySet<string> = new Set(['messages', 'contents'])

/** How many recent bodies are kept (conversations in flight on one worker), and the characters they may hold together. */
const RECENT = 64
const BUDGET = 4_000_000

/** A parsed body and where its message array's elements end. */
interface Parsed {
  readonly text: string
  readonly value: unknown
  /** Offset of the array's `[`. */
  readonly open: number
  /** The array's elements, and the offset just after each. */
  readonly elements: readonly unknown[]
  readonly ends: readonly number[]
}

/**
 * Bodies shorter than this are parsed whole and not kept: JSON.parse of a few KB costs less than looking
 * through the recent bodies and keeping one more (single-turn calls that share a system prompt would pay
 * for it on every call).
 */
const MIN_CHARS = 4096

let recent: Parsed[] = []
let held = 0
let on = true
let minChars = MIN_CHARS

/** Benchmarks and tests compare against parsing every body whole; tests reuse small bodies too (`min` 0). */
export function setBodyReuse (enabled: boolean, min = MIN_CHARS): void {
  on = enabled
  minChars = min
  recent = []
  held = 0
}

/** JSON.parse(text), or null for text that is not JSON. */
export function parseBody (text: string): unknown {
  if (!on || text.length < minChars) return parseWhole(text)
  const reused = reuse(text)
  if (reused !== undefined) return reused
  const value = parseWhole(text)
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) remember(text, value)
  return value
}

function parseWhole (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

/** The body parsed with the recent body that shares the most messages with it, or undefined when none shares one. */
function reuse (text: string): unknown {
  let best = -1
  let shared = 0
  for (let r = 0; r < recent.length; r++) {
    const old = recent[r] as Parsed
    const k = sharedElements(old, text)
    if (k > shared) { shared = k; best = r }
    // The most recent body this one continues: the usual next call of a conversation.
    if (k === old.ends.length) break
  }
  if (best < 0) return undefined
  const old = recent[best] as Parsed
  // A body that continues the old one takes its place; one that shares less (another conversation with
  // the same system prompt, an edited turn) leaves it to the conversation it belongs to.
  if (shared === old.ends.length) {
    recent.splice(best, 1)
    held -= old.text.length
  }
  return parseRest(old, text, shared)
}

/** How many of `old`'s elements, from the first, `text` starts with (their bytes and all before them). */
function sharedElements (old: Parsed, text: string): number {
  const ends = old.ends
  // The whole history, or one or two messages fewer (a retried or edited turn). The shortest is tried
  // first: a body of another conversation fails it, so each recent body costs one comparison.
  const least = Math.max(1, ends.length - 2)
  if (!probesAgree(text, old, ends[least - 1] as number) || !startsWithPrefix(text, old, least)) return 0
  for (let k = ends.length; k > least; k--) if (startsWithPrefix(text, old, k)) return k
  return least
}

/**
 * A few characters of the second message and the one before `end` compared first: conversations with
 * the same system prompt differ there, so a recent body of another one is passed over without building
 * the substrings. Agreeing probes prove nothing; a disagreeing one rules the body out.
 */
function probesAgree (text: string, old: Parsed, end: number): boolean {
  if (end > text.length) return false
  const second = old.ends[0] as number
  return probeAgrees(text, old.text, second + 16, end) && probeAgrees(text, old.text, second + 32, end) &&
    probeAgrees(text, old.text, second + 64, end) && probeAgrees(text, old.text, end - 1, end)
}

/** Whether the two texts have the same character at `at`, or `at` is past `end`. */
function probeAgrees (text: string, old: string, at: number, end: number): boolean {
  return at >= end || text.charCodeAt(at) === old.charCodeAt(at)
}

/** Whether `text` starts with `old`'s text up to the end of its `k`th element. */
function startsWithPrefix (text: string, old: Parsed, k: number): boolean {
  const end = old.ends[k - 1] as number
  // Two substrings compared with === are compared by memory; startsWith goes character by character.
  return end <= text.length && text.substring(0, end) === old.text.substring(0, end)
}

/** The value of `text`, whose first `k` elements of the message array are `old`'s; undefined to parse it whole. */
function parseRest (old: Parsed, text: string, k: number): unknown {
  const from = old.ends[k - 1] as number
  const scan = scanElements(text, from, true)
  if (scan === null) return undefined
  let head: Record<string, unknown>
  let added: unknown[]
  let tail: Record<string, unknown> | null = null
  try {
    head = JSON.parse(text.slice(0, old.open) + 'null}') as Record<string, unknown>
    added = JSON.parse('[0' + text.slice(from, scan.close + 1)) as unknown[]
    const after = skipSpace(text, scan.close + 1)
    if (text.charCodeAt(after) === COMMA) {
      // '{' and the rest is an object exactly when a key follows the comma ("],}" is not JSON, "{}" is).
      if (text.charCodeAt(skipSpace(text, after + 1)) !== QUOTE) return undefined
      tail = JSON.parse('{' + text.slice(after + 1)) as Record<string, unknown>
    }
    else if (text.charCodeAt(after) !== CLOSE_OBJECT || skipSpace(text, after + 1) !== text.length) return undefined
  } catch {
    return undefined
  }
  const elements = (old.elements as unknown[]).slice(0, k)
  for (let i = 1; i < added.length; i++) elements.push(added[i])
  const key = listKey(head)
  if (key === null || elements.length !== k + scan.ends.length) return undefined
  head[key] = elements
  if (tail !== null) {
    // As JSON.parse defines each key: a key seen before keeps its place and takes the later value, and
    // `__proto__` is an own key, not the prototype.
    for (const name of Object.keys(tail)) Object.defineProperty(head, name, { value: tail[name], writable: true, enumerable: true, configurable: true })
  }
  remember(text, head, { open: old.open, elements, ends: [...old.ends.slice(0, k), ...scan.ends] })
  return head
}

/** The list key the head parsed with a null value (the array that was cut off). */
function listKey (head: Record<string, unknown>): string | null {
  let found: string | null = null
  for (const name of LISTS) {
    if (Object.hasOwn(head, name) && head[name] === null) {
      if (found !== null) return null
      found = name
    }
  }
  return found
}

function remember (text: string, value: unknown, known?: Pick<Parsed, 'open' | 'elements' | 'ends'>): void {
  if (text.length > BUDGET / 4) return
  let entry: Parsed | null = null
  if (known !== undefined) entry = { text, value, ...known }
  else {
    const list = findList(text)
    if (list === null) return
    const elements = (value as Record<string, unknown>)[list.key]
    if (!Array.isArray(elements) || elements.length !== list.ends.length) return
    entry = { text, value, open: list.open, elements, ends: list.ends }
  }
  if (entry.ends.length === 0) return
  recent.unshift(entry)
  held += text.length
  while (recent.length > RECENT || held > BUDGET) held -= (recent.pop() as Parsed).text.length
}

const QUOTE = 34
const COMMA = 44
const COLON = 58
const OPEN_ARRAY = 91
const CLOSE_ARRAY = 93
const OPEN_OBJECT = 123
const CLOSE_OBJECT = 125

function skipSpace (text: string, i: number): number {
  for (;;) {
    const c = text.charCodeAt(i)
    if (c !== 32 && c !== 10 && c !== 13 && c !== 9) return i
    i++
  }
}

/** The offset just after the string whose opening quote is at `i`, or -1. */
function skipString (text: string, i: number): number {
  for (let q = text.indexOf('"', i + 1); q >= 0; q = text.indexOf('"', q + 1)) {
    let slashes = 0
    while (text.charCodeAt(q - 1 - slashes) === 92) slashes++
    if (slashes % 2 === 0) return q + 1
  }
  return -1
}

/** The offset just after the value at `i` (objects and arrays by their brackets, outside strings), or -1. */
function skipValue (text: string, i: number): number {
  const c = text.charCodeAt(i)
  if (c === QUOTE) return skipString(text, i)
  if (c !== OPEN_OBJECT && c !== OPEN_ARRAY) {
    // A number, true, false or null: up to the next delimiter.
    let j = i
    for (let d = text.charCodeAt(j); j < text.length && d !== COMMA && d !== CLOSE_ARRAY && d !== CLOSE_OBJECT && d !== 32 && d !== 10 && d !== 13 && d !== 9; d = text.charCodeAt(++j));
    return j > i ? j : -1
  }
  let depth = 0
  for (let j = i; j < text.length; j++) {
    const d = text.charCodeAt(j)
    if (d === QUOTE) {
      j = skipString(text, j) - 1
      if (j < 0) return -1
    } else if (d === OPEN_OBJECT || d === OPEN_ARRAY) depth++
    else if (d === CLOSE_OBJECT || d === CLOSE_ARRAY) {
      if (--depth === 0) return j + 1
    }
  }
  return -1
}

/**
 * The elements of an array from offset `i`: just after its `[` (`afterElement` false) or just after an
 * element. Their ends and the offset of the closing `]`, or null when the text is not as expected.
 */
function scanElements (text: string, i: number, afterElement: boolean): { ends: number[], close: number } | null {
  const ends: number[] = []
  let j = skipSpace(text, i)
  if (!afterElement && text.charCodeAt(j) === CLOSE_ARRAY) return { ends, close: j }
  for (;;) {
    if (afterElement) {
      const c = text.charCodeAt(j)
      if (c === CLOSE_ARRAY) return { ends, close: j }
      if (c !== COMMA) return null
      j = skipSpace(text, j + 1)
    }
    const end = skipValue(text, j)
    if (end < 0) return null
    ends.push(end)
    j = skipSpace(text, end)
    afterElement = true
  }
}

/** The one top-level conversation array of a body: its key, where it opens and where its elements end. */
function findList (text: string): { key: string, open: number, ends: number[] } | null {
  let i = skipSpace(text, 0)
  if (text.charCodeAt(i) !== OPEN_OBJECT) return null
  i = skipSpace(text, i + 1)
  let found: { key: string, open: number, ends: number[] } | null = null
  while (text.charCodeAt(i) === QUOTE) {
    const keyEnd = skipString(text, i)
    if (keyEnd < 0) return null
    const key = text.slice(i + 1, keyEnd - 1)
    // A key written with escapes may be a list's name spelled otherwise: leave such bodies alone.
    if (key.includes('\\')) return null
    i = skipSpace(text, keyEnd)
    if (text.charCodeAt(i) !== COLON) return null
    i = skipSpace(text, i + 1)
    if (LISTS.has(key) && text.charCodeAt(i) === OPEN_ARRAY) {
      // One list only: with two, which one the parse kept is not worth working out.
      if (found !== null) return null
      const scan = scanElements(text, i + 1, false)
      if (scan === null) return null
      found = { key, open: i, ends: scan.ends }
      i = scan.close + 1
    } else {
      const end = skipValue(text, i)
      if (end < 0) return null
      i = end
    }
    i = skipSpace(text, i)
    if (text.charCodeAt(i) !== COMMA) break
    i = skipSpace(text, i + 1)
  }
  return found
}
