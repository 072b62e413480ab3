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
  readonly stack: readonly string[];
  /** The ids of the tasks awaiting it, in this thread and (through calls) in others. */
  readonly awaitedBy: readonly number[];
  /** What it awaits that is not a task of a known thread: a pool job, a comlink call, a call served by a plain function. */
  readonly leaves: readonly string[];
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

/**
 * What one snapshot has already worked out about the futures between tasks (gathers, shields,
 * calls), so that a future shared by many tasks is walked once per snapshot, not once per task:
 * the tasks awaiting it, and the leaves under it.
 */
export interface Memo {
  readonly awaiters: Map<Future<unknown>, ReadonlyArray<Task<unknown>>>;
  readonly leaves: Map<Future<unknown>, readonly string[]>;
  /** The one-frame stack of each coroutine (outside debug mode), shared by its tasks' rows. */
  readonly stacks: Map<string, readonly string[]>;
  /** Each description of what a task awaits, once: thousands of tasks sleep as long as one another, or await one future. */
  readonly texts: Map<string, string>;
  /** The one-id list of awaiters of the tasks awaited by one task only (a gather's or a TaskGroup's children), by that id. */
  readonly single: Map<number, readonly number[]>;
  /** `sleep, N s left` by N, for sleeps of 10 s or more. */
  readonly sleeps: Map<number, string>;
}

// Shared by every row that has none (rows are read, never changed): a snapshot of 20,000 tasks allocates half as much.
const NO_TASKS: ReadonlyArray<Task<unknown>> = Object.freeze([]);
const NO_IDS: readonly number[] = Object.freeze([]);
const NO_LEAVES: readonly string[] = Object.freeze([]);

/** A few tasks stay an array; more become a Set (a future awaited by thousands), which keeps their order too. */
type Found = Array<Task<unknown>> | Set<Task<unknown>>;

function added(found: Found, task: Task<unknown>): Found {
  if (!Array.isArray(found)) return found.add(task);
  if (found.includes(task)) return found;
  found.push(task);
  return found.length > 8 ? new Set(found) : found;
}

/**
 * The tasks awaiting `future` in this thread, directly or through gathers, shields and
 * TaskGroups, each once, in the order a walk of its done callbacks meets them.
 */
function awaitersOf(future: Future<unknown>, memo: Memo): ReadonlyArray<Task<unknown>> {
  const known = memo.awaiters.get(future);
  if (known !== undefined) return known;
  // Futures between tasks form no cycle (each is made from futures that exist before it); the mark only guards the walk.
  memo.awaiters.set(future, NO_TASKS);
  let found: Found = [];
  for (let i = 0, count = future._entryCount(); i < count; i++) {
    const waiter = waiterOf(future._entryAt(i));
    if (waiter === undefined) continue;
    if (waiter instanceof Task) found = added(found, waiter);
    else for (const task of awaitersOf(waiter, memo)) found = added(found, task);
  }
  const tasks = Array.isArray(found) ? found : [...found];
  memo.awaiters.set(future, tasks);
  return tasks;
}

/** The ids of the tasks awaiting `task`, itself left out (a task gathering itself). */
function taskAwaiters(task: Task<unknown>, memo: Memo): readonly number[] {
  const count = task._entryCount();
  // Most tasks are awaited by nobody, or by one task directly: nothing to walk, nothing to allocate but the answer.
  if (count === 0) return NO_IDS;
  if (count === 1) {
    const waiter = waiterOf(task._entryAt(0));
    if (waiter instanceof Task) return waiter === task ? NO_IDS : single(idOf(waiter), memo);
    // A gather's or a shield's child: the tasks awaiting that, known after its first child.
    if (waiter !== undefined) {
      const others = awaitersOf(waiter, memo);
      if (others.length === 0 || (others.length === 1 && others[0] === task)) return NO_IDS;
      if (others.length === 1) return single(idOf(others[0] as Task<unknown>), memo);
    }
  }
  let found: Found = [];
  for (let i = 0; i < count; i++) {
    const waiter = waiterOf(task._entryAt(i));
    if (waiter === undefined || waiter === task) continue;
    if (waiter instanceof Task) found = added(found, waiter);
    else for (const other of awaitersOf(waiter, memo)) if (other !== task) found = added(found, other);
  }
  if (Array.isArray(found) && found.length <= 1) return found.length === 0 ? NO_IDS : single(idOf(found[0] as Task<unknown>), memo);
  // Ids are given on first use: in the order the awaiters are met, before the task's own.
  const ids: number[] = [];
  for (const other of found) ids.push(idOf(other));
  return ids;
}

