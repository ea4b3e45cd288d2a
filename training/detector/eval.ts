// `npm run eval:detector`: quality on dev.jsonl per source and overall, and the latency of
// detectInjection per prompt length, timed inside one worker thread. Prints a table, then one JSON line.
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads'
import type { Segment } from '../../src/detection/types.js'
import { repoFile } from '../../src/paths.js'
import { THRESHOLD, detectInjection, setAnalysisCache } from '../../workers/detector/injection.js'
import { FPR_BUDGET, readRows, type Row } from './train.js'

const BUCKETS = [100, 1000, 4000, 32000] as const

function segmentOf(text: string): Segment[] {
  return [{ message: 0, role: 'user', path: 'messages[0].content', text }]
}

function pct(x: number): number {
  return Math.round(x * 10000) / 100
}

interface Latency { readonly chars: number, readonly runs: number, readonly p50: number, readonly p99: number, readonly max: number }

/** Prompts of exactly `chars` characters, built by concatenating dev texts from rotating offsets. */
function prompts(texts: readonly string[], chars: number, count: number): string[] {
  const out: string[] = []
  let k = 0
  for (let i = 0; i < count; i++) {
    let s = ''
    while (s.length < chars) { s += (texts[k % texts.length] as string) + '\n\n'; k++ }
    out.push(s.slice(0, chars))
  }
  return out
}

function timeBuckets(texts: readonly string[]): Latency[] {
  // Every prompt judged from scratch: a repeated text would be answered from the analysis cache.
  setAnalysisCache(false)
  const result: Latency[] = []
  for (const chars of BUCKETS) {
    const runs = chars >= 32000 ? 400 : 2000
    const set = prompts(texts, chars, runs)
    for (let i = 0; i < Math.min(200, runs); i++) detectInjection(segmentOf(set[i] as string)) // warm up the JIT
    const ms = new Float64Array(runs)
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now()
      detectInjection(segmentOf(set[i] as string))
      ms[i] = performance.now() - t0
    }
    ms.sort()
    const at = (q: number): number => Math.round((ms[Math.min(runs - 1, Math.floor(q * runs))] as number) * 1000) / 1000
    result.push({ chars, runs, p50: at(0.5), p99: at(0.99), max: at(1) })
  }
  return result
}

function runTimingWorker(texts: readonly string[]): Promise<Latency[]> {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL(import.meta.url), { workerData: { texts } })
    w.once('message', (m: Latency[]) => { resolve(m); void w.terminate() })
    w.once('error', reject)
  })
}

async function main(): Promise<void> {
  const rows = readRows('dev.jsonl')
  const scores = rows.map((r) => detectInjection(segmentOf(r.text)).score)
  const bySource = new Map<string, { label: 0 | 1, n: number, blocked: number }>()
  let tp = 0, fp = 0, fn = 0, tn = 0
  rows.forEach((r: Row, i) => {
    const blocked = (scores[i] as number) >= THRESHOLD
    const key = `${r.source}${r.label === 1 ? ' (attack)' : ''}`
    const s = bySource.get(key) ?? { label: r.label, n: 0, blocked: 0 }
    s.n++
    if (blocked) s.blocked++
    bySource.set(key, s)
    if (r.label === 1) { if (blocked) tp++; else fn++ } else if (blocked) fp++; else tn++
  })
  const precision = tp / Math.max(1, tp + fp)
  const recall = tp / Math.max(1, tp + fn)
  const f1 = (2 * precision * recall) / Math.max(1e-12, precision + recall)
  // TPR at 1% FPR: the threshold that lets exactly floor(1% of benign) benign prompts through to "blocked".
  const benign = rows.flatMap((r, i) => (r.label === 0 ? [scores[i] as number] : [])).sort((a, b) => b - a)
  const attacks = rows.flatMap((r, i) => (r.label === 1 ? [scores[i] as number] : []))
  const cut = (benign[Math.floor(FPR_BUDGET * benign.length)] ?? 0) + 1e-9
  const tprAt1 = attacks.filter((s) => s >= cut).length / attacks.length

  console.log(`threshold ${THRESHOLD.toFixed(4)} on dev (${rows.length} rows)`)
  console.log('source                              n   blocked  rate (TPR for attacks, FPR for benign)')
  for (const [src, s] of [...bySource].sort((a, b) => b[1].label - a[1].label || a[0].localeCompare(b[0]))) {
    console.log(`${src.padEnd(34)} ${String(s.n).padStart(4)} ${String(s.blocked).padStart(8)}  ${pct(s.blocked / s.n).toFixed(2)}% ${s.label === 1 ? 'TPR' : 'FPR'}`)
  }
  console.log(`overall TPR ${pct(recall)}%  FPR ${pct(fp / Math.max(1, fp + tn))}%  precision ${pct(precision)}%  F1 ${f1.toFixed(4)}  TPR@1%FPR ${pct(tprAt1)}%`)

  // Hand-written sets, never trained on: probes.jsonl (a smoke test of hard benign prompts with trigger
  // words, system prompts, and attacks phrased unlike the data set) and holdout.jsonl (written later, in
  // other styles, and never used to choose anything). Too few for a rate.
  const probes = handSet('probes.jsonl')
  const holdout = handSet('holdout.jsonl')

  const texts = rows.map((r) => r.text)
  const latency = await runTimingWorker(texts)
  console.log('latency on one worker thread (ms per prompt)')
  for (const l of latency) console.log(`  ${String(l.chars).padStart(6)} chars  p50 ${l.p50}  p99 ${l.p99}  max ${l.max}  (${l.runs} runs)`)

  const perSource = Object.fromEntries([...bySource].map(([k, s]) => [k, pct(s.blocked / s.n)]))
  console.log(JSON.stringify({
    threshold: Number(THRESHOLD.toFixed(6)),
    tpr: pct(recall),
    fpr: pct(fp / Math.max(1, fp + tn)),
    f1: Number(f1.toFixed(4)),
    tprAt1pctFpr: pct(tprAt1),
    perSource,
    probes,
    holdout,
    latencyMs: Object.fromEntries(latency.map((l) => [l.chars, { p50: l.p50, p99: l.p99 }])),
  }))
}

interface HandSet { readonly benignBlocked: number, readonly benign: number, readonly attacksBlocked: number, readonly attacks: number }

/** Judges a hand-written set, prints its counts and every misjudged prompt. */
function handSet(file: string): HandSet {
  const items = readFileSync(repoFile(`training/detector/${file}`), 'utf8').split('\n').filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { text: string, label: number, role: string })
  const blocked = items.map((p) => detectInjection([{ message: 0, role: p.role, path: file, text: p.text }]).blocked)
  const fp = items.filter((p, i) => p.label === 0 && blocked[i] === true)
  const fn = items.filter((p, i) => p.label === 1 && blocked[i] !== true)
  const attacks = items.filter((p) => p.label === 1).length
  const name = file.replace('.jsonl', '')
  console.log(`${name}: benign blocked ${fp.length}/${items.length - attacks}, attacks blocked ${attacks - fn.length}/${attacks}`)
  for (const p of fp) console.log(`  blocked benign: ${JSON.stringify(p.text.slice(0, 90))}`)
  for (const p of fn) console.log(`  missed attack:  ${JSON.stringify(p.text.slice(0, 90))}`)
  return { benignBlocked: fp.length, benign: items.length - attacks, attacksBlocked: attacks - fn.length, attacks }
}

if (isMainThread) {
  await main()
} else {
  const { texts } = workerData as { texts: string[] }
  parentPort?.postMessage(timeBuckets(texts))
}
