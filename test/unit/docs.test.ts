// The README is the contract users read: every error code the server can answer and every setting it
// reads are documented there, and the proxy's error table gives each code its real status.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { repoFile } from '../../src/paths.js'
import { ERRORS } from '../../src/errors.js'

const readme = readFileSync(repoFile('README.md'), 'utf8')
const section = (title: string): string => {
  const start = readme.indexOf(`\n${title}\n`)
  if (start < 0) return ''
  const next = readme.indexOf('\n## ', start + title.length + 2)
  return readme.slice(start, next < 0 ? undefined : next)
}

t.test('every error code is in the README', async (t) => {
  const missing = Object.keys(ERRORS).filter((code) => !readme.includes(`\`${code}\``))
  t.same(missing, [], 'codes the README does not mention')
})

t.test("the proxy's error table gives each code its status", async (t) => {
  const table = section('### Errors')
  t.ok(table.length > 0, 'the README has the Errors section')
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

t.test('every setting config.ts reads is in the Configuration table', async (t) => {
  const source = readFileSync(repoFile('src/config.ts'), 'utf8')
  const names = [...new Set([...source.matchAll(/'(TRACEGATE_[A-Z_]+)'/g)].map((m) => m[1]!))]
  t.ok(names.length > 20, `${names.length} settings read`)
  const config = section('## Configuration')
  t.same(names.filter((n) => !config.includes(n)), [], 'settings missing from the table')
})
