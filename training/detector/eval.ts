// `npm run eval:detector`: quality on dev.jsonl per source and overall; on the own held-out part (the
// over-defense prompts' block rate per topic, recall per attack style); on the probes, the holdout and
// the final check; the share of plain attacks blocked under each cheap evasion (evasions.ts); planted
// instructions of held-out contexts and clean documents never trained on, as requests carry them
// (eval-data.ts); recall with each attack source, each attack category and each context kind left out
// of training (loso.ts, eval-data.ts; EVAL_LOSO=0 skips them); and the latency of detectInjection per
// prompt length, timed inside one worker thread. Prints tables, then one JSON line.
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads'
import type { Segment } from '../../src/detection/types.js'
import { repoFile } from '../../src/paths.js'
import { THRESHOLD, detectInjection, setAnalysisCache } from '../../workers/detector/injection.js'
import { ownRows, readRows, trainingRows, type Row } from './data.js'
import { dataReport, leaveDataOut } from './eval-data.js'
import { EVASIONS, evasionAttacks, evasionBenign } from './evasions.js'
import { leaveOneSourceOut, type LeftOut } from './loso.js'
import { FPR_BUDGET } from './train.js'

const BUCKETS = [100, 1000, 4000, 32000] as const

function segmentOf (text: string, role = 'user'): Segment[] {
  return [{ message: 0, role, path: 'messages[0].content', text }]
}

function pct (x: number): number {
  return Math.round(x * 10000) / 100
}

interface Latency { readonly chars: number, readonly role: string, readonly runs: number, readonly p50: number, readonly p99: number, readonly max: number }

/** Prompts of exactly `chars` characters, built by concatenating dev texts from rotating offsets. */
function prompts (texts: readonly string[], chars: number, count: number): string[] {
  const out: string[] = []
  let k = 0
  for (let i = 0; i < count; i++) {
    let s = ''
    while (s.length < chars) { s += (texts[k % texts.length] as string) + '\n\n'; k++ }
    out.push(s.slice(0, chars))
  }
  return out
}

function timeBuckets (texts: readonly string[]): Latency[] {
  // Every prompt judged from scratch: a repeated text would be answered from the analysis cache.
  setAnalysisCache(false)
  const result: Latency[] = []
  // A user's text, and the same text returned by a tool (read as data: windows and the neural head).
  for (const role of ['user', 'tool']) for (const chars of BUCKETS) {
    const runs = chars >= 32000 ? 400 : 2000
    const set = prompts(texts, chars, runs)
    for (let i = 0; i < Math.min(200, runs); i++) detectInjection(segmentOf(set[i] as string, role)) // warm up the JIT
    const ms = new Float64Array(runs)
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now()
      detectInjection(segmentOf(set[i] as string, role))
      ms[i] = performance.now() - t0
    }
    ms.sort()
    const at = (q: number): number => Math.round((ms[Math.min(runs - 1, Math.floor(q * runs))] as number) * 1000) / 1000
    result.push({ chars, role, runs, p50: at(0.5), p99: at(0.99), max: at(1) })
  }
  return result
}

function runTimingWorker (texts: readonly string[]): Promise<Latency[]> {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL(import.meta.url), { workerData: { texts } })
    w.once('message', (m: Latency[]) => { resolve(m); void w.terminate() })
    w.once('error', reject)
  })
}

const blocked = (r: Row): boolean => detectInjection(segmentOf(r.text, r.role)).blocked

interface Rate { readonly n: number, readonly blocked: number }

/** Block counts by key, printed as one table: TPR for attack keys, FPR (block rate) for benign ones. */
function table (title: string, rows: readonly Row[], key: (r: Row) => string): Record<string, Rate> {
  const by = new Map<string, { label: 0 | 1, n: number, blocked: number }>()
  for (const r of rows) {
    const k = key(r)
    const s = by.get(k) ?? { label: r.label, n: 0, blocked: 0 }
    s.n++
    if (blocked(r)) s.blocked++
    by.set(k, s)
  }
  console.log(title)
  for (const [k, s] of [...by].sort((a, b) => b[1].label - a[1].label || a[0].localeCompare(b[0]))) {
    console.log(`  ${k.padEnd(40)} ${String(s.n).padStart(5)} ${String(s.blocked).padStart(6)}  ${pct(s.blocked / s.n).toFixed(2)}% ${s.label === 1 ? 'TPR' : 'blocked'}`)
  }
  return Object.fromEntries([...by].map(([k, s]) => [k, { n: s.n, blocked: s.blocked }]))
}

