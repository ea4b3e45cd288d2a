// The per-account detection policy's pieces on their own: allow phrases as the worker blanks them (whole
// phrase, any case, spans kept, regular-expression characters taken as text) and the verdict at an
// account's threshold (blocked, threshold, categories).
import t from 'tap'
import { atThreshold, DEFAULT_DETECTION } from '../../src/detection/policy.js'
import type { Segment, Verdict } from '../../src/detection/types.js'
import { allowMatcher, blankAllowed } from '../../workers/allow.js'

const seg = (text: string): Segment => ({ message: 0, role: 'user', path: 'messages[0].content', text })
const blanked = (phrases: string[], text: string): string => blankAllowed([seg(text)], allowMatcher(phrases))[0]!.text

t.test('allow phrases: whole phrase, any case, any whitespace run, same length', async (t) => {
  const text = 'Type Developer\n  Mode to debug; developermode and developer modes stay.'
  const out = blanked(['developer mode'], text)
  t.equal(out.length, text.length, 'spans keep pointing into the text as sent')
  t.equal(out, `Type ${' '.repeat('Developer\n  Mode'.length)} to debug; developermode and developer modes stay.`)
  t.equal(blanked(['mode'], 'a mode, MODE. modes'), 'a     ,     . modes', 'every occurrence, not inside a word')
})

t.test('allow phrases: the longest first, punctuation and regular-expression characters as text', async (t) => {
  t.equal(blanked(['developer', 'developer mode'], 'developer mode!'), ' '.repeat(14) + '!', 'the longer phrase wins where both start')
  t.equal(blanked(['a.b (c)+'], 'x a.b (c)+ y axb (c)c y'), `x ${' '.repeat(8)} y axb (c)c y`, 'dots and brackets are literal')
  t.equal(blanked(['<|im_start|>'], 'x<|im_start|>y'), `x${' '.repeat(12)}y`, 'a phrase that ends in punctuation needs no word boundary there')
})

t.test('allow phrases: the same segments when nothing matches; only matching segments are copied', async (t) => {
  const segments = [seg('hello there'), seg('enter developer mode')]
  const re = allowMatcher(['developer mode'])
  t.equal(blankAllowed([segments[0]!], re)[0], segments[0], 'untouched')
  const out = blankAllowed(segments, re)
  t.not(out, segments)
  t.equal(out[0], segments[0], 'the first segment object is kept')
  t.equal(out[1]!.text, `enter ${' '.repeat(14)}`)
  t.equal(segments[1]!.text, 'enter developer mode', 'the input is not changed')
  t.equal(allowMatcher(['developer mode']), re, 'a list is compiled once')
})

const verdict = (score: number, blocked: boolean, categories: string[] = []): Verdict =>
  ({ blocked, score, categories, issues: [], ms: 0.1, threshold: 0.5, allowApplied: false })

t.test('a verdict at the account\'s threshold', async (t) => {
  const v = verdict(0.4, false)
  t.equal(atThreshold(DEFAULT_DETECTION, v), v, 'the detector\'s own threshold: the verdict as it is')
  t.match(atThreshold({ ...DEFAULT_DETECTION, threshold: 0.3 }, v), { blocked: true, threshold: 0.3, categories: ['model'] },
    'blocked lower down, on the model\'s score: the model is named')
  t.match(atThreshold({ ...DEFAULT_DETECTION, threshold: 0.3 }, verdict(0.4, false, ['role_play'])), { blocked: true, categories: ['role_play'] },
    'a category the detector reported stays')
  t.match(atThreshold({ ...DEFAULT_DETECTION, threshold: 0.9 }, verdict(0.85, true, ['instruction_override'])), { blocked: false, threshold: 0.9, categories: ['instruction_override'] },
    'a strong rule below a higher threshold passes, and its family is still reported')
  t.match(atThreshold({ ...DEFAULT_DETECTION, threshold: 0.4 }, v), { blocked: true }, 'at the threshold blocks')
})
