/**
 * run() and Runner (asyncio.runners): a fresh loop for a main coroutine, then an orderly
 * teardown: cancel leftover tasks, finalize, shut the default executor down, close the loop.
 */
import { yieldable } from './internal/yieldable.js';
import type { YieldablePromise } from './coroutines.js';
import { isMainThread } from 'node:worker_threads';
import type { EventLoop } from './base-events.js';
import { copyContext, type Context } from './contextvars.js';
import { _isThenable, isCoroutine, type Awaitable, type Coroutine } from './coroutines.js';
import { newEventLoop, setEventLoop } from './events.js';
import { CancelledError, KeyboardInterrupt, RuntimeError } from './exceptions.js';
import { _hasSignalHandler } from './signals.js';
import { _getRunningLoop } from './internal/running.js';
import { CLOSING } from './internal/messages.js';
import { _checkSignal, type SignalOption } from './interop.js';
import { allTasks, ensureFuture, type Task } from './task.js';
import { Future } from './futures.js';

/** asyncio's THREAD_JOIN_TIMEOUT: how long teardown waits for the default executor, in seconds. */
const THREAD_JOIN_TIMEOUT = 300;

/** Options of `run` and `Runner`. */
export interface RunOptions {
  /** Set the loop's debug mode. */
  debug?: boolean;
  /** Create the loop with this instead of `newEventLoop()` (asyncio's loop_factory). */
  loopFactory?: () => EventLoop;
}

/** The lifecycle of a Runner. */
const State = { Created: 0, Initialized: 1, Closed: 2 } as const;
type State = (typeof State)[keyof typeof State];

/**
 * Run several coroutines on one loop and one context (asyncio.Runner).
 *
 * @example
 * ```ts
 * const runner = new Runner();
 * try {
 *   await runner.run(setup());
 *   await runner.run(serve());
 * } finally {
 *   await runner.close();
 * }
 * ```
 */
export class Runner {
  #state: State = State.Created;
  #debug: boolean | undefined;
  #loopFactory: (() => EventLoop) | undefined;
  #loop: EventLoop | null = null;
  #context: Context | null = null;
  #setEventLoop = false;
  #interruptCount = 0;

  constructor(options?: RunOptions) {
    this.#debug = options?.debug;
    this.#loopFactory = options?.loopFactory;
  }

