// The docs are the contract users read: every error code the server can answer and every setting it
// reads are documented, and the Errors table gives each code its real status. The README stays a short
// entry page that links every docs page, the detector's guide short, each docs page opens with its table
// of contents, and every relative link in them reaches a file (and, within Markdown, a heading).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { repoFile } from '../../src/paths.js'
import { ERRORS } from '../../src/errors.js'

const root = fileURLToPath(repoFile('.'))
const read = (path: string): string => readFileSync(join(root, path), 'utf8')
const PAGES = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)
/** What a user can read: the README and every docs page. */
const DOCS = ['README.md', ...PAGES]
const everything = DOCS.map(read).join('\n')

/** A `## ` section of one page, up to the next `## `; '' when the page has none. */
const section = (path: string, title: string): string => {
  const text = read(path)
  const start = text.indexOf(`\n${title}\n`)
  if (start < 0) return ''
  const next = text.indexOf('\n## ', start + title.length + 2)
  return text.slice(start, next < 0 ? undefined : next)
}

/** The text outside fenced code blocks, where headings and links mean something. */
const prose = (text: string): string => text.replace(/^```[\s\S]*?^```/gm, '')

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors (text: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const m of prose(text).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = m[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, '').replace(/ /g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

t.test('every error code is in the docs', async (t) => {
  const missing = Object.keys(ERRORS).filter((code) => !everything.includes(`\`${code}\``))
  t.same(missing, [], 'codes no page mentions')
})

t.test("the Errors table gives each code its status", async (t) => {
  const table = section('docs/endpoints.md', '## Errors')
  t.ok(table.length > 0, 'docs/endpoints.md has the Errors section')
  let rows = 0
  for (const line of table.split('\n')) {
    const m = /^\| ([\d /]+) \| (.+?) \|/.exec(line)
    if (m === null) continue
    const statuses = m[1]!.split('/').map((s) => Number(s.trim()))
    const codes = [...m[2]!.replace(/\(.*?\)/g, "").matchAll(/`([a-z_]+)`/g)].map((c) => c[1]!)
    for (const [i, code] of codes.entries()) {
      const spec = (ERRORS as Record<string, { status: number }>)[code]
      t.ok(spec !== undefined, `${code} is a code of the error table`)
      const status = statuses.length === codes.length ? statuses[i] : statuses[0]
      t.equal(spec?.status, status, `${code}: ${status}`)
      rows++
    }
  }
  t.ok(rows >= 15, `${rows} codes checked`)
})

t.test('every setting the code reads is in the Configuration table', async (t) => {
  const files = (readdirSync(join(root, 'src'), { recursive: true }) as string[]).filter((f) => f.endsWith('.ts'))
  const source = files.map((f) => read(join('src', f))).join('\n')
  const setting = /(?:'|env\.)((?:TRACEGATE|OTEL|CLICKHOUSE)_[A-Z_]+)\b/g
  const names = [...new Set([...source.matchAll(setting)].map((m) => m[1]!))]
  t.ok(names.filter((n) => n.startsWith('TRACEGATE_')).length > 20, `${names.length} settings read`)
  t.ok(names.includes('OTEL_SERVICE_NAME') && names.includes('CLICKHOUSE_URL'), 'the OTEL_* and CLICKHOUSE_* settings too')
  const config = section('docs/configuration.md', '## Environment variables')
  t.ok(config.length > 0, 'docs/configuration.md has the Environment variables section')
  t.same(names.filter((n) => !config.includes(n)), [], 'settings missing from the table')
})

t.test('the README and the detector guide stay short', async (t) => {
  const readme = statSync(join(root, 'README.md')).size
  t.ok(readme <= 30_000, `README.md is ${readme} bytes, at most 30,000`)
  const guide = statSync(join(root, 'workers/detector/README.md')).size
  t.ok(guide <= 15_000, `workers/detector/README.md is ${guide} bytes, at most 15,000`)
})

t.test('each docs page opens with a table of contents of its sections', async (t) => {
  t.ok(PAGES.length >= 6, `${PAGES.length} pages`)
  const readme = read('README.md')
  t.same(PAGES.filter((page) => !readme.includes(`](${page})`)), [], 'pages the README does not link to')
  for (const page of PAGES) {
    const text = prose(read(page))
    const first = text.indexOf('\n## ')
    const head = first < 0 ? text : text.slice(0, first)
    const sections = [...text.matchAll(/^## (.+)$/gm)].map((m) => m[1]!.trim())
    t.ok(sections.length > 0, `${page} has sections`)
    const listed = [...head.matchAll(/^- \[(.+?)\]\(#/gm)].map((m) => m[1]!)
    t.same(listed, sections, `${page}: the contents list every section, in order`)
  }
})

t.test('every relative link reaches a file, and a heading where it names one', async (t) => {
  const checked = [...DOCS, 'workers/detector/README.md', 'workers/detector/EXPERIMENTS.md', 'bench/RESULTS.md']
  const broken: string[] = []
  let links = 0
  for (const page of checked) {
    for (const m of prose(read(page)).matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!
      if (/^[a-z]+:/i.test(target)) continue
      links++
      const [path = '', anchor] = target.split('#')
      const file = path === '' ? page : normalize(join(dirname(page), path))
      if (file.startsWith('..') || !existsSync(join(root, file))) { broken.push(`${page}: ${target} (no file)`); continue }
      if (anchor === undefined || !file.endsWith('.md')) continue
      if (!anchors(read(file)).has(anchor)) broken.push(`${page}: ${target} (no heading)`)
    }
  }
  t.ok(links > 50, `${links} links checked`)
  t.same(broken, [], 'links that reach nothing')
})
