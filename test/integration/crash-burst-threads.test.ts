// The kill -9 burst of crash-burst.test.ts with two front threads serving the proxy: each writes its own
// hand-off file, and a call answered by either is stored once after the restart. A separate file: chDB
// allows one data directory per process.
import t from 'tap'
import { killDuringBurst } from '../helpers/kill-burst.js'

killDuringBurst(t, { TRACEGATE_THREADS: '2' })