function single(id: number, memo: Memo): readonly number[] {
  let ids = memo.single.get(id);
  if (ids === undefined) memo.single.set(id, (ids = Object.freeze([id])));
  return ids;
}

/** `text`, or the same text met before in this snapshot: rows keep one copy of each (the others die young, unseen by the collector). */
function interned(text: string, memo: Memo): string {
  const known = memo.texts.get(text);
  if (known !== undefined) return known;
  memo.texts.set(text, text);
  return text;
}

/** What a task's `_futWaiter` stands for, in a few words. */
function describeAwaited(future: Future<unknown>, now: number, memo: Memo): string {
  if (future instanceof Task) return `Task ${repr(future.getName())}`;
  const call = describeCall(future);
  if (call !== null) return call;
  const note = future._result;
  if (note instanceof ConcurrentFuture) return note._describeWork() ?? 'a concurrent future';
  if (note instanceof WaitNote) return note.text;
  if (note instanceof TimerHandle) {
    const left = Math.max(0, note.when() - now);
    if (left < 10) return `sleep, ${left.toFixed(2)} s left`;
    // Whole seconds: thousands of tasks sleeping about as long share one text, made once.
    const seconds = Math.round(left);
    let text = memo.sleeps.get(seconds);
    if (text === undefined) memo.sleeps.set(seconds, (text = `sleep, ${seconds} s left`));
    return text;
  }
  const children = future._awaits();
  if (children.length > 0) return `gather of ${children.length}`;
  return future.constructor.name === 'Future' ? 'a Future' : `a ${future.constructor.name}`;
}

/**
 * What a task awaits that is a node of its own but no task of a known thread — pool jobs,
 * comlink calls — directly or through a gather.
 */
function leavesOf(future: Future<unknown>, memo: Memo): readonly string[] {
  if (future instanceof Task || describeCall(future) !== null || future.done()) return NO_LEAVES;
  const note = future._result;
  const children = future._awaits();
  let own: string | null = null;
  if (note instanceof ConcurrentFuture) own = note._describeWork();
  else if (note instanceof WaitNote && note.leaf) own = note.text;
  if (children.length === 0) return own === null ? NO_LEAVES : [own];
  const known = memo.leaves.get(future);
  if (known !== undefined) return known;
  const leaves: string[] = own === null ? [] : [own];
  for (const child of children) for (const leaf of leavesOf(child, memo)) leaves.push(leaf);
  memo.leaves.set(future, leaves);
  return leaves;
}

function stackOf(task: Task<unknown>, debug: boolean, coroutine: string, memo: Memo): readonly string[] {
  const frames = task._futWaiter !== null && debug ? suspendedAt.get(task) : undefined;
  if (frames !== undefined) return frames.map((frame) => (frame.location === null ? `${frame.name}()` : `${frame.name}() at ${frame.location}`));
  let stack = memo.stacks.get(coroutine);
  if (stack === undefined) memo.stacks.set(coroutine, (stack = Object.freeze([coroutine])));
  return stack;
}

/** A new memo: one per snapshot, or per slice of one (what it remembers holds for one turn of the loop). */
export function newMemo(): Memo {
  return { awaiters: new Map(), leaves: new Map(), stacks: new Map(), texts: new Map(), single: new Map(), sleeps: new Map() };
}

