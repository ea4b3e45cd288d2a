// Structured logs for start-up, shutdown and faults; never on the per-request hot path.
import { pino, type Logger } from 'pino'

export type { Logger }

export function createLogger (level: string): Logger {
  return pino({
    level,
    base: { pid: process.pid },
    // Belt and braces: nothing that logs should carry a secret, and if it ever does it is blanked.
    redact: { paths: ['api_key', '*.api_key', 'key', '*.key', 'token', '*.token', 'authorization', '*.authorization', 'password', '*.password'], censor: '[redacted]' },
  })
}
