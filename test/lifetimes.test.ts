/**
 * `await using` ends what multiloop starts: a LoopThread is closed, an executor shut down, a
 * monitor closed, a server closed and waited for (every connection ended), when the scope ends,
 * also when it ends by an error.
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { LoopThread, PiscinaExecutor, Protocol, ensureFuture, getRunningLoop, run, sleep, startMonitor, type Coroutine, type Server } from '../src/index.js';

const SERVICE = new URL('./fixtures/lt-service.mjs', import.meta.url);

describe('await using', () => {
  it('closes a LoopThread, shuts an executor down and closes a monitor when the scope ends, by an error too', async () => {
    let thread: LoopThread | null = null;
    let executor: PiscinaExecutor | null = null;
    let url = '';
    await expect(
      (async () => {
        await using lt = await LoopThread.start(SERVICE);
        await using pool = new PiscinaExecutor({ maxThreads: 1 });
        await using monitor = await startMonitor({ port: 0 });
        [thread, executor, url] = [lt, pool, monitor.url];
        throw new RangeError('the scope ends here');
      })(),
    ).rejects.toThrow('the scope ends here');
    expect(thread!.isDead()).toBe(true);
    expect(() => executor!.submit(null as never)).toThrow(/shut down|shutdown/i);
    await expect(fetch(url)).rejects.toThrow();
  });

  it('closes a server and waits until the connections it accepted have ended', async () => {
    const order: string[] = [];
    await run(
      (function* main(): Coroutine<void> {
        const loop = getRunningLoop();
        const accepted = loop.createFuture<void>();
        class Recorder extends Protocol {
          override connectionMade(): void {
            accepted.setResult(undefined);
          }
          override connectionLost(): void {
            order.push('connection lost');
          }
        }
        const server: Server = yield* loop.createServer(() => new Recorder(), '127.0.0.1', 0);
        const client = connect((server.address() as [string, number])[1], '127.0.0.1');
        yield* accepted;
        const disposing = (async () => {
          await using scoped = server;
          order.push(`scope ends, serving ${scoped.isServing()}`);
        })().then(() => order.push('disposed'));
        // Until the client goes, the server is closed but not done.
        for (let i = 0; i < 5; i++) yield* sleep(0);
        order.push(`closing the client, server serving ${server.isServing()}`);
        client.end();
        yield* ensureFuture(disposing);
      })(),
    );
    expect(order).toEqual(['scope ends, serving true', 'closing the client, server serving false', 'connection lost', 'disposed']);
  });
});
