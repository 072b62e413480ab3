/**
 * Call graphs (asyncio.graph, Python 3.14): which coroutine a task runs, and who awaits it —
 * tasks awaiting it directly, and through `gather`, `shield` and `TaskGroup`.
 *
 * JavaScript shows no frames of a suspended generator, so a task's call stack is its own
 * coroutine function (asyncio would also list the coroutines it awaits through `yield*`); in
 * debug mode each entry says where the coroutine is suspended (`file:line`, through V8's
 * inspector, which costs a round trip), else its location is null. The awaited-by side is
 * asyncio's: read from the futures' done callbacks when a graph is captured, so nothing is paid
 * while tasks run.
 */
import { RuntimeError } from './exceptions.js';
import { Future } from './futures.js';
import { remoteAwaitersOf, waiterOf } from './internal/awaited-by.js';
import { idOf } from './internal/introspect.js';
import { captureSuspension, suspendedAt, suspension } from './internal/suspension.js';
import { repr } from './internal/format.js';
import { generatorLocation, generatorName } from './internal/generators.js';
import { _getRunningLoop } from './internal/running.js';
import { Task, currentTask } from './task.js';

/** One coroutine of a call stack (asyncio.FrameCallGraphEntry; JavaScript shows no frames of a suspended generator). */
export interface FrameCallGraphEntry {
  /** The coroutine's (generator function's) name, as `fetchUser` (printed as `fetchUser()`). */
  readonly name: string;
  /** Where it is suspended (`file:line`), when known (debug mode), else null. */
  readonly location: string | null;
}

/** A task or future in another thread, as a call graph names it. */
export interface RemoteTaskRef {
  /** The thread's id (`threadId` of `node:worker_threads`; 0 is the main thread). */
  readonly threadId: number;
  /** The thread's name (a LoopThread's `name`), or null. */
  readonly threadName: string | null;
  /** The remote task's id, as `ps()` gives it. */
  readonly taskId: number;
  /** The remote task's name. */
  readonly taskName: string;
}

/** The awaited-by graph of a future (asyncio.FutureCallGraph). */
export interface FutureCallGraph {
  /** The future or task, or a reference to one in another thread. */
  readonly future: Future<unknown> | RemoteTaskRef;
  /** Its coroutine chain, innermost first (empty for a plain future). */
  readonly callStack: readonly FrameCallGraphEntry[];
  /** The graphs of what awaits it: tasks, gather/shield futures, TaskGroup bodies. */
  readonly awaitedBy: readonly FutureCallGraph[];
}

/** Options of the call-graph functions (asyncio 3.14's keywords). */
export interface CallGraphOptions {
  /** Skip this many innermost entries of the current task's stack, counting the caller itself (default 1: none skipped). */
  depth?: number;
  /** Keep at most this many call-stack entries (negative: the outermost), null for all. */
  limit?: number | null;
}

function checkOptions(options: CallGraphOptions | undefined, what: string): { depth: number; limit: number | null } {
  const depth = options?.depth ?? 1;
  const limit = options?.limit ?? null;
  if (!Number.isInteger(depth) || depth < 0) throw new RangeError(`${what} depth must be a non-negative integer, got ${repr(depth)}`);
  if (limit !== null && !Number.isInteger(limit)) throw new TypeError(`${what} limit must be an integer or null, got ${repr(limit)}`);
  return { depth, limit };
}

/**
 * The call stack of `future`, innermost first: for the task running now, the frames of this
 * very moment (from the caller of the graph function `entry` down to the task's step); for a
 * parked task in debug mode, the frames of its `yield*` chain where it parked; otherwise its
 * coroutine alone (with its location in debug mode).
 */
function callStackOf(future: Future<unknown>, skip: number, limit: number | null, entry: (...args: never[]) => unknown): FrameCallGraphEntry[] {
  if (!(future instanceof Task)) return [];
  const coro = future.getCoro();
  if (coro === null) return [];
  const loop = future.getLoop();
  let stack: FrameCallGraphEntry[] | undefined;
  if (currentTask(loop) === future) {
    captureSuspension(entry);
    stack = suspension.frames ?? undefined;
    suspension.frames = null;
  } else if (future._futWaiter !== null && loop.getDebug()) {
    stack = suspendedAt.get(future);
  }
  if (stack === undefined) {
    // generatorName says `fetchUser()`, as ps() prints a coroutine.
    const named = generatorName(coro);
    stack = [{ name: named === null ? 'anonymous' : named.slice(0, -2), location: loop.getDebug() ? generatorLocation(coro) : null }];
  }
  stack = stack.slice(skip);
  if (limit !== null) stack = limit >= 0 ? stack.slice(0, limit) : stack.slice(limit);
  return stack;
}

