/**
 * `startup-child <module URL> <threads>`: start LoopThreads hosting the module one after another,
 * all kept alive, after one started and closed to warm up; print as JSON how long each start
 * took (ms) and how much the process's resident memory grew per thread (bytes). Run by
 * bench/startup.ts under node (the module compiled) and under tsx (the module in TypeScript).
 */
import { LoopThread, ensureFuture, run, type Coroutine } from 'multiloop';

const [moduleUrl = '', count = ''] = process.argv.slice(2);
const threads = Number(count);
if (moduleUrl === '' || !(Number.isInteger(threads) && threads > 0)) {
  console.error(`usage: startup-child <module URL> <threads>, got ${JSON.stringify(process.argv.slice(2))}`);
  process.exit(2);
}

function* main(): Coroutine<{ ms: number[]; rssPerThread: number }> {
  const warm = yield* ensureFuture(LoopThread.start(moduleUrl));
  yield* warm.call<string>('ping');
  yield* ensureFuture(warm.close());
  const started: LoopThread[] = [];
  const ms: number[] = [];
  const rssBefore = process.memoryUsage().rss;
  for (let i = 0; i < threads; i++) {
    const t0 = performance.now();
    started.push(yield* ensureFuture(LoopThread.start(moduleUrl)));
    ms.push(performance.now() - t0);
  }
  for (const thread of started) {
    if ((yield* thread.call<string>('ping')) !== 'pong') throw new Error('the hosted module did not answer');
  }
  const rssPerThread = (process.memoryUsage().rss - rssBefore) / threads;
  for (const thread of started) yield* ensureFuture(thread.close());
  return { ms, rssPerThread };
}

console.log(JSON.stringify(await run(main())));
