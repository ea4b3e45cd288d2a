// The UI's files. The names that may be served are listed once at start (the compiled UI scripts, the
// provider modules they import, the static css/svg/html, and uPlot's two files); a request names one of
// them or gets 404, so no path from a URL ever reaches the file system. Contents are read per request,
// so a rebuilt UI shows on reload.
//
// The browser build (src/dashboard/ui/tsconfig.json) compiles the UI and the pure provider and domain
// modules it imports into dist/browser. The UI imports them as `./providers/…` and `./domain/…` (tsconfig
// rootDirs), so they are served under `providers/` and `domain/` beside the UI scripts.
import { readdirSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, extname, join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { TracegateError } from '../errors.js'
import { repoFile } from '../paths.js'
import type { Reply } from './http.js'

const TYPES: Readonly<Record<string, string>> = {
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.html': 'text/html; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
}

const BROWSER_BUILD = repoFile('dist/browser/')
const COMPILED_UI = fileURLToPath(new URL('dashboard/ui/', BROWSER_BUILD))
const COMPILED_PROVIDERS = fileURLToPath(new URL('providers/', BROWSER_BUILD))
const COMPILED_DOMAIN = fileURLToPath(new URL('domain/', BROWSER_BUILD))
const STATIC_UI = fileURLToPath(repoFile('src/dashboard/ui/static/'))
const SHELL = join(STATIC_UI, 'index.html')
const NOT_FOUND = join(STATIC_UI, 'not-found.html')

/** Shown when the UI has not been built: plain HTML, nothing inline for the CSP to refuse. */
const NOT_BUILT = '<!doctype html><html><head><meta charset="utf-8"><title>tracegate</title></head>' +
  '<body><p>The dashboard UI is not built. Run <code>npm run build</code> and reload.</p></body></html>'

/** Every file under `dir` (relative name → absolute path) whose extension is served. */
function walk (dir: string, accept: (name: string) => boolean, into: Map<string, string>, prefix = ''): void {
  let entries
  try {
    entries = readdirSync(dir, { withFileTypes: true, recursive: true })
  } catch {
    return
  }
  for (const e of entries) {
    if (!e.isFile()) continue
    const abs = join(e.parentPath ?? e.path, e.name)
    const name = relative(dir, abs).split(sep).join('/')
    if (accept(name) && extname(name) in TYPES) into.set(prefix + name, abs)
  }
}

const NOT_FOUND_FALLBACK = '<!doctype html><html><head><meta charset="utf-8"><title>Not found · tracegate</title></head>' +
  '<body><h1>Page not found</h1><p><a href="/">Go to the dashboard</a></p></body></html>'

/** An HTML page from `file`, or `fallback` when the file cannot be read (the UI not built or not shipped). */
async function page (file: string, fallback: string, status: number, headers: Array<[string, string]>): Promise<Reply> {
  let body: Buffer | string
  try {
    body = await readFile(file)
  } catch {
    body = fallback
  }
  return { status, body, headers: [['content-type', TYPES['.html']!], ...headers] }
}

export class Assets {
  readonly #files = new Map<string, string>()

  constructor () {
    const script = (n: string): boolean => n.endsWith('.js') || n.endsWith('.js.map')
    walk(COMPILED_UI, script, this.#files)
    walk(COMPILED_PROVIDERS, script, this.#files, 'providers/')
    walk(COMPILED_DOMAIN, script, this.#files, 'domain/')
    walk(STATIC_UI, () => true, this.#files)
    const uplot = dirname(createRequire(import.meta.url).resolve('uplot'))
    this.#files.set('vendor/uPlot.esm.js', join(uplot, 'uPlot.esm.js'))
    this.#files.set('vendor/uPlot.min.css', join(uplot, 'uPlot.min.css'))
  }

  /** The names that can be served (for tests and diagnostics). */
  get names (): string[] {
    return [...this.#files.keys()]
  }

  /** `/assets/{name}`: the file, or 404 for any name not listed at start. */
  async asset (path: string): Promise<Reply> {
    const file = this.#files.get(path.slice('/assets/'.length))
    if (file === undefined) throw new TracegateError('not_found')
    let body: Buffer
    try {
      body = await readFile(file)
    } catch {
      throw new TracegateError('not_found')
    }
    return { status: 200, body, headers: [['content-type', TYPES[extname(file)]!], ['cache-control', 'no-cache']] }
  }

  /** The app's own 404 page for an address it does not have: plain HTML, the app's stylesheet, a link home. */
  notFoundPage (): Promise<Reply> {
    return page(NOT_FOUND, NOT_FOUND_FALLBACK, 404, [])
  }

  /** Every page path answers with the same shell; the client routes. */
  shell (): Promise<Reply> {
    return page(SHELL, NOT_BUILT, 200, [['cache-control', 'no-cache']])
  }
}
