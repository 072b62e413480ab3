/**
 * Promises and AbortSignal both ways, with real Node APIs: fromAbortable aborts a real fetch to
 * a local node:http server (the server sees its socket close), and its body download when fetch
 * and body are one operation (the server's response ends unfinished), a timers/promises timer
 * and an fs.promises read; `{ signal }` cancels run(), Runner.run() and runUntilComplete().
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CancelledError,
  ExceptionGroup,
  Runner,
  TaskGroup,
  TimeoutError,
  ensureFuture,
  fromAbortable,
  newEventLoop,
  run,
  sleep,
  waitFor,
  type Coroutine,
} from '../src/index.js';
import { trackLoops } from './helpers/loops.js';

const track = trackLoops();

/** What a coroutine raised, or its value. */
function* outcome<T>(body: Iterable<unknown, T, unknown>): Coroutine<{ value?: T; error?: unknown }> {
  try {
    return { value: yield* body };
  } catch (error) {
    return { error };
  }
}

describe('fromAbortable', () => {
  let server: Server;
  let url: string;
  /** Each request's path, resolved when the server receives it. */
  const arrived = new Map<string, () => void>();
  /** Each request's path, resolved when its socket closes, with whether its whole response was sent. */
  const closed = new Map<string, (finished: boolean) => void>();

  /** Promises of the request to `path` reaching the server and of its socket closing. */
  function expectRequest(path: string): { arrived: Promise<void>; closed: Promise<boolean> } {
    return {
      arrived: new Promise<void>((resolve) => arrived.set(path, resolve)),
      closed: new Promise<boolean>((resolve) => closed.set(path, resolve)),
    };
  }

  beforeAll(async () => {
    server = createServer((request, response) => {
      const path = request.url ?? '';
      request.socket.once('close', () => closed.get(path)?.(response.writableFinished));
      arrived.get(path)?.();
      if (path === '/fast') response.end('fast');
      if (path === '/slow-body') {
        // Headers and a first piece at once, then a piece every 10 ms until the client goes away.
        response.writeHead(200, { 'content-type': 'text/plain' });
        response.write('x'.repeat(1024));
        const more = setInterval(() => response.write('x'.repeat(1024)), 10);
        response.once('close', () => clearInterval(more));
      }
      // '/slow' never answers: only the client going away ends it.
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  });

  it('aborts a real fetch when waitFor times out: the server sees the socket close', async () => {
    const loop = track(newEventLoop());
    const slow = expectRequest('/slow');
    const seen = await loop.runUntilComplete(
      (function* () {
        const request = fromAbortable((signal) => fetch(`${url}/slow`, { signal }));
        // The timeout starts once the server has the request: timing out before the request left
        // would abort a fetch the server never saw (fetch's first use loads undici, slowly on a busy machine).
        yield* ensureFuture(slow.arrived);
        return yield* outcome(waitFor(request, 0.05));
      })(),
    );
    expect(seen.error).toBeInstanceOf(TimeoutError);
    expect(await slow.closed).toBe(false);
    const fast = await loop.runUntilComplete(
      (function* (): Coroutine<string> {
        return yield* fromAbortable(async (signal) => (await fetch(`${url}/fast`, { signal })).text());
      })(),
    );
    expect(fast).toBe('fast');
  });

  it('aborts the body download too when fetch and body are in one fromAbortable: the server stops sending', async () => {
    const loop = track(newEventLoop());
    const slowBody = expectRequest('/slow-body');
    let headersArrived!: () => void;
    const headers = new Promise<void>((resolve) => (headersArrived = resolve));
    const seen = await loop.runUntilComplete(
      (function* () {
        const download = fromAbortable(async (signal) => {
          const response = await fetch(`${url}/slow-body`, { signal });
          headersArrived();
          return response.text();
        });
        // Timed out while the body comes, not before the headers.
        yield* ensureFuture(headers);
        return yield* outcome(waitFor(download, 0.05));
      })(),
    );
    expect(seen.error).toBeInstanceOf(TimeoutError);
    // The server's response ended with its socket, unfinished: the body stopped coming.
    expect(await slowBody.closed).toBe(false);
  });

  it('aborts a timers/promises timer and an fs.promises read; their rejections are not reported', async () => {
    const loop = track(newEventLoop());
    const dir = mkdtempSync(join(tmpdir(), 'multiloop-abort-'));
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const big = join(dir, 'big.bin');
      writeFileSync(big, Buffer.alloc(32 << 20, 1));
      const rejected: string[] = [];
      const settled: Promise<void>[] = [];
      const seen = await loop.runUntilComplete(
        (function* () {
          const timer = fromAbortable((signal) => {
            const promise = delay(60_000, 'late', { signal });
            settled.push(promise.then(() => undefined, (error: Error) => void rejected.push(`timer: ${error.name}`)));
            return promise;
          });
          const read = fromAbortable((signal) => {
            const promise = readFile(big, { signal });
            settled.push(promise.then(() => undefined, (error: Error) => void rejected.push(`read: ${error.name}`)));
            return promise;
          });
          yield* sleep(0);
          timer.cancel('no longer needed');
          read.cancel();
          return [yield* outcome(timer), yield* outcome(read)];
        })(),
      );
      expect((seen[0]!.error as CancelledError).message).toBe('no longer needed');
      expect(seen[1]!.error).toBeInstanceOf(CancelledError);
      // The read stops at its next chunk: waited for, not guessed (a busy thread pool is slow).
      await Promise.all(settled);
      // Node reports an unhandled rejection once the turn that made it ends.
      await new Promise((resolve) => setImmediate(resolve));
      expect(rejected.sort()).toEqual(['read: AbortError', 'timer: AbortError']);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('gives the abort reason as the CancelledError, and settles with what the Promise gives', async () => {
    const loop = track(newEventLoop());
    let reason: unknown = null;
    const results = await loop.runUntilComplete(
      (function* () {
        const ok = yield* fromAbortable(() => Promise.resolve(42));
        const failing = yield* outcome(fromAbortable(() => Promise.reject(new RangeError('refused'))));
        const cancelled = fromAbortable((signal) => {
          signal.addEventListener('abort', () => (reason = signal.reason));
          return new Promise<never>(() => {});
        });
        cancelled.cancel('stop');
        return { ok, failing: (failing.error as Error).message };
      })(),
    );
    expect(results).toEqual({ ok: 42, failing: 'refused' });
    expect(reason).toBeInstanceOf(CancelledError);
    expect((reason as CancelledError).message).toBe('stop');
  });

  it('fails with what start throws, and with a TypeError when start returns no Promise', async () => {
    const loop = track(newEventLoop());
    const thrown = fromAbortable(() => {
      throw new RangeError('bad start');
    }, { loop });
    expect(thrown.exception()).toEqual(new RangeError('bad start'));
    const plain = fromAbortable((() => 42) as never, { loop });
    expect(plain.exception()).toEqual(new TypeError('fromAbortable() start must return a Promise, got 42'));
    expect(() => fromAbortable(42 as never, { loop })).toThrow(new TypeError('fromAbortable() needs a function that takes an AbortSignal, got 42'));
  });

  it('in a TaskGroup, aborts exactly the operations under the scope that is cancelled', async () => {
    const loop = track(newEventLoop());
    const aborted: string[] = [];
    const op = (name: string, ms: number) =>
      fromAbortable((signal) => {
        signal.addEventListener('abort', () => aborted.push(name));
        return delay(ms, name, { signal });
      });
    const seen = await loop.runUntilComplete(
      (function* () {
        const outside = op('outside', 100);
        const group = yield* outcome(
          new TaskGroup().run(function* (tg) {
            tg.createTask((function* () { return yield* op('sibling', 60_000); })());
            tg.createTask((function* (): Coroutine<never> {
              yield* sleep(0.01);
              throw new RangeError('one child failed');
            })());
          }),
        );
        return { group: group.error, outside: yield* outside };
      })(),
    );
    expect(seen.group).toBeInstanceOf(ExceptionGroup);
    expect(seen.outside).toBe('outside');
    expect(aborted).toEqual(['sibling']);
  });
});

describe('{ signal } on run, Runner.run and runUntilComplete', () => {
  it('run(): aborting cancels main; the Promise rejects with the reason after its finally ran', async () => {
    const controller = new AbortController();
    const log: string[] = [];
    function* main(): Coroutine<string> {
      try {
        yield* sleep(0.01);
        controller.abort(new Error('user gave up'));
        yield* sleep(3600);
        return 'not reached';
      } finally {
        log.push('finally');
      }
    }
    await expect(run(main(), { signal: controller.signal })).rejects.toThrow(new Error('user gave up'));
    expect(log).toEqual(['finally']);
  });

  it('run(): an already-aborted signal never starts the coroutine', async () => {
    let started = false;
    function* main(): Coroutine<void> {
      started = true;
    }
    const reason = new Error('too late');
    await expect(run(main(), { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(started).toBe(false);
  });

  it('Runner.run() and runUntilComplete() take a signal too; AbortSignal.timeout works as is', async () => {
    const runner = new Runner();
    try {
      await expect(runner.run(sleep(3600), { signal: AbortSignal.timeout(20) })).rejects.toMatchObject({ name: 'TimeoutError' });
      expect(await runner.run(sleep(0, 'still usable'))).toBe('still usable');
    } finally {
      await runner.close();
    }
    const loop = track(newEventLoop());
    const controller = new AbortController();
    setTimeout(() => controller.abort('stop'), 20);
    await expect(loop.runUntilComplete(sleep(3600), { signal: controller.signal })).rejects.toBe('stop');
    expect(await loop.runUntilComplete(sleep(0, 'next'), { signal: controller.signal }).catch((error: unknown) => error)).toBe('stop');
    await expect(loop.runUntilComplete(sleep(0), { signal: 'no' as never })).rejects.toThrow(
      new TypeError("runUntilComplete() options.signal must be an AbortSignal, got 'no'"),
    );
  });
});
