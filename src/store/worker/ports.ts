// The front threads' own channels to the store worker (TRACEGATE_THREADS above 1): each port carries the
// same requests and trace batches as the parent port, and is answered on the port a request came on. The
// parent port alone controls the worker (live lists, close): a front port that says more is not heard.
import { workerData, type MessagePort } from 'node:worker_threads'
import type { StoreRequest, StoreResponse, TraceMessage } from '../protocol.js'

/** What StoreClient adds to the worker's data when front threads exist: one port per thread, moved here. */
export interface FrontPortsData {
  readonly frontPorts?: readonly MessagePort[]
}

export interface Replier {
  postMessage (msg: StoreResponse): void
}

export type FrontMessageHandler = (msg: StoreRequest | TraceMessage, to: Replier) => void

/**
 * Serves every front port with `handle`. The ports are unreferenced: they never keep the worker alive
 * once the parent port closes (the front threads are gone by then, their traces handed over).
 */
export function serveFrontPorts (handle: FrontMessageHandler): void {
  for (const port of (workerData as FrontPortsData).frontPorts ?? []) {
    port.on('message', (msg: unknown) => {
      if (typeof msg !== 'object' || msg === null) return
      if ('traces' in msg || ('id' in msg && 'op' in msg)) handle(msg as StoreRequest | TraceMessage, port)
    })
    port.unref()
  }
}
