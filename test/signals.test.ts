/**
 * loop.addSignalHandler / removeSignalHandler with real signals sent to this process (vitest runs
 * each file in its own process), a worker thread that is refused, and run()'s SIGINT handling
 * giving way to a loop's own handler (in a child process).
 */
import { describe, expect, it } from 'vitest';
import { RuntimeError, getRunningLoop, newEventLoop, run, sleep } from '../src/index.js';
import { startFixture } from './helpers/child-process.js';
import { useThreads } from './helpers/loop-threads.js';

const threads = useThreads();


describe('addSignalHandler', () => {
  it('runs the callback with its arguments inside a loop iteration each time the signal arrives', async () => {
    const calls = await run(
      (function* () {
        const loop = getRunningLoop();
        const calls: Array<[string, number, boolean]> = [];
        loop.addSignalHandler('SIGUSR2', (what: string, n: number) => calls.push([what, n, loop._inDrive()]), 'usr2', 7);
        // Each signal is awaited until it arrived: removing the handler before a late one would
        // leave it to its default action, which ends the process.
        process.kill(process.pid, 'SIGUSR2');
        while (calls.length < 1) yield* sleep(0.005);
        process.kill(process.pid, 'SIGUSR2');
        while (calls.length < 2) yield* sleep(0.005);
        loop.removeSignalHandler('SIGUSR2');
        return calls;
      })(),
    );
    expect(calls).toEqual([
      ['usr2', 7, true],
      ['usr2', 7, true],
    ]);
  });

  it('replaces the previous handler; removeSignalHandler says whether there was one and stops the calls', async () => {
    const seen = await run(
      (function* () {
        const loop = getRunningLoop();
        const calls: string[] = [];
        const before = process.listenerCount('SIGUSR2');
        loop.addSignalHandler('SIGUSR2', () => calls.push('first'));
        loop.addSignalHandler(12, () => calls.push('second')); // SIGUSR2 by number
        const listeners = process.listenerCount('SIGUSR2') - before;
        process.kill(process.pid, 'SIGUSR2');
        while (calls.length < 1) yield* sleep(0.005);
        const removed = [loop.removeSignalHandler('SIGUSR2'), loop.removeSignalHandler('SIGUSR2')];
        // Keep the process alive through the next SIGUSR2 (its default would end it): the guard
        // stays until the signal reached it, however late a loaded machine delivers it.
        let guarded = 0;
        const guard = (): void => void guarded++;
        process.on('SIGUSR2', guard);
        process.kill(process.pid, 'SIGUSR2');
        while (guarded === 0) yield* sleep(0.005);
        yield* sleep(0.01);
        process.off('SIGUSR2', guard);
        return { calls, listeners, removed, after: process.listenerCount('SIGUSR2') - before };
      })(),
    );
    expect(seen).toEqual({ calls: ['second'], listeners: 1, removed: [true, false], after: 0 });
  });

  it('refuses what asyncio refuses, with its messages', async () => {
    const messages = await run(
      (function* () {
        const loop = getRunningLoop();
        const attempts: Array<() => unknown> = [
          () => loop.addSignalHandler('SIGKILL', () => undefined),
          () => loop.addSignalHandler('SIGSTOP', () => undefined),
          () => loop.addSignalHandler(0, () => undefined),
          () => loop.addSignalHandler(65, () => undefined),
          () => loop.addSignalHandler('SIGNOPE' as NodeJS.Signals, () => undefined),
          () => loop.addSignalHandler('SIGUSR2', 'not a function' as never),
          () =>
            loop.addSignalHandler('SIGUSR2', function* () {
              yield;
            } as never),
          () => loop.removeSignalHandler({} as never),
        ];
        return attempts.map((attempt) => {
          try {
            attempt();
            return 'accepted';
          } catch (error) {
            return `${(error as Error).name}: ${(error as Error).message}`;
          }
        });
      })(),
    );
    expect(messages).toEqual([
      'RuntimeError: sig 9 cannot be caught',
      'RuntimeError: sig 19 cannot be caught',
      'RangeError: sig 0 out of range(1, 65)',
      'RangeError: sig 65 out of range(1, 65)',
      "RangeError: invalid signal 'SIGNOPE'",
      "TypeError: a callable object was expected by addSignalHandler(), got 'not a function'",
      'TypeError: coroutines cannot be used with addSignalHandler()',
      'TypeError: sig must be a signal name or number, not {}',
    ]);
  });

  it('a closed loop refuses, and closing a loop removes its handlers', () => {
    const loop = newEventLoop();
    const before = process.listenerCount('SIGUSR2');
    loop.addSignalHandler('SIGUSR2', () => undefined);
    expect(process.listenerCount('SIGUSR2')).toBe(before + 1);
    loop.close();
    expect(process.listenerCount('SIGUSR2')).toBe(before);
    expect(() => loop.addSignalHandler('SIGUSR2', () => undefined)).toThrow(new RuntimeError('Event loop is closed'));
  });

  it('in a worker thread both refuse with a RuntimeError', async () => {
    const seen = await run(
      (function* () {
        const thread = yield* threads.start(new URL('./fixtures/signals-worker.mjs', import.meta.url));
        return [yield* thread.call('tryAdd'), yield* thread.call('tryRemove')];
      })(),
    );
    expect(seen).toEqual([
      'RuntimeError: addSignalHandler() works in the main thread only: Node delivers no signals to worker threads',
      'RuntimeError: removeSignalHandler() works in the main thread only: Node delivers no signals to worker threads',
    ]);
  });

  it("run() leaves SIGINT to the loop's own handler: the main task is not cancelled", async () => {
    const started = startFixture('signals-sigint.mjs');
    await started.printed('ready\n');
    started.child.kill('SIGINT');
    const exit = await started.exited;
    expect(exit.code).toBe(0);
    expect(exit.stdout).toBe('ready\nSIGINT heard by the loop\n');
  });
});
