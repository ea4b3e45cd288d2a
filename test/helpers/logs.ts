// A pino logger whose lines a test keeps, parsed: for checking what tracegate logs, and what it never does.
import { Writable } from 'node:stream'
import { pino } from 'pino'
import type { Logger } from '../../src/log.js'

export interface Logs {
  readonly log: Logger
  readonly lines: Array<Record<string, unknown>>
  /** Every line as written, for looking for text that must not be there. */
  readonly raw: string[]
  /** Lines whose msg is `msg`. */
  find (msg: string): Array<Record<string, unknown>>
}

export function capturingLogger (level = 'info'): Logs {
  const lines: Array<Record<string, unknown>> = []
  const raw: string[] = []
  const sink = new Writable({
    write (chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString('utf8').split('\n')) {
        if (l.trim() === '') continue
        raw.push(l)
        lines.push(JSON.parse(l) as Record<string, unknown>)
      }
      cb()
    },
  })
  return { log: pino({ level }, sink), lines, raw, find: (msg) => lines.filter((l) => l.msg === msg) }
}
