// No answered call lost to kill -9: a real `tracegate serve --mock-providers` with its
// default settings takes a burst of concurrent calls, streamed and not, and gets SIGKILL in the middle of
// it. Every call whose client received the end of a 200 answer must then be stored, once, after the data
// directory is opened again (or be counted as dropped), and counted once in usage_minute: the record of a
// call reaches its thread's hand-off file before the end of its response leaves the process. Here the
// main thread serves the proxy; crash-burst-threads.test.ts runs the same with two front threads. A
// separate file each: chDB allows one data directory per process.
import t from 'tap'
import { killDuringBurst } from '../helpers/kill-burst.js'

killDuringBurst(t, {})
