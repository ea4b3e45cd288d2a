// Clean documents as negatives: text that is data, full of imperatives addressed to people,
// none to the model reading it. Two kinds:
// - the READMEs and source files of MIT and Apache-2.0 npm packages, cut into passages: exactly the
//   versions npm-documents.txt pins (with licence and integrity), read from node_modules or from the
//   published tarball (npm-packages.ts); `node dist-training/training/detector/documents.js` prints
//   the list for what is installed;
// - generated mail, logs, tool outputs, search results, tables, recipes and forms (gen-documents.ts).
// Each document is one group; a fixed quarter of the groups is held out and never trained on.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { repoFile } from '../../src/paths.js'
import type { Row } from './data.js'
import { generatedDocuments } from './gen-documents.js'
import { compareFolders, installedIntegrity, installedNames, installedPackageFiles, parsePinned, pinnedLine, pinnedPackageFiles, type PackageFiles, type PinnedPackage } from './npm-packages.js'
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

/** The pinned package list: "name@version licence integrity [folder]" a line. */
export const MANIFEST_URL = repoFile('training/detector/npm-documents.txt')

const MANIFEST_HEADER = `# The packages whose README and main source file give the clean npm documents (documents.ts).
# name@version licence integrity [folder under node_modules, where npm installs it under an alias]
# Read from node_modules where that version is installed, else from its published tarball (training/.cache/).
# Written by \`node dist-training/training/detector/documents.js\`; a change here changes weights.bin.
`

/**
 * README passages and source passages of exactly the pinned packages, each read from node_modules where
 * that version is installed and from its published tarball otherwise (npm-packages.ts), in node_modules'
 * order. One generator draws the passage lengths across all packages in that order, so the passages
 * depend on the pinned list alone.
 */
export function npmDocuments (pinned: readonly PinnedPackage[] = readManifest()): DocumentRow[] {
  const sorted = [...pinned].sort((a, b) => compareFolders(a.folder, b.folder))
  return passagesOf(sorted, pinnedPackageFiles(sorted), true)
}

/** The text of the first of `names` the package has. */
function firstFile (f: PackageFiles, names: readonly string[]): string | undefined {
  for (const n of names) {
    const text = f.read(n)
    if (text !== undefined) return text
  }
  return undefined
}

function passagesOf (pinned: readonly PinnedPackage[], files: readonly PackageFiles[], strict: boolean): DocumentRow[] {
  const next = rng(22)
  const rows: DocumentRow[] = []
  pinned.forEach((p, i) => {
    const f = files[i] as PackageFiles
    let pkg: { name?: string, version?: string, license?: unknown, main?: string }
    try { pkg = JSON.parse(f.read('package.json') ?? '') as typeof pkg } catch { pkg = {} }
    if (pkg.name !== p.name || pkg.version !== p.version || pkg.license !== p.licence || !DOCUMENT_LICENCES.has(p.licence)) {
      if (!strict) return
      throw new Error(`training documents: ${f.from} is ${String(pkg.name)}@${String(pkg.version)} ${String(pkg.license)}, npm-documents.txt pins ${p.name}@${p.version} ${p.licence}`)
    }
    const origin = `${p.name}@${p.version} ${p.licence}`
    const readme = firstFile(f, ['README.md', 'readme.md', 'Readme.md'])
    if (readme !== undefined) {
      for (const text of passages(readme, next, 4)) rows.push({ text, label: 0, source: 'npm_readme', group: `npm:${p.name}`, origin })
    }
    const main = firstFile(f, [pkg.main, 'index.js', 'dist/index.js', 'lib/index.js'].filter((n): n is string => typeof n === 'string' && /\.[cm]?js$/.test(n)))
    if (main !== undefined) {
      for (const text of passages(main, next, 2)) rows.push({ text, label: 0, source: 'npm_code', group: `npm:${p.name}`, origin })
    }
  })
  return rows
}

/** The pinned packages; lines starting with # are comments. */
function readManifest (): PinnedPackage[] {
  return readFileSync(MANIFEST_URL, 'utf8').split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#')).map(parsePinned)
}

/** Every clean document: npm passages and generated ones. */
export function documents (): DocumentRow[] {
  return [...npmDocuments(), ...generatedDocuments()]
}

/**
 * The MIT and Apache-2.0 packages installed now that give passages, with the integrity npm installed
 * them by, "name@version licence integrity" a line: npm-documents.txt's contents for a deliberate
 * change of the pinned list (which changes the passages, so weights.bin is then trained again).
 */
export function documentManifest (): string {
  const found: PinnedPackage[] = []
  for (const folder of installedNames()) {
    let pkg: { name?: string, version?: string, license?: unknown }
    try { pkg = JSON.parse(installedPackageFiles(folder).read('package.json') ?? '') as typeof pkg } catch { continue }
    if (typeof pkg.name !== 'string' || typeof pkg.version !== 'string' || typeof pkg.license !== 'string' || !DOCUMENT_LICENCES.has(pkg.license)) continue
    // A package npm did not install from a registry tarball (linked, from git) has no integrity to pin.
    const integrity = installedIntegrity(folder, pkg.version)
    if (integrity === undefined || !integrity.startsWith('sha512-')) continue
    found.push({ name: pkg.name, folder, version: pkg.version, licence: pkg.license, integrity })
  }
  const origins = new Set(passagesOf(found, found.map((p) => installedPackageFiles(p.folder)), false).map((r) => r.origin))
  return MANIFEST_HEADER + found.filter((p) => origins.has(`${p.name}@${p.version} ${p.licence}`)).map(pinnedLine).sort().join('\n') + '\n'
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) process.stdout.write(documentManifest())
