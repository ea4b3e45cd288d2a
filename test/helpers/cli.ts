// Child processes of the tests: `tracegate` itself (bin's entry, src/cli) and the fixtures that run as
// processes. From source the entry is a .ts file, which node runs only with the TypeScript loader tap
// started this process with (in execArgv, not NODE_OPTIONS), so the child gets the same flags.
import { fileURLToPath } from 'node:url'
import { COMPILED, moduleFile } from '../../src/paths.js'

export const CLI = fileURLToPath(moduleFile('../../src/cli.js', import.meta.url))

/** The caller's environment without its own tracegate or ClickHouse settings, plus `env`. */
export function childEnv (env: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {}
  for (const [name, value] of Object.entries(process.env)) {
    // Nothing from the caller's own tracegate or ClickHouse set-up may leak into these processes.
    if (!name.startsWith('TRACEGATE_') && !name.startsWith('CLICKHOUSE_')) base[name] = value
  }
  return { ...base, ...env }
}

/** The arguments for `node <file> ...args` (spawn process.execPath with them), with the TypeScript loader when running from source. */
export function nodeArgs (file: string, ...args: string[]): string[] {
  return [...(COMPILED ? [] : process.execArgv), file, ...args]
}

/** The arguments for `tracegate ...args` (spawn process.execPath with them). */
export function cliArgs (...args: string[]): string[] {
  return nodeArgs(CLI, ...args)
}
