// Whether a burst's traces slow the calls after it (issue 25: tracing never slows the proxy): tracegate on its
// defaults in front of the mock. First its full speed is probed (autocannon, 3 s); then a steady quarter of
// it (an open-loop sender, each call timed) before the burst; the burst at full speed; and the same steady
// rate after it, second by second, with how far the traces are behind (tracegate_trace_lag_seconds) at each
// second. Last, every call answered 200 is accounted for: written, spooled or dropped (counted). Prints one
// JSON line per phase and a summary, then one line for people on standard error. BENCH_BURST (s, default
// 10), BENCH_STEADY (s before, default 8), BENCH_AFTER (s after, default 10), BENCH_CONNECTIONS (burst,
// default 50), TRACEGATE_* passed through; BENCH_URL and BENCH_KEY aim it at a deployment instead
// (processes.ts benchTarget: the lag and the accounting need its BENCH_METRICS_URL, and on a deployment
// that serves other traffic the accounting counts that too).
import autocannon from 'autocannon'
import { Pool, request } from 'undici'
import { benchTarget, fixedRate, quantile, round2, sampleOf, say } from './processes.js'

const burstS = Number(process.env.BENCH_BURST ?? 10)
const steadyS = Number(process.env.BENCH_STEADY ?? 8)
const afterS = Number(process.env.BENCH_AFTER ?? 10)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50)

function line (obj: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ bench: 'burst', ...obj }) + '\n')
}

const target = await benchTarget({}, ['BENCH_BURST', 'BENCH_STEADY', 'BENCH_AFTER'])
const tg = target
const path = '/api/alpha_service/chat_completion'
const body = target.body(false)
const pool = new Pool(tg.url, { connections: 16 })

/** One sample of the target's metrics (its labels as written); null when its /metrics is not known. */
async function metric (name: string, labels = ''): Promise<number | null> {
  const m = target.metrics
  if (m === null) return null
  const r = await request(m.url, m.token === null ? {} : { headers: { authorization: `Bearer ${m.token}` } })
  return sampleOf(await r.body.text(), name + labels) ?? 0
}

async function fullSpeed (seconds: number): Promise<{ rps: number; ok: number; errors: number; p99: number }> {
  const r = await autocannon({ url: tg.url + path, method: 'POST', body, headers: { 'content-type': 'application/json' }, connections, duration: seconds, timeout: 30 })
  return { rps: Math.round(r.requests.average), ok: r['2xx'], errors: r.errors + r.timeouts + r.non2xx, p99: r.latency.p99 }
}

let answered = 0
try {
  await fixedRate(pool, 200, path, body, {}, 2)
  const probe = await fullSpeed(3)
  answered += probe.ok
  const rate = Math.max(50, Math.round(probe.rps / 4))
  line({ phase: 'probe', ...probe, steady_rate: rate })
  const before = await fixedRate(pool, rate, path, body, {}, steadyS)
  answered += before.calls - before.errors
  line({ phase: 'before', rate, ...before })
  const burst = await fullSpeed(burstS)
  answered += burst.ok
  line({ phase: 'burst', seconds: burstS, ...burst, lag_s: { clickhouse: await metric('tracegate_trace_lag_seconds', '{view="clickhouse"}'), dashboard: await metric('tracegate_trace_lag_seconds', '{view="dashboard"}') } })
  const after: number[] = []
  const afterMs: number[] = []
  for (let s = 0; s < afterS; s++) {
    const r = await fixedRate(pool, rate, path, body, {}, 1, afterMs)
    answered += r.calls - r.errors
    after.push(r.p99)
    line({ phase: 'after', second: s + 1, rate, ...r, lag_s: { clickhouse: await metric('tracegate_trace_lag_seconds', '{view="clickhouse"}'), dashboard: await metric('tracegate_trace_lag_seconds', '{view="dashboard"}') } })
  }
  // Every answered call ends as a row written, spooled (then replayed) or dropped and counted.
  const deadline = Date.now() + 180_000
  let lag: number | null = Infinity
  while (Date.now() < deadline && (lag = await metric('tracegate_trace_lag_seconds', '{view="clickhouse"}')) !== null && lag > 0) await new Promise((resolve) => setTimeout(resolve, 1000))
  const events = async (e: string): Promise<number | null> => await metric('tracegate_traces_total', `{event="${e}"}`)
  const written = await events('written')
  const spooled = await events('spooled')
  const replayed = await events('replayed')
  const dropped = await events('dropped')
  const p99After = round2(quantile(afterMs, 0.99))
  line({
    summary: true,
    steady_rate: rate,
    p99_before_ms: before.p99,
    p99_after_ms: p99After,
    p99_after_by_second_ms: after,
    after_minus_before_ms: round2(p99After - before.p99),
    target_within_ms: 5,
    answered_200: answered,
    written, spooled, replayed, dropped,
    accounted: written === null || dropped === null ? null : written + dropped >= answered,
    caught_up: lag === null ? null : lag === 0,
  })
  say(`burst: ${rate} calls/s steady, p99 ${before.p99} ms before and ${p99After} ms after ${burstS} s at ${burst.rps} calls/s (target: within 5 ms); ` +
    (written === null ? 'traces not checked (no BENCH_METRICS_URL)' : `${answered} answered, ${written} written, ${dropped ?? 0} dropped${lag === 0 ? '' : ', still behind'}`))
} finally {
  await pool.close()
  await target.stop()
}
