// Text normalisation for the injection detector: one canonical form that rules and the model both read,
// plus a map from every normalised character back to the original text so findings carry real spans.
// Also finds embedded base64, hex and %xx payloads so their decoded text is scored too.

/**
 * Normalised text and, for each of its UTF-16 units, the [start, end) of the original unit(s) it came
 * from. When `starts` is null the map is the identity shifted by `offset` (plain ASCII text that only
 * needed lower-casing and trimming, the common case, is mapped without building arrays).
 */
export interface Normalized {
  readonly text: string
  readonly starts: Int32Array | null
  readonly ends: Int32Array | null
  readonly offset: number
}

/** A decoded payload and the span of its encoded run in the original text. */
export interface Payload {
  readonly kind: 'base64' | 'hex' | 'url'
  readonly start: number
  readonly end: number
  readonly decoded: string
}

// Look-alike letters that NFKC leaves alone (it folds fullwidth and mathematical letters, not scripts).
// Lower-case keys only: we lower-case before the lookup. https://www.unicode.org/Public/security/latest/confusables.txt
const CONFUSABLES: Readonly<Record<string, string>> = {
  // Cyrillic
  а: 'a', в: 'b', г: 'r', е: 'e', ё: 'e', з: '3', и: 'u', й: 'u', к: 'k', м: 'm', н: 'h', о: 'o', п: 'n',
  р: 'p', с: 'c', т: 't', у: 'y', х: 'x', ѕ: 's', і: 'i', ї: 'i', ј: 'j', ԁ: 'd', һ: 'h', ӏ: 'l', ԛ: 'q',
  ԝ: 'w', ү: 'y', ѵ: 'v', ь: 'b', ɡ: 'g',
  // Greek
  α: 'a', β: 'b', γ: 'y', ε: 'e', ζ: 'z', η: 'n', ι: 'i', κ: 'k', μ: 'u', ν: 'v', ο: 'o', ρ: 'p', σ: 'o',
  ς: 'c', τ: 't', υ: 'u', χ: 'x', ω: 'w',
  // Latin extensions and IPA that survive NFKD
  ɑ: 'a', ı: 'i', ȷ: 'j', ł: 'l', ø: 'o', đ: 'd', ħ: 'h', ß: 'ss', æ: 'ae', œ: 'oe', ɩ: 'i', ʀ: 'r', ᴀ: 'a',
}

// Digits and symbols read as letters inside words ("1gn0re", "pr0mpt", "p@ssw0rd").
const LEET: Readonly<Record<number, number>> = {
  48: 111, 49: 105, 51: 101, 52: 97, 53: 115, 55: 116, 64: 97, 36: 115, // 0 1 3 4 5 7 @ $
}

const cache = new Map<number, string>()

function isInvisible(cp: number): boolean {
  // Zero-width, bidi controls and other format characters that split words without showing.
  return (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x206f) ||
    cp === 0xfeff || cp === 0x00ad || cp === 0x034f || cp === 0x180e || cp === 0x061c ||
    (cp >= 0xfe00 && cp <= 0xfe0f) || (cp >= 0xe0000 && cp <= 0xe007f)
}

const MARKS = /\p{M}/gu

function foldNonAscii(cp: number): string {
  let out = cache.get(cp)
  if (out !== undefined) return out
  // Regional-indicator symbols spell words with flags: 🇮🇬🇳🇴🇷🇪 reads "ignore".
  if (cp >= 0x1f1e6 && cp <= 0x1f1ff) return String.fromCharCode(97 + cp - 0x1f1e6)
  // NFKD then dropping marks is NFKC plus diacritic folding: "ｉｇｎｏｒｅ" and "ìgnóre" both become "ignore".
  const decomposed = String.fromCodePoint(cp).normalize('NFKD').replace(MARKS, '').toLowerCase()
  out = ''
  for (const ch of decomposed) out += CONFUSABLES[ch] ?? ch
  if (cache.size < 65536) cache.set(cp, out)
  return out
}

function isSpace(cp: number): boolean {
  return cp === 32 || (cp >= 9 && cp <= 13) || cp === 0xa0 || cp === 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
    cp === 0x2028 || cp === 0x2029 || cp === 0x202f || cp === 0x205f || cp === 0x3000 || cp === 0x85
}

function isLetter(c: number): boolean {
  return c >= 97 && c <= 122
}

// Reused output buffers: the hot path normalises every segment of every request.
let codes = new Uint16Array(1024)
let starts = new Int32Array(1024)
let ends = new Int32Array(1024)