  /**
   * Run `coro` to completion on the runner's loop, in `options.context` or the runner's own
   * context. Any awaitable is accepted, as in asyncio 3.14: a Future or a Promise (thenable) is
   * awaited by a coroutine of the runner's. In the main thread a first SIGINT cancels the task
   * (the Promise then rejects with KeyboardInterrupt); a second ends the process with exit code 130.
   *
   * @example
   * ```ts
   * await runner.run(main());
   * await runner.run(fetch(url)); // a Promise, awaited by a task of the runner's loop
   * ```
   */
  run<T>(coro: Awaitable<T>, options?: { context?: Context } & SignalOption): YieldablePromise<T> {
    return yieldable(this.#run(coro, options));
  }

  async #run<T>(coro: Awaitable<T>, options?: { context?: Context } & SignalOption): Promise<T> {
    if (_getRunningLoop() !== null) {
      closeIfCoroutine(coro);
      throw new RuntimeError('Runner.run() cannot be called from a running event loop');
    }
    const signal = _checkSignal(options?.signal, 'Runner.run()');
    if (signal?.aborted === true) {
      closeIfCoroutine(coro);
      throw signal.reason;
    }
    this.#lazyInit();
    let main: Coroutine<T>;
    if (isCoroutine(coro)) main = coro;
    else if (coro instanceof Future || _isThenable(coro)) main = wrapAwaitable(coro);
    else throw new TypeError('An asyncio.Future, a coroutine or an awaitable is required');
    const loop = this.#loop as EventLoop;
    const task = loop.createTask(main, { context: options?.context ?? (this.#context as Context) });

    let onSigint: (() => void) | null = null;
    if (isMainThread && process.listenerCount('SIGINT') === 0) {
      // A handler the loop installed itself (loop.addSignalHandler) takes SIGINT over, as in asyncio.
      onSigint = () => {
        if (!_hasSignalHandler(loop, 'SIGINT')) this.#onSigint(task);
      };
      process.on('SIGINT', onSigint);
    }
    this.#interruptCount = 0;
    try {
      return await loop.runUntilComplete(task, { signal });
    } catch (error) {
      if (error instanceof CancelledError && this.#interruptCount > 0) {
        const uncancel = (task as { uncancel?: () => number }).uncancel;
        if (typeof uncancel === 'function' && uncancel.call(task) === 0) {
          exitWith130IfUncaught();
          throw new KeyboardInterrupt();
        }
      }
      throw error;
    } finally {
      if (onSigint !== null) process.off('SIGINT', onSigint);
    }
  }

  /** The runner's loop, created on first use. */
  getLoop(): EventLoop {
    this.#lazyInit();
    return this.#loop as EventLoop;
  }

  /**
   * Cancel leftover tasks, then the calls to other threads still in flight, finalize, shut down
   * the default executor and close the loop; a no-op unless initialized.
   */
  close(): YieldablePromise<void> {
    return yieldable(this.#close());
  }

  /** `await using runner = new Runner()`: `close()` when the scope ends. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #close(): Promise<void> {
    if (this.#state !== State.Initialized) return;
    const loop = this.#loop as EventLoop;
    try {
      await cancelAllTasks(loop);
      await cancelCallsInFlight(loop);
      // As coroutines, as asyncio.run awaits them: a Task each, so each takes two iterations
      // (its step, then its done callback), and tasks spawned meanwhile get as many steps.
      await loop.runUntilComplete(awaiting(() => loop.shutdownAsyncgens()));
      await loop.runUntilComplete(awaiting(() => loop.shutdownDefaultExecutor(THREAD_JOIN_TIMEOUT)));
    } finally {
      if (this.#setEventLoop) setEventLoop(null);
      loop.close();
      this.#loop = null;
      this.#state = State.Closed;
    }
  }

  #lazyInit(): void {
    if (this.#state === State.Closed) throw new RuntimeError('Runner is closed');
    if (this.#state === State.Initialized) return;
    if (this.#loopFactory === undefined) {
      this.#loop = newEventLoop();
      if (!this.#setEventLoop) {
        setEventLoop(this.#loop);
        this.#setEventLoop = true;
      }
    } else {
      this.#loop = this.#loopFactory();
    }
    if (this.#debug !== undefined) this.#loop.setDebug(this.#debug);
    this.#context = copyContext();
    this.#state = State.Initialized;
  }

  #onSigint(task: Task<unknown>): void {
    this.#interruptCount++;
    if (this.#interruptCount === 1 && !task.done()) {
      task.cancel();
      return;
    }
    process.exit(130);
  }
}

let exitCodeHooked = false;

/**
 * Make the process end with code 130 if the KeyboardInterrupt that run() raises reaches the top
 * uncaught, as Python's does (128 + SIGINT); Node would end it with 1.
 */
function exitWith130IfUncaught(): void {
  if (exitCodeHooked) return;
  exitCodeHooked = true;
  let interrupted = false;
  process.on('uncaughtExceptionMonitor', (error) => {
    if (error instanceof KeyboardInterrupt) interrupted = true;
  });
  // Node ends an uncaught exception with the exit code set by the time 'exit' was emitted.
  process.on('exit', () => {
    if (interrupted) process.exitCode = 130;
  });
}

/** Cancel every task of `loop`, wait until all are done, report errors they raised meanwhile. */
async function cancelAllTasks(loop: EventLoop): Promise<void> {
  const leftovers = [...allTasks(loop)];
  if (leftovers.length === 0) return;
  for (const task of leftovers) task.cancel();
  const allDone = loop.createFuture<void>();
  let remaining = leftovers.length;
  const countDone = (): void => {
    if (--remaining === 0 && !allDone.done()) allDone.setResult(undefined);
  };
  for (const task of leftovers) task.addDoneCallback(countDone);
  await loop.runUntilComplete(allDone);
  for (const task of leftovers) {
    if (task.cancelled()) continue;
    const exception = task.exception();
    if (exception !== null) {
      loop.callExceptionHandler({
        message: 'unhandled exception during asyncio.run() shutdown',
        exception,
        task,
      });
    }
  }
}

/**
 * Cancel the Futures still waiting for calls to other threads (a LoopThread's `call`, a
 * parent's), and the calls there, then let their done callbacks run: nothing awaited after
 * run() ends may stay pending forever.
 */
async function cancelCallsInFlight(loop: EventLoop): Promise<void> {
  if (loop._cancelCallsInFlight(CLOSING) === 0) return;
  const settled = loop.createFuture<void>();
  // Scheduled after the cancelled Futures' callbacks, so they run first.
  loop.callSoon(() => settled.setResult(undefined));
  await loop.runUntilComplete(settled);
}

/**
 * Run `main` on a fresh loop, then cancel leftovers, shut the executor down and close the
 * loop (asyncio.run). `main` may be any awaitable (asyncio 3.14): a coroutine, a Future, a
 * Promise. Aborting `options.signal` cancels `main`; once it ended cancelled (its `finally`
 * blocks ran) the Promise rejects with `signal.reason`; an already-aborted signal: `main`
 * never starts.
 *
 * @example
 * ```ts
 * function* main(): Coroutine<number> {
 *   yield* sleep(0.1);
 *   return 42;
 * }
 * console.log(await run(main())); // 42
 * ```
 */
export function run<T>(main: Awaitable<T>, options?: RunOptions & SignalOption): YieldablePromise<T> {
  return yieldable(runMain(main, options));
}

async function runMain<T>(main: Awaitable<T>, options?: RunOptions & SignalOption): Promise<T> {
  if (_getRunningLoop() !== null) {
    throw new RuntimeError('asyncio.run() cannot be called from a running event loop');
  }
  const runner = new Runner(options);
  try {
    return await runner.run(main, { signal: options?.signal });
  } finally {
    await runner.close();
  }
}

/** Close `aw` when it is a coroutine that will never run (asyncio leaves it to the "never awaited" warning). */
function closeIfCoroutine(aw: unknown): void {
  if (isCoroutine(aw)) aw.return(undefined);
}

/** The coroutine asyncio 3.14's Runner.run wraps a non-coroutine awaitable in (`_wrap_awaitable`): a Promise becomes a Future of the running loop. */
function* wrapAwaitable<T>(awaitable: Future<T> | PromiseLike<T>): Coroutine<T> {
  return yield* (awaitable instanceof Future ? awaitable : ensureFuture(awaitable));
}

/** A coroutine that awaits the Future `start()` gives, made when the coroutine first runs (asyncio's `async def` wrappers). */
function* awaiting(start: () => Future<void>): Coroutine<void> {
  yield* start();
}
