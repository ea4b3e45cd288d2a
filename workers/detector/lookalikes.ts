// Tables for normalize.ts: letters of other scripts drawn like Latin ones, characters that render as a
// blank or not at all, and the symbols leetspeak writes letters with. Written for this project from
// the glyphs' shapes; NFKC already folds fullwidth, mathematical, circled and superscript letters.

/**
 * Look-alike letters that NFKD leaves alone, by code point as written (before lower-casing: Armenian
 * capital Տ looks like S, its small form տ does not). normalize.ts maps them only inside a word that
 * also has Latin letters, or when the whole word reads as a known word, so Armenian, Cherokee,
 * Russian and Greek text written as such stays itself.
 */
export const LOOKALIKES: ReadonlyMap<number, number> = build({
  // Cyrillic (lower-case forms; capitals reach them through lower-casing, which keeps the look).
  а: 'a', в: 'b', г: 'r', е: 'e', з: '3', и: 'u', к: 'k', м: 'm', н: 'h', о: 'o', п: 'n', р: 'p', с: 'c',
  т: 't', у: 'y', х: 'x', ѕ: 's', і: 'i', ј: 'j', ԁ: 'd', һ: 'h', ӏ: 'l', ԛ: 'q', ԝ: 'w', ү: 'y', ѵ: 'v',
  ь: 'b', ѡ: 'w', ԍ: 'g', ɡ: 'g',
  // Greek
  α: 'a', β: 'b', γ: 'y', ε: 'e', ζ: 'z', η: 'n', ι: 'i', κ: 'k', μ: 'u', ν: 'v', ο: 'o', ρ: 'p', σ: 'o',
  ς: 'c', τ: 't', υ: 'u', χ: 'x', ω: 'w', ϲ: 'c', ϳ: 'j', ϱ: 'p', ϐ: 'b',
  // Armenian: small letters and the capitals whose shape is Latin.
  ա: 'w', գ: 'q', զ: 'q', հ: 'h', յ: 'j', ո: 'n', ռ: 'n', ս: 'u', ց: 'g', օ: 'o', ք: 'p', ի: 'h', լ: 'l',
  ւ: 'i', վ: 'y', Ս: 'u', Տ: 's', Օ: 'o', Լ: 'l', Յ: '3', Զ: 'z',
  // Cherokee capitals (their small forms are added below): shapes of Latin capitals.
  Ꭺ: 'a', Ᏼ: 'b', Ꮯ: 'c', Ꭰ: 'd', Ꭼ: 'e', Ꮐ: 'g', Ꮋ: 'h', Ꭵ: 'i', Ꭻ: 'j', Ꮶ: 'k', Ꮮ: 'l', Ꮇ: 'm',
  Ꮒ: 'h', Ꮎ: 'o', Ꮻ: 'o', Ꮲ: 'p', Ꭱ: 'r', Ꮢ: 'r', Ꮪ: 's', Ꮟ: 'b', Ꭲ: 't', Ꮩ: 'v', Ꮃ: 'w', Ꮤ: 'w',
  Ꭹ: 'y', Ꮍ: 'y', Ꮓ: 'z',
  // Lisu capitals and Coptic small letters drawn as Latin ones.
  ꓮ: 'a', ꓐ: 'b', ꓚ: 'c', ꓓ: 'd', ꓰ: 'e', ꓝ: 'f', ꓖ: 'g', ꓧ: 'h', ꓲ: 'i', ꓙ: 'j', ꓗ: 'k', ꓡ: 'l',
  ꓟ: 'm', ꓠ: 'n', ꓳ: 'o', ꓑ: 'p', ꓣ: 'r', ꓢ: 's', ꓔ: 't', ꓴ: 'u', ꓦ: 'v', ꓪ: 'w', ꓫ: 'x', ꓬ: 'y',
  ꓜ: 'z', ⲁ: 'a', ⲃ: 'b', ⲉ: 'e', ⲓ: 'i', ⲕ: 'k', ⲟ: 'o', ⲣ: 'p', ⲥ: 'c', ⲧ: 't', ⲩ: 'y', ⲭ: 'x',
})

/**
 * Latin letters NFKD does not take apart (small capitals, IPA, letters with a stroke or hook): they
 * are Latin, so they map wherever they stand.
 */
