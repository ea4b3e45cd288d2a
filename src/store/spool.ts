// The disk spool: trace batches ClickHouse did not take, one file per batch named so that a directory
// listing is their order, each carrying the batch's deduplication token in its name so a replay that
// ClickHouse already took once is a no-op. Written to a temporary name and renamed, so a crash never
// leaves half a batch behind. Bounded in bytes. A file is the batch's summaries (for the live list, as
// one JSON line) followed by the batch itself, as the TabSeparated bytes that are inserted.
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import type { TraceSummary } from './trace-types.js'

export interface SpooledBatch {
  readonly file: string
  readonly token: string
  readonly summaries: TraceSummary[]
  readonly tsv: Buffer
}

const NAME = /^(\d{16})-([0-9a-f-]{36})\.tsv$/

export class Spool {
  readonly #dir: string
  readonly #maxBytes: number
  #bytes = 0
  #seq = 0
  #files: string[] = []

  constructor (dir: string, maxBytes: number) {
    this.#dir = dir
    this.#maxBytes = maxBytes
    mkdirSync(dir, { recursive: true })
    for (const f of readdirSync(dir)) {
      if (f.endsWith('.tmp')) { rmSync(join(dir, f), { force: true }); continue }
      const m = NAME.exec(f)
      if (m === null) continue
      this.#files.push(f)
      this.#bytes += statSync(join(dir, f)).size
      this.#seq = Math.max(this.#seq, Number(m[1]))
    }
    this.#files.sort()
  }

  get bytes (): number { return this.#bytes }
  get batches (): number { return this.#files.length }

  /** False when the batch does not fit under the byte limit. */
  append (token: string, summaries: readonly TraceSummary[], parts: readonly Uint8Array[]): boolean {
    const head = Buffer.from(JSON.stringify(summaries) + '\n')
    const size = parts.reduce((n, p) => n + p.length, head.length)
    if (this.#bytes + size > this.#maxBytes) return false
    const name = `${String(++this.#seq).padStart(16, '0')}-${token}.tsv`
    const tmp = join(this.#dir, name + '.tmp')
    writeFileSync(tmp, Buffer.concat([head, ...parts], size))
    renameSync(tmp, join(this.#dir, name))
    this.#files.push(name)
    this.#bytes += size
    return true
  }

  /** The oldest batch, or null when the spool is empty. */
  oldest (): SpooledBatch | null {
    const f = this.#files[0]
    if (f === undefined) return null
    const bytes = readFileSync(join(this.#dir, f))
    const nl = bytes.indexOf(0x0a)
    const summaries = JSON.parse(bytes.toString('utf8', 0, nl)) as TraceSummary[]
    return { file: f, token: NAME.exec(f)![2]!, summaries, tsv: bytes.subarray(nl + 1) }
  }

  remove (file: string): void {
    const path = join(this.#dir, file)
    let size = 0
    try { size = statSync(path).size } catch { /* already gone */ }
    rmSync(path, { force: true })
    this.#files = this.#files.filter((f) => f !== file)
    this.#bytes = Math.max(0, this.#bytes - size)
  }
}
