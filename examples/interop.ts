/**
 * multiloop meets the Node world: a slow HTTP request is really cancelled when `waitFor` times
 * out (fromAbortable hands fetch an AbortSignal, and the server sees the socket close), and a
 * pool job reports its progress through a `Comlink.proxy` callback that runs in this loop.
 *
 * Run: npm run example:interop
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as Comlink from 'comlink';
import { TimeoutError, ensureFuture, fromAbortable, getRunningLoop, run, toThread, waitFor, workerFn, type Coroutine } from 'multiloop';

const indexBlocks = workerFn<[number, number, (done: number, total: number) => void], string>(
  new URL('./jobs/index-files.js', import.meta.url),
  'indexBlocks',
);

function* main(): Coroutine<void> {
  // A local server whose /slow answers after 5 s: long past our patience.
  const loop = getRunningLoop();
  const hungUp = loop.createFuture<number>();
  const server = createServer((request, response) => {
    if (request.url !== '/slow') {
      response.end('quick');
      return;
    }
    const started = Date.now();
    const timer = setTimeout(() => response.end('finally'), 5_000);
    request.socket.once('close', () => {
      clearTimeout(timer);
      loop.callSoonThreadsafe(() => hungUp.setResult(Date.now() - started));
    });
  });
  server.listen(0, '127.0.0.1');
  yield* ensureFuture(once(server, 'listening'));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const quick = yield* fromAbortable((signal) => fetch(`${base}/fast`, { signal }).then((r) => r.text()));
  console.log(`fetch ${base}/fast: ${quick}`);
  try {
    yield* waitFor(fromAbortable((signal) => fetch(`${base}/slow`, { signal }).then((r) => r.text())), 0.2);
  } catch (error) {
    if (!(error instanceof TimeoutError)) throw error;
    console.log('fetch /slow: TimeoutError after 0.2 s');
  }
  console.log(`server: the client hung up on /slow after ${yield* hungUp} ms: the request was aborted, not left running`);
  server.closeAllConnections();
  server.close();
  yield* ensureFuture(once(server, 'close'));

  // Progress from a pool thread, through a callback that stays here.
  const report = Comlink.proxy((done: number, total: number) => {
    const bar = '#'.repeat(done).padEnd(total, '.');
    console.log(`progress [${bar}] ${done}/${total} (in this loop: ${getRunningLoop() === loop})`);
  });
  const digest = yield* toThread(indexBlocks, 8, 1 << 20, report);
  console.log(`indexed 8 MiB in a pool thread: ${digest}`);
}

await run(main());
