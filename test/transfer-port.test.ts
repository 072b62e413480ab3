import { MessageChannel } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { LoopThread, ensureFuture, move, newEventLoop, type Coroutine, type EventLoop } from '../src/index.js';

const SERVICE = new URL('./fixtures/lt-service.mjs', import.meta.url);

describe('move(MessagePort)', () => {
  let loop: EventLoop;
  let thread: LoopThread | null = null;
  afterEach(async () => {
    await thread?.close();
    thread = null;
    loop?.close();
  });

  it('hands a port to a LoopThread, which answers through it directly', async () => {
    loop = newEventLoop();
    const channel = new MessageChannel();
    function* main(): Coroutine<[string, number]> {
      thread = yield* ensureFuture(LoopThread.start(SERVICE, { name: 'ports' }));
      const kind = yield* thread.call<string>('serveDoubles', move(channel.port2));
      const answer = yield* ensureFuture(
        new Promise<number>((resolve) => {
          channel.port1.once('message', resolve);
          channel.port1.postMessage(21);
        }),
      );
      return [kind, answer];
    }
    expect(await loop.runUntilComplete(main())).toEqual(['function', 42]);
    channel.port1.close();
  });

  it('cannot send an unmoved port: the call fails naming its type, the thread goes on', async () => {
    loop = newEventLoop();
    const channel = new MessageChannel();
    function* main(): Coroutine<string> {
      thread = yield* ensureFuture(LoopThread.start(SERVICE, { name: 'ports' }));
      try {
        yield* thread.call('serveDoubles', channel.port2);
        return 'sent';
      } catch (error) {
        return `${(error as Error).name}: ${(error as Error).message.split(':')[0]}`;
      } finally {
        channel.port1.close();
      }
    }
    expect(await loop.runUntilComplete(main())).toBe("TypeError: cannot send call 'serveDoubles' to LoopThread 'ports'");
    const running = thread as LoopThread | null;
    function* next(): Coroutine<number> {
      return yield* (running as LoopThread).call<number>('add', 1, 2);
    }
    expect(await loop.runUntilComplete(next())).toBe(3);
  });
});
