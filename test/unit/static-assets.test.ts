// The dashboard serves the browser build: the UI scripts and the provider and domain modules they import
// (as ./providers/…, ./domain/…), and nothing else of the build. The provider modules must load in a browser, so none
// imports a Node built-in.
import t from 'tap'
import { Assets } from '../../src/dashboard/static.js'

const assets = new Assets()

t.test('the UI scripts and the provider modules they import are served', async (t) => {
  const names = assets.names
  t.ok(names.includes('main.js'), 'main.js')
  for (const name of ['providers/index.js', 'providers/json.js', 'providers/sse.js', 'providers/alpha.js', 'providers/beta.js', 'providers/gamma.js']) {
    t.ok(names.includes(name), name)
    const r = await assets.asset(`/assets/${name}`)
    t.match(r.headers, [['content-type', 'text/javascript; charset=utf-8']])
    t.notMatch(String(r.body), /from ['"]node:|require\(/, `${name} imports no Node built-in`)
  }
  t.notOk(names.some((n) => n.includes('..') || n.startsWith('/')), 'every name stays inside the asset folders')
})

t.test('a name outside the list is 404', async (t) => {
  for (const path of ['/assets/providers/../../package.json', '/assets/providers/types.ts', '/assets/src/providers/index.js']) {
    await t.rejects(assets.asset(path), { code: 'not_found' }, path)
  }
})

t.test('every module a served script imports is served too', async (t) => {
  const names = new Set(assets.names)
  let imports = 0
  for (const name of names) {
    if (!name.endsWith('.js')) continue
    const body = String((await assets.asset(`/assets/${name}`)).body)
    // Compiled modules put each static import (and re-export) on a line of its own.
    for (const m of body.matchAll(/^(?:import|export)\b[^\n]*?\bfrom\s*['"]([^'"]+)['"]|^import\s*['"]([^'"]+)['"]/gm)) {
      const spec = (m[1] ?? m[2])!
      const url = new URL(spec, `https://ui.test/assets/${name}`)
      t.ok(url.pathname.startsWith('/assets/') && names.has(url.pathname.slice('/assets/'.length)), `${name} imports ${spec}, which is served`)
      imports++
    }
  }
  t.ok(imports > 20, 'the scripts import modules')
})
