// The per-account detection policy's pieces on their own: allow phrases as the worker blanks them (whole
// phrase, any case, spans kept, regular-expression characters taken as text) and the verdict at an
// account's threshold (blocked, threshold, categories).
import t from 'tap'
import { atThreshold } from '../../src/detection/policy.js'
import type { Segment, Verdict } from '../../src/detection/types.js'
import { allowMatcher, blankAllowed } from '../../workers/allow.js'
import { DEFAULT_DETECTION } from '../../src/domain/detection-policy.js'

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

t.test('a data threshold holds the data spans\' score to its own bar; the other spans keep the threshold', async (t) => {
  const split = (own: number, data: number): Verdict => ({ ...verdict(Math.max(own, data), Math.max(own, data) >= 0.5), ownScore: own, dataScore: data })
  const strict = { ...DEFAULT_DETECTION, dataThreshold: 0.3 }
  t.match(atThreshold(strict, split(0.1, 0.35)), { blocked: true, threshold: 0.5, dataThreshold: 0.3, categories: ['model'] }, 'a data score over the data threshold blocks')
  t.match(atThreshold(strict, split(0.35, 0.1)), { blocked: false, threshold: 0.5, dataThreshold: 0.3 }, 'the same score in the user\'s words does not')
  const lax = { ...DEFAULT_DETECTION, threshold: 0.4, dataThreshold: 0.95 }
  t.match(atThreshold(lax, split(0.1, 0.9)), { blocked: false, threshold: 0.4, dataThreshold: 0.95 }, 'a laxer data threshold lets data through')
  t.match(atThreshold(lax, split(0.45, 0.1)), { blocked: true }, 'while the threshold still holds the rest')
  t.match(atThreshold({ ...DEFAULT_DETECTION, threshold: 0.4 }, split(0.1, 0.45)), { blocked: true, dataThreshold: 0.4 }, 'none: data is held to the threshold')
  t.match(atThreshold(strict, verdict(0.35, false)), { blocked: true }, 'a verdict without the split: its score counts for both')
})

t.test('the data threshold is read like the threshold, none meaning the threshold', async (t) => {
  const { parseDetectionPatch, ADMIN_NAMES, UI_NAMES, applyDetectionPatch } = await import('../../src/detection/policy.js')
  t.same(parseDetectionPatch({ 'detection-data-threshold': '0.25' }, { names: ADMIN_NAMES, code: 'invalid_argument' }), { dataThreshold: 0.25 })
  t.same(parseDetectionPatch({ data_threshold: 'none' }, { names: UI_NAMES, code: 'invalid_parameter' }), { dataThreshold: null })
  t.throws(() => parseDetectionPatch({ data_threshold: 0 }, { names: UI_NAMES, code: 'invalid_parameter' }), { code: 'invalid_parameter', param: 'data_threshold' })
  t.same(applyDetectionPatch({ ...DEFAULT_DETECTION, threshold: 0.6, dataThreshold: 0.2 }, { threshold: 0.7 }), { ...DEFAULT_DETECTION, threshold: 0.7, dataThreshold: 0.2 }, 'kept when not given')
})
