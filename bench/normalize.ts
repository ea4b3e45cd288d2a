// Micro-benchmark of the detector's normalisation (workers/detector/normalize.ts) on this thread: µs per
// call, p50 and p99 of wall time and the mean CPU time, for prompts of BENCH_NORM_CHARS characters
// (default 4000) built from dev.jsonl texts as training/detector/eval.ts builds them, and for the dev
// texts one by one (most take the fast path). With BENCH_NORM_BASELINE (the path of another build's
// normalize.js) both builds run in alternating rounds on the same prompts, so their ratio holds on a
// loaded machine. BENCH_NORM_ROUNDS (default 5), BENCH_NORM_N (prompts per round, default 500).
// Prints one JSON line.
import { performance } from 'node:perf_hooks'
import { pathToFileURL } from 'node:url'
import { readRows } from '../training/detector/data.js'
import { normalize } from '../workers/detector/normalize.js'
import { quantile, round2 } from './processes.js'

type Normalize = (text: string) => unknown

const chars = Number(process.env.BENCH_NORM_CHARS ?? 4000)
const rounds = Number(process.env.BENCH_NORM_ROUNDS ?? 5)
const count = Number(process.env.BENCH_NORM_N ?? 500)
const baselinePath = process.env.BENCH_NORM_BASELINE

const dev = readRows('dev.jsonl').map((r) => r.text)
const long: string[] = []
for (let i = 0, k = 0; i < count; i++) {
  let s = ''
  while (s.length < chars) { s += (dev[k % dev.length] as string) + '\n\n'; k++ }
  long.push(s.slice(0, chars))
}

interface Round { readonly p50: number, readonly p99: number, readonly cpu: number }

function timeRound (f: Normalize, texts: readonly string[]): Round {
  const us: number[] = []
  const c0 = process.cpuUsage()
  for (const t of texts) {
    const t0 = performance.now()
    f(t)
    us.push((performance.now() - t0) * 1000)
  }
  const c = process.cpuUsage(c0)
  return { p50: round2(quantile(us, 0.5)), p99: round2(quantile(us, 0.99)), cpu: round2((c.user + c.system) / texts.length) }
}

const builds: Array<[string, Normalize]> = [['current', normalize]]
if (baselinePath !== undefined) {
  const mod = await import(pathToFileURL(baselinePath).href) as { normalize: Normalize }
  builds.unshift(['baseline', mod.normalize])
}
const result: Record<string, unknown> = { chars, rounds, prompts: count }
for (const [name, f] of builds) for (const t of [...long, ...dev]) f(t) // warm up the JIT
const per: Record<string, { long: Round[], dev: Round[] }> = {}
for (let r = 0; r < rounds; r++) {
  for (const [name, f] of builds) {
    const entry = per[name] ??= { long: [], dev: [] }
    entry.long.push(timeRound(f, long))
    entry.dev.push(timeRound(f, dev))
  }
}
const median = (xs: readonly number[]): number => round2(quantile(xs, 0.5))
for (const [name, { long: l, dev: d }] of Object.entries(per)) {
  result[name] = {
    [`p50_us_${chars}`]: median(l.map((x) => x.p50)),
    [`p99_us_${chars}`]: median(l.map((x) => x.p99)),
    [`cpu_us_${chars}`]: median(l.map((x) => x.cpu)),
    cpu_us_dev_text: median(d.map((x) => x.cpu)),
    rounds_cpu_us: l.map((x) => x.cpu),
  }
}
console.log(JSON.stringify(result))
