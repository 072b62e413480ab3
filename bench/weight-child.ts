/**
 * `weight-child <side> <threads>`: one side of the weight bench (bench/weight.ts) in a process of
 * its own, printed as JSON.
 *
 * - `loop-thread`, `loop-thread-importing`, `piscina`, `plain`: start one thread of the kind (a
 *   LoopThread hosting a module of nothing, or one importing multiloop) and close it (warm-up: the
 *   main thread has loaded everything it will load), collect garbage, then start `threads` of
 *   them, each answering once, and report how much the process's resident memory grew per idle
 *   thread (bytes).
 * - `import`, `import-piscina`: import multiloop (piscina) and report how long it took (ms) and
 *   how much the resident memory and the used heap grew (bytes).
 */
import { once } from 'node:events';
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const [side = '', count = ''] = process.argv.slice(2);
const threads = Number(count);
const fixture = (name: string): URL => new URL(`./fixtures/${name}.js`, import.meta.url);

function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) gc();
  return new Promise((resolve) => setTimeout(resolve, 100));
}

/** Start `threads` threads with `start`, each answering once; resident memory grown per thread. */
async function perThread(start: () => Promise<() => Promise<void>>): Promise<number> {
  const close = await start();
  await close();
  await settle();
  const before = process.memoryUsage().rss;
  const closers: Array<() => Promise<void>> = [];
  for (let i = 0; i < threads; i++) closers.push(await start());
  await settle();
  const grown = (process.memoryUsage().rss - before) / threads;
  for (const closeOne of closers) await closeOne();
  return grown;
}

async function plain(): Promise<() => Promise<void>> {
  const worker = new Worker(fixture('weight-plain'));
  worker.postMessage('ping');
  await once(worker, 'message');
  return async () => void (await worker.terminate());
}

async function piscina(): Promise<number> {
  const { Piscina } = await import('piscina');
  return perThread(async () => {
    const pool = new Piscina({ filename: fixture('weight-piscina').href, minThreads: 1, maxThreads: 1 });
    if ((await pool.run(null)) !== 'pong') throw new Error('the piscina worker did not answer');
    return () => pool.destroy();
  });
}

async function loopThread(module: string): Promise<number> {
  const { LoopThread, ensureFuture, run } = await import('multiloop');
  // LoopThread's calls are Futures of a running loop: every start runs in a loop of its own.
  const start = (): Promise<() => Promise<void>> =>
    run(
      (function* () {
        const thread = yield* ensureFuture(LoopThread.start(fixture(module)));
        if ((yield* thread.call<string>('ping')) !== 'pong') throw new Error('the hosted module did not answer');
        return () => thread.close();
      })(),
    );
  return perThread(start);
}

async function importCost(load: () => Promise<unknown>): Promise<{ ms: number; rss: number; heap: number }> {
  await settle();
  const before = process.memoryUsage();
  const t0 = performance.now();
  await load();
  const ms = performance.now() - t0;
  const after = process.memoryUsage();
  return { ms, rss: after.rss - before.rss, heap: after.heapUsed - before.heapUsed };
}

const sides: Record<string, () => Promise<unknown>> = {
  'loop-thread': () => loopThread('weight-service'),
  piscina,
  plain: () => perThread(plain),
  'loop-thread-importing': () => loopThread('weight-service-importing'),
  import: () => importCost(() => import('multiloop')),
  'import-piscina': () => importCost(() => import('piscina')),
};
const chosen = sides[side];
if (chosen === undefined || (!side.startsWith('import') && !(Number.isInteger(threads) && threads > 0))) {
  console.error(`usage: weight-child ${Object.keys(sides).join('|')} <threads>, got ${JSON.stringify(process.argv.slice(2))}`);
  process.exit(2);
}
console.log(JSON.stringify(await chosen()));
