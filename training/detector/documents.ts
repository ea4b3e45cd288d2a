// Clean documents as negatives: text that is data, full of imperatives addressed to people,
// none to the model reading it. Two kinds:
// - the READMEs and source files of the MIT and Apache-2.0 packages installed under node_modules, cut
//   into passages; the packages used are pinned by name, version and licence in npm-documents.txt
//   (`node dist-training/training/detector/documents.js` prints the list for what is installed);
// - generated mail, logs, tool outputs, search results, tables, recipes and forms (gen-documents.ts).
// Each document is one group; a fixed quarter of the groups is held out and never trained on.
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { ROOT, repoFile } from '../../src/paths.js'
import type { Row } from './data.js'
import { generatedDocuments } from './gen-documents.js'
import { rng } from './rng.js'

export const DOCUMENT_LICENCES: ReadonlySet<string> = new Set(['MIT', 'Apache-2.0'])

export interface DocumentRow extends Row {
  readonly label: 0
  /** npm_readme, npm_code, or the generated kind (mail, log, tool_json, search, table, recipe, form, web). */
  readonly source: string
  readonly group: string
  /** For npm rows: "name@version licence". */
  readonly origin?: string
  /** Generated rows name their template's part (gen-documents.ts); npm rows go by group. */
  readonly split?: 'train' | 'dev' | 'heldout'
}

function groupHash (s: string): number {
  return parseInt(createHash('sha256').update(s).digest('hex').slice(0, 8), 16)
}

/**
 * Documents by group: a quarter of the packages and a third of the generated templates held out (never
 * trained on, never used to choose anything), another quarter of the packages and third of the
 * templates the data-dev part (train.ts chooses the data threshold on it), the rest trained on.
 */
export function documentSplit (r: Pick<DocumentRow, 'group' | 'split'>): 'train' | 'dev' | 'heldout' {
  if (r.split !== undefined) return r.split
  const k = groupHash(r.group) % 4
  return k === 0 ? 'heldout' : k === 1 ? 'dev' : 'train'
}

export function isHeldOutDocument (r: Pick<DocumentRow, 'group' | 'split'>): boolean {
  return documentSplit(r) === 'heldout'
}

/** Package folders under node_modules (scoped ones included), sorted. */
function packageDirs (): string[] {
  const base = fileURLToPath(new URL('node_modules/', ROOT))
  const out: string[] = []
  for (const e of readdirSync(base).sort()) {
    if (e.startsWith('.')) continue
    if (e.startsWith('@')) for (const s of readdirSync(join(base, e)).sort()) out.push(join(base, e, s))
    else out.push(join(base, e))
  }
  return out
}

/** Passages of 150 to ~2,500 characters: whole paragraphs, lengths drawn from the seeded generator. */
function passages (text: string, next: () => number, max: number): string[] {
  const paras = text.replace(/\r\n/g, '\n').split(/\n{2,}/).map((p) => p.trim()).filter((p) => p !== '')
  const out: string[] = []
  let cur = ''
  let want = 150 + Math.floor(next() * 2300)
  for (const p of paras) {
    cur = cur === '' ? p : `${cur}\n\n${p}`
    if (cur.length >= want) {
      out.push(cur.slice(0, 6000))
      cur = ''
      want = 150 + Math.floor(next() * 2300)
      if (out.length === max) break
    }
  }
  if (cur.length >= 150 && out.length < max) out.push(cur)
  return out
}

/** The pinned package list: "name@version licence" a line. */
export const MANIFEST_URL = repoFile('training/detector/npm-documents.txt')

/**
 * README passages and source passages of the packages under node_modules: with `pinned`, only those
 * whose "name@version licence" is listed (a package installed at another version is skipped), else
 * every MIT or Apache-2.0 package.
 */
export function npmDocuments (pinned: ReadonlySet<string> | null = readManifest()): DocumentRow[] {
  const next = rng(22)
  const rows: DocumentRow[] = []
  for (const dir of packageDirs()) {
    let pkg: { name?: string, version?: string, license?: unknown, main?: string }
    try { pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as typeof pkg } catch { continue }
    if (typeof pkg.license !== 'string' || !DOCUMENT_LICENCES.has(pkg.license) || pkg.name === undefined) continue
    const origin = `${pkg.name}@${pkg.version ?? '?'} ${pkg.license}`
    if (pinned !== null && !pinned.has(origin)) continue
    const readme = ['README.md', 'readme.md', 'Readme.md'].map((f) => join(dir, f)).find((f) => existsSync(f))
    if (readme !== undefined) {
      for (const text of passages(readFileSync(readme, 'utf8'), next, 4)) rows.push({ text, label: 0, source: 'npm_readme', group: `npm:${pkg.name}`, origin })
    }
    const main = [pkg.main, 'index.js', 'dist/index.js', 'lib/index.js'].filter((f): f is string => typeof f === 'string').map((f) => join(dir, f)).find((f) => existsSync(f) && /\.[cm]?js$/.test(f))
    if (main !== undefined) {
      for (const text of passages(readFileSync(main, 'utf8'), next, 2)) rows.push({ text, label: 0, source: 'npm_code', group: `npm:${pkg.name}`, origin })
    }
  }
  return rows
}

function readManifest (): ReadonlySet<string> {
  return new Set(readFileSync(MANIFEST_URL, 'utf8').split('\n').filter((l) => l !== ''))
}

/** Every clean document: npm passages and generated ones. */
export function documents (): DocumentRow[] {
  return [...npmDocuments(), ...generatedDocuments()]
}

/** The MIT and Apache-2.0 packages installed now, "name@version licence" a line: npm-documents.txt's contents. */
export function documentManifest (): string {
  return [...new Set(npmDocuments(null).map((r) => r.origin))].sort().join('\n') + '\n'
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) process.stdout.write(documentManifest())
