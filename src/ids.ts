// Request ids are UUIDv7 (time-ordered, so traces sort by id). The random bytes come from a pooled
// buffer refilled 256 ids at a time: one CSPRNG call per id is a visible share of the front thread.
import { randomFillSync } from 'node:crypto'
import { v7 } from 'uuid'

const POOL = Buffer.allocUnsafe(16 * 256)
let offset = POOL.length

function random16 (): Uint8Array {
  if (offset === POOL.length) {
    randomFillSync(POOL)
    offset = 0
  }
  const bytes = POOL.subarray(offset, offset + 16)
  offset += 16
  return bytes
}

export function newRequestId (): string {
  return v7({ random: random16() })
}
