/**
 * The multiloop showcase: `npm start`.
 *
 * One main loop, two LoopThreads and the default piscina pool, working at once:
 * - the main loop offloads CPU-bound jobs to the pool and stays responsive: a probe measures
 *   its lag the whole time;
 * - it asks an inventory service and a pricing service, each on its own thread's loop; the
 *   pricing thread reaches the inventory thread through the main loop, so futures chain across
 *   three threads;
 * - it cancels a remote audit by timeout, and the audit's `finally` (in its thread) reports back.
 * On a terminal the counters update live; otherwise it prints plain lines. A summary table ends
 * it; it finishes by itself in a few seconds.
 */
import { readSync } from 'node:fs';
import {
  LoopThread,
  TimeoutError,
  ensureFuture,
  gather,
  getRunningLoop,
  pstree,
  run,
  sleep,
  toThread,
  waitFor,
  workerFn,
  type Coroutine,
  type Task,
} from 'multiloop';

const JOBS = 24;
const JOB_MS = 60;
const QUOTES = 40;
const crunch = workerFn<[number, number], number>(new URL('./jobs/crunch.js', import.meta.url), 'crunch');
const tty = process.stdout.isTTY === true;

interface Progress {
  jobsDone: number;
  quotesDone: number;
  lags: number[];
  events: string[];
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

function say(progress: Progress, line: string): void {
  progress.events.push(line);
  if (tty) process.stdout.write('\r\x1b[2K');
  console.log(line);
}

function* probeLag(progress: Progress, running: () => boolean): Coroutine<void> {
  const loop = getRunningLoop();
  while (running()) {
    const before = loop.time();
    yield* sleep(0.005);
    progress.lags.push((loop.time() - before - 0.005) * 1000);
  }
}

function* showLive(progress: Progress, running: () => boolean): Coroutine<void> {
  while (running()) {
    yield* sleep(tty ? 0.1 : 1);
    const bar = '#'.repeat(Math.round((progress.jobsDone / JOBS) * 20)).padEnd(20, '.');
    const line = `[${bar}] pool jobs ${progress.jobsDone}/${JOBS} | quotes ${progress.quotesDone}/${QUOTES} | loop lag p99 ${percentile(progress.lags, 99).toFixed(1)} ms`;
    if (tty) process.stdout.write(`\r\x1b[2K${line}`);
    else console.log(line);
  }
  if (tty) process.stdout.write('\r\x1b[2K');
}

function* offload(progress: Progress): Coroutine<number> {
  const jobs = Array.from({ length: JOBS }, (_, i) => {
    const job = toThread(crunch, JOB_MS, i);
    job.addDoneCallback(() => progress.jobsDone++);
    return job;
  });
  const rounds = yield* gather(jobs);
  return rounds.reduce((sum, n) => sum + n, 0);
}

function* quotes(progress: Progress, pricing: LoopThread): Coroutine<number> {
  const items = ['apple', 'pear', 'plum'];
  let total = 0;
  for (let i = 0; i < QUOTES; i++) {
    total += yield* pricing.call<number>('quote', items[i % items.length] as string, 1 + (i % 5));
    progress.quotesDone++;
  }
  return Math.round(total * 100) / 100;
}

/** Block this thread until a line arrives on stdin (or it ends): a main thread that is truly stuck. */
function blockUntilEnter(): void {
  const byte = Buffer.alloc(1);
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      if (readSync(0, byte) === 0 || byte[0] === 0x0a) return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') return;
      Atomics.wait(pause, 0, 0, 20);
    }
  }
}

/**
 * `npm start -- --hold`: an audit runs in the inventory thread while the main thread is blocked
 * until Enter, so that `npx multiloop pstree <pid>` from another terminal shows a stuck main loop
 * (unresponsive, and for how long) beside threads that go on.
 */
function* holdForInspection(progress: Progress, inventory: LoopThread): Coroutine<void> {
  const audit = getRunningLoop().createTask(
    (function* heldAudit(): Coroutine<string> {
      return yield* inventory.call<string>('audit', 3600);
    })(),
    { name: 'held-audit' },
  );
  yield* sleep(0.05); // the audit starts in its thread
  say(progress, `holding: the main thread is blocked until you press Enter; meanwhile run: npx multiloop pstree ${process.pid}`);
  blockUntilEnter();
  audit.cancel();
  yield* gather([audit, sleep(0.05)], { returnExceptions: true });
}