function devQuality (): { tpr: number, fpr: number, f1: number, tprAt1: number, perSource: Record<string, number> } {
  const rows = readRows('dev.jsonl')
  const scores = rows.map((r) => detectInjection(segmentOf(r.text)).score)
  let tp = 0, fp = 0, fn = 0, tn = 0
  rows.forEach((r, i) => {
    const b = (scores[i] as number) >= THRESHOLD
    if (r.label === 1) { if (b) tp++; else fn++ } else if (b) fp++; else tn++
  })
  const bySource = table(`threshold ${THRESHOLD.toFixed(4)} on dev (${rows.length} rows): source, n, blocked`, rows, (r) => `${r.source}${r.label === 1 ? ' (attack)' : ''}`)
  const precision = tp / Math.max(1, tp + fp)
  const recall = tp / Math.max(1, tp + fn)
  const f1 = (2 * precision * recall) / Math.max(1e-12, precision + recall)
  // TPR at 1% FPR: the cut that lets exactly floor(1% of benign) benign prompts through to "blocked".
  const benign = rows.flatMap((r, i) => (r.label === 0 ? [scores[i] as number] : [])).sort((a, b) => b - a)
  const attacks = rows.flatMap((r, i) => (r.label === 1 ? [scores[i] as number] : []))
  const cut = (benign[Math.floor(FPR_BUDGET * benign.length)] ?? 0) + 1e-9
  const tprAt1 = attacks.filter((s) => s >= cut).length / attacks.length
  console.log(`  overall TPR ${pct(recall)}%  FPR ${pct(fp / Math.max(1, fp + tn))}%  precision ${pct(precision)}%  F1 ${f1.toFixed(4)}  TPR@1%FPR ${pct(tprAt1)}%`)
  const perSource = Object.fromEntries(Object.entries(bySource).map(([k, s]) => [k, pct(s.blocked / s.n)]))
  return { tpr: pct(recall), fpr: pct(fp / Math.max(1, fp + tn)), f1: Number(f1.toFixed(4)), tprAt1: pct(tprAt1), perSource }
}

/**
 * The own held-out part, never trained on: over-defense prompts by topic (hand-written ones as one
 * topic) and attacks by style. Every blocked benign prompt is listed.
 */
function heldOut (): { benignBlocked: number, benign: number, topics: Record<string, Rate>, attacks: Record<string, Rate> } {
  const rows = ownRows('heldout')
  const benign = rows.filter((r) => r.label === 0)
  const topics = table('own held-out part, benign prompts with trigger words: topic, n, blocked', benign, (r) => `${r.topic ?? 'hand-written'} (${r.role ?? 'user'})`)
  let n = 0
  for (const r of benign) if (blocked(r)) { n++; console.log(`    blocked: ${JSON.stringify(r.text.slice(0, 100))}`) }
  console.log(`  over-defense held-out: ${n}/${benign.length} blocked (${pct(n / benign.length)}%)`)
  const attacks = table('own held-out part, attacks: style, n, blocked', rows.filter((r) => r.label === 1), (r) => `${r.source}${r.template === undefined ? ' hand-written' : ' generated'}`)
  return { benignBlocked: n, benign: benign.length, topics, attacks }
}

interface HandSet { readonly benignBlocked: number, readonly benign: number, readonly attacksBlocked: number, readonly attacks: number }

/** Judges a hand-written set, prints its counts and every misjudged prompt. */
function handSet (file: string): HandSet {
  const items = readFileSync(repoFile(`training/detector/${file}`), 'utf8').split('\n').filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { text: string, label: number, role: string })
  const judged = items.map((p) => detectInjection([{ message: 0, role: p.role, path: file, text: p.text }]).blocked)
  const fp = items.filter((p, i) => p.label === 0 && judged[i] === true)
  const fn = items.filter((p, i) => p.label === 1 && judged[i] !== true)
  const attacks = items.filter((p) => p.label === 1).length
  console.log(`${file.replace('.jsonl', '')}: benign blocked ${fp.length}/${items.length - attacks}, attacks blocked ${attacks - fn.length}/${attacks}`)
  for (const p of fp) console.log(`  blocked benign: ${JSON.stringify(p.text.slice(0, 90))}`)
  for (const p of fn) console.log(`  missed attack:  ${JSON.stringify(p.text.slice(0, 90))}`)
  return { benignBlocked: fp.length, benign: items.length - attacks, attacksBlocked: attacks - fn.length, attacks }
}

