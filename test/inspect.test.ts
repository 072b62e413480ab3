/** util.inspect and console.log show each object's asyncio-style repr, never its internals. */
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import {
  Lock,
  PiscinaExecutor,
  Queue,
  newEventLoop,
  runCoroutineThreadsafe,
  type Coroutine,
} from '../src/index.js';
import { trackLoops } from './helpers/loops.js';

const track = trackLoops();

describe('util.inspect', () => {
  it('shows futures, tasks, handles and the loop by their reprs, also nested', () => {
    const loop = track(newEventLoop());
    const future = loop.createFuture<number>();
    function* fetchUser(): Coroutine<number> {
      return yield* future;
    }
    const task = loop.createTask(fetchUser(), { name: 'fetch-1' });
    const handle = loop.callSoon(function ping() {});
    expect(inspect(future)).toBe('<Future pending>');
    expect(inspect(task)).toBe("<Task pending name='fetch-1' coro=<fetchUser()>>");
    expect(inspect(handle)).toBe('<Handle ping()>');
    expect(inspect(loop)).toBe('<EventLoop running=false closed=false debug=false>');
    expect(inspect({ task, list: [future] }, { breakLength: Infinity })).toBe("{ task: <Task pending name='fetch-1' coro=<fetchUser()>>, list: [ <Future pending> ] }");
  });

  it('shows locks, queues, concurrent futures and executors by their reprs', async () => {
    const loop = track(newEventLoop());
    const executor = new PiscinaExecutor({ maxThreads: 2 });
    try {
      expect(inspect(new Lock())).toBe('<Lock [unlocked]>');
      expect(inspect(new Queue(3))).toMatch(/^<Queue maxsize=3/);
      function* one(): Coroutine<number> {
        return 1;
      }
      expect(inspect(runCoroutineThreadsafe(one(), loop))).toBe('<ConcurrentFuture state=pending>');
      expect(inspect(executor)).toBe('<PiscinaExecutor threads=0/2 queued=0 in_flight=0 completed=0>');
    } finally {
      await executor.shutdown();
    }
  });
});
