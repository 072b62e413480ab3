/**
 * This thread's part of a snapshot read a slice at a time, for the live monitor: which tasks
 * there are, the loops' figures and the moment waits are measured from are read in one go; the
 * rows of the tasks, a thousand per turn of the event loop, so that a page refreshing every
 * second never holds the app's loop for the whole of 20,000 tasks. The rows are then not all of
 * one moment: a task that ends meanwhile is left out, one that starts meanwhile is not there yet,
 * and who awaits whom is as each slice finds it. ps(), pstree() and snapshot() read in one go.
 */
import { performance } from 'node:perf_hooks';
import { threadId } from 'node:worker_threads';
import type { EventLoop } from '../base-events.js';
import type { Task } from '../task.js';
import { currentThreadName, threadHealth, threadLoops } from './introspect.js';
import { callsOfThisThread, loopRow, newMemo, sceneOf, taskRow, type LoopRow, type Scene, type TaskRow, type ThreadSnapshot } from './snapshot.js';

/** Task rows made per turn of the event loop: about a millisecond's worth. */
const TASKS_PER_TURN = 1000;

/**
 * How long a turn may go on making rows, in ms: a row whose coroutine the inspector has not
 * named yet costs a hundred microseconds or more (an app making tasks of closures).
 */
const TURN_MS = 4;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** This thread's part of a snapshot, its task rows `perTurn` at a time at most, and for some 4 ms of a turn at most (see the module's comment). */
export async function snapshotThisThreadInSlices(perTurn = TASKS_PER_TURN): Promise<ThreadSnapshot> {
  const nowTick = performance.now() | 0;
  const threadName = currentThreadName();
  const loops: LoopRow[] = [];
  const scenes: Array<[Scene, Array<Task<unknown>>]> = [];
  for (const loop of threadLoops<EventLoop>()) {
    const stats = loop._stats();
    const pending: Array<Task<unknown>> = [];
    loop._promoteLight();
    for (let task = loop._taskList; task !== null; task = task._nextTask) if (!task.done()) pending.push(task);
    loops.push(loopRow(loop, stats, pending.length));
    scenes.push([sceneOf(loop, threadName, nowTick), pending]);
  }
  const health = threadHealth();
  const tasks: TaskRow[] = [];
  let memo = newMemo();
  let made = 0;
  let turnStarted = performance.now();
  for (const [scene, pending] of scenes) {
    for (const task of pending) {
      if (made === perTurn || ((made & 31) === 31 && performance.now() - turnStarted > TURN_MS)) {
        await nextTurn();
        // What the memo knows of the futures between tasks held for the turn it was made in.
        memo = newMemo();
        made = 0;
        turnStarted = performance.now();
      }
      made++;
      if (!task.done()) tasks.push(taskRow(task, scene, memo));
    }
  }
  const { callsOut, callsIn } = callsOfThisThread(memo);
  return { threadId, threadName, responsive: true, blockedFor: null, health, loops, tasks, callsOut, callsIn };
}
