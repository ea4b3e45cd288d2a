// Waiting for what the store worker writes: a trace as a row, or a set of traces all stored. The front
// thread hands traces over on its next turn and the worker batches them, so each probe flushes first.
import type { Tracegate } from '../../src/tracegate.js'
import type { TraceRow } from '../../src/store/trace-types.js'
import { until } from './wait.js'

/** The stored row of one trace; what a page or an answer shows must be what is stored. */
export async function storedTrace (tg: Tracegate, accountId: string, traceId: string): Promise<TraceRow> {
  await until(async () => {
    await tg.store.call('flushTraces')
    return await tg.store.call('getTrace', { accountId, traceId })
  }, { tries: 100, everyMs: 20, what: `trace ${traceId} of account ${accountId}` })
  // getTrace also answers from the rows waiting in the store worker's memory: once the worker holds the
  // trace, one more flush inserts it, and the row is read back from ClickHouse.
  await tg.store.call('flushTraces')
  return (await tg.store.call('getTrace', { accountId, traceId }))!
}

/** Waits until every given trace of the account is stored. */
export async function stored (tg: Tracegate, accountId: string, traceIds: readonly string[]): Promise<void> {
  await until(async () => {
    await tg.store.call('flushTraces')
    const rows = await tg.store.call('testQuery', {
      query: 'SELECT count() AS n FROM traces WHERE account_id = {a:UUID} AND trace_id IN {ids:Array(UUID)}',
      params: { a: accountId, ids: traceIds },
    })
    return Number(rows[0]?.n) === traceIds.length
  }, { tries: 200, everyMs: 25, what: `traces stored: ${traceIds.join(', ')}` })
}