function* main(): Coroutine<void> {
  const loop = getRunningLoop();
  const progress: Progress = { jobsDone: 0, quotesDone: 0, lags: [], events: [] };
  const started = loop.time();
  let working = true;
  const probe: Task<void> = loop.createTask(probeLag(progress, () => working), { name: 'lag-probe' });
  const live: Task<void> = loop.createTask(showLive(progress, () => working), { name: 'live' });

  const inventory = yield* ensureFuture(
    LoopThread.start(new URL('./services/inventory.js', import.meta.url), {
      name: 'inventory',
      expose: { report: (line: string) => say(progress, `  ↳ ${line}`) },
    }),
  );
  const pricing = yield* ensureFuture(
    LoopThread.start(new URL('./services/pricing.js', import.meta.url), {
      name: 'pricing',
      // The pricing thread asks the inventory thread through this loop: futures chained across threads.
      expose: { inventoryAvailable: (item: string) => inventory.call<number>('available', item) },
    }),
  );
  say(progress, `started LoopThreads 'inventory' (thread ${inventory.threadId}) and 'pricing' (thread ${pricing.threadId})`);

  const offloading = loop.createTask(offload(progress), { name: 'offload' });
  const quoting = loop.createTask(quotes(progress, pricing), { name: 'quotes' });

  // What the running app looks like from inside: every task of every thread, by who awaits whom,
  // 0.15 s into the work (the threads took their time to start before it).
  const seen = loop.createTask(
    (function* look(): Coroutine<{ tree: string; at: number }> {
      yield* sleep(0.15);
      const at = loop.time() - started;
      return { tree: yield* ensureFuture(pstree()), at };
    })(),
    { name: 'look-inside' },
  );

  say(progress, 'asking inventory for a 60 s audit, with a 0.3 s timeout...');
  let auditOutcome = 'completed';
  try {
    yield* waitFor(inventory.call<string>('audit', 60), 0.3);
  } catch (error) {
    if (!(error instanceof TimeoutError)) throw error;
    auditOutcome = 'timed out, remote task cancelled';
    say(progress, 'audit timed out after 0.3 s: its remote task was cancelled');
  }

  const [rounds, quoteTotal, tree] = yield* gather(offloading, quoting, seen);
  yield* sleep(0.05); // let the audit's last report arrive
  working = false;
  yield* gather(probe, live);
  const wall = loop.time() - started;
  if (process.argv.includes('--hold')) yield* holdForInspection(progress, inventory);
  yield* ensureFuture(Promise.all([inventory.close(), pricing.close()]));

  const rows: Array<[string, string]> = [
    ['pool jobs', `${JOBS} × ${JOB_MS} ms CPU (${rounds} rounds), ${((JOBS * JOB_MS) / 1000).toFixed(2)} s of work`],
    ['cross-thread quotes', `${QUOTES} calls main → pricing → main → inventory, total ${quoteTotal}`],
    ['remote audit', auditOutcome],
    ['main loop lag', `p50 ${percentile(progress.lags, 50).toFixed(2)} ms, p99 ${percentile(progress.lags, 99).toFixed(2)} ms, max ${percentile(progress.lags, 100).toFixed(2)} ms over ${progress.lags.length} probes`],
    ['wall time', `${wall.toFixed(2)} s`],
  ];
  const width = Math.max(...rows.map(([name]) => name.length));
  console.log('\nsummary');
  console.log(`${'─'.repeat(width + 2)}┬${'─'.repeat(60)}`);
  for (const [name, value] of rows) console.log(` ${name.padEnd(width)} │ ${value}`);
  console.log(`\nthe running app ${tree.at.toFixed(2)} s into the run (0.15 s into the work), as pstree() saw it (npx multiloop pstree <pid> shows the same from outside)`);
  console.log(tree.tree);
}

await run(main());
