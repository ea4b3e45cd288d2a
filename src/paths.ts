// Where the repository's files are, whether this code runs compiled (dist/src/paths.js) or from source
// (src/paths.ts under a TypeScript loader, as `npm run test:src` runs it): every file path in the code
// that is not an import goes through here, so both ways find the same files. Also who may read the data
// directory: its user alone (privateDataDir).
import { chmodSync, mkdirSync, statSync } from 'node:fs'

const SELF = import.meta.url

/** True when running the compiled JavaScript in dist/, false when running the TypeScript sources. */
export const COMPILED = SELF.endsWith('.js')

/** The repository root (the folder with package.json), as a file URL ending in '/'. */
export const ROOT = new URL(COMPILED ? '../../' : '../', SELF)

/** A file of the repository, by its path from the root (data files, migrations, static assets, the browser build). */
export function repoFile(path: string): URL {
  return new URL(path, ROOT)
}

/**
 * A module to start as a thread or a process, named by its compiled `.js` path next to `base`: the `.ts`
 * source when running from source, since a worker's entry is a path, not an import the loader rewrites.
 */
export function moduleFile(path: string, base: string): URL {
  const url = new URL(path, base)
  if (COMPILED || !url.pathname.endsWith('.js')) return url
  url.pathname = url.pathname.slice(0, -3) + '.ts'
  return url
}

/**
 * Makes what tracegate writes from here on readable by its own user only: the process's umask becomes
 * 0077 (files 0600, folders 0700, the embedded ClickHouse's included, which no call here can give a mode),
 * and the data directory is made, or narrowed if it exists, to 0700, so files an earlier version left
 * wider are out of other users' reach too. The umask is process-wide and only the main thread may set it.
 */
export function privateDataDir (dataDir: string): void {
  process.umask(0o077)
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  if ((statSync(dataDir).mode & 0o077) !== 0) chmodSync(dataDir, 0o700)
}
