/**
 * Real Redis servers and real `multiloop worker` processes for the distributed (BullMQ) suites:
 * Debian's redis-server on a free 127.0.0.1 port with persistence off, and node running the
 * built command (dist/bin/multiloop.js worker) from the repository's root.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BullMQExecutor } from '../../src/bullmq.js';
import type { ConcurrentFuture } from '../../src/concurrent.js';
import { freePort } from './io.js';

/** The repository's root: workers resolve `./test/fixtures/...` from there. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const WORKER_ENTRY = join(ROOT, 'dist/bin/multiloop.js');

/** Resolve after `ms` milliseconds. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Wait until `condition()` holds, checking every 20 ms; fails with `what` after `limitMs`. */
export async function until(condition: () => boolean | Promise<boolean>, what: string, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await delay(20);
  }
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A redis-server this test started: stop it, start it again on the same port. */
export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** Start it (again) on its port, persistence off: empty. */
  start(): Promise<void>;
  /** Kill it (SIGKILL: an outage, not a shutdown) and wait until it is gone. */
  kill(): Promise<void>;
  /** Freeze it (SIGSTOP): connections stay open, nothing is answered, time runs on (keys expire). */
  freeze(): void;
  /** Let it run again (SIGCONT). */
  thaw(): void;
}

/**
 * Start a redis-server on a free port of 127.0.0.1 with persistence off.
 *
 * @example
 * ```ts
 * const redis = await startRedis();
 * afterAll(() => redis.kill());
 * ```
 */
export async function startRedis(): Promise<RedisServer> {
  const port = await freePort();
  let child: ChildProcess | null = null;
  const server: RedisServer = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async start() {
      const started = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmpdir()], {
        stdio: 'ignore',
      });
      child = started;
      await until(async () => {
        if (started.exitCode !== null) throw new Error(`redis-server exited with ${started.exitCode}`);
        return accepts(port);
      }, `redis-server listens on port ${port}`);
    },
    async kill() {
      const running = child;
      child = null;
      if (running === null || running.exitCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGKILL');
      await exited;
    },
    freeze() {
      child?.kill('SIGSTOP');
    },
    thaw() {
      child?.kill('SIGCONT');
    },
  };
  await server.start();
  return server;
}

/** A `multiloop worker` process this test started. */
export interface WorkerProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Everything it printed so far. */
  output(): string;
  /** Resolves with its exit code (or signal) once it ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Start `node dist/bin/multiloop.js worker --redis <url> <args>` (without `--redis` when `url`
 * is null: `args` or `env` say where Redis is) in the repository's root and wait until it
 * serves (with `serving: false`, not: a worker that may die taking a job it fetched at once);
 * it is SIGKILLed after 60 s at the latest.
 *
 * @example
 * ```ts
 * const worker = await startWorker(redis.url, ['--queue', 'q1', '--allow', './test/fixtures/bullmq-jobs.mjs']);
 * ```
 */
export async function startWorker(url: string | null, args: readonly string[], env?: Record<string, string>, serving = true): Promise<WorkerProcess> {
  const connection = url === null ? [] : ['--redis', url];
  const child = spawn(process.execPath, [WORKER_ENTRY, 'worker', ...connection, ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const guard = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      clearTimeout(guard);
      resolve({ code, signal });
    }),
  );
  let ended = false;
  void exited.then(() => (ended = true));
  if (!serving) return { child, pid: child.pid as number, output: () => output, exited };
  try {
    await until(() => {
      if (ended) throw new Error(`the worker exited before serving:\n${output}`);
      // At the start of a line: the usage a worker prints for a bad command line names the line too.
      return /^multiloop worker: serving/m.test(output);
    }, 'the worker serves');
  } catch (error) {
    // A worker that never served (busy decoding a job it took at once) outlives no test.
    child.kill('SIGKILL');
    throw error;
  }
  return { child, pid: child.pid as number, output: () => output, exited };
}

/** SIGKILL the worker (if it still runs) and wait for its end. */
export async function killWorker(worker: WorkerProcess): Promise<void> {
  if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGKILL');
  await worker.exited;
}

