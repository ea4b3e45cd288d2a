// The error a bad setting raises at start: it names the environment variable, never its value's secret.
// A leaf, so the modules that read settings (config.ts, otel/settings.ts) need not import each other.

export class ConfigError extends Error {
  readonly variable: string
  constructor (variable: string, problem: string) {
    super(`${variable} ${problem}`)
    this.name = 'ConfigError'
    this.variable = variable
  }
}
