import type { ProviderName } from '../config.js'
import { alpha } from './alpha.js'
import { beta } from './beta.js'
import { gamma } from './gamma.js'
import type { Dialect } from './types.js'

export type { Dialect, ParamRule, RequestFacts, UpstreamTarget } from './types.js'

export const DIALECTS: Readonly<Record<ProviderName, Dialect>> = { alpha, beta, gamma }
export const PROVIDER_KEY_FIELDS: readonly string[] = Object.values(DIALECTS).map((d) => d.keyField)
