// Budget holds with front threads (TRACEGATE_THREADS=2): the main thread judges and holds every thread's
// calls under a budget, so 300 parallel calls spread over both threads pass one at a time as on one thread.
import t from 'tap'
import { burst, start } from '../helpers/budgets.js'

const s = await start(t, { TRACEGATE_THREADS: '2' })

t.test('300 parallel calls against a spent budget over two front threads: at most one passes', async (t) => {
  await burst(t, s, 'two front threads')
})
