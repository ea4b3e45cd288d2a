// The thread map, enforced on the import graph of src/ and workers/ (read from the TypeScript sources, so
// `import type` is told apart from an import that loads a module):
// - no cycle among imports that load a module (and no type-only cycle beyond the known ones below);
// - code outside the store worker (src/store/worker/) and the detection worker (workers/) never loads
//   theirs: a type-only import is fine, a value import starts that thread's code on the wrong thread;
// - the store's contract (protocol.ts and the shared types beside it) imports no worker module at all;
// - the scanners both workers run (src/scan/) load no thread's code;
// - reading the configuration (config.ts and all it loads) loads no adapter and no npm package;
// - src/domain/ is a leaf: it imports nothing outside the folder, no npm package and no Node built-in
//   (the dashboard's browser build imports it too).
import { readdirSync, readFileSync } from 'node:fs'
import { join, posix, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import ts from 'typescript'
import { repoFile } from '../../src/paths.js'

const ROOT = fileURLToPath(repoFile(''))

interface Edge {
  /** Repository paths (`src/config.ts`), or the bare specifier of a package or built-in. */
  readonly from: string
  readonly to: string
  /** `import type` / `export type`: erased at compile time, loads nothing. */
  readonly typeOnly: boolean
  /** `import()`: loads the module when that line runs. */
  readonly lazy: boolean
}

function sources (dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .map((f) => posix.join(dir, f.split(sep).join('/')))
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.startsWith('src/dashboard/ui/'))
}

/** Every import, re-export and `import()` with a literal specifier, of one source file. */
function edgesOf (file: string): Edge[] {
  const text = readFileSync(join(ROOT, file), 'utf8')
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, false)
  const out: Edge[] = []
  const add = (spec: string, typeOnly: boolean, lazy: boolean): void => {
    const to = spec.startsWith('.') ? posix.join(posix.dirname(file), spec).replace(/\.js$/, '.ts') : spec
    out.push({ from: file, to, typeOnly, lazy })
  }
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, node.importClause?.isTypeOnly === true, false)
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, node.isTypeOnly, false)
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const arg = node.arguments[0]
      if (arg !== undefined && ts.isStringLiteralLike(arg)) add(arg.text, false, true)
    }
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return out
}

const FILES = [...sources('src'), ...sources('workers')]
const EDGES = FILES.flatMap(edgesOf)
const isLocal = (p: string): boolean => p.startsWith('src/') || p.startsWith('workers/')
const isPackage = (p: string): boolean => !isLocal(p) && !p.startsWith('node:')

/** The cycles (strongly connected components of two or more files, or a file importing itself). */
function cycles (edges: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>()
  for (const e of edges) {
    if (!isLocal(e.to)) continue
    let list = next.get(e.from)
    if (list === undefined) next.set(e.from, list = [])
    list.push(e.to)
  }
  // Tarjan's algorithm.
  let index = 0
  const order = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  const connect = (v: string): void => {
    order.set(v, index)
    low.set(v, index++)
    stack.push(v)
    onStack.add(v)
    for (const w of next.get(v) ?? []) {
      if (!order.has(w)) {
        connect(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, order.get(w)!))
      }
    }
    if (low.get(v) !== order.get(v)) return
    const component: string[] = []
    let w: string
    do {
      w = stack.pop()!
      onStack.delete(w)
      component.push(w)
    } while (w !== v)
    if (component.length > 1 || (next.get(v) ?? []).includes(v)) found.push(component.sort())
  }
  for (const v of next.keys()) if (!order.has(v)) connect(v)
  return found
}

/** What `file` loads when it is loaded (its value imports, `import()` included), transitively. */
function loads (file: string): Set<string> {
  const seen = new Set<string>([file])
  const queue = [file]
  for (let f = queue.shift(); f !== undefined; f = queue.shift()) {
    for (const e of EDGES) {
      if (e.from !== f || e.typeOnly || seen.has(e.to)) continue
      seen.add(e.to)
      if (isLocal(e.to)) queue.push(e.to)
    }
  }
  seen.delete(file)
  return seen
}

const show = (e: Edge): string => `${e.from} -> ${e.to}`

t.test('the graph was read', async (t) => {
  t.ok(FILES.includes('src/config.ts') && FILES.includes('workers/detect.ts'), 'src/ and workers/ are both read')
  t.ok(EDGES.length > 500, `${EDGES.length} imports`)
  t.ok(EDGES.some((e) => e.typeOnly) && EDGES.some((e) => e.lazy), 'type-only and lazy imports are told apart')
  t.same(EDGES.filter((e) => isLocal(e.to) && !FILES.includes(e.to)).map(show), [], 'every local import names a source file')
})