/** A fresh temporary directory for marker files, removed by the returned function. */
export function markerDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'multiloop-bullmq-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Run `redis-cli -p <port> ...args` (it comes with redis-server) and return its output.
 *
 * @example
 * ```ts
 * redisCli(redis.port, 'KEYS', 'bull:main:*'); // one key a line
 * ```
 */
export function redisCli(port: number, ...args: string[]): string {
  return execFileSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).trim();
}

/** The ids of the BullMQ jobs of executors in `queue` that Redis holds now. */
export function jobsInRedis(port: number, queue: string): string[] {
  const keys = redisCli(port, 'KEYS', `bull:${queue}:[0-9a-f]*-[0-9]*`);
  return keys === '' ? [] : keys.split('\n').filter((key) => /^bull:[^:]+:[0-9a-f]+-\d+$/.test(key));
}

/** The result of a call's future; rejects with its error, or an Error('cancelled'). */
export function resultOf<T>(future: ConcurrentFuture<T>): Promise<T> {
  return new Promise((resolve, reject) =>
    future.addDoneCallback((done) => {
      if (done.cancelled()) {
        reject(new Error('cancelled'));
        return;
      }
      const error = done.exception();
      if (error === null) resolve(done.result());
      else reject(error);
    }),
  );
}

/**
 * Start workers of 64 MB of heap (`url` and `args` as startWorker takes them) one at a time, the
 * next once the last one died (as a supervisor would, serving or not), until `future` settles
 * or four died: those that died, and the error the future failed with (null when it succeeded,
 * or did not settle before the fourth died). Each worker joins `workers`.
 */
export async function workersUntilSettled(
  future: ConcurrentFuture<unknown>,
  url: string | null,
  args: readonly string[],
  workers: Set<WorkerProcess>,
): Promise<{ died: WorkerProcess[]; error: Error | null }> {
  let settled = false;
  const failure = resultOf(future).then(
    () => null,
    (error: unknown) => error as Error,
  );
  void failure.then(() => (settled = true));
  const died: WorkerProcess[] = [];
  while (!settled && died.length < 4) {
    const worker = await startWorker(url, args, { NODE_OPTIONS: '--max-old-space-size=64' }, false);
    workers.add(worker);
    if ((await Promise.race([worker.exited.then(() => 'died'), failure.then(() => 'settled')])) === 'died') died.push(worker);
  }
  // A crash loop (four died and it goes on) fails its test at once, not at the test's timeout.
  return { died, error: settled ? await failure : null };
}

/**
 * Teach `made` the run time of what `burst()` submits, until a burst of it travels as one job:
 * its first call goes alone (the probe), and a probe that took more than a second (a worker
 * slow to start on a loaded machine) leaves a long estimate, which each run measured halves.
 */
export async function teachBurst<T>(made: BullMQExecutor, burst: () => Array<ConcurrentFuture<T>>): Promise<void> {
  for (let round = 1; ; round++) {
    const before = made.statistics().jobsSent;
    await Promise.all(burst().map((future) => resultOf(future)));
    if (made.statistics().jobsSent - before === 1) return;
    if (round === 20) throw new Error(`a burst still travelled as ${made.statistics().jobsSent - before} jobs after 20 rounds`);
  }
}

/** The lines of `dir/runs`, which the fixture jobs append to, one a run (empty when none ran). */
export function runs(dir: string): string[] {
  const file = join(dir, 'runs');
  return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : [];
}


/**
 * The end of a test of the distributed executor: shut `executors` down, cancelling what is left
 * (forced after 5 s), kill `workers` and forget them.
 */
export async function endAll(executors: readonly BullMQExecutor[], workers: Set<WorkerProcess>): Promise<void> {
  await Promise.all(
    executors.map(async (made) => {
      const joined = made.shutdown(true, { cancelFutures: true });
      const timer = setTimeout(() => void made.shutdown(false), 5000);
      await joined;
      clearTimeout(timer);
    }),
  );
  await Promise.all([...workers].map(killWorker));
  workers.clear();
}
