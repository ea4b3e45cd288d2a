// Where the limiter's counters live: `local` (this process), `shared` (Redis answers), `fallback` (Redis is
// configured but away, so each instance counts alone until it is back).
// Imports nothing of a thread (a leaf: test/unit/import-rules.test.ts keeps it one).

export type LimitsMode = 'local' | 'shared' | 'fallback'
