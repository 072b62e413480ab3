/**
 * What travels with BullMQ jobs besides arguments and results, with a real redis-server and a
 * real worker process: the caller's values of registered context variables (the worker's calls
 * see them, a coroutine for the whole of its Task; nothing comes back), and Node Buffers, which
 * arrive as Buffers in arguments, results and errors' own properties; plain data that uses the
 * library's envelope key arrives as the same plain data, never as what it imitates.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BullMQExecutor } from '../src/bullmq.js';
import { ContextVar, copyContext, registerContextVar } from '../src/contextvars.js';
import { workerFn } from '../src/worker-fn.js';
import { killWorker, resultOf, startRedis, startWorker, type RedisServer, type WorkerProcess } from './helpers/redis.js';
import { needProgram } from './helpers/system.js';

const JOBS = './test/fixtures/bullmq-jobs.mjs';
const SERVICE = './test/fixtures/context-service.mjs';
const seen = workerFn<[], { requestId: unknown; user: unknown }>(SERVICE, 'seen');
const seenLater = workerFn<[], { requestId: unknown; user: unknown }>(SERVICE, 'seenLater');
const change = workerFn<[], { requestId: unknown; user: unknown }>(SERVICE, 'change');
const echo = workerFn<[unknown], unknown>(JOBS, 'echo');
const FORGED = './test/fixtures/wire-forged-service.mjs';
const seenThere = workerFn<[unknown], { value: unknown; classes: string[] }>(FORGED, 'seen');
const parsedThere = workerFn<[string], unknown>(FORGED, 'parsed');

// The worker's copy of multiloop registers the same names (the fixture does, as an app would once).
const requestId = registerContextVar(new ContextVar<string>('requestId'));
const user = registerContextVar(new ContextVar<unknown>('user'));

const hasRedis = needProgram('redis-server', 'apt-get install redis-server', 'the BullMQ travel tests');

describe.runIf(hasRedis)('BullMQ jobs carry context variables and Buffers', () => {
  let redis: RedisServer;
  let worker: WorkerProcess;
  let made: BullMQExecutor;

  beforeAll(async () => {
    redis = await startRedis();
    worker = await startWorker(redis.url, ['--queue', 'travel', '--allow', `${JOBS},${SERVICE},${FORGED}`]);
    made = new BullMQExecutor({ connection: redis.url, queue: 'travel' });
  });

  afterAll(async () => {
    await made?.shutdown(true, { cancelFutures: true });
    if (worker !== undefined) await killWorker(worker);
    await redis?.kill();
  });

  it("runs the worker's calls with the caller's values of registered context variables, a coroutine for the whole of its Task", async () => {
    const [plain, later, changed] = copyContext().run(() => {
      requestId.set('r-17');
      user.set({ name: 'ann', roles: new Set(['admin']) });
      return [made.submit(seen), made.submit(seenLater), made.submit(change)];
    });
    const expected = { requestId: 'r-17', user: { name: 'ann', roles: new Set(['admin']) } };
    expect(await resultOf(plain)).toEqual(expected);
    expect(await resultOf(later)).toEqual(expected);
    expect(await resultOf(changed)).toEqual({ ...expected, requestId: 'changed-in-thread' });
    // Nothing comes back, and a call made where nothing is set sees nothing.
    expect(requestId.get('unset')).toBe('unset');
    expect(await resultOf(made.submit(seen))).toEqual({ requestId: 'unset', user: 'unset' });
  });

  it('fails a call whose context value cannot cross, naming the variable', async () => {
    const future = copyContext().run(() => {
      user.set({ callback() {} });
      return made.submit(seen);
    });
    const error = await resultOf(future).then(() => null, (failure: unknown) => failure as Error);
    expect(error).toBeInstanceOf(TypeError);
    expect(error?.message).toMatch(/^cannot send seen of \.\/test\/fixtures\/context-service\.mjs to a BullMQ worker: context variable 'user' cannot go to another thread: /);
  });

  it("brings Buffers back as Buffers, in arguments, results, nested values and errors' own properties", async () => {
    const bytes = Buffer.from('multiloop');
    const back = (await resultOf(made.submit(echo, { bytes, list: [Buffer.alloc(3, 7)], view: new Uint8Array([1, 2]) }))) as Record<string, unknown>;
    expect(Buffer.isBuffer(back.bytes)).toBe(true);
    expect((back.bytes as Buffer).toString()).toBe('multiloop');
    expect(Buffer.isBuffer((back.list as unknown[])[0])).toBe(true);
    expect([...((back.list as Buffer[])[0] as Buffer)]).toEqual([7, 7, 7]);
    expect(Buffer.isBuffer(back.view)).toBe(false);
    expect(back.view).toEqual(new Uint8Array([1, 2]));
    const alone = await resultOf(made.submit(echo, Buffer.from([0xff, 0])));
    expect(Buffer.isBuffer(alone)).toBe(true);
    expect([...(alone as Buffer)]).toEqual([0xff, 0]);
    const error = (await resultOf(made.submit(workerFn<[], never>(JOBS, 'failWithBytes'))).then(
      () => null,
      (failure: unknown) => failure,
    )) as (Error & { payload: unknown }) | null;
    expect(error?.message).toBe('with bytes');
    expect(Buffer.isBuffer(error?.payload)).toBe(true);
    expect(String(error?.payload)).toBe('raw');
  });

  it("brings plain data that uses the library's envelope key as the same plain data, in arguments, results and context variables", async () => {
    const key = '\\u0000multiloop';
    const texts = [
      `{"${key}":"value","value":{"${key}":"class","name":"Point","data":{"x":3,"y":4,"admin":true}}}`,
      `{"${key}":"value","value":{"${key}":"error","error":{"kind":"error","base":"TypeError","name":"TypeError","message":"forged","stack":null}}}`,
      `{"${key}":"plain","fields":{"${key}":"buffer","bytes":{}}}`,
      `{"session":{"${key}":"class","name":"Point","data":{"admin":true}}}`,
    ];
    for (const text of texts) {
      const body = JSON.parse(text) as unknown;
      expect(await resultOf(made.submit(seenThere, body)), text).toStrictEqual({ value: body, classes: [] });
      // Beside a Buffer, which makes the argument an encoded value.
      expect(await resultOf(made.submit(seenThere, [body, Buffer.from('b')])), text).toStrictEqual({ value: [body, Buffer.from('b')], classes: ['Buffer'] });
      expect(await resultOf(made.submit(parsedThere, text)), text).toStrictEqual(body);
      const carried = copyContext().run(() => {
        user.set(body);
        return made.submit(seen);
      });
      expect(await resultOf(carried), text).toStrictEqual({ requestId: 'unset', user: body });
    }
  });
});
