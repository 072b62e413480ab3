/**
 * Promises of multiloop's APIs are YieldablePromises: real Promises that a coroutine can also
 * `yield*`, with the value typed, errors thrown in at the `yield*`, and cancellation as for any
 * Future the task awaits.
 */
import { describe, expect, it } from 'vitest';
import {
  CancelledError,
  LoopThread,
  PiscinaExecutor,
  createTask,
  ps,
  pstree,
  run,
  sleep,
  startMonitor,
  type Coroutine,
  type TaskInfo,
} from '../src/index.js';
import { yieldable } from '../src/internal/yieldable.js';

const SERVICE = new URL('./fixtures/lt-service.mjs', import.meta.url);

describe('YieldablePromise', () => {
  it('is what LoopThread.start, lt.close, ps and pstree return: yield* in a coroutine, instanceof Promise outside', async () => {
    const seen = await run(
      (function* main(): Coroutine<{ sum: number; rows: TaskInfo[]; tree: string; closed: boolean; kinds: boolean[] }> {
        const starting = LoopThread.start(SERVICE, { name: 'yieldable-svc' });
        const lt: LoopThread = yield* starting;
        const sum = yield* lt.call<number>('add', 2, 3);
        const listing = ps();
        const rows = yield* listing;
        const tree = yield* pstree();
        const closing = lt.close();
        yield* closing;
        return { sum, rows, tree, closed: lt.isDead(), kinds: [starting, listing, closing].map((p) => p instanceof Promise) };
      })(),
    );
    expect(seen.sum).toBe(5);
    expect(seen.rows.some((row) => row.coroutine === 'main()' && row.state === 'running')).toBe(true);
    expect(seen.tree).toMatch(/^MainThread \(thread 0\): loop 0x[0-9a-f]+ running/);
    expect(seen.closed).toBe(true);
    expect(seen.kinds).toEqual([true, true, true]);
    // The same objects, awaited as Promises.
    const lt = await LoopThread.start(SERVICE);
    await lt.close();
    expect(lt.isDead()).toBe(true);
  });

  it('throws a rejection in at the yield*, as the error it rejected with', async () => {
    const caught = await run(
      (function* (): Coroutine<unknown> {
        try {
          yield* LoopThread.start(new URL('./fixtures/lt-import-error.mjs', import.meta.url));
          return null;
        } catch (error) {
          return error;
        }
      })(),
    );
    expect(caught).toBeInstanceOf(RangeError);
    expect((caught as Error).message).toBe('the service is misconfigured');
  });

  it('lets a task waiting in yield* be cancelled, as any awaited Future; executors and the monitor close through it too', async () => {
    const outcome = await run(
      (function* (): Coroutine<string> {
        const monitor = yield* startMonitor({ port: 0 });
        const executor = new PiscinaExecutor({ maxThreads: 1 });
        const waiting = createTask(
          (function* (): Coroutine<string> {
            yield* yieldable(new Promise<void>(() => undefined));
            return 'not cancelled';
          })(),
        );
        const closing = createTask(
          (function* (): Coroutine<string> {
            yield* monitor.close();
            yield* executor.shutdown();
            return 'closed';
          })(),
        );
        yield* sleep(0.01);
        waiting.cancel();
        let cancelled = false;
        try {
          yield* waiting;
        } catch (error) {
          cancelled = error instanceof CancelledError;
        }
        return `${cancelled ? 'cancelled' : 'not cancelled'}, ${yield* closing}`;
      })(),
    );
    expect(outcome).toBe('cancelled, closed');
  });
});
