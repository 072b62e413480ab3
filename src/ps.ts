/**
 * Every task of every loop in every thread, at one moment (asyncio.tools in Python 3.14:
 * `python -m asyncio ps` and `pstree`): `ps()` lists the tasks, `pstree()` draws who awaits
 * whom — through gathers, TaskGroups and shields, and across threads through calls between
 * loops. Each LoopThread answers from its own thread; one that does not answer in time (its loop
 * is blocked) is listed as unresponsive, with how long its loop has been busy.
 */
import type { ThreadHealth } from './internal/introspect.js';
import { printable, repr } from './internal/format.js';
import { yieldable } from './internal/yieldable.js';
import type { YieldablePromise } from './coroutines.js';
import type { LoopRow, TaskRow, ThreadSnapshot } from './internal/snapshot.js';
import { snapshotThisThreadInSlices } from './internal/snapshot-slices.js';
import { _snapshotProcess } from './loop-thread.js';

/** One task in a `ps()` snapshot. */
export interface TaskInfo {
  /** The thread's id (0: the main thread). */
  readonly threadId: number;
  /** The thread's name, or null. */
  readonly threadName: string | null;
  /** The loop's id, unique in the process. */
  readonly loopId: number;
  /** The task's id, unique in the process. */
  readonly taskId: number;
  /** The task's name (`getName()`). */
  readonly name: string;
  /** The coroutine (generator function) the task drives. */
  readonly coroutine: string;
  /** `'running'` (its step runs now), `'pending'` (waiting) or `'cancelling'` (a cancellation is pending). */
  readonly state: 'running' | 'pending' | 'cancelling';
  /** What it awaits (a future, a task, a remote call), described, or null. */
  readonly awaiting: string | null;
  /** Seconds since it started waiting. */
  readonly waitingFor: number;
}

/** How long a thread has to answer a snapshot before it is listed as unresponsive, in ms. */
const DEADLINE_MS = 1000;

/** Options of `ps()`, `pstree()` and `snapshot()`. */
export interface SnapshotOptions {
  /** How long each thread has to answer, in seconds (default 1). */
  timeout?: number;
}

function deadlineOf(options: SnapshotOptions | undefined, what: string): number {
  const timeout = options?.timeout;
  if (timeout === undefined) return DEADLINE_MS;
  if (typeof timeout !== 'number' || !(timeout > 0) || !Number.isFinite(timeout)) {
    throw new RangeError(`${what} timeout must be a positive number of seconds, got ${repr(timeout)}`);
  }
  return timeout * 1000;
}

/** A snapshot of the whole process: each thread with its health, loops and tasks; the tasks joined into one tree. */
export interface ProcessSnapshot {
  /** When it was taken (epoch ms). */
  readonly at: number;
  readonly threads: ReadonlyArray<{
    readonly threadId: number;
    readonly threadName: string;
    readonly responsive: boolean;
    readonly blockedFor: number | null;
    readonly health: ThreadHealth | null;
    readonly loops: readonly LoopRow[];
  }>;
  /** Every task, with `awaitedBy` joined across threads (the ids of the tasks awaiting it). */
  readonly tasks: readonly TaskRow[];
}

/**
 * Take one snapshot of every thread of the process (the data behind `ps()`, `pstree()` and the
 * monitor): each thread's health and loops, and every task with the tasks awaiting it, across
 * threads.
 *
 * @example
 * ```ts
 * const { threads, tasks } = await snapshot();
 * console.log(threads.map((t) => `${t.threadName}: lag p99 ${t.health?.lag.p99}`));
 * ```
 */
export function snapshot(options?: SnapshotOptions): YieldablePromise<ProcessSnapshot> {
  return yieldable(snapshotAsync(options));
}

async function snapshotAsync(options?: SnapshotOptions): Promise<ProcessSnapshot> {
  const parts = await _snapshotProcess(deadlineOf(options, 'snapshot()'));
  return join(parts);
}

/**
 * @internal The live monitor's snapshot: as `snapshot()`'s, except that when it is taken from
 * this thread, this thread's task rows are read a thousand per turn of its event loop (see
 * internal/snapshot-slices.ts); `timeout` in seconds.
 */
