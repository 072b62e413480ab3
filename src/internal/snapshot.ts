/**
 * One thread's part of a `ps()` snapshot: its loops with their health, every pending task with
 * what it awaits and since when, and the calls between threads in flight through its links —
 * plain data, cloneable, so that another thread can join them into one picture of the process.
 * Read synchronously, in one go, from state the loops keep anyway.
 */
import { performance } from 'node:perf_hooks';
import { threadId } from 'node:worker_threads';
import type { EventLoop } from '../base-events.js';
import { Future } from '../futures.js';
import { TimerHandle } from '../handles.js';
import { Task } from '../task.js';
import { waiterOf } from './awaited-by.js';
import { ConcurrentFuture } from './concurrent-future.js';
import { repr } from './format.js';
import { generatorName } from './generators.js';
import { WaitNote, currentThreadName, heartbeat, idOf, threadHealth, threadLoops, type SlowCallback, type ThreadHealth } from './introspect.js';
import { callsInFlight, describeCall } from './link.js';
import { suspendedAt } from './suspension.js';
import type { TaskInfo } from '../ps.js';

/** One task of a snapshot: the public TaskInfo, and the edges that make the tree. */
export interface TaskRow extends TaskInfo {
  /** Its coroutine chain, innermost first, as `name()` or `name() at file:line:column` (the chain in debug mode). */
  readonly stack: string[];
  /** The ids of the tasks awaiting it, in this thread and (through calls) in others. */
  readonly awaitedBy: number[];
  /** What it awaits that is not a task of a known thread: a pool job, a comlink call, a call served by a plain function. */
  readonly leaves: string[];
}

/** A loop of a snapshot, with its health. */
export interface LoopRow {
  readonly threadId: number;
  readonly loopId: number;
  /** `running` (its callbacks run now), `idle` (running, waiting for events), `stopped`, `closed`. */
  readonly state: 'running' | 'idle' | 'stopped' | 'closed';
  readonly debug: boolean;
  readonly iterations: number;
  readonly ready: number;
  readonly timers: number;
  readonly tasks: number;
  readonly slowCallbacks: readonly SlowCallback[];
}

/** A call to another thread made here and not settled: who awaits it. */
export interface CallOut {
  readonly linkId: number;
  readonly callId: number;
  readonly description: string;
  readonly awaitedBy: number[];
}

/** A call from another thread served here: the task serving it (null: a plain function's Promise or Future), and its caller. */
export interface CallIn {
  readonly linkId: number;
  readonly callId: number;
  readonly taskId: number | null;
  readonly callerTaskId: number | null;
}

/** One thread's part of a snapshot. */
export interface ThreadSnapshot {
  readonly threadId: number;
  readonly threadName: string;
  /** False when the thread did not answer in time (its loop is blocked, or it is busy). */
  readonly responsive: boolean;
  /** When unresponsive: for how long (seconds) its loop has been running callbacks without a break; null when unknown. */
  readonly blockedFor: number | null;
  readonly health: ThreadHealth | null;
  readonly loops: LoopRow[];
  readonly tasks: TaskRow[];
  readonly callsOut: CallOut[];
  readonly callsIn: CallIn[];
}

/** The tasks awaiting `future` in this thread: directly, or through gathers, shields and TaskGroups. */
function awaitingTasks(future: Future<unknown>, found: Set<number>, seen: Set<Future<unknown>>): void {
  for (const [callback] of future._entries()) {
    const waiter = waiterOf(callback);
    if (waiter === undefined || seen.has(waiter)) continue;
    seen.add(waiter);
    if (waiter instanceof Task) found.add(idOf(waiter));
    else awaitingTasks(waiter, found, seen);
  }
}

/** What a task's `_futWaiter` stands for, in a few words. */
function describeAwaited(future: Future<unknown>): string {
  if (future instanceof Task) return `Task ${repr(future.getName())}`;
  const call = describeCall(future);
  if (call !== null) return call;
  const note = future._result;
  if (note instanceof ConcurrentFuture) return note._describeWork() ?? 'a concurrent future';
  if (note instanceof WaitNote) return note.text;
  if (note instanceof TimerHandle) {
    const left = Math.max(0, note.when() - future.getLoop().time());
    return `sleep, ${left < 10 ? left.toFixed(2) : Math.round(left)} s left`;
  }
  const children = future._awaits();
  if (children.length > 0) return `gather of ${children.length}`;
  return future.constructor.name === 'Future' ? 'a Future' : `a ${future.constructor.name}`;
}

