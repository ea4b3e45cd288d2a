// The turn's write-ahead: a call answered by the provider ends its response only once its trace record is
// in its thread's hand-off file (store/handoff.ts), so a process killed at any moment has every call whose
// client saw the end of its answer on disk. Calls that finish in one event-loop turn are written together,
// one write for all of them, in a setImmediate after the turn's I/O callbacks, and their responses end
// right after it. A thread where no sink writes ahead (traces off) ends responses at once, as before.

/** Each sink's write of the records it has not written ahead yet. */
const writers = new Set<() => void>()
let held: Array<() => void> = []
let scheduled = false

/** A sink's write-ahead, run once per turn in which calls finished; returns its removal. */
export function writeAheadEachTurn (write: () => void): () => void {
  writers.add(write)
  return () => { writers.delete(write) }
}

/**
 * Runs `end` (which ends a response) once this turn's records are written ahead. False when nothing in
 * this thread writes ahead: the caller ends the response itself, now.
 */
export function afterWriteAhead (end: () => void): boolean {
  if (writers.size === 0) return false
  held.push(end)
  if (!scheduled) {
    scheduled = true
    setImmediate(runTurn)
  }
  return true
}

function runTurn (): void {
  scheduled = false
  // A sink whose write fails logs it and lets its calls end all the same (their records stay in memory).
  for (const write of writers) guarded(write)
  const ends = held
  held = []
  for (const end of ends) guarded(end)
}

/** One sink's or response's fault must not leave the others unended; it is still thrown, as it would have been. */
function guarded (fn: () => void): void {
  try {
    fn()
  } catch (err) {
    process.nextTick(() => { throw err })
  }
}