export async function _snapshotInSlices(timeout: number): Promise<ProcessSnapshot> {
  return join(await _snapshotProcess(timeout * 1000, snapshotThisThreadInSlices));
}

/**
 * Join the threads' parts: a task serving a call is awaited by the tasks awaiting that call in the caller's thread.
 *
 * @internal
 */
export function join(parts: ThreadSnapshot[]): ProcessSnapshot {
  const callers = new Map<string, number[]>();
  for (const part of parts) for (const call of part.callsOut) callers.set(`${call.linkId}/${call.callId}`, call.awaitedBy);
  const tasks: TaskRow[] = [];
  for (const part of parts) {
    const served = new Map<number, number[]>();
    for (const call of part.callsIn) {
      if (call.taskId === null) continue;
      // The caller's thread says who awaits the call; if it could not answer, the task that made it.
      const awaiting = callers.get(`${call.linkId}/${call.callId}`) ?? (call.callerTaskId === null ? [] : [call.callerTaskId]);
      const list = served.get(call.taskId);
      if (list === undefined) served.set(call.taskId, awaiting.slice());
      else for (const id of awaiting) list.push(id);
    }
    for (const task of part.tasks) {
      const remote = served.get(task.taskId);
      if (remote === undefined) {
        tasks.push(task);
        continue;
      }
      const local = new Set(task.awaitedBy);
      const awaitedBy = task.awaitedBy.slice();
      for (const id of remote) if (!local.has(id)) awaitedBy.push(id);
      tasks.push({ ...task, awaitedBy });
    }
  }
  // Calls whose far side runs no task (a plain function's Promise): a leaf of the tasks awaiting them.
  const servedByTask = new Set<string>();
  for (const part of parts) for (const call of part.callsIn) if (call.taskId !== null) servedByTask.add(`${call.linkId}/${call.callId}`);
  const withLeaves = new Map<number, string[]>();
  for (const part of parts) {
    for (const call of part.callsOut) {
      if (servedByTask.has(`${call.linkId}/${call.callId}`)) continue;
      for (const id of call.awaitedBy) {
        const leaves = withLeaves.get(id);
        if (leaves === undefined) withLeaves.set(id, [call.description]);
        else leaves.push(call.description);
      }
    }
  }
  const joined = tasks.map((task) => {
    const extra = withLeaves.get(task.taskId);
    return extra === undefined ? task : { ...task, leaves: [...task.leaves, ...extra] };
  });
  return {
    at: Date.now(),
    threads: parts.map(({ threadId, threadName, responsive, blockedFor, health, loops }) => ({ threadId, threadName, responsive, blockedFor, health, loops })),
    tasks: joined,
  };
}

/**
 * Snapshot every task of every loop in every thread of this process (asyncio 3.14's
 * `python -m asyncio ps`, in-process): thread, loop, task id and name, coroutine, state, what it
 * awaits, and for how long.
 *
 * @example
 * ```ts
 * for (const task of await ps()) console.log(task.threadName, task.name, task.awaiting, task.waitingFor);
 * ```
 */
export function ps(options?: SnapshotOptions): YieldablePromise<TaskInfo[]> {
  return yieldable(psAsync(options));
}

async function psAsync(options?: SnapshotOptions): Promise<TaskInfo[]> {
  const { tasks } = await snapshot({ timeout: deadlineOf(options, 'ps()') / 1000 });
  return tasks.map(({ threadId, threadName, loopId, taskId, name, coroutine, state, awaiting, waitingFor }) => ({
    threadId,
    threadName,
    loopId,
    taskId,
    name,
    coroutine,
    state,
    awaiting,
    waitingFor,
  }));
}

/**
 * The same snapshot as a tree of awaiting tasks across threads, as text (asyncio 3.14's
 * `pstree`): each thread with its loops' state and health, then every task under the task that
 * awaits it, pool jobs and comlink calls as leaves.
 *
 * @example
 * ```ts
 * console.log(await pstree());
 * // └── (T) Task-1 main() — MainThread, waiting 0.2 s for call 'work' in LoopThread 'svc'
 * //     └── (T) Task-2 work() — svc, waiting 0.2 s for a Future
 * ```
 */
