// The disk spool: trace batches ClickHouse did not take, one file per batch named so that a directory
// listing is their order, each carrying the batch's deduplication token in its name so a replay that
// ClickHouse already took once is a no-op. Written to a temporary name and renamed, so a crash never
// leaves half a batch behind. Bounded in bytes.
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface SpooledBatch {
  readonly file: string
  readonly token: string
  readonly rows: unknown[]
}

const NAME = /^(\d{16})-([0-9a-f-]{36})\.ndjson$/

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
  append (token: string, rows: readonly unknown[]): boolean {
    const text = rows.map((r) => JSON.stringify(r)).join('\n') + '\n'
    const size = Buffer.byteLength(text)
    if (this.#bytes + size > this.#maxBytes) return false
    const name = `${String(++this.#seq).padStart(16, '0')}-${token}.ndjson`
    const tmp = join(this.#dir, name + '.tmp')
    writeFileSync(tmp, text)
    renameSync(tmp, join(this.#dir, name))
    this.#files.push(name)
    this.#bytes += size
    return true
  }

  /** The oldest batch, or null when the spool is empty. */
  oldest (): SpooledBatch | null {
    const f = this.#files[0]
    if (f === undefined) return null
    const text = readFileSync(join(this.#dir, f), 'utf8')
    const rows = text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as unknown)
    return { file: f, token: NAME.exec(f)![2]!, rows }
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
