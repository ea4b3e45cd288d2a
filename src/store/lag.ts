/** A TraceStats.lag figure as the seconds /readyz and the dashboard show, to a tenth. */
export function secondsBehind (ms: number): number {
  return Math.round(ms / 100) / 10
}