export function pstree(options?: SnapshotOptions): YieldablePromise<string> {
  return yieldable(pstreeAsync(options));
}

async function pstreeAsync(options?: SnapshotOptions): Promise<string> {
  return formatTree(await snapshot({ timeout: deadlineOf(options, 'pstree()') / 1000 }));
}

/** Seconds as people read them. */
function seconds(value: number): string {
  if (value < 0.001) return `${Math.round(value * 1e6)} µs`;
  if (value < 0.01) return `${(value * 1000).toFixed(1)} ms`;
  if (value < 1) return `${Math.round(value * 1000)} ms`;
  return `${value.toFixed(1)} s`;
}

function threadLine(thread: ProcessSnapshot['threads'][number]): string {
  const who = `${thread.threadName} (thread ${thread.threadId})`;
  if (!thread.responsive) {
    return `${who}: unresponsive${thread.blockedFor === null ? '' : `, its loop running callbacks for ${seconds(thread.blockedFor)} without a break`}`;
  }
  const loops = thread.loops
    .filter((loop) => loop.state !== 'closed')
    .map((loop) => `loop 0x${loop.loopId.toString(16)} ${loop.state}, ${loop.tasks} task${loop.tasks === 1 ? '' : 's'}, ${loop.ready} ready, ${loop.timers} timer${loop.timers === 1 ? '' : 's'}`);
  const health = thread.health === null ? '' : `; lag p99 ${seconds(thread.health.lag.p99)}, max ${seconds(thread.health.lag.max)}, busy ${(thread.health.utilization * 100).toFixed(0)}%`;
  return `${who}: ${loops.length === 0 ? 'no open loop' : loops.join('; ')}${health}`;
}

function taskLabel(task: TaskRow): string {
  const where = task.threadName ?? `thread ${task.threadId}`;
  const state = task.state === 'running' ? 'running' : task.awaiting === null ? `${task.state}, ready to run` : `${task.state === 'cancelling' ? 'cancelling, ' : ''}waiting ${seconds(task.waitingFor)} for ${task.awaiting}`;
  return `(T) ${task.name} ${task.stack.join(' ← ')} — ${where}, ${state}`;
}

/** The mark of a leaf: (J) a pool job, (R) a call to another thread running no task there (yet), (C) a comlink call. */
function leafKind(leaf: string): string {
  if (leaf.startsWith('job ')) return '(J)';
  if (leaf.startsWith('call ')) return '(R)';
  return '(C)';
}

/** The snapshot as text: the threads, then the forest of tasks by who awaits whom. */
export function formatTree(snap: ProcessSnapshot): string {
  const drawing = _treeInTurns(snap);
  for (;;) {
    const step = drawing.next();
    if (step.done === true) return step.value;
  }
}

/** Lines drawn between two pauses of `_treeInTurns`. */
const LINES_PER_TURN = 2000;

/**
 * @internal formatTree's text, drawn a top-level task at a time: it pauses (yields) once some
 * two thousand lines are drawn, between two top-level tasks, so that the monitor can draw a big
 * tree a turn of the event loop at a time; returns the text.
 */
