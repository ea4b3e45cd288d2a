// Password resets, recorded in the data directory: `tracegate user reset-password` (the CLI, or a running
// server's admin socket) appends the user and the time, and the dashboard's sessions (dashboard/session.ts)
// read them at start, so a user's sessions issued before a reset stay refused after a restart. A narrow
// module, so the admin tools record a reset without loading the dashboard.
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

function resetsFile (dataDir: string): string {
  return join(dataDir, 'dashboard-resets')
}

/**
 * Ends every session of a user issued until `at`, for the next server that starts on `dataDir` (a
 * running server learns it through Sessions.endUser).
 */
export function recordPasswordReset (dataDir: string, userId: string, at = Date.now()): void {
  appendFileSync(resetsFile(dataDir), `${userId} ${at}\n`, { mode: 0o600 })
}

/**
 * The resets that still matter (a session issued before one, living `keepMs`, has not expired yet), newest
 * per user; the file is rewritten with only those.
 */
export function loadResets (dataDir: string, now: number, keepMs: number): Map<string, number> {
  const file = resetsFile(dataDir)
  const resets = new Map<string, number>()
  let text = ''
  try { text = readFileSync(file, 'utf8') } catch { /* none yet */ }
  for (const line of text.split('\n')) {
    const [user, at] = line.split(' ')
    if (user === undefined || user === '' || !(Number(at) + keepMs > now)) continue
    resets.set(user, Math.max(resets.get(user) ?? 0, Number(at)))
  }
  writeFileSync(file, [...resets].map(([u, at]) => `${u} ${at}\n`).join(''), { mode: 0o600 })
  return resets
}
