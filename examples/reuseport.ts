/**
 * One port, a loop per thread: every thread of a LoopThreadPool listens on the same port of
 * 127.0.0.1 with `reusePort` (SO_REUSEPORT; Node 22.12+ on Linux), and the kernel hands each new
 * connection to one of their loops, as it does for Node's cluster or uvicorn's workers, but with
 * threads of one process. A client in the main loop makes a bounded load of HTTP requests and
 * counts which thread answered each.
 *
 * Run: npm run example:reuseport
 */
import { availableParallelism } from 'node:os';
import { LoopThreadPool, gather, openConnection, run, type Coroutine } from 'multiloop';

const REQUESTS = 200;
const AT_ONCE = 8;
const THREADS = Math.min(4, Math.max(2, availableParallelism()));
const decoder = new TextDecoder();

/** One GET on a connection of its own; the id of the thread that answered. */
function* get(port: number): Coroutine<number> {
  const [reader, writer] = yield* openConnection('127.0.0.1', port);
  writer.write(new TextEncoder().encode(`GET / HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`));
  const response = decoder.decode(yield* reader.read());
  writer.close();
  yield* writer.waitClosed();
  const answer = /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nhello from thread (\d+)\n$/.exec(response);
  if (answer === null) throw new Error(`unexpected response: ${JSON.stringify(response)}`);
  return Number(answer[1]);
}

/** `AT_ONCE` clients, each making requests one after another until `REQUESTS` were made. */
function* load(port: number): Coroutine<number[]> {
  const answeredBy: number[] = [];
  let started = 0;
  function* client(): Coroutine<void> {
    while (started < REQUESTS) {
      started++;
      answeredBy.push(yield* get(port));
    }
  }
  yield* gather(Array.from({ length: AT_ONCE }, () => client()));
  return answeredBy;
}

function* main(pool: LoopThreadPool): Coroutine<void> {
  const [first] = pool.threads();
  let port: number;
  try {
    port = yield* first!.call<number>('serve', 0);
  } catch (error) {
    if (!(error instanceof RangeError && error.message.startsWith('reusePort'))) throw error;
    console.log(`this Node cannot serve one port from several threads: ${error.message}`);
    console.log('run this example with Node 22.12 or later on Linux to see it');
    return;
  }
  yield* pool.broadcast<number>('serve', port);
  const names = pool.threads().map((thread) => thread.name);
  console.log(`a pool of ${THREADS} loops (${names.join(', ')}) serves http://127.0.0.1:${port}/ (reusePort)`);
  const answeredBy = yield* load(port);
  console.log(`${answeredBy.length} requests, each on a new connection, ${AT_ONCE} at a time`);
  let answering = 0;
  for (const thread of pool.threads()) {
    const count = answeredBy.filter((id) => id === thread.threadId).length;
    if (count > 0) answering++;
    console.log(`  ${thread.name} (thread ${thread.threadId}) answered ${count}`);
  }
  console.log(
    answering > 1 ? `${answering} of ${THREADS} threads answered: the kernel spread the connections over their loops` : `only one of ${THREADS} threads answered`,
  );
  const served = yield* pool.broadcast<number>('stop');
  console.log(`servers stopped: ${served.reduce((a, b) => a + b, 0)} requests served in all`);
}

const pool = await LoopThreadPool.start(new URL('./services/hello-http.js', import.meta.url), { size: THREADS, name: 'web' });
try {
  await run(main(pool));
} finally {
  await pool.close();
}
