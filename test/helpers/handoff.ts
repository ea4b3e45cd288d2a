// Traces handed to the store worker exactly as the front thread's sink hands them (the codec's buffer,
// moved to the real worker), for tests of what the store does with a trace whatever the proxy would
// have set: labels before the proxy reads their headers, bounds at their limits, hostile strings.
import { randomUUID } from 'node:crypto'
import { TraceBatchWriter, type TraceMeta } from '../../src/store/trace-codec.js'
import type { AdmittedCount, CallLabels } from '../../src/store/trace-types.js'
import type { Tracegate } from '../../src/tracegate.js'

/** The request and answer every handed-over trace carries (3 input tokens, 1 output, by the provider). */
export const PROMPT = Buffer.from('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}')
export const ANSWER = Buffer.from('{"choices":[{"message":{"role":"assistant","content":"hello"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}')

/** A finished alpha call of that account and key, answered 200, with these labels. */
export function traceMeta (owner: { accountId: string; keyId: string }, labels: CallLabels | null, confidential = false): TraceMeta {
  return {
    traceId: randomUUID(), accountId: owner.accountId, keyId: owner.keyId, time: Date.now(), provider: 'alpha', model: 'gpt-4o-mini',
    endpoint: '/v1/chat/completions', streaming: false, confidential, status: 200, outcome: 'ok', errorCode: '', errorCause: '', attempts: '',
    requestBytes: PROMPT.length, responseBytes: ANSWER.length, chunkMarks: null, latencyMs: 12.5, ttfbMs: 12, providerMs: 11,
    overheadMs: 1.5, detection: '', issues: '', labels, span: null, stored: true,
  }
}

/** One batch of these traces to the store worker, as TraceSink.flush posts it, with a front thread's `admitted` requests. */
export function handOver (tg: Tracegate, metas: readonly TraceMeta[], admitted: AdmittedCount[] | null = null): void {
  const w = new TraceBatchWriter(1024)
  for (const m of metas) w.add(m, PROMPT, PROMPT.length, [ANSWER], ANSWER.length, [], 0)
  const batch = w.take()
  tg.store.postTraces(batch, [batch.buffer], null, null, admitted)
}
