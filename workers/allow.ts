// An account's allow phrases (src/detection/policy.ts) in the detection worker: every occurrence, matched
// case-insensitively as a whole phrase (no letter or digit joined to either end; a space in the phrase
// takes any whitespace run), is blanked in the text injection scoring reads. Blanked with spaces of the
// same length, so every span the detector reports still points into the text as sent.
import type { Segment } from '../src/detection/types.js'

/** Compiled lists by their phrases; accounts are few, and the cache is emptied when it fills. */
const CACHE_MAX = 256
const compiled = new Map<string, RegExp>()

const SYNTAX = /[\\^$.*+?()[\]{}|/]/g
const WORD_EDGE = /[\p{L}\p{N}]/u

function phraseSource (phrase: string): string {
  const body = phrase.split(' ').map((w) => w.replace(SYNTAX, '\\$&')).join('\\s+')
  const before = WORD_EDGE.test(phrase[0] ?? '') ? '(?<![\\p{L}\\p{N}])' : ''
  const after = WORD_EDGE.test(phrase[phrase.length - 1] ?? '') ? '(?![\\p{L}\\p{N}])' : ''
  return before + body + after
}

/** One expression for the list, longest phrase first so a phrase inside a longer one never cuts it short. */
export function allowMatcher (phrases: readonly string[]): RegExp {
  const key = phrases.join('\n')
  let re = compiled.get(key)
  if (re !== undefined) return re
  const sorted = [...phrases].sort((a, b) => b.length - a.length)
  re = new RegExp(sorted.map(phraseSource).join('|'), 'giu')
  if (compiled.size >= CACHE_MAX) compiled.clear()
  compiled.set(key, re)
  return re
}

const blank = (m: string): string => ' '.repeat(m.length)

/** The segments with the phrases blanked; the same array when none occurs. */
export function blankAllowed (segments: readonly Segment[], re: RegExp): readonly Segment[] {
  let out: Segment[] | null = null
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!
    re.lastIndex = 0
    if (!re.test(seg.text)) continue
    out ??= segments.slice()
    out[i] = { ...seg, text: seg.text.replace(re, blank) }
  }
  return out ?? segments
}