export const LATIN_VARIANTS: ReadonlyMap<number, string> = new Map(Object.entries({
  ɑ: 'a', ı: 'i', ȷ: 'j', ł: 'l', ø: 'o', đ: 'd', ħ: 'h', ß: 'ss', æ: 'ae', œ: 'oe', ɩ: 'i', ʀ: 'r',
  ᴀ: 'a', ʙ: 'b', ᴄ: 'c', ᴅ: 'd', ᴇ: 'e', ɢ: 'g', ʜ: 'h', ɪ: 'i', ᴊ: 'j', ᴋ: 'k', ʟ: 'l', ᴍ: 'm', ɴ: 'n',
  ᴏ: 'o', ᴘ: 'p', ꜱ: 's', ᴛ: 't', ᴜ: 'u', ᴠ: 'v', ᴡ: 'w', ʏ: 'y', ᴢ: 'z', ɛ: 'e', ɣ: 'y', ɦ: 'h',
  ɱ: 'm', ɲ: 'n', ɵ: 'o', ʂ: 's', ʈ: 't', ʐ: 'z', ƅ: 'b', ƈ: 'c', ɗ: 'd', ƒ: 'f', ɠ: 'g', ƙ: 'k', ɭ: 'l',
  ɳ: 'n', ƥ: 'p', ʠ: 'q', ɽ: 'r', ƭ: 't', ʋ: 'v', ƴ: 'y', ȥ: 'z', ƀ: 'b', ɨ: 'i', ɉ: 'j', ƚ: 'l', ᵽ: 'p',
  ɍ: 'r', ŧ: 't', ʉ: 'u', ɏ: 'y', ƶ: 'z', ǥ: 'g', ȼ: 'c', ɇ: 'e', ℮: 'e',
}).map(([k, v]) => [k.codePointAt(0) as number, v]))

function build (o: Readonly<Record<string, string>>): Map<number, number> {
  const m = new Map<number, number>()
  for (const [k, v] of Object.entries(o)) {
    const cp = k.codePointAt(0) as number
    m.set(cp, v.charCodeAt(0))
    // Cherokee small letters (Unicode 8) are the capitals' shapes at x-height.
    if (cp >= 0x13a0 && cp <= 0x13ef) m.set(cp + 0x97d0, v.charCodeAt(0))
    if (cp >= 0x13f0 && cp <= 0x13f5) m.set(cp + 8, v.charCodeAt(0))
  }
  return m
}

/** The letter an enclosed or squared capital stands for (🅰 🅐 ⒜), which NFKD leaves as it is or wraps in parentheses. */
export function enclosedLetter (cp: number): number {
  if (cp >= 0x1f150 && cp <= 0x1f169) return 97 + cp - 0x1f150
  if (cp >= 0x1f170 && cp <= 0x1f189) return 97 + cp - 0x1f170
  if (cp >= 0x1f130 && cp <= 0x1f149) return 97 + cp - 0x1f130
  if (cp >= 0x249c && cp <= 0x24b5) return 97 + cp - 0x249c
  if (cp >= 0x1f1e6 && cp <= 0x1f1ff) return 97 + cp - 0x1f1e6 // regional indicators: 🇮🇬🇳🇴🇷🇪
  return 0
}

/**
 * Characters drawn as a blank of a letter's width: the Hangul fillers and the Braille blank. They
 * separate like a space, so letters spread out with them are rejoined as spaced letters are.
 */
export function isFiller (cp: number): boolean {
  return cp === 0x3164 || cp === 0x115f || cp === 0x1160 || cp === 0xffa0 || cp === 0x2800
}

/** Characters drawn as nothing: zero-width, bidi and other format controls, variation selectors, tags. */
export function isInvisible (cp: number): boolean {
  return (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x206f) ||
    cp === 0xfeff || cp === 0x00ad || cp === 0x034f || cp === 0x180e || cp === 0x061c ||
    (cp >= 0x180b && cp <= 0x180d) || cp === 0x17b4 || cp === 0x17b5 || (cp >= 0xfff9 && cp <= 0xfffb) ||
    (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0x1bca0 && cp <= 0x1bca3) ||
    (cp >= 0xfe00 && cp <= 0xfe0f) || (cp >= 0xe0000 && cp <= 0xe007f) || (cp >= 0xe0100 && cp <= 0xe01ef)
}

/**
 * Leetspeak written with symbols: several characters for one letter, longest first. They are read
 * only when the word they are in then is a known word (normalize.ts), so `|name|`, `a/b` and `(x)`
 * stay as they are.
 */
export const LEET_SEQUENCES: ReadonlyArray<readonly [string, string]> = [
  ['|\\/|', 'm'], ['/\\/\\', 'm'], ['\\/\\/', 'w'], ['|\\|', 'n'], ['/\\/', 'n'], ['|-|', 'h'], ['|_|', 'u'],
  ['()', 'o'], ['[]', 'o'], ['/\\', 'a'], ['\\/', 'v'], ['|)', 'd'], ['|<', 'k'], ['><', 'x'],
]

/** One symbol for a letter; `|`, `!` and `1` can be i or l, and the word decides. */
export const LEET_SYMBOLS: ReadonlyMap<number, string> = new Map(Object.entries({
  '!': 'il', '|': 'li', 1: 'il', 0: 'o', 3: 'e', 4: 'a', 5: 's', 7: 't', '@': 'a', $: 's',
  '€': 'e', '£': 'l', '¡': 'i', '¥': 'y', '¢': 'c', '©': 'c', '®': 'r', '§': 's',
}).map(([k, v]) => [k.charCodeAt(0), v]))