/** What every task of a loop is read against: the loop, and the moment (its clock, and the tick for waits). */
export interface Scene {
  readonly loop: EventLoop;
  readonly threadName: string;
  readonly debug: boolean;
  readonly current: Task<unknown> | null;
  readonly now: number;
  readonly nowTick: number;
}

/** The scene of `loop` now; `nowTick`: performance.now() | 0, read once per snapshot. */
export function sceneOf(loop: EventLoop, threadName: string, nowTick: number): Scene {
  return { loop, threadName, debug: loop.getDebug(), current: loop._runningTask(), now: loop.time(), nowTick };
}

/** The row of `task`, not done, of the loop of `scene`. */
export function taskRow(task: Task<unknown>, scene: Scene, memo: Memo): TaskRow {
  const waiter = task._futWaiter;
  const awaitedBy = taskAwaiters(task, memo);
  const coroutine = generatorName(task.getCoro() as object) ?? 'anonymous()';
  return {
    threadId,
    threadName: scene.threadName,
    loopId: scene.loop._id,
    taskId: idOf(task),
    name: task.getName(),
    coroutine,
    state: scene.current === task ? 'running' : task.cancelling() > 0 ? 'cancelling' : 'pending',
    awaiting: waiter === null ? null : interned(describeAwaited(waiter, scene.now, memo), memo),
    // While parked, the task's result slot holds the tick its wait began (see Task).
    waitingFor: waiter === null || typeof task._result !== 'number' ? 0 : Math.max(0, ((scene.nowTick - task._result) | 0) / 1000),
    stack: stackOf(task, scene.debug, coroutine, memo),
    awaitedBy,
    leaves: waiter === null ? NO_LEAVES : leavesOf(waiter, memo),
  };
}

/** The row of `loop`, whose `_stats()` are `stats`, with `count` tasks not done. */
export function loopRow(loop: EventLoop, stats: ReturnType<EventLoop['_stats']>, count: number): LoopRow {
  return {
    threadId,
    loopId: loop._id,
    state: stats.closed ? 'closed' : !stats.running ? 'stopped' : loop._inDrive() ? 'running' : 'idle',
    debug: stats.debug,
    iterations: loop._iterations,
    ready: stats.ready,
    timers: stats.timers,
    tasks: count,
    slowCallbacks: [...loop._slowCallbacks],
  };
}

/** This thread's calls to and from other threads in flight. */
export function callsOfThisThread(memo: Memo): { callsOut: CallOut[]; callsIn: CallIn[] } {
  const calls = callsInFlight();
  const callsOut: CallOut[] = calls.out.map((call) => {
    const awaitedBy = call.future instanceof Future ? awaitersOf(call.future, memo).map((task) => idOf(task)) : [];
    return { linkId: call.linkId, callId: call.callId, description: `call ${repr(call.name)} in ${call.peer}`, awaitedBy };
  });
  const callsIn: CallIn[] = calls.in.map((call) => ({
    linkId: call.linkId,
    callId: call.callId,
    taskId: call.future instanceof Task ? idOf(call.future) : null,
    callerTaskId: call.origin?.taskId ?? null,
  }));
  return { callsOut, callsIn };
}

/** This thread's part of a snapshot. */
export function snapshotThisThread(): ThreadSnapshot {
  const nowTick = performance.now() | 0;
  const threadName = currentThreadName();
  const loops: LoopRow[] = [];
  const tasks: TaskRow[] = [];
  const memo = newMemo();
  for (const loop of threadLoops<EventLoop>()) {
    const stats = loop._stats();
    const scene = sceneOf(loop, threadName, nowTick);
    let count = 0;
    loop._promoteLight();
    for (let task = loop._taskList; task !== null; task = task._nextTask) {
      if (task.done()) continue;
      count++;
      tasks.push(taskRow(task, scene, memo));
    }
    loops.push(loopRow(loop, stats, count));
  }
  const { callsOut, callsIn } = callsOfThisThread(memo);
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
