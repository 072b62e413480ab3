/**
 * Scaling out: one loop fans 10,000 jobs out to two `multiloop worker` processes through BullMQ
 * on a real Redis, kills one worker with SIGKILL in the middle, and shows that every result
 * arrived, once: BullMQ ran the dead worker's unfinished jobs again on the other worker (the
 * calls it had finished were not run again), and each Future settled once.
 *
 * Needs Debian's redis-server (apt-get install redis-server); it is started here on a free port
 * with persistence off, and stopped at the end.
 *
 * Run: npm run example:distributed
 */
import { fileURLToPath } from 'node:url';
import {
  BullMQExecutor,
  PIPE,
  createSubprocessExec,
  getRunningLoop,
  run,
  workerFn,
  type Coroutine,
  type Process,
} from 'multiloop';
import { startRedis } from './redis-server.js';

const JOBS = 10_000;
const KILL_AFTER = 2_500;
/** Workers resolve `./jobs/score.js` from the directory of this (built) example. */
const ROOT = fileURLToPath(new URL('.', import.meta.url));
const WORKER = fileURLToPath(new URL('../bin/multiloop.js', import.meta.url));
const score = workerFn<[number], { i: number; checksum: number; pid: number }>('./jobs/score.js', 'score');

/** Start a worker process serving the default queue; returns once it takes jobs. */
function* startWorker(url: string): Coroutine<Process> {
  const worker = yield* createSubprocessExec(
    process.execPath,
    [WORKER, 'worker', '--connection', url, '--root', ROOT, '--allow', './jobs/score.js', '--lock-duration', '2000', '--stalled-interval', '500'],
    { stdout: PIPE },
  );
  yield* (worker.stdout as NonNullable<Process['stdout']>).readline();
  return worker;
}

function* main(): Coroutine<void> {
  const loop = getRunningLoop();
  const { redis, port } = yield* startRedis();
  const url = `redis://127.0.0.1:${port}`;
  const workers = [yield* startWorker(url), yield* startWorker(url)];
  const [victim, survivor] = workers as [Process, Process];
  console.log(`redis-server on 127.0.0.1:${port}; workers ${victim.pid} and ${survivor.pid}`);
  const executor = new BullMQExecutor({ connection: url });
  try {
    const results = new Array<{ i: number; checksum: number; pid: number } | undefined>(JOBS);
    let arrived = 0;
    const allIn = loop.createFuture<void>();
    const started = loop.time();
    for (let i = 0; i < JOBS; i++) {
      loop.runInExecutor(executor, score, i).addDoneCallback((future) => {
        results[i] = future.result();
        if (++arrived === KILL_AFTER) {
          victim.kill();
          console.log(`${KILL_AFTER} results in: worker ${victim.pid} killed with SIGKILL in the middle of its jobs`);
        }
        if (arrived === JOBS) allIn.setResult(undefined);
      });
    }
    console.log(`${JOBS} jobs sent from one loop`);
    yield* allIn;
    const seconds = loop.time() - started;

    const distinct = new Set(results.map((result) => result?.i));
    const wrong = results.filter((result, i) => result === undefined || result.i !== i).length;
    const byVictim = results.filter((result) => result?.pid === victim.pid).length;
    const bySurvivor = results.filter((result) => result?.pid === survivor.pid).length;
    console.log(`${arrived} results in ${seconds.toFixed(1)} s: ${distinct.size} distinct, ${JOBS - distinct.size} missing, ${wrong} wrong, each Future settled once`);
    console.log(`worker ${victim.pid} delivered ${byVictim} before it died; worker ${survivor.pid} delivered ${bySurvivor}, including the jobs the dead one had not finished`);
    const { jobsSent, callsSent } = executor.statistics();
    console.log(`${callsSent} calls travelled in ${jobsSent} BullMQ jobs`);
  } finally {
    yield* executor.shutdown();
    for (const worker of workers) if (worker.returncode === null) worker.terminate();
    for (const worker of workers) yield* worker.wait();
    redis.terminate();
    yield* redis.wait();
  }
}

await run(main());
