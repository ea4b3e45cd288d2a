// A Redis connection for what a proxy thread shares with other instances at best (provider rests, cached
// answers): while it is away a command fails at once (never queued, unless `queueOffline`, never
// retried), it reconnects every second at most, and its errors, which may hold the URL, are never printed.
import { Redis } from 'ioredis'

export function bestEffortRedis (url: string, queueOffline = false): Redis {
  const c = new Redis(url, { lazyConnect: true, enableOfflineQueue: queueOffline, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: (n: number) => Math.min(n * 100, 1000) })
  // The listener keeps ioredis from printing errors itself.
  c.on('error', () => {})
  c.connect().catch(() => {})
  return c
}
