// Reading the Prometheus text format in tests: every sample by its name and labels.
export interface Sample {
  readonly name: string
  readonly labels: Record<string, string>
  readonly value: number
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g

export function parseMetrics (text: string): Sample[] {
  const out: Sample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const m = LINE.exec(line)
    if (m === null) throw new Error(`not a sample line: ${line}`)
    const labels: Record<string, string> = {}
    for (const l of (m[2] ?? '').matchAll(LABEL)) labels[l[1]!] = l[2]!
    out.push({ name: m[1]!, labels, value: Number(m[3]) })
  }
  return out
}

/** The samples of `name` whose labels include `match`. */
export function samples (all: readonly Sample[], name: string, match: Record<string, string> = {}): Sample[] {
  return all.filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
}

/** The one sample of `name` with exactly the labels `match` has (plus none others), or undefined. */
export function value (all: readonly Sample[], name: string, match: Record<string, string> = {}): number | undefined {
  const keys = Object.keys(match).length
  return all.find((s) => s.name === name && Object.keys(s.labels).length === keys && Object.entries(match).every(([k, v]) => s.labels[k] === v))?.value
}

/** Requests each of `threads` front threads served (`tracegate_thread_requests_total`, by its thread label), in order. */
export function servedByThread (all: readonly Sample[], threads = 2): number[] {
  const by = new Map(samples(all, 'tracegate_thread_requests_total').map((x) => [x.labels.thread, x.value]))
  return Array.from({ length: threads }, (_, i) => by.get(String(i)) ?? 0)
}
