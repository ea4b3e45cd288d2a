// The buffer normalize.ts's passes work on: normalised UTF-16 units, each with the [start, end) of the
// original characters it came from and marks the passes leave for each other, and the character
// classes they look letters, leet symbols and separators up in.
import { LEET_SYMBOLS } from './lookalikes.js'

/** Normalised UTF-16 units and where each came from; `n` are in use. */
export interface Units {
  codes: Uint16Array
  starts: Int32Array
  ends: Int32Array
  /** Per unit: LOOKALIKE (mapped from another script, the original in `origs`), SEAM (a separator or invisible character was removed before it), ONE. */
  marks: Uint8Array
  origs: Uint16Array
  n: number
}

export const LOOKALIKE = 1
export const SEAM = 2
/** An `i` read from the digit 1, which may as well have been an l. */
export const ONE = 4

export function isOne (u: Units, k: number): boolean {
  return ((u.marks[k] as number) & ONE) !== 0
}

/** Code of a blank filler (Hangul filler, Braille blank) until the passes decide what it was. */
export const FILL = 0x3164

export function isLetter (c: number): boolean {
  return c >= 97 && c <= 122
}

// Character classes of the passes, one table lookup each (the passes run over every slow-path text).
export const LETTER = 1, LEET = 2, NEW = 4, RUN = 8, SEP = 16, DIGIT = 32
const ASCII_CLASS = new Uint8Array(128)
const OTHER_CLASS = new Map<number, number>()

export function classOf (c: number): number {
  return c < 128 ? ASCII_CLASS[c] as number : c === FILL ? SEP : OTHER_CLASS.get(c) ?? 0
}

/** Unit `k` moved to `j` with its span and marks (the passes only ever move units left or keep them). */
export function move (u: Units, j: number, k: number): void {
  copyUnit(u, j, u, k)
}

/** Unit `k` of `u` copied to position `j` of `o`, with its span and marks. */
export function copyUnit (o: Units, j: number, u: Units, k: number): void {
  o.codes[j] = u.codes[k] as number
  o.starts[j] = u.starts[k] as number
  o.ends[j] = u.ends[k] as number
  o.marks[j] = u.marks[k] as number
  o.origs[j] = u.origs[k] as number
}

// Native, and several times faster than String.fromCharCode over the units; a lone surrogate (no
// character) reads as U+FFFD, one unit for one, so positions do not move.
const UTF16 = new TextDecoder('utf-16le')

/** The text of units [from, to). */
export function textOf (u: Units, from = 0, to = u.n): string {
  return UTF16.decode(u.codes.subarray(from, to))
}

/** Units `a` and `b` swapped, with their spans and marks. */
export function swap (u: Units, a: number, b: number): void {
  const c = u.codes[a] as number; u.codes[a] = u.codes[b] as number; u.codes[b] = c
  const s = u.starts[a] as number; u.starts[a] = u.starts[b] as number; u.starts[b] = s
  const e = u.ends[a] as number; u.ends[a] = u.ends[b] as number; u.ends[b] = e
  const m = u.marks[a] as number; u.marks[a] = u.marks[b] as number; u.marks[b] = m
  const o = u.origs[a] as number; u.origs[a] = u.origs[b] as number; u.origs[b] = o
}

for (let c = 97; c <= 122; c++) ASCII_CLASS[c] = LETTER
for (let c = 48; c <= 57; c++) ASCII_CLASS[c] = DIGIT
for (const c of LEET_SYMBOLS.keys()) {
  if (c < 128) ASCII_CLASS[c] = (ASCII_CLASS[c] as number) | LEET | RUN
  else OTHER_CLASS.set(c, LEET | RUN)
}
for (const ch of '()[]/\\<>-_') ASCII_CLASS[ch.charCodeAt(0)] = (ASCII_CLASS[ch.charCodeAt(0)] as number) | RUN
// Symbols that stand for letters only as leetspeak (digits, `@` and `$` are read the older way, by position).
for (const ch of '!|()[]/\\<>€£¡¥¢©®§') {
  const c = ch.charCodeAt(0)
  if (c < 128) ASCII_CLASS[c] = (ASCII_CLASS[c] as number) | NEW
  else OTHER_CLASS.set(c, (OTHER_CLASS.get(c) ?? 0) | NEW)
}
for (const c of [32, 10, 9, 46, 45, 95, 47, 92, 42, 43, 126, 44, 58]) ASCII_CLASS[c] = (ASCII_CLASS[c] as number) | SEP
for (const c of [0xb7, 0x2022]) OTHER_CLASS.set(c, SEP)