/** Evasions (evasions.ts): per transformation, the share of the plain attacks still blocked; and the benign look-alikes blocked. */
function evasionReport (): { blocked: Record<string, number>, benignBlocked: number, benign: number } {
  const attacks = evasionAttacks()
  const judged = (text: string): boolean => detectInjection(segmentOf(text)).blocked
  console.log(`evasions of ${attacks.length} plain attacks (${attacks.filter(judged).length} blocked as written): transformation, blocked`)
  const blocked: Record<string, number> = {}
  for (const [name, transform] of Object.entries(EVASIONS)) {
    blocked[name] = pct(attacks.filter((a) => judged(transform(a))).length / attacks.length)
    console.log(`  ${name.padEnd(40)} ${String(blocked[name]?.toFixed(2)).padStart(6)}%`)
  }
  const benign = evasionBenign()
  const fp = benign.filter(judged)
  console.log(`  benign look-alikes blocked: ${fp.length}/${benign.length}`)
  for (const text of fp) console.log(`    blocked: ${JSON.stringify(text.slice(0, 90))}`)
  return { blocked, benignBlocked: fp.length, benign: benign.length }
}

function losoReport (): { dataSetMean: number, ownMean: number, bySource: Record<string, number> } | null {
  if (process.env.EVAL_LOSO === '0') return null
  console.log('leave one attack source out (retrained without it, threshold chosen on dev): source, n, caught')
  const t0 = performance.now()
  const rows = leaveOneSourceOut(trainingRows(), (r: LeftOut) => {
    console.log(`  ${`${r.source}${r.own ? ' (own)' : ''}`.padEnd(40)} ${String(r.n).padStart(5)} ${String(r.caught).padStart(6)}  ${pct(r.caught / r.n).toFixed(2)}%  (threshold ${r.threshold.toFixed(3)})`)
  })
  const mean = (xs: readonly LeftOut[]): number => pct(xs.reduce((a, r) => a + r.caught / r.n, 0) / Math.max(1, xs.length))
  const dataSet = rows.filter((r) => !r.own)
  const own = rows.filter((r) => r.own)
  console.log(`  mean recall: data-set sources ${mean(dataSet)}% (${dataSet.length}), own sources ${mean(own)}% (${own.length}), all ${mean(rows)}%  [${Math.round((performance.now() - t0) / 1000)} s]`)
  return { dataSetMean: mean(dataSet), ownMean: mean(own), bySource: Object.fromEntries(rows.map((r) => [r.source, pct(r.caught / r.n)])) }
}

async function main (): Promise<void> {
  const dev = devQuality()
  const held = heldOut()
  // Hand-written sets never trained on: probes.jsonl (a smoke test) and holdout.jsonl (written before
  // the November 2026 changes). Too few for a rate.
  const probes = handSet('probes.jsonl')
  const holdout = handSet('holdout.jsonl')
  // final-check.jsonl: benign prompts with trigger words and attacks in the own styles, written after
  // the held-out part and kept out of every run until the settings were final. Never trained on.
  const finalCheck = handSet('final-check.jsonl')
  // errands-check.jsonl: a user asking an assistant to send, forward or share things, or to show its
  // earlier answers again (30 benign prompts, written before anything was measured on them), and 8
  // exfiltration attacks worded as such errands. Never trained on (EXPERIMENTS.md, "Errands").
  const errands = handSet('errands-check.jsonl')
  const evasions = evasionReport()
  const data = dataReport()
  const loso = losoReport()
  const dataLeftOut = process.env.EVAL_LOSO === '0' ? null : leaveDataOut()
  const latency = await runTimingWorker(readRows('dev.jsonl').map((r) => r.text))
  console.log('latency on one worker thread (ms per prompt)')
  for (const l of latency) console.log(`  ${l.role.padEnd(5)} ${String(l.chars).padStart(6)} chars  p50 ${l.p50}  p99 ${l.p99}  max ${l.max}  (${l.runs} runs)`)
  console.log(JSON.stringify({
    threshold: Number(THRESHOLD.toFixed(6)),
    tpr: dev.tpr,
    fpr: dev.fpr,
    f1: dev.f1,
    tprAt1pctFpr: dev.tprAt1,
    perSource: dev.perSource,
    overdefenseHeldout: { blocked: held.benignBlocked, n: held.benign, pct: pct(held.benignBlocked / held.benign) },
    heldoutAttacks: held.attacks,
    probes,
    holdout,
    finalCheck,
    errands,
    evasions,
    data,
    loso,
    dataLeftOut: dataLeftOut === null ? null : { categoryMean: Number(dataLeftOut.categoryMean.toFixed(2)), sourceMean: Number(dataLeftOut.sourceMean.toFixed(2)), sources: dataLeftOut.sources },
    latencyMs: Object.fromEntries(latency.map((l) => [`${l.role} ${l.chars}`, { p50: l.p50, p99: l.p99 }])),
  }))
}

if (isMainThread) {
  await main()
} else {
  const { texts } = workerData as { texts: string[] }
  parentPort?.postMessage(timeBuckets(texts))
}
