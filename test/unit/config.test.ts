import t from 'tap'
import { loadConfig } from '../../src/config.js'
import { ConfigError } from '../../src/domain/config-error.js'

t.test('defaults', async (t) => {
  const c = loadConfig({})
  t.equal(c.host, '127.0.0.1')
  t.equal(c.proxyPort, 8080)
  t.equal(c.dashboardPort, 8081)
  t.equal(c.maxBodyBytes, 4 * 1024 * 1024)
  t.same(c.providers.alpha.baseUrls, ['https://api.openai.com'])
  t.same(c.providers.beta.baseUrls, ['https://api.anthropic.com'])
  t.same(c.providers.gamma.baseUrls, ['https://generativelanguage.googleapis.com'])
  t.same(c.providers.alpha.apiKeys, [])
  t.equal(c.keyCache.ttlMs, 5000)
  t.equal(c.clickhouse, null)
  t.ok(Object.isFrozen(c) && Object.isFrozen(c.providers) && Object.isFrozen(c.providers.alpha))
})

t.test('values are read and checked', async (t) => {
  const c = loadConfig({ TRACEGATE_PROXY_PORT: '0', TRACEGATE_ALPHA_BASE_URL: 'http://127.0.0.1:9000/', TRACEGATE_BETA_API_KEY: 'sk-ant-x', CLICKHOUSE_URL: 'http://ch:8123', CLICKHOUSE_DATABASE: 'tg' })
  t.equal(c.proxyPort, 0)
  t.same(c.providers.alpha.baseUrls, ['http://127.0.0.1:9000'])
  t.same(c.providers.beta.apiKeys, ['sk-ant-x'])
  t.same(c.clickhouse, { url: 'http://ch:8123', username: 'default', password: '', database: 'tg', compression: false })
  t.equal(loadConfig({ CLICKHOUSE_URL: 'http://ch:8123', CLICKHOUSE_COMPRESSION: 'on' }).clickhouse?.compression, true, 'CLICKHOUSE_COMPRESSION=on')
  t.equal(configError({ CLICKHOUSE_URL: 'http://ch:8123', CLICKHOUSE_COMPRESSION: 'gzip' }).variable, 'CLICKHOUSE_COMPRESSION', 'on or off only')
})

function configError (env: Record<string, string>): ConfigError {
  try {
    loadConfig(env)
  } catch (err) {
    if (err instanceof ConfigError) return err
    throw err
  }
  throw new Error('loadConfig accepted ' + JSON.stringify(Object.keys(env)))
}

t.test('a bad value names the variable and never echoes a secret', async (t) => {
  const bad: Array<[string, string]> = [
    ['TRACEGATE_PROXY_PORT', 'eighty'],
    ['TRACEGATE_PROXY_PORT', '70000'],
    ['TRACEGATE_MAX_BODY_BYTES', '-1'],
    ['TRACEGATE_ALPHA_BASE_URL', 'not a url'],
    ['TRACEGATE_GAMMA_BASE_URL', 'ftp://x'],
    ['TRACEGATE_LOG_LEVEL', 'loud'],
    ['CLICKHOUSE_URL', '::'],
    ['TRACEGATE_KEY_CACHE_TTL_MS', '1.5'],
  ]
  for (const [name, value] of bad) {
    const err = configError({ [name]: value })
    t.equal(err.variable, name, `${name}=${value}`)
    t.match(err.message, name)
  }
  const withCredentials = configError({ TRACEGATE_ALPHA_BASE_URL: 'https://user:sk-secret@api.openai.com' })
  t.equal(withCredentials.variable, 'TRACEGATE_ALPHA_BASE_URL')
  t.notMatch(withCredentials.message, 'sk-secret')
  const multiline = configError({ TRACEGATE_ALPHA_API_KEY: 'sk-a\nb' })
  t.equal(multiline.variable, 'TRACEGATE_ALPHA_API_KEY')
  t.notMatch(multiline.message, 'sk-a')
})

t.test('a server-side provider key must be able to travel in a header', async (t) => {
  for (const value of ['sk-…', 'sk-a b', 'sk-\u0000x', 'sk-\u007fx', 'sk-\ud800x']) {
    const err = configError({ TRACEGATE_GAMMA_API_KEY: value })
    t.equal(err.variable, 'TRACEGATE_GAMMA_API_KEY', JSON.stringify(value))
    t.notMatch(err.message, value)
  }
  t.same(loadConfig({ TRACEGATE_GAMMA_API_KEY: ' AIza-x_y.z ' }).providers.gamma.apiKeys, ['AIza-x_y.z'], 'surrounding spaces are trimmed')
})

t.test('credentials in CLICKHOUSE_URL become the user and password, and leave the URL', async (t) => {
  const c = loadConfig({ CLICKHOUSE_URL: 'https://tg:p%40ss@ch.internal:8443/' })
  t.same(c.clickhouse, { url: 'https://ch.internal:8443/', username: 'tg', password: 'p@ss', database: 'default', compression: false })
  const explicit = loadConfig({ CLICKHOUSE_URL: 'http://a:b@ch:8123', CLICKHOUSE_USER: 'u', CLICKHOUSE_PASSWORD: 'p' })
  t.equal(explicit.clickhouse?.username, 'u')
  t.equal(explicit.clickhouse?.password, 'p')
  t.notMatch(explicit.clickhouse?.url ?? '', 'b@')
  t.equal(configError({ CLICKHOUSE_URL: 'tcp://ch:9000' }).variable, 'CLICKHOUSE_URL')
})

t.test('the SQL port: off unless its port is set, its limits read and checked', async (t) => {
  t.equal(loadConfig({}).sql.port, null, 'off by default')
  t.equal(loadConfig({ TRACEGATE_SQL_PORT: ' ' }).sql.port, null, 'blank is off')
  const c = loadConfig({ TRACEGATE_SQL_PORT: '0', TRACEGATE_SQL_MAX_EXECUTION_SECONDS: '5', TRACEGATE_SQL_MAX_RESULT_ROWS: '10', TRACEGATE_SQL_CONNECTIONS: '8', TRACEGATE_SQL_QUERIES_PER_ACCOUNT: '3' })
  t.same([c.sql.port, c.sql.maxExecutionSeconds, c.sql.maxResultRows, c.sql.connections, c.sql.perAccount], [0, 5, 10, 8, 3])
  t.equal(configError({ TRACEGATE_SQL_PORT: 'x' }).variable, 'TRACEGATE_SQL_PORT')
  t.equal(configError({ TRACEGATE_SQL_MAX_EXECUTION_SECONDS: '0' }).variable, 'TRACEGATE_SQL_MAX_EXECUTION_SECONDS')
  t.equal(configError({ TRACEGATE_SQL_QUERIES_PER_ACCOUNT: '4' }).variable, 'TRACEGATE_SQL_QUERIES_PER_ACCOUNT', 'one account may not hold every connection')
})
