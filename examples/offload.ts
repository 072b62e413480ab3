/**
 * Offloading blocking work: CPU-bound jobs run in the default piscina pool through toThread,
 * while the loop stays responsive (its lag is measured meanwhile).
 *
 * Run: npm run build && node dist/examples/offload.js
 */
import { gather, getRunningLoop, run, sleep, toThread, workerFn, type Coroutine } from 'multiloop';

const crunch = workerFn<[number, number], number>(new URL('./jobs/crunch.js', import.meta.url), 'crunch');

function* main(): Coroutine<void> {
  const loop = getRunningLoop();
  let worstLag = 0;
  let probing = true;
  const probe = loop.createTask(
    (function* (): Coroutine<void> {
      while (probing) {
        const before = loop.time();
        yield* sleep(0.005);
        worstLag = Math.max(worstLag, (loop.time() - before - 0.005) * 1000);
      }
    })(),
  );
  const started = loop.time();
  const rounds = yield* gather(Array.from({ length: 12 }, (_, i) => toThread(crunch, 50, i)));
  const wall = loop.time() - started;
  probing = false;
  yield* probe;
  console.log(`12 jobs of 50 ms CPU each ran in ${wall.toFixed(2)} s on the pool (${rounds.reduce((a, b) => a + b, 0)} rounds)`);
  console.log(`the loop's worst lag meanwhile: ${worstLag.toFixed(1)} ms`);
}

await run(main());
