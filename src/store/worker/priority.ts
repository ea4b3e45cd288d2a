// The trace store works below the front thread's priority: a trace insert or a merge may wait a moment,
// the proxy's event loop should not. On Linux nice is per thread, setpriority(2) on a thread id changes
// only that thread, and a new thread inherits its creator's value. The store lowers its own thread and
// the threads that do its storage work: chDB's (merges, inserts, background schedules, named by
// ClickHouse) and libuv's pool, where chDB's raw inserts run (unnamed). Threads named "node" (the
// front thread, V8's helpers, detection workers) keep theirs. Elsewhere this does nothing.
import { readFileSync, readdirSync, readlinkSync } from 'node:fs'
import { getPriority, setPriority } from 'node:os'

/** The nice value the store's threads run at (0 is the front thread's; 19 the lowest). */
export const STORE_NICE = 10

function lower (tid: number, nice: number): void {
  try {
    if (getPriority(tid) < nice) setPriority(tid, nice)
  } catch { /* the thread ended meanwhile */ }
}

/** Lowers the calling thread and every storage thread of the process; returns how many were lowered. */
export function lowerStoreThreads (nice = STORE_NICE): number {
  if (process.platform !== 'linux') return 0
  let lowered = 0
  try {
    // "/proc/thread-self" links to "<pid>/task/<tid>".
    const self = Number(readlinkSync('/proc/thread-self').split('/').pop())
    if (Number.isInteger(self) && self > 0) { lower(self, nice); lowered++ }
    for (const entry of readdirSync('/proc/self/task')) {
      const tid = Number(entry)
      if (tid === process.pid || tid === self) continue
      let name = ''
      try { name = readFileSync(`/proc/self/task/${entry}/comm`, 'utf8').trim() } catch { continue }
      if (name === 'node') continue
      lower(tid, nice)
      lowered++
    }
  } catch { /* no /proc: leave priorities alone */ }
  return lowered
}
