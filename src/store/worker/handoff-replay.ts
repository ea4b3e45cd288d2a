// At start, the hand-off files a killed process's proxy threads left in the spool folder (store/handoff.ts):
// their records are the calls those threads had answered, or were about to, and not yet handed over.
// Each goes through the trace writer like a batch just posted (into a write-ahead segment, then
// ClickHouse), except records also found in a segment the same process left (it died between writing
// that segment and removing the file): those are replayed from the segment, once. A frame cut short is
// counted as dropped (its calls' responses had not ended); the file then goes.
import { readdirSync, renameSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { HANDOFF_FILE, readHandoff } from '../handoff.js'
import type { Spool } from './spool.js'
import type { TraceWriter, Warn } from './trace-writer.js'

export function replayHandoffs (dir: string, spool: Spool, traces: TraceWriter, warn: Warn): void {
  let names: string[]
  try {
    names = readdirSync(dir).filter((f) => HANDOFF_FILE.test(f)).sort()
  } catch {
    return
  }
  if (names.length === 0) return
  const inSegments = spool.segmentTraceIds()
  for (const name of names) {
    const path = join(dir, name)
    let read: ReturnType<typeof readHandoff>
    try {
      read = readHandoff(path)
    } catch (err) {
      warn('a hand-off file left by an earlier run cannot be read; kept as .bad', { file: name, err: (err as Error).message })
      try { renameSync(path, path + '.bad') } catch { /* listed again at the next start */ }
      continue
    }
    for (const batch of read.batches) traces.add(batch, inSegments)
    if (read.cut !== 0) traces.dropped(Math.max(1, read.cut), `the last frame of ${name} was not written whole`)
    // Its records are in a segment of this run now.
    rmSync(path, { force: true })
  }
}
