/**
 * One side of the context bench, in a process of its own (ALS capture, once on, stays on in a
 * process): `plain` makes ping-pong round trips to a LoopThread with nothing registered; `store`
 * makes them inside `als.run({rid})` with that AsyncLocalStorage registered in both threads, so
 * its store travels with every call. Prints the p50 of the round trips in µs as JSON.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { LoopThread, registerAsyncLocalStorage, run, type Coroutine } from '../src/index.js';
import { now, percentile } from './harness.js';

const side = process.argv[2];
if (side !== 'plain' && side !== 'store') throw new Error(`context-child: plain or store, got ${side}`);
const PLAIN = new URL('./fixtures/echo-service.js', import.meta.url);
const STORE = new URL('./fixtures/echo-context-service.js', import.meta.url);
const request = side === 'store' ? registerAsyncLocalStorage(new AsyncLocalStorage<{ rid: string }>(), { name: 'bench.request' }) : null;

function* pingPong(): Coroutine<number> {
  const thread = yield* LoopThread.start(side === 'store' ? STORE : PLAIN);
  const samples: number[] = [];
  try {
    for (let i = 0; i < 22_000; i++) {
      const started = now();
      yield* thread.call<number>('echo', i);
      if (i >= 2_000) samples.push((now() - started) * 1000);
    }
  } finally {
    yield* thread.close();
  }
  return percentile(samples, 50);
}

const p50 = request === null ? await run(pingPong()) : await request.run({ rid: 'r-1' }, () => run(pingPong()));
console.log(JSON.stringify({ p50 }));
