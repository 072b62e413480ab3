/**
 * registerAsyncLocalStorage with BullMQ jobs, a real redis-server and a real worker process: the
 * caller's store travels with the job (a function sees it across its awaits, a coroutine in every
 * step of its Task); nothing comes back; a store that cannot cross fails that call, naming it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BullMQExecutor } from '../src/bullmq.js';
import { registerAsyncLocalStorage } from '../src/async-local-storage.js';
import { workerFn } from '../src/worker-fn.js';
import { killWorker, resultOf, startRedis, startWorker, type RedisServer, type WorkerProcess } from './helpers/redis.js';
import { needProgram } from './helpers/system.js';

const SERVICE = './test/fixtures/als-service.mjs';
const seen = workerFn<[], unknown>(SERVICE, 'seen');
const seenLater = workerFn<[], unknown>(SERVICE, 'seenLater');
const seenAfterAwait = workerFn<[], unknown>(SERVICE, 'seenAfterAwait');

// The worker's copy of multiloop registers the same name (the fixture does, as an app would once).
const request = registerAsyncLocalStorage(new AsyncLocalStorage<Record<string, unknown>>(), { name: 'request' });

const hasRedis = needProgram('redis-server', 'apt-get install redis-server', 'the BullMQ AsyncLocalStorage tests');

describe.runIf(hasRedis)('BullMQ jobs carry registered AsyncLocalStorage stores', () => {
  let redis: RedisServer;
  let worker: WorkerProcess;
  let made: BullMQExecutor;

  beforeAll(async () => {
    redis = await startRedis();
    worker = await startWorker(redis.url, ['--queue', 'als', '--allow', SERVICE]);
    made = new BullMQExecutor({ connection: redis.url, queue: 'als' });
  });

  afterAll(async () => {
    await made?.shutdown(true, { cancelFutures: true });
    if (worker !== undefined) await killWorker(worker);
    await redis?.kill();
  });

  it("runs the worker's calls in the caller's store, an async function across its awaits, a coroutine in every step", async () => {
    const [plain, later, afterAwait] = request.run({ rid: 'r-17', roles: new Set(['admin']) }, () => [
      made.submit(seen),
      made.submit(seenLater),
      made.submit(seenAfterAwait),
    ]);
    const expected = { rid: 'r-17', roles: new Set(['admin']) };
    expect(await resultOf(plain)).toEqual(expected);
    expect(await resultOf(later)).toEqual(expected);
    expect(await resultOf(afterAwait)).toEqual(expected);
    expect(await resultOf(made.submit(seen))).toBe('unset');
  });

  it('fails a call whose store cannot cross, naming the storage', async () => {
    const future = request.run({ callback() {} }, () => made.submit(seen));
    const error = await resultOf(future).then(() => null, (failure: unknown) => failure as Error);
    expect(error).toBeInstanceOf(TypeError);
    expect(error?.message).toMatch(/^cannot send seen of \.\/test\/fixtures\/als-service\.mjs to a BullMQ worker: AsyncLocalStorage 'request' cannot go to another thread: /);
  });
});
