// Where the repository's files are, whether this code runs compiled (dist/src/paths.js) or from source
// (src/paths.ts under a TypeScript loader, as `npm run test:src` runs it): every file path in the code
// that is not an import goes through here, so both ways find the same files.
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
