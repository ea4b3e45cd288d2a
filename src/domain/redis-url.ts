// The check of TRACEGATE_REDIS_URL that both the configuration (at start) and the Redis adapter (at
// connect) make; a leaf, so reading the configuration loads no Redis client.

/** What is wrong with a Redis URL, or null; never repeats the URL (it may carry a password). */
export function redisUrlProblem (url: string): string | null {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return 'is not a URL (expected redis://[:password@]host:port[/db])'
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') return 'must start with redis:// or rediss://'
  if (parsed.hostname === '') return 'has no host'
  return null
}
