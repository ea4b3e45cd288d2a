// What the main thread and a front thread tell each other (through hub.ts). Both sides import these with
// `import type`; nothing here runs.
import type { MessagePort } from 'node:worker_threads'
import type { Config } from '../config.js'
import type { NotReady } from '../server/proxy-app.js'
import type { LimitsMode } from '../domain/limits-mode.js'

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
}

/** The main thread's readiness, and how the limits count, for a front thread's /readyz. */
export interface Readiness {
  readonly not: NotReady | null
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
