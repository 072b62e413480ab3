/**
 * Node's async context (AsyncLocalStorage stores) for Tasks: a task takes the async context in
 * force where it is created and runs each step in it, as it runs each step in its ContextVar
 * context. The context is held by an AsyncResource made at creation; a step runs through its
 * `runInAsyncScope`, so `als.run()`/`als.enterWith()` inside a step stay inside the task, and
 * Promises the step creates continue in the task's stores. The context also names the task
 * (`stepOwner`), so ContextVar reads in those Promise reactions find the task's values.
 *
 * Cost: nothing until some AsyncLocalStorage is used in the process or a ContextVar is set (or a
 * storage registered to travel). Node says nowhere whether a storage is used, so this module
 * looks once, as it loads (a store in force then), and otherwise waits for the first
 * `run()`/`enterWith()` of any AsyncLocalStorage: the prototype's two methods are wrapped until
 * that first call, which turns `asyncContextInUse` on and puts the originals back. Until then a
 * task holds no AsyncResource and a step reads one boolean. A storage used only before multiloop
 * was loaded, and never again, goes unseen: its later stores would be (run/enterWith).
 */
import { AsyncLocalStorage, AsyncResource, executionAsyncResource } from 'node:async_hooks';

/** Whether any AsyncLocalStorage was used in this process: from then on tasks capture async context. */
export let asyncContextInUse = false;

/** The slot a Task keeps its AsyncResource in; null for a task made before any store was used. */
export interface ScopedTask {
  _asyncScope: AsyncResource | null;
}

/**
 * The task whose async context is in force: in its steps, and in the Promise reactions of async
 * code they started, where no step runs. ContextVar reads there find the task's context through it
 * (contextvars.ts), so async code a task awaits sees the task's values across its own awaits.
 */
const stepOwner = new AsyncLocalStorage<ScopedTask>();

/** Set by task.ts: the task whose step runs now, if any. */
let steppingTask: () => ScopedTask | null = () => null;
/** Whether `stepOwner` was entered for the rest of a step that had no async context of its own. */
let ownerEntered = false;

const TASK_RESOURCE = 'multiloop.Task';
const RESOURCE_OPTIONS = { requireManualDestroy: true } as const;

/** The symbol under which an AsyncResource keeps its AsyncContextFrame (Node 22+), if any. */
const frameSymbol = Object.getOwnPropertySymbols(new AsyncResource(TASK_RESOURCE, RESOURCE_OPTIONS)).find(
  (symbol) => symbol.description === 'context_frame',
);

/**
 * Whether stores live in AsyncContextFrames (Node 24's default): `enterWith()` then replaces the
 * frame in force, which `runInAsyncScope` puts back afterwards, so a step that changed it must be
 * captured again. With async_hooks stores (Node 20, 22) `enterWith()` writes on the AsyncResource
 * running, the task's own, and nothing needs capturing. Probed with a private storage; with
 * async_hooks it is disabled right after, so its hook goes off again when no other storage is on.
 */
function probeFrames(): boolean {
  if (frameSymbol === undefined) return false;
  const probe = new AsyncLocalStorage<boolean>();
  const resource = probe.run(true, () => new AsyncResource(TASK_RESOURCE, RESOURCE_OPTIONS));
  const frames = (resource as unknown as Record<symbol, unknown>)[frameSymbol] !== undefined;
  // With frames, disable() would leave a frame in force; there is no hook to turn off either.
  if (!frames) probe.disable();
  return frames;
}

/** An AsyncResource made as the module loads: the async context of a task made before any store was used. */
const emptyScope = new AsyncResource(TASK_RESOURCE, RESOURCE_OPTIONS);

/** Puts Node's own `run` and `enterWith` back, while they are watched. */
let stopWatching: (() => void) | null = null;

/** Turn capturing on (a store was used, or an AsyncLocalStorage registered to travel). */
export function useAsyncContext(): void {
  if (asyncContextInUse) return;
  asyncContextInUse = true;
  stopWatching?.();
  enterStepOwner();
}

/** @internal Tell this module how to find the task whose step runs now (task.ts). */
export function _setSteppingTask(find: () => ScopedTask | null): void {
  steppingTask = find;
}

/** The task whose async context is in force now, if any: see `stepOwner`. */
export function asyncContextOwner(): ScopedTask | undefined {
  return stepOwner.getStore();
}

/**
 * Capturing turned on inside a step of a task made before: Promises the rest of that step makes
 * must find the task (until `adoptFirstStore` takes it back after the step).
 */
function enterStepOwner(): void {
  const task = steppingTask();
  if (task === null || task._asyncScope !== null) return;
  stepOwner.enterWith(task);
  ownerEntered = true;
}

