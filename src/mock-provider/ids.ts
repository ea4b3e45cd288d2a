// Random ids in the providers' styles (chatcmpl-…, msg_…, req_…). Taken from a pooled random buffer so
// a request costs no crypto call; ids only need to look real and not collide, not to be secrets.
import { randomFillSync } from 'node:crypto'

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
const HEX = '0123456789abcdef'
const pool = Buffer.allocUnsafe(4096)
let pos = pool.length

function take (length: number): number {
  if (pos + length > pool.length) {
    randomFillSync(pool)
    pos = 0
  }
  const start = pos
  pos += length
  return start
}

/** `length` characters of [A-Za-z0-9]; the modulo bias does not matter for ids like these. */
export function randomId (length: number): string {
  const start = take(length)
  let id = ''
  for (let i = start; i < start + length; i++) id += BASE62.charAt((pool[i] ?? 0) % 62)
  return id
}

export function randomHex (length: number): string {
  const start = take(length)
  let id = ''
  for (let i = start; i < start + length; i++) id += HEX.charAt((pool[i] ?? 0) & 15)
  return id
}
