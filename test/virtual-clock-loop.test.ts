/**
 * multiloop/testing's VirtualClockLoop (Trio's MockClock): the clock moves by jump() or, with
 * autojump, straight to the next timer when nothing but timers is left; what runs outside the
 * loop (a Promise, a pool job, a LoopThread call) holds it.
 */
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { Coroutine } from '../src/coroutines.js';
import { TimeoutError } from '../src/exceptions.js';
import { getRunningLoop } from '../src/events.js';
import { LoopThread } from '../src/loop-thread.js';
import { run } from '../src/runners.js';
import { openConnection, startServer } from '../src/streams.js';
import { createSubprocessExec } from '../src/subprocess.js';
import { sleep, waitFor } from '../src/tasks.js';
import { VirtualClockLoop } from '../src/testing/index.js';
import { toThread } from '../src/threads.js';
import { workerFn } from '../src/worker-fn.js';

const SERVICE = new URL('./fixtures/lt-service.mjs', import.meta.url);
const slowAddInPool = workerFn<[number, number, number], number>(new URL('./fixtures/pool-math.mjs', import.meta.url), 'slowAdd');

function virtual<T>(main: Coroutine<T>, options?: { start?: number; autojump?: boolean }): Promise<T> {
  return run(main, { loopFactory: () => new VirtualClockLoop(options) });
}

/** The error `body` raised, or null. */
function* raised(body: () => Coroutine<unknown>): Coroutine<unknown> {
  try {
    yield* body();
    return null;
  } catch (error) {
    return error;
  }
}

describe('VirtualClockLoop', () => {
  it('starts at `start` and jumps straight to each timer: an hour of sleep takes no time', async () => {
    const times = await virtual(
      (function* () {
        const loop = getRunningLoop();
        const seen = [loop.time()];
        yield* sleep(3600);
        seen.push(loop.time());
        yield* sleep(0.25);
        seen.push(loop.time());
        return seen;
      })(),
      { start: 100 },
    );
    expect(times).toEqual([100, 3700, 3700.25]);
  });

  it('runs a retry backoff under a deadline in the order real time gives it, the deadline at its virtual second', async () => {
    const outcome = await virtual(
      (function* () {
        const loop = getRunningLoop();
        const attempts: number[] = [];
        function* retrying(): Coroutine<never> {
          for (let delay = 1; ; delay *= 2) {
            attempts.push(loop.time());
            yield* sleep(delay);
          }
        }
        const error = yield* raised(() => waitFor(retrying(), 30));
        return { attempts, error, at: loop.time() };
      })(),
    );
    expect(outcome.attempts).toEqual([0, 1, 3, 7, 15]);
    expect(outcome.error).toBeInstanceOf(TimeoutError);
    expect(outcome.at).toBe(30);
  });

  it('without autojump moves only by jump(): a timer runs once the clock passed it', async () => {
    const loop = new VirtualClockLoop({ autojump: false });
    const seen: string[] = [];
    const done = loop.runUntilComplete(
      (function* () {
        loop.callLater(10, () => seen.push(`timer at ${loop.time()}`));
        yield* sleep(10);
        seen.push(`sleep over at ${loop.time()}`);
      })(),
    );
    // Jumps from outside the loop's callbacks, each after the loop had every chance to run.
    await new Promise((resolve) => setTimeout(resolve, 20));
    seen.push('jump 4');
    loop.jump(4);
    await new Promise((resolve) => setTimeout(resolve, 20));
    seen.push('jump 6');
    loop.jump(6);
    await done;
    loop.close();
    expect(seen).toEqual(['jump 4', 'jump 6', 'timer at 10', 'sleep over at 10']);
  });

  it('waits for a Promise a task awaits rather than jumping past its timeout', async () => {
    const outcome = await virtual(
      (function* () {
        const later = new Promise<string>((resolve) => setTimeout(() => resolve('answered'), 30));
        const value = yield* waitFor(later, 5);
        return { value, at: getRunningLoop().time() };
      })(),
    );
    expect(outcome).toEqual({ value: 'answered', at: 0 });
  });

  it('waits for a pool job and for a LoopThread call, which run in real time', async () => {
    const outcome = await virtual(
      (function* () {
        const fromPool = yield* waitFor(toThread(slowAddInPool, 1, 2, 30), 5);
        const thread = yield* LoopThread.start(SERVICE);
        try {
          const fromThread = yield* waitFor(thread.call<number>('slowAdd', 3, 4, 0.03), 5);
          return { fromPool, fromThread, at: getRunningLoop().time() };
        } finally {
          yield* thread.close();
        }
      })(),
    );
    expect(outcome).toEqual({ fromPool: 3, fromThread: 7, at: 0 });
  });

  it('does not wait for a socket: a read that nothing answers times out at its virtual second', async () => {
    const server = createServer(() => undefined);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const outcome = await virtual(
        (function* () {
          const [reader, writer] = yield* openConnection('127.0.0.1', port);
          try {
            const error = yield* raised(() => waitFor(reader.read(10), 7));
            return { error, at: getRunningLoop().time() };
          } finally {
            writer.close();
          }
        })(),
      );
      expect(outcome.error).toBeInstanceOf(TimeoutError);
      expect(outcome.at).toBe(7);
    } finally {
      server.close();
    }
  });

  it('waits for a connect, a bind and a spawn under way: they always end, in real time', async () => {
    const server = createServer((socket) => socket.end('hello'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const outcome = await virtual(
        (function* () {
          // Nothing else can run while these are under way: without the hold, each timeout fired first.
          const [reader, writer] = yield* waitFor(openConnection('127.0.0.1', port), 3);
          const greeting = new TextDecoder().decode(yield* reader.read(10));
          writer.close();
          const own = yield* waitFor(startServer(() => undefined, '127.0.0.1', 0), 3);
          own.close();
          const child = yield* waitFor(createSubprocessExec(process.execPath, ['-e', '0']), 3);
          const code = yield* child.wait();
          return { greeting, code, at: getRunningLoop().time() };
        })(),
      );
      expect(outcome).toEqual({ greeting: 'hello', code: 0, at: 0 });
    } finally {
      server.close();
    }
  });

  it('refuses bad options and a jump backwards, naming them', () => {
    expect(() => new VirtualClockLoop({ start: Number.NaN })).toThrow(new TypeError('options.start must be a finite number of seconds, got NaN'));
    expect(() => new VirtualClockLoop({ autojump: 'yes' as never })).toThrow(new TypeError("options.autojump must be a boolean, got 'yes'"));
    expect(() => new VirtualClockLoop(null as never)).toThrow(new TypeError('VirtualClockLoop options must be an object, got null'));
    const loop = new VirtualClockLoop();
    try {
      expect(() => loop.jump(-1)).toThrow(new RangeError("time can't go backwards: jump(-1)"));
      expect(() => loop.jump('1' as never)).toThrow(new TypeError("jump() needs a number of seconds, got '1'"));
      expect(() => loop.jump(Infinity)).toThrow(new RangeError('jump() needs a finite number of seconds, got Infinity'));
      loop.jump(2.5);
      expect(loop.time()).toBe(2.5);
    } finally {
      loop.close();
    }
  });
});
