// The test runner's reporter (package.json's tap config): reads tap's raw TAP and prints only what a
// reader needs, each failed assertion with the path of subtests above it and its diagnostics (expected,
// actual, source, stack), each failed file, a bail-out, and tap's closing summary comment
// `# { total: N, pass: N, fail: N }` verbatim (.ci/run counts from that line). Passing tests print nothing.
// tap pipes its TAP in and the report out to its own output, so the class is a Transform.
import { Transform, type TransformCallback } from 'node:stream'

/** TAP indents a subtest's lines by four spaces a level. */
const LEVEL = 4

export default class FailuresReporter extends Transform {
  #rest = ''
  /** The subtest names open at each depth: `# Subtest: name` comes at its body's depth. */
  readonly #names: string[] = []
  /** The indent of the `not ok` whose diagnostics are being printed, or null. */
  #diagnostics: number | null = null

  override _transform (chunk: Buffer | string, _encoding: BufferEncoding, done: TransformCallback): void {
    const lines = (this.#rest + String(chunk)).split('\n')
    this.#rest = lines.pop() ?? ''
    for (const line of lines) this.#line(line)
    done()
  }

  override _flush (done: TransformCallback): void {
    if (this.#rest !== '') this.#line(this.#rest)
    this.#rest = ''
    done()
  }

  #out (line: string): void {
    this.push(line + '\n')
  }

  #line (line: string): void {
    const text = line.trimStart()
    const indent = line.length - text.length
    if (this.#diagnostics !== null) {
      // A failure's YAML block: everything indented past its `not ok`, blank lines included, up to `...`.
      if (text === '' || indent > this.#diagnostics) {
        this.#out(line)
        if (text === '...') this.#diagnostics = null
        return
      }
      this.#diagnostics = null
    }
    const depth = Math.floor(indent / LEVEL)
    if (text.startsWith('# Subtest: ')) {
      this.#names.length = depth
      this.#names[depth] = text.slice('# Subtest: '.length)
    } else if (/^not ok \d+/.test(text)) {
      const path = this.#names.slice(0, depth).join(' > ')
      this.#out(`${' '.repeat(indent)}${text}${path === '' ? '' : `  (in ${path})`}`)
      this.#diagnostics = indent
    } else if (depth === 0 && (/^# \{ total: /.test(text) || text.startsWith('Bail out!'))) {
      this.#out(text)
    }
  }
}
