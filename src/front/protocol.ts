// What the main thread and a front thread tell each other (through hub.ts): one table per side, each
// operation's argument and result and each note's argument, so tsc checks both ends. Both sides import
// these with `import type`; nothing here runs.
import type { MessagePort } from 'node:worker_threads'
import type { Config } from '../config.js'
import type { LimitsMode } from '../domain/limits-mode.js'
import type { CountedNote } from '../limits/front.js'
import type { LimitCall } from '../limits/limiter.js'
import type { Refusal } from '../limits/rules.js'
import type { ReadyState } from '../server/proxy-app.js'

export interface FrontWorkerData {
  /** 0 … N-1: the label of its metrics. */
  readonly index: number
  /** The configuration as the main thread resolved it (the mock provider's address included). */
  readonly config: Config
  /** The port to listen on: the configured one, or the one the first thread was given for 0. */
  readonly port: number
  /** This thread's channel to the store worker (the other end was moved to it). */
  readonly store: MessagePort
  /** One cell per front thread: its calls in flight, read by the main thread. */
  readonly inflight: SharedArrayBuffer
  /** The detection worker file of this thread's pool; null: the real one. */
  readonly detectionWorker: string | null
  /** The bulk lanes' shared slots (detection/slots.ts), the same buffer for every thread. */
  readonly bulkSlots: SharedArrayBuffer
  /** The main thread's request board (limits/board.ts), the same buffer for every thread; null: none. */
  readonly requestBoard: SharedArrayBuffer | null
}

/** The main thread's readiness, and how the limits count, for a front thread's /readyz. */
export interface Readiness extends ReadyState {
  readonly limits: LimitsMode
}

/** A log line of a front thread, written by the main thread's logger. */
export interface LogNote {
  readonly level: 'error' | 'warn' | 'info'
  readonly fields: object
  readonly msg: string
}

/** How a front thread's start went: the port it listens on, or why it could not. */
export type Started = { readonly port: number } | { readonly error: string }

/** The main thread's side: what a front thread may ask of it, and tell it. */
export type MainSide = {
  readonly serves: {
    /** A call under a counted limit, judged and counted in one step by the main thread's Limiter. */
    readonly admit: { readonly args: LimitCall; readonly result: Refusal | null }
    readonly ready: { readonly args: null; readonly result: Readiness }
    /** The Prometheus text of the whole process, for /metrics on the proxy port. */
    readonly metrics: { readonly args: null; readonly result: string }
  }
  readonly hears: {
    /** Calls admitted without a counted limit, for the dashboard's use figures. */
    readonly counted: CountedNote
    readonly log: LogNote
    /** Sent once, when the thread listens or cannot. */
    readonly started: Started
  }
}

/** A front thread's side: what the main thread may ask of it (it tells it nothing). */
export type FrontSide = {
  readonly serves: {
    /** Drops a key from this thread's cache; answered once it is gone. */
    readonly invalidate: { readonly args: { readonly hash: string }; readonly result: true }
    readonly invalidateAccount: { readonly args: { readonly accountId: string }; readonly result: true }
    /** This thread's registry as prom-client's JSON, to be summed with the others. */
    readonly metricsJson: { readonly args: null; readonly result: object[] }
    /** Stops listening, lets its calls end within the grace and hands over its traces. */
    readonly drain: { readonly args: { readonly graceMs: number }; readonly result: true }
  }
  readonly hears: Record<never, never>
}
