// The oldest ClickHouse server tracegate runs on: 24.3, the first release whose new query analyzer is on
// by default (the SQL port's checks read its EXPLAIN QUERY TREE) and which has every type and function
// the migrations and queries use (DateTime64, Bool, formatQuery). `serve` refuses an older server
// before migrating it, and `tracegate doctor` says the same.

export const MIN_CLICKHOUSE_VERSION = '24.3'

/** Why a server of this version (`SELECT version()`) cannot be used, or null when it can. */
export function clickhouseVersionProblem (version: string): string | null {
  const m = /^(\d+)\.(\d+)/.exec(version.trim())
  const [minMajor, minMinor] = MIN_CLICKHOUSE_VERSION.split('.').map(Number) as [number, number]
  if (m === null) return `ClickHouse reported version "${version.slice(0, 40)}", which tracegate cannot read; it needs ${MIN_CLICKHOUSE_VERSION} or newer`
  const major = Number(m[1])
  const minor = Number(m[2])
  if (major > minMajor || (major === minMajor && minor >= minMinor)) return null
  return `ClickHouse ${version.trim()} is older than ${MIN_CLICKHOUSE_VERSION}, the oldest version tracegate runs on`
}