t.test('no import cycle', async (t) => {
  t.same(cycles(EDGES.filter((e) => !e.typeOnly)), [], 'no cycle among imports that load a module')
  // Type-only cycles load nothing, but still tie files together. Two remain, each inside one folder:
  // providers/types.ts names the registry's ProviderName (index.ts imports every provider, each imports
  // types.ts), and detection/pool.ts's DetectionOutcome is read by the lane and fault-episodes modules it
  // loads. Any other cycle fails.
  const known = ['src/providers/', 'src/detection/']
  const others = cycles(EDGES).filter((c) => !known.some((d) => c.every((f) => f.startsWith(d))))
  t.same(others, [], 'no other cycle, type-only imports included')
})

t.test('no thread loads the store worker\'s or the detection worker\'s code', async (t) => {
  const regions: ReadonlyArray<readonly [string, string]> = [['src/store/worker/', 'the store worker'], ['workers/', 'the detection worker']]
  // `tracegate doctor` loads the detector's weights once, in its own short-lived process, to check them;
  // a thread that serves the proxy loads the detector to judge small bodies itself, lazily (import()), so
  // no other importer of the detection pool loads it.
  const allowed = new Set(['src/doctor.ts -> workers/detector/model.ts'])
  const allowedLazy = new Set(['src/detection/inline.ts -> workers/detect.ts'])
  for (const [folder, name] of regions) {
    const crossing = EDGES.filter((e) => !e.typeOnly && e.to.startsWith(folder) && !e.from.startsWith(folder) && !allowed.has(show(e)) && !(e.lazy && allowedLazy.has(show(e))))
    t.same(crossing.map(show), [], `nothing outside ${folder} value-imports ${name}'s modules`)
  }
  const contract = ['src/store/protocol.ts', 'src/store/query-types.ts', 'src/store/trace-types.ts', 'src/store/insight-types.ts']
  const reaching = EDGES.filter((e) => contract.includes(e.from) && e.to.startsWith('src/store/worker/'))
  t.same(reaching.map(show), [], 'the store\'s contract imports no worker module, not even a type')
})

t.test('the scanners both workers run load no thread\'s code', async (t) => {
  // src/scan/ runs in the detection worker and in the store worker (PII at rest): it may load only
  // itself, the provider modules (pure), Node built-ins and its phone-number package.
  const scanners = FILES.filter((f) => f.startsWith('src/scan/'))
  t.ok(scanners.includes('src/scan/pii.ts') && scanners.includes('src/scan/extract.ts'), 'the scanners are read')
  const loaded = [...new Set(scanners.flatMap((f) => [...loads(f)]))]
  const others = loaded.filter((f) => !f.startsWith('src/scan/') && !f.startsWith('src/providers/') && !f.startsWith('node:') && !f.startsWith('libphonenumber-js/'))
  t.same(others, [], 'src/scan loads only itself, the provider modules, Node built-ins and libphonenumber-js')
})

t.test('reading the configuration loads no adapter', async (t) => {
  const loaded = [...loads('src/config.ts')]
  const adapters = loaded.filter((f) => isPackage(f) || ['src/limits/', 'src/store/', 'src/upstream/', 'src/otel/'].some((d) => f.startsWith(d)) && f !== 'src/otel/settings.ts')
  t.same(adapters, [], 'config.ts loads no npm package and nothing of limits/, store/, upstream/ or otel/ but the OTel settings')
  t.ok(loaded.includes('src/otel/settings.ts'), 'it still reads the OTel settings')
})

t.test('src/domain is a leaf', async (t) => {
  const domain = EDGES.filter((e) => e.from.startsWith('src/domain/'))
  t.ok(FILES.filter((f) => f.startsWith('src/domain/')).length >= 5, 'the domain modules are read')
  t.same(domain.filter((e) => !e.to.startsWith('src/domain/')).map(show), [], 'its modules import only each other')
})

t.test('the rules catch what they are meant to', async (t) => {
  // The cycle finder on made-up edges: a cycle is found, a chain is not.
  const e = (from: string, to: string, typeOnly = false): Edge => ({ from, to, typeOnly, lazy: false })
  t.same(cycles([e('src/a.ts', 'src/b.ts'), e('src/b.ts', 'src/a.ts'), e('src/b.ts', 'src/c.ts')]), [['src/a.ts', 'src/b.ts']])
  t.same(cycles([e('src/a.ts', 'src/b.ts'), e('src/b.ts', 'src/c.ts')]), [])
})
