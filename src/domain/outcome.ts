// How an exchange ended: the one list the proxy records, the trace filters accept, the dashboard offers
// and the usage rollup counts errors from. Imports nothing of a thread (a leaf, also compiled for the UI).

export const OUTCOMES = ['ok', 'blocked', 'limited', 'rejected', 'provider_error', 'provider_stream_error', 'client_aborted', 'proxy_error'] as const
export type Outcome = (typeof OUTCOMES)[number]

/** The outcomes counted as errors; every error count (rollup, totals, sessions, users) reads this list. */
export const ERROR_OUTCOMES: readonly Outcome[] = ['rejected', 'provider_error', 'provider_stream_error', 'proxy_error']

/** An outcome as people read it: its words without underscores ("provider stream error"). */
export const outcomeLabel = (o: Outcome): string => o.replaceAll('_', ' ')