/** Whether a store is in force as this module loads (an AsyncLocalStorage used before multiloop was imported). */
function storeInForceNow(): boolean {
  if (frameSymbol !== undefined) {
    const resource = new AsyncResource(TASK_RESOURCE, RESOURCE_OPTIONS) as unknown as Record<symbol, unknown>;
    if (resource[frameSymbol] !== undefined) return true;
  }
  const running = executionAsyncResource() as Record<symbol, unknown>;
  return Object.getOwnPropertySymbols(running).some((symbol) => symbol.description === 'kResourceStore' && running[symbol] !== undefined);
}

/**
 * The storage whose `enterWith()` was the first use of a store, with the original method: a step
 * of a task made before had no async context of its own, so that store went to whatever ran the
 * step, until `adoptFirstStore` takes it back.
 */
let firstEntered: { storage: unknown; enterWith: (...args: unknown[]) => unknown } | null = null;

/** Wrap `run` and `enterWith` of AsyncLocalStorage until the first call to either turns capturing on. */
function watchForFirstStore(): void {
  const prototype = AsyncLocalStorage.prototype as unknown as Record<'run' | 'enterWith', (...args: unknown[]) => unknown>;
  const originalRun = prototype.run;
  const originalEnterWith = prototype.enterWith;
  const runDescriptor = Object.getOwnPropertyDescriptor(prototype, 'run');
  const enterWithDescriptor = Object.getOwnPropertyDescriptor(prototype, 'enterWith');
  if (originalRun === undefined || originalEnterWith === undefined || runDescriptor === undefined || enterWithDescriptor === undefined) {
    asyncContextInUse = true;
    return;
  }
  const restore = (): void => {
    asyncContextInUse = true;
    stopWatching = null;
    // Only when nobody wrapped them again meanwhile; else ours stay, passing calls through.
    if (prototype.run === watchedRun) Object.defineProperty(prototype, 'run', runDescriptor);
    if (prototype.enterWith === watchedEnterWith) Object.defineProperty(prototype, 'enterWith', enterWithDescriptor);
    enterStepOwner();
  };
  stopWatching = restore;
  const watchedRun = function run(this: unknown, ...args: unknown[]): unknown {
    if (!asyncContextInUse) restore();
    return Reflect.apply(originalRun, this, args);
  };
  const watchedEnterWith = function enterWith(this: unknown, ...args: unknown[]): unknown {
    if (!asyncContextInUse) {
      restore();
      const task = steppingTask();
      if (task !== null && task._asyncScope === null) firstEntered = { storage: this, enterWith: originalEnterWith };
    }
    return Reflect.apply(originalEnterWith, this, args);
  };
  Object.defineProperty(prototype, 'run', { ...runDescriptor, value: watchedRun });
  Object.defineProperty(prototype, 'enterWith', { ...enterWithDescriptor, value: watchedEnterWith });
}

// Looked at before the probe, which leaves traces of its own.
if (storeInForceNow()) asyncContextInUse = true;
const usesFrames = probeFrames();
if (!asyncContextInUse) watchForFirstStore();

/** The async context in force now. */
function newResource(): AsyncResource {
  return new AsyncResource(TASK_RESOURCE, RESOURCE_OPTIONS);
}

/** The async context in force now, for `task` created now, with `task` as its owner (call only while `asyncContextInUse`). */
export function captureAsyncContext(task: ScopedTask): AsyncResource {
  return stepOwner.run(task, newResource);
}

/**
 * Run `step(task)` in the task's async context; a task made before any store was used gets an
 * empty one of its own now (no store was in force where it was made).
 */
export function runInTaskScope<T extends ScopedTask>(task: T, step: (task: T) => void): void {
  const scope = (task._asyncScope ??= emptyScope.runInAsyncScope(captureAsyncContext, null, task));
  if (usesFrames) scope.runInAsyncScope(stepAndRecapture, null, task, step);
  else scope.runInAsyncScope(step, null, task);
}

/**
 * After a step that ran without an async context and used the first store of the process: the
 * task keeps what is in force now (an `enterWith()` of that step) as its own, and the store
 * leaves what ran the step, so other tasks never see it.
 */
export function adoptFirstStore(task: ScopedTask): void {
  task._asyncScope = captureAsyncContext(task);
  if (ownerEntered) {
    ownerEntered = false;
    stepOwner.enterWith(undefined as unknown as ScopedTask);
  }
  const entered = firstEntered;
  if (entered === null) return;
  firstEntered = null;
  Reflect.apply(entered.enterWith, entered.storage, [undefined]);
}

/** Run a step, then keep the frame it leaves in force (an `enterWith()` in it) for the task's next steps. */
function stepAndRecapture<T extends ScopedTask>(task: T, step: (task: T) => void): void {
  try {
    step(task);
  } finally {
    task._asyncScope = newResource();
  }
}
