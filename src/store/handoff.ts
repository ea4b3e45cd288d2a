// Hand-off files: a proxy thread's write-ahead of the trace records it has not yet handed to the store
// worker. The thread appends each event-loop turn's finished records (trace-codec.ts's encoding) as one
// frame, before those calls' responses end; the store worker removes the file once the batch posted with
// its name is in its own write-ahead segment, and replays a file a killed process left behind at start.
// A frame is its byte length (u32 LE), its record count (u32 LE), then the records. The file lives in
// the spool folder; its name holds a per-sink id so threads and runs never share one.
import { closeSync, openSync, readFileSync, writeSync, writevSync } from 'node:fs'
import { join } from 'node:path'
import type { EncodedTraces } from './trace-codec.js'

export const HANDOFF_FILE = /^front-[0-9a-f-]{36}-\d{10}\.wal$/
const FRAME_HEAD = 8

export function handoffName (sinkId: string, seq: number): string {
  return `front-${sinkId}-${String(seq).padStart(10, '0')}.wal`
}

/** One open hand-off file. Writes are plain writes (no fsync): they survive the process, not the machine. */
export class HandoffFile {
  readonly #fd: number
  readonly #head = Buffer.alloc(FRAME_HEAD)

  constructor (readonly dir: string, readonly name: string) {
    this.#fd = openSync(join(dir, name), 'wx', 0o600)
  }

  /** One frame of `count` records: one writev(2), which a regular file takes whole (the rest is retried). */
  append (records: Uint8Array, count: number): void {
    this.#head.writeUInt32LE(records.length, 0)
    this.#head.writeUInt32LE(count, 4)
    const total = FRAME_HEAD + records.length
    let at = writevSync(this.#fd, [this.#head, records])
    if (at === total) return
    const frame = Buffer.concat([this.#head, records], total)
    while (at < total) at += writeSync(this.#fd, frame, at, total - at)
  }

  close (): void {
    closeSync(this.#fd)
  }
}

/**
 * A hand-off file's frames as trace batches, and how many records were cut off by a frame the process did
 * not finish writing (their responses never ended: the write comes first); -1 when even the cut frame's
 * head is incomplete, so its count is unknown.
 */
export function readHandoff (path: string): { batches: EncodedTraces[]; cut: number } {
  const bytes = readFileSync(path)
  const batches: EncodedTraces[] = []
  let at = 0
  while (at < bytes.length) {
    if (at + FRAME_HEAD > bytes.length) return { batches, cut: -1 }
    const length = bytes.readUInt32LE(at)
    const count = bytes.readUInt32LE(at + 4)
    if (at + FRAME_HEAD + length > bytes.length) return { batches, cut: count }
    const buffer = new ArrayBuffer(length)
    new Uint8Array(buffer).set(bytes.subarray(at + FRAME_HEAD, at + FRAME_HEAD + length))
    batches.push({ buffer, length, count })
    at += FRAME_HEAD + length
  }
  return { batches, cut: 0 }
}
