// The routes file (TRACEGATE_ROUTES): routes of a model to ordered (target, model) steps, `*` expanded to
// the provider's own targets, and who may fall back to another model; every mistake stops the start with
// an error naming the file's line.
import t from 'tap'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config.js'
import { fallbacksAllowed, parseRoutes, type ModelRoutes } from '../../src/domain/model-routes.js'

const TARGETS = { alpha: ['https://api.openai.com', 'https://eu.example.net/openai'], beta: ['https://api.anthropic.com'], gamma: ['https://generativelanguage.googleapis.com'] }
const parse = (text: string): ModelRoutes<'alpha' | 'beta' | 'gamma'> => parseRoutes(text, TARGETS, (p, m) => p !== 'gamma' || !m.includes('/'))
const A = '0192f5a0-1111-7000-8000-000000000001'
const B = '0192f5a0-2222-7000-8000-000000000002'

t.test('routes, * expanded, comments and blank lines', async (t) => {
  const r = parse(`# fallbacks for gpt-4o
alpha gpt-4o -> * gpt-4o, https://backup.example.com/v1/ gpt-4o-mini   # then a cheaper model

beta claude-sonnet-4-5 -> * claude-sonnet-4-5, * claude-3-5-haiku-latest
fallbacks deny *
fallbacks allow ${A}
`)
  t.same(r.routes.alpha.get('gpt-4o'), [
    { baseUrl: 'https://api.openai.com', model: 'gpt-4o' },
    { baseUrl: 'https://eu.example.net/openai', model: 'gpt-4o' },
    { baseUrl: 'https://backup.example.com/v1', model: 'gpt-4o-mini' },
  ], '* is each of the provider\'s targets, in order; a target loses its trailing slash')
  t.equal(r.routes.beta.get('claude-sonnet-4-5')?.length, 2)
  t.equal(r.routes.gamma.size, 0)
  t.ok(fallbacksAllowed(r, A), 'an account allowed after deny * may fall back')
  t.notOk(fallbacksAllowed(r, B), 'any other may not')
  const open = parse(`fallbacks deny ${B}`)
  t.ok(fallbacksAllowed(open, A), 'without deny *, every account may')
  t.notOk(fallbacksAllowed(open, B), 'but one denied')
})

t.test('each mistake names its line', async (t) => {
  const cases: Array<[string, RegExp]> = [
    ['\n\nomega gpt-4o -> * gpt-4o', /^line 3: unknown provider "omega"/],
    ['alpha gpt-4o * gpt-4o', /^line 1: a route is/],
    ['alpha -> * gpt-4o', /^line 1: a route starts with a provider and a model/],
    ['alpha gpt-4o -> ftp://x.example gpt-4o', /^line 1: "ftp:\/\/x\.example" must use http or https/],
    ['alpha gpt-4o -> https://user:pw@x.example gpt-4o', /^line 1: a target must not carry credentials/],
    ['alpha gpt-4o -> nowhere gpt-4o', /^line 1: "nowhere" is not \* or an absolute http\(s\) URL/],
    ['alpha gpt-4o -> * gpt-4o,', /^line 1: each step is a target and a model/],
    ['alpha gpt-4o -> *', /^line 1: each step is a target and a model/],
    ['alpha gpt-4o -> * gpt-4o\nalpha gpt-4o -> * gpt-4o-mini', /^line 2: alpha gpt-4o has a route already/],
    ['gamma gemini-2.5-flash -> * models/x/y', /^line 1: "models\/x\/y" is not a valid gamma model name/],
    [`alpha gpt-4o -> ${Array.from({ length: 9 }, () => '* gpt-4o').join(', ')}`, /^line 1: a route may hold at most 16 steps once \* is expanded, this one holds 18/],
    ['fallbacks allow *', /^line 1: every account is allowed fallbacks unless denied/],
    ['fallbacks deny someone', /^line 1: "someone" is not an account id/],
    ['fallbacks maybe ' + A, /^line 1: a fallbacks line is/],
    [`fallbacks deny ${A}\nfallbacks allow ${A}`, /^line 2: account .* is both allowed and denied/],
  ]
  for (const [text, want] of cases) {
    t.throws(() => parse(text), { name: 'RoutesError', message: want }, JSON.stringify(text))
  }
})

t.test('loadConfig reads the file TRACEGATE_ROUTES names, and its errors name the variable, the file and the line', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tracegate-routes-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const file = join(dir, 'routes.txt')
  writeFileSync(file, 'alpha gpt-4o -> * gpt-4o, * gpt-4o-mini\n')
  const c = loadConfig({ TRACEGATE_ROUTES: file, TRACEGATE_ALPHA_BASE_URL: 'https://a.example,https://b.example' })
  t.same(c.routes?.routes.alpha.get('gpt-4o')?.map((p) => `${p.baseUrl} ${p.model}`), ['https://a.example gpt-4o', 'https://b.example gpt-4o', 'https://a.example gpt-4o-mini', 'https://b.example gpt-4o-mini'])
  t.equal(loadConfig({}).routes, null, 'no file, no routes')
  writeFileSync(file, '# ok\nalpha gpt-4o => * gpt-4o\n')
  t.throws(() => loadConfig({ TRACEGATE_ROUTES: file }), { name: 'ConfigError', message: `TRACEGATE_ROUTES ${file} line 2: a route is \`<provider> <model> -> <target> <model>, …\` (or a fallbacks line)` })
  t.throws(() => loadConfig({ TRACEGATE_ROUTES: join(dir, 'missing.txt') }), { name: 'ConfigError', message: /^TRACEGATE_ROUTES cannot read .*missing\.txt: ENOENT$/ })
})
