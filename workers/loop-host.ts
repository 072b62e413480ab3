/** The entry of a LoopThread's worker: host the module named in workerData on its own loop. */
import { _hostLoopThread } from '../src/loop-thread.js';

await _hostLoopThread();