function ensure(n: number): void {
  if (codes.length >= n) return
  let size = codes.length
  while (size < n) size *= 2
  codes = new Uint16Array(size)
  starts = new Int32Array(size)
  ends = new Int32Array(size)
}

// Text the fast path cannot take: anything outside printable ASCII and newline, a whitespace run, a
// digit or symbol next to a letter (leet). One native scan, instead of the character loop below.
const NOT_PLAIN = /[^\x20-\x7e\n]|\s\s|[a-z][013457@$]|[013457@$][a-z]/i

/** Lower-cased, NFKC-folded, confusable- and leet-mapped text with whitespace runs collapsed (newline kept). */
export function normalize(input: string): Normalized {
  let a = 0
  let b = input.length
  while (a < b && isSpace(input.charCodeAt(a))) a++
  while (b > a && isSpace(input.charCodeAt(b - 1))) b--
  const core = a === 0 && b === input.length ? input : input.slice(a, b)
  if (!NOT_PLAIN.test(core)) return { text: core.toLowerCase(), starts: null, ends: null, offset: core === '' ? 0 : a }
  return normalizeSlow(input)
}

/** The character loop; exported for the test that checks the fast path against it. */
export function normalizeSlow(input: string): Normalized {
  ensure(input.length * 3 + 8)
  let n = 0
  let pendingSpace = 0 // 0 none, 32 space, 10 newline
  let spaceStart = 0
  for (let i = 0; i < input.length;) {
    const cp = input.codePointAt(i) as number
    const width = cp > 0xffff ? 2 : 1
    const at = i
    i += width
    if (cp < 128) {
      if (cp === 32 || (cp >= 9 && cp <= 13)) {
        if (pendingSpace === 0) spaceStart = at
        if (cp === 10 || pendingSpace === 10) pendingSpace = 10
        else pendingSpace = 32
        continue
      }
      if (pendingSpace !== 0) {
        if (n > 0) { codes[n] = pendingSpace; starts[n] = spaceStart; ends[n] = at; n++ }
        pendingSpace = 0
      }
      codes[n] = cp >= 65 && cp <= 90 ? cp + 32 : cp
      starts[n] = at; ends[n] = i; n++
      continue
    }
    if (isInvisible(cp)) continue
    if (isSpace(cp)) {
      if (pendingSpace === 0) { spaceStart = at; pendingSpace = 32 }
      if (cp === 0x2028 || cp === 0x2029 || cp === 0x85) pendingSpace = 10
      continue
    }
    const folded = foldNonAscii(cp)
    if (folded.length === 0) continue
    if (pendingSpace !== 0) {
      if (n > 0) { codes[n] = pendingSpace; starts[n] = spaceStart; ends[n] = at; n++ }
      pendingSpace = 0
    }
    ensure(n + folded.length + 2)
    for (let k = 0; k < folded.length; k++) {
      codes[n] = folded.charCodeAt(k); starts[n] = at; ends[n] = i; n++
    }
  }
  // Leet digits count as letters only next to a letter, so "2024" and "3.14" stay numbers.
  for (let k = 0; k < n; k++) {
    const m = LEET[codes[k] as number]
    if (m === undefined) continue
    const prev = k > 0 ? codes[k - 1] as number : 0
    const next = k + 1 < n ? codes[k + 1] as number : 0
    if (isLetter(prev) || isLetter(next)) codes[k] = m
  }
  let text = ''
  for (let k = 0; k < n; k += 8192) text += String.fromCharCode.apply(null, codes.subarray(k, Math.min(n, k + 8192)) as unknown as number[])
  return { text, starts: starts.slice(0, n), ends: ends.slice(0, n), offset: 0 }
}

/** Maps a [start, end) span of normalised text back to the original text. */
export function originalSpan(norm: Normalized, start: number, end: number): [number, number] {
  if (norm.starts === null || norm.ends === null) {
    const n = norm.text.length
    return [norm.offset + Math.min(start, n), norm.offset + Math.max(Math.min(start, n), Math.min(end, n))]
  }
  if (norm.starts.length === 0) return [0, 0]
  const s = norm.starts[Math.min(start, norm.starts.length - 1)] as number
  const e = norm.ends[Math.max(0, Math.min(end, norm.ends.length) - 1)] as number
  return [s, Math.max(s, e)]
}

