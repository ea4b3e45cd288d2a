// Which accounts may use the proxy port: those on the pro or enterprise plan. The calls and the models
// lists ask this one rule right after the key, so a free account's key is refused alike on every route.
import type { KeyInfo } from '../domain/key-info.js'
import type { Plan } from '../domain/plan.js'
import { TracegateError } from '../errors.js'

/** Every plan decided here: a new plan does not build until it is placed on one side. */
const USES_PROXY: Readonly<Record<Plan, boolean>> = Object.freeze({ free: false, pro: true, enterprise: true })

/** null when the key's account may use the proxy; else the 403 `plan_required` that refuses it. */
export function planRefusal (caller: Pick<KeyInfo, 'plan'>): TracegateError | null {
  return USES_PROXY[caller.plan] ? null : new TracegateError('plan_required')
}
