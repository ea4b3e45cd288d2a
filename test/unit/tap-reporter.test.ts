// The test runner's reporter: fed tap's raw TAP, it passes on each failure with its subtest path and
// diagnostics, the closing summary comment .ci/run counts from, and nothing of what passed.
import t from 'tap'
import FailuresReporter from '../helpers/tap-reporter.js'

const LINES = [
  'TAP version 14',
  '1..2',
  '# Subtest: dist/test/unit/a.test.js',
  '    # Subtest: a group',
  '        ok 1 - one is one',
  '        not ok 2 - one is two',
  '          ---',
  '          diff: |',
  '            -2',
  '',
  '            +1',
  '          ...',
  '        ',
  '        ok 3 - after the failure',
  '        1..3',
  '    not ok 1 - a group # time=1ms',
  '      ---',
  '      at: here',
  '      ...',
  '    1..1',
  'not ok 1 - dist/test/unit/a.test.js # time=2ms',
  '# Subtest: dist/test/unit/b.test.js',
  '    ok 1 - passes',
  '    1..1',
  'ok 2 - dist/test/unit/b.test.js # time=1ms',
  '# { total: 4, pass: 3, fail: 1 }',
  '# time=5ms',
  '',
]
const TAP = LINES.join('\n')

async function report (chunks: readonly string[]): Promise<string> {
  const r = new FailuresReporter()
  const out: string[] = []
  r.on('data', (b: Buffer) => { out.push(String(b)) })
  const ended = new Promise((resolve) => { r.on('end', resolve) })
  for (const c of chunks) r.write(c)
  r.end()
  await ended
  return out.join('')
}

t.test('failures with their path and diagnostics, the summary, nothing that passed', async (t) => {
  const text = await report([TAP])
  // The failed assertion's YAML block (blank lines included) and the failed group's, as they came.
  t.same(text.split('\n'), [
    `${LINES[5]!}  (in dist/test/unit/a.test.js > a group)`,
    ...LINES.slice(6, 12),
    `${LINES[15]!}  (in dist/test/unit/a.test.js)`,
    ...LINES.slice(16, 19),
    LINES[20],
    LINES[25],
    '',
  ])
})

t.test('the same report whatever the chunks the TAP arrives in', async (t) => {
  const whole = await report([TAP])
  const bytes = [...TAP]
  const pieces: string[] = []
  for (let i = 0; i < bytes.length; i += 7) pieces.push(bytes.slice(i, i + 7).join(''))
  t.equal(await report(pieces), whole)
})
