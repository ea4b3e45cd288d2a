// At start, the hand-off files a killed process's proxy threads left in the spool folder (store/handoff.ts):
// their records are the calls those threads had answered, or were about to, and not yet handed over.
// Each goes through the trace writer like a batch just posted (into a write-ahead segment, then
// ClickHouse), except records the store worker had taken before the kill: those in a segment the process
// left are replayed from the segment, and those ClickHouse already has are not stored again (a file holds
// a second of batches, the first of which may be inserted by the time the last is handed over). A frame
// cut short is counted as dropped (its calls' responses had not ended); the file then goes.
import { readdirSync, renameSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import type { ClickHouseClient } from '@clickhouse/client'
import { HANDOFF_FILE, readHandoff } from '../handoff.js'
import { decodeTraces, type EncodedTraces } from '../trace-codec.js'
import type { Spool } from './spool.js'
import type { TraceWriter, Warn } from './trace-writer.js'

export async function replayHandoffs (dir: string, spool: Spool, traces: TraceWriter, client: ClickHouseClient, warn: Warn): Promise<void> {
  let names: string[]
  try {
    names = readdirSync(dir).filter((f) => HANDOFF_FILE.test(f)).sort()
  } catch {
    return
  }
  if (names.length === 0) return
  const files: Array<{ path: string; name: string; batches: EncodedTraces[]; cut: number }> = []
  for (const name of names) {
    const path = join(dir, name)
    try {
      files.push({ path, name, ...readHandoff(path) })
    } catch (err) {
      warn('a hand-off file left by an earlier run cannot be read; kept as .bad', { file: name, err: (err as Error).message })
      try { renameSync(path, path + '.bad') } catch { /* listed again at the next start */ }
    }
  }
  const skip = spool.segmentTraceIds()
  const all = files.flatMap((f) => f.batches.flatMap((b) => decodeTraces(b).map((r) => r.traceId)))
  for (const id of all) spool.recovered(id)
  const ids = all.filter((id) => !skip.has(id))
  for (const id of await storedIds(client, ids, warn)) skip.add(id)
  for (const f of files) {
    for (const batch of f.batches) traces.add(batch, skip)
    if (f.cut !== 0) traces.dropped(Math.max(1, f.cut), `the last frame of ${f.name} was not written whole`)
    // Its records are in a segment of this run now.
    rmSync(f.path, { force: true })
  }
}

/** Which of these traces ClickHouse has; none when it cannot say (logged: they may then be stored twice). */
async function storedIds (client: ClickHouseClient, ids: readonly string[], warn: Warn): Promise<string[]> {
  if (ids.length === 0) return []
  try {
    const rs = await client.query({
      query: 'SELECT toString(trace_id) AS id FROM traces WHERE trace_id IN {ids:Array(UUID)}',
      query_params: { ids },
      format: 'JSONEachRow',
    })
    return (await rs.json<{ id: string }>()).map((r) => r.id)
  } catch (err) {
    warn('could not ask ClickHouse which hand-off records it has; they are replayed all the same', { err: (err as Error).message })
    return []
  }
}
