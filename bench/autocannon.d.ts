// The part of autocannon's API the benchmarks use (the package ships no types).
declare module 'autocannon' {
  interface Histogram { average: number; mean: number; p50: number; p90: number; p99: number; max: number }
  export interface Result {
    requests: Histogram & { total: number; sent: number }
    latency: Histogram
    throughput: Histogram
    errors: number
    timeouts: number
    non2xx: number
    /** Answers with a 2xx status. */
    '2xx': number
    duration: number
  }
  interface Options {
    url: string
    method?: string
    body?: string | Buffer
    headers?: Record<string, string>
    connections?: number
    duration?: number
    amount?: number
    overallRate?: number
    pipelining?: number
    /** Worker threads firing the requests; connections are divided between them, overallRate is per worker. */
    workers?: number
    timeout?: number
    /** Per-request hooks; setupRequest may rewrite each request before it is sent. */
    requests?: Array<{ setupRequest?: (req: { body?: string | Buffer }) => { body?: string | Buffer } }>
  }
  function autocannon (opts: Options): Promise<Result>
  export default autocannon
}