/**
 * What a task awaits that is a node of its own but no task of a known thread — pool jobs,
 * comlink calls — directly or through a gather.
 */
function collectLeaves(future: Future<unknown>, leaves: string[]): void {
  if (future instanceof Task || describeCall(future) !== null || future.done()) return;
  const note = future._result;
  if (note instanceof ConcurrentFuture) {
    const work = note._describeWork();
    if (work !== null) leaves.push(work);
  } else if (note instanceof WaitNote && note.leaf) leaves.push(note.text);
  for (const child of future._awaits()) collectLeaves(child, leaves);
}

function stackOf(task: Task<unknown>, loop: EventLoop): string[] {
  const frames = task._futWaiter !== null && loop.getDebug() ? suspendedAt.get(task) : undefined;
  if (frames !== undefined) return frames.map((frame) => (frame.location === null ? frame.name : `${frame.name} at ${frame.location}`));
  return [generatorName(task.getCoro() as object) ?? 'anonymous()'];
}

/** This thread's part of a snapshot. */
export function snapshotThisThread(): ThreadSnapshot {
  const nowTick = performance.now() | 0;
  const threadName = currentThreadName();
  const loops: LoopRow[] = [];
  const tasks: TaskRow[] = [];
  for (const loop of threadLoops<EventLoop>()) {
    const stats = loop._stats();
    let count = 0;
    for (let task = loop._taskList; task !== null; task = task._nextTask) {
      if (task.done()) continue;
      count++;
      const waiter = task._futWaiter;
      const awaitedBy = new Set<number>();
      awaitingTasks(task, awaitedBy, new Set([task]));
      const leaves: string[] = [];
      if (waiter !== null) collectLeaves(waiter, leaves);
      const row: TaskRow = {
        threadId,
        threadName,
        loopId: loop._id,
        taskId: idOf(task),
        name: task.getName(),
        coroutine: generatorName(task.getCoro() as object) ?? 'anonymous()',
        state: loop._currentTask === task ? 'running' : task.cancelling() > 0 ? 'cancelling' : 'pending',
        awaiting: waiter === null ? null : describeAwaited(waiter),
        // While parked, the task's result slot holds the tick its wait began (see Task).
        waitingFor: waiter === null || typeof task._result !== 'number' ? 0 : Math.max(0, ((nowTick - task._result) | 0) / 1000),
        stack: stackOf(task, loop),
        awaitedBy: [...awaitedBy],
        leaves,
      };
      tasks.push(row);
    }
    loops.push({
      threadId,
      loopId: loop._id,
      state: stats.closed ? 'closed' : !stats.running ? 'stopped' : loop._inDrive() ? 'running' : 'idle',
      debug: stats.debug,
      iterations: loop._iterations,
      ready: stats.ready,
      timers: stats.timers,
      tasks: count,
      slowCallbacks: [...loop._slowCallbacks],
    });
  }
    const calls = callsInFlight();
  const callsOut: CallOut[] = calls.out.map((call) => {
    const awaitedBy = new Set<number>();
    if (call.future instanceof Future) awaitingTasks(call.future, awaitedBy, new Set());
    return { linkId: call.linkId, callId: call.callId, description: `call ${repr(call.name)} in ${call.peer}`, awaitedBy: [...awaitedBy] };
  });
  const callsIn: CallIn[] = calls.in.map((call) => ({
    linkId: call.linkId,
    callId: call.callId,
    taskId: call.future instanceof Task ? idOf(call.future) : null,
    callerTaskId: call.origin?.taskId ?? null,
  }));
  return { threadId, threadName, responsive: true, blockedFor: null, health: threadHealth(), loops, tasks, callsOut, callsIn };
}

/** The part of a thread that did not answer in time: what its heartbeat says (`since`: when its busy stretch began, epoch ms; 0 unknown). */
export function unresponsiveThread(id: number, name: string, since: number): ThreadSnapshot {
  return {
    threadId: id,
    threadName: name,
    responsive: false,
    blockedFor: since === 0 ? null : Math.max(0, (Date.now() - since) / 1000),
    health: null,
    loops: [],
    tasks: [],
    callsOut: [],
    callsIn: [],
  };
}

/** This thread's heartbeat, to hand to the thread that started it. */
export function thisHeartbeat(): Float64Array {
  return heartbeat;
}