export function* _treeInTurns(snap: ProcessSnapshot): Generator<void, string, void> {
  const lines = snap.threads.map(threadLine);
  const children = new Map<number, TaskRow[]>();
  const known = new Set<number>();
  for (const task of snap.tasks) known.add(task.taskId);
  const roots: TaskRow[] = [];
  for (const task of snap.tasks) {
    let parents = 0;
    for (const parent of task.awaitedBy) {
      if (!known.has(parent)) continue;
      parents++;
      const kids = children.get(parent);
      if (kids === undefined) children.set(parent, [task]);
      else kids.push(task);
    }
    if (parents === 0) roots.push(task);
  }
  lines.push('');
  if (snap.tasks.length === 0) lines.push('(no tasks)');
  const drawn = new Set<number>();
  const draw = (task: TaskRow, prefix: string, last: boolean, top: boolean): void => {
    const branch = top ? '└── ' : last ? '└── ' : '├── ';
    if (drawn.has(task.taskId)) {
      lines.push(`${prefix}${branch}(T) ${task.name} (awaited by more than one task: drawn above)`);
      return;
    }
    drawn.add(task.taskId);
    lines.push(`${prefix}${branch}${taskLabel(task)}`);
    const kids = children.get(task.taskId);
    const kidCount = kids === undefined ? 0 : kids.length;
    let leaves: string[] | null = null;
    if (task.leaves.length > 0) {
      // Identical leaves (a gather of 24 jobs of one function) as one line with a count.
      const counted = new Map<string, number>();
      for (const leaf of task.leaves) counted.set(leaf, (counted.get(leaf) ?? 0) + 1);
      leaves = [...counted].map(([leaf, count]) => `${leafKind(leaf)} ${count > 1 ? `${count} × ` : ''}${leaf}`);
    }
    const count = kidCount + (leaves === null ? 0 : leaves.length);
    if (count === 0) return;
    const below = prefix + (top || last ? '    ' : '│   ');
    for (let i = 0; i < kidCount; i++) draw((kids as TaskRow[])[i] as TaskRow, below, i === count - 1, false);
    if (leaves !== null) leaves.forEach((leaf, i) => lines.push(`${below}${kidCount + i === count - 1 ? '└── ' : '├── '}${leaf}`));
  };
  let paused = lines.length;
  for (const root of roots) {
    draw(root, '', true, true);
    if (lines.length - paused >= LINES_PER_TURN) {
      paused = lines.length;
      yield;
    }
  }
  // Tasks in a cycle of awaiting (a task awaiting itself through others) have no root: draw them too.
  for (const task of snap.tasks) {
    if (drawn.has(task.taskId)) continue;
    draw(task, '', true, true);
    if (lines.length - paused >= LINES_PER_TURN) {
      paused = lines.length;
      yield;
    }
  }
  // Names come from the app (and, from outside, from another process): never raw to a terminal.
  return lines.map(printable).join('\n');
}

/**
 * A snapshot's tasks as a table, as `npx multiloop ps <pid>` prints them: asyncio 3.14's columns
 * (thread id, task id and name, coroutine, who awaits it) plus the thread's name, the loop and its
 * state, the task's state and how long it has been waiting, and what it awaits.
 */
export function formatTable(snap: ProcessSnapshot): string {
  const header = ['tid', 'thread', 'loop id', 'loop state', 'task id', 'task name', 'coroutine', 'state', 'waiting', 'awaiting', 'awaiter name', 'awaiter id'];
  const names = new Map(snap.tasks.map((task) => [task.taskId, task.name]));
  const loopStates = new Map(snap.threads.flatMap((thread) => thread.loops.map((loop) => [loop.loopId, loop.state])));
  const cells = snap.tasks.map((row) => {
    const awaiters = row.awaitedBy.filter((id) => names.has(id));
    return [
      String(row.threadId),
      row.threadName ?? '',
      `0x${row.loopId.toString(16)}`,
      loopStates.get(row.loopId) ?? '',
      `0x${row.taskId.toString(16)}`,
      row.name,
      row.stack.join(' ← '),
      row.state,
      row.state === 'running' || row.awaiting === null ? '' : seconds(row.waitingFor),
      row.awaiting ?? '',
      awaiters.map((id) => names.get(id)).join(', '),
      awaiters.map((id) => `0x${id.toString(16)}`).join(', '),
    ].map(printable);
  });
  // A loop, not Math.max(...cells): spread arguments overflow the stack past some 100k tasks.
  const widths = header.map((title, i) => cells.reduce((width, cell) => Math.max(width, (cell[i] as string).length), title.length));
  const line = (cell: string[]): string => cell.map((text, i) => text.padEnd(widths[i] as number)).join('  ').trimEnd();
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...cells.map(line)].join('\n');
}