/** The graph of `future` and of everything that awaits it, each future once; callers in other threads as references. */
function buildGraph(
  future: Future<unknown>,
  skip: number,
  limit: number | null,
  seen: Set<Future<unknown>>,
  entry: (...args: never[]) => unknown,
): FutureCallGraph {
  seen.add(future);
  const awaitedBy: FutureCallGraph[] = [];
  for (const [callback] of future._entries()) {
    const waiter = waiterOf(callback);
    if (waiter === undefined || seen.has(waiter)) continue;
    awaitedBy.push(buildGraph(waiter, 0, limit, seen, entry));
  }
  for (const ref of remoteAwaitersOf(future)) awaitedBy.push({ future: ref, callStack: [], awaitedBy: [] });
  return { future, callStack: callStackOf(future, skip, limit, entry), awaitedBy };
}

/**
 * The call graph of `future` (default: the current task), or null when there is no current task
 * (capture_call_graph). Outside a running loop and without `future`: RuntimeError.
 *
 * @example
 * ```ts
 * function* worker(): Coroutine<void> {
 *   const graph = captureCallGraph()!;
 *   graph.awaitedBy[0]!.future; // the gather that waits for this task
 * }
 * ```
 */
export function captureCallGraph(future: Future<unknown> | null = null, options?: CallGraphOptions): FutureCallGraph | null {
  return capture(future, options, captureCallGraph);
}

function capture(future: Future<unknown> | null, options: CallGraphOptions | undefined, entry: (...args: never[]) => unknown): FutureCallGraph | null {
  const { depth, limit } = checkOptions(options, 'captureCallGraph()');
  if (future !== null) {
    if (!(future instanceof Future)) throw new TypeError(`captureCallGraph() needs a Future or a Task, got ${repr(future)}`);
    const current = currentTask(future.getLoop()) === future;
    return buildGraph(future, current ? Math.max(0, depth - 1) : 0, limit, new Set(), entry);
  }
  const loop = _getRunningLoop();
  if (loop === null) {
    throw new RuntimeError('captureCallGraph() is called outside of a running event loop and no future to introspect was provided');
  }
  const task = currentTask(loop);
  if (task === null) return null;
  return buildGraph(task, Math.max(0, depth - 1), limit, new Set(), entry);
}

/** A graph's future as asyncio 3.14 names it: `Task(name='...', id=0x..)` or `Future(id=0x..)`. */
function describe(future: Future<unknown> | RemoteTaskRef): string {
  if (!(future instanceof Future)) {
    return `Task(name=${repr(future.taskName)}, id=0x${future.taskId.toString(16)}, thread=${future.threadName ?? future.threadId})`;
  }
  if (future instanceof Task) return `Task(name=${repr(future.getName())}, id=0x${idOf(future).toString(16)})`;
  return `Future(id=0x${idOf(future).toString(16)})`;
}

function render(graph: FutureCallGraph, lines: string[], level: number): void {
  const indent = '    '.repeat(level);
  lines.push(`${indent}* ${describe(graph.future)}`);
  if (graph.callStack.length > 0) {
    lines.push(`${indent}  + Call stack:`);
    for (const entry of graph.callStack) {
      const at = entry.location === null ? null : /^(.*?):(\d+)(?::\d+)?$/.exec(entry.location);
      lines.push(at === null ? `${indent}  |   in async ${entry.name}()` : `${indent}  |   File ${repr(at[1])}, line ${at[2]}, in async ${entry.name}()`);
    }
  }
  if (graph.awaitedBy.length > 0) {
    lines.push(`${indent}  + Awaited by:`);
    for (const waiter of graph.awaitedBy) render(waiter, lines, level + 1);
  }
}

/**
 * `captureCallGraph` as text, in asyncio 3.14's layout (format_call_graph); empty when there is
 * no current task.
 *
 * @example
 * ```ts
 * console.log(formatCallGraph(task));
 * // * Task(name='worker', id=0x2)
 * //   + Call stack:
 * //   |   in async worker()
 * //   + Awaited by:
 * //     * Task(name='Task-1', id=0x1)
 * ```
 */
export function formatCallGraph(future: Future<unknown> | null = null, options?: CallGraphOptions): string {
  return formatGraph(future, options, formatCallGraph);
}

/** The text of the graph; `entry` is the public function called, whose caller the current task's stack starts at. */
function formatGraph(future: Future<unknown> | null, options: CallGraphOptions | undefined, entry: (...args: never[]) => unknown): string {
  const graph = capture(future, options, entry);
  if (graph === null) return '';
  const lines: string[] = [];
  render(graph, lines, 0);
  return lines.join('\n');
}

/**
 * Print `formatCallGraph` to `options.file` (default: stdout) (print_call_graph).
 *
 * @example
 * ```ts
 * printCallGraph(); // the current task and what awaits it
 * ```
 */
export function printCallGraph(future: Future<unknown> | null = null, options?: CallGraphOptions & { file?: { write(text: string): unknown } }): void {
  const text = formatGraph(future, options, printCallGraph);
  (options?.file ?? process.stdout).write(`${text}\n`);
}
