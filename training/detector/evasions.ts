// Cheap evasions of the injection detector, as transformations of a plain attack: letters spread out
// with a blank filler, an invisible character or a separator, look-alike letters of another script or
// small capitals, leetspeak symbols, and the whole text written backwards. `evasion-attacks.jsonl`
// holds plain attacks the detector blocks as written (written for this project); eval.ts and
// test/unit/evasions.test.ts report how many each transformation lets through. `evasion-benign.jsonl`
// holds text that looks like an evasion and is not (acronyms, initials, spaced headings, versions,
// paths, math, code, emoticons, Korean, Braille, Armenian, Cherokee, Russian and Greek text), which
// must stay unblocked.
import { readFileSync } from 'node:fs'
import { repoFile } from '../../src/paths.js'

/** Each word's letters joined by `sep`; the spaces between words kept. */
function spread (sep: string): (text: string) => string {
  return (text) => text.split(' ').map((w) => [...w].join(sep)).join(' ')
}

/** Every letter that has a look-alike in `table` replaced by it. */
function swap (table: Readonly<Record<string, string>>): (text: string) => string {
  return (text) => [...text].map((c) => table[c] ?? c).join('')
}

const ARMENIAN = { o: 'օ', u: 'ս', n: 'ո', g: 'ց', h: 'հ', q: 'զ', j: 'յ', l: 'լ', O: 'Օ', U: 'Ս', S: 'Տ', L: 'Լ' }
// Cherokee letters are drawn like Latin capitals, so the text is written in capitals.
const CHEROKEE = {
  A: 'Ꭺ', B: 'Ᏼ', C: 'Ꮯ', D: 'Ꭰ', E: 'Ꭼ', G: 'Ꮐ', H: 'Ꮋ', I: 'Ꭵ', J: 'Ꭻ', K: 'Ꮶ', L: 'Ꮮ', M: 'Ꮇ', O: 'Ꮎ',
  P: 'Ꮲ', R: 'Ꭱ', S: 'Ꮪ', T: 'Ꭲ', V: 'Ꮩ', W: 'Ꮃ', Z: 'Ꮓ',
}
const CYRILLIC_GREEK = { a: 'а', e: 'е', o: 'ο', p: 'р', c: 'с', i: 'і', y: 'у', x: 'х', s: 'ѕ', v: 'ν', k: 'κ', t: 'τ' }
const SMALL_CAPITALS = { a: 'ᴀ', b: 'ʙ', c: 'ᴄ', d: 'ᴅ', e: 'ᴇ', g: 'ɢ', h: 'ʜ', i: 'ɪ', j: 'ᴊ', k: 'ᴋ', l: 'ʟ', m: 'ᴍ', n: 'ɴ', o: 'ᴏ', p: 'ᴘ', r: 'ʀ', s: 'ꜱ', t: 'ᴛ', u: 'ᴜ', v: 'ᴠ', w: 'ᴡ', y: 'ʏ', z: 'ᴢ' }
const LEET = { a: '/\\', i: '!', o: '()', m: '|\\/|', v: '\\/', e: '3', s: '$', l: '|', t: '7', A: '/\\', I: '!', O: '()', E: '3', S: '$' }

/** The transformations, by name. Each keeps the attack readable to a model that is told how to read it. */
export const EVASIONS: Readonly<Record<string, (text: string) => string>> = {
  hangul_filler: spread('\u3164'),
  braille_blank: spread('\u2800'),
  zero_width: spread('\u200b'),
  dots: spread('.'),
  hyphens: spread('-'),
  underscores: spread('_'),
  slashes: spread('/'),
  // One space between letters and one between words: the words must be found again.
  spaces: (text) => [...text.replace(/ +/g, '')].join(' '),
  wide_spaces: (text) => text.split(' ').map((w) => [...w].join(' ')).join('   '),
  armenian: swap(ARMENIAN),
  cherokee: (text) => swap(CHEROKEE)(text.toUpperCase()),
  cyrillic_greek: swap(CYRILLIC_GREEK),
  small_capitals: swap(SMALL_CAPITALS),
  leet_symbols: swap(LEET),
  reversed: (text) => [...text].reverse().join(''),
}

function texts (file: string): string[] {
  return readFileSync(repoFile(`training/detector/${file}`), 'utf8').split('\n').filter((l) => l.trim() !== '')
    .map((l) => (JSON.parse(l) as { text: string }).text)
}

/** Plain attacks the detector blocks as written. */
export function evasionAttacks (): string[] {
  return texts('evasion-attacks.jsonl')
}

/** Benign text that looks like an evasion. */
export function evasionBenign (): string[] {
  return texts('evasion-benign.jsonl')
}