const HEX_RUN = /(?:(?:\\x|0x)?[0-9a-fA-F]{2}[ :,]?){8,}/g
// Starts at a '%' so the engine can skip to candidates; at least three escapes close together.
const URL_RUN = /(?:%[0-9a-fA-F]{2}[^\s%]{0,12}){3,}/g

// Character classes for the hand-written run scanner, which is cheaper than a regex over long text.
const B64 = 1, HEX = 2, SEP = 4
const CLASS = new Uint8Array(128)
for (let c = 0; c < 128; c++) {
  const ch = String.fromCharCode(c)
  if (/[A-Za-z0-9+/_=-]/.test(ch)) CLASS[c] = (CLASS[c] as number) | B64
  if (/[0-9a-fA-Fx\\]/.test(ch)) CLASS[c] = (CLASS[c] as number) | HEX
  if (ch === ' ' || ch === ':' || ch === ',') CLASS[c] = (CLASS[c] as number) | SEP
}

/**
 * One pass over the text for both run kinds: `b64(start, end)` for each maximal run of base64
 * characters and `hex(start, end)` for each maximal run of hex characters (separators allowed inside),
 * each with at least `min` characters of its class. One pass instead of one per kind: this scan is paid
 * by every segment, and almost all of them have no run at all.
 */
function scanRuns(input: string, min: number, b64: (start: number, end: number) => void, hex: (start: number, end: number) => void): void {
  let bStart = -1, bCount = 0
  let hStart = -1, hCount = 0
  for (let i = 0; i <= input.length; i++) {
    const c = i < input.length ? input.charCodeAt(i) : 0
    const k = c < 128 ? CLASS[c] as number : 0
    if ((k & B64) !== 0) {
      if (bStart < 0) { bStart = i; bCount = 0 }
      bCount++
    } else if (bStart >= 0) {
      if (bCount >= min) b64(bStart, i)
      bStart = -1
    }
    if ((k & HEX) !== 0) {
      if (hStart < 0) { hStart = i; hCount = 0 }
      hCount++
    } else if (hStart >= 0 && (k & SEP) === 0) {
      if (hCount >= min) hex(hStart, i)
      hStart = -1
    }
  }
}

function readable(s: string): boolean {
  if (s.length < 6) return false
  let letters = 0
  let bad = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 32) letters++
    else if (c === 0xfffd || (c < 32 && c !== 10 && c !== 13 && c !== 9)) bad++
  }
  return bad === 0 && letters >= s.length * 0.6
}

function decodeUrl(run: string): string {
  try {
    return decodeURIComponent(run.replace(/\+/g, ' '))
  } catch {
    return run.replace(/%([0-9a-fA-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)))
  }
}

/** Encoded runs in the text whose decoded form is readable text (depth 1; callers may recurse). */
export function findPayloads(input: string): Payload[] {
  const out: Payload[] = []
  if (input.length < 16) return out
  const hexRuns: Array<[number, number]> = []
  scanRuns(input, 16, (start, end) => {
    let run = input.slice(start, end)
    // "==" only pads the end; a long word is not base64, so require the mixed alphabet real encodings have.
    const pad = run.indexOf('=')
    if (pad >= 0) run = run.slice(0, pad)
    if (run.length < 16 || !/[A-Z]/.test(run) || !/[a-z0-9]/.test(run)) return
    const decoded = Buffer.from(run, 'base64').toString('utf8')
    if (readable(decoded)) out.push({ kind: 'base64', start, end, decoded })
  }, (start, end) => { hexRuns.push([start, end]) })
  // Hex payloads after base64 ones, as before the scans shared a pass (findings keep their order).
  for (const [start, end] of hexRuns) {
    HEX_RUN.lastIndex = 0
    for (const m of input.slice(start, end).matchAll(HEX_RUN)) {
      const digits = m[0].replace(/\\x|0x|[ :,]/g, '')
      if (digits.length % 2 !== 0 || (!/[a-fA-F]/.test(digits) && !/^(?:[2-7][0-9])+$/.test(digits))) continue
      const decoded = Buffer.from(digits, 'hex').toString('utf8')
      if (readable(decoded)) out.push({ kind: 'hex', start: start + m.index, end: start + m.index + m[0].length, decoded })
    }
  }
  if (input.includes('%')) {
    for (const m of input.matchAll(URL_RUN)) {
      const decoded = decodeUrl(m[0])
      if (readable(decoded)) out.push({ kind: 'url', start: m.index, end: m.index + m[0].length, decoded })
    }
  }
  return out
}
