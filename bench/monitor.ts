/**
 * What the live monitor costs the app it watches: an app whose loop holds 20,000 pending tasks
 * (sleeping, awaiting futures, in gathers and TaskGroups, over a handful of coroutine functions)
 * runs a 5 ms sleep probe for 10 s — its loop lag, p50/p99/max — while 16 clients in another
 * process ask the monitor for `snapshot.json` and the page back to back over 127.0.0.1; beside the
 * same app and probe with no client. One run each: each is thousands of probe samples. A probe
 * that wakes L ms late also stands for the probes a stall of L ms kept from running (L - 5,
 * L - 10, … ms late, as HdrHistogram corrects coordinated omission): without them a loop
 * blocked most of the time shows a fine median from the few probes that ran.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { TaskGroup, ensureFuture, gather, getRunningLoop, run, sleep, startMonitor, type Coroutine, type Future, type Task } from '../src/index.js';
import { now, percentile, type Row } from './harness.js';

const CLIENTS_JS = fileURLToPath(new URL('./monitor-clients.js', import.meta.url));
const TASKS = 20_000;
const CLIENTS = 16;
const SECONDS = 10;
/** The probe's sleep, in seconds: how late it wakes is the loop's lag. */
const PROBE = 0.005;

interface ClientReport {
  statuses: Record<string, number>;
  bytes: number;
}

interface Measured {
  /** How late each probe woke, ms. */
  woke: number[];
  /** The same, with the probes each stall kept from running. */
  lags: number[];
  clients: ClientReport | null;
}

function* sleeping(): Coroutine<void> {
  yield* sleep(3600);
}

function* waiting(future: Future<void>): Coroutine<void> {
  yield* future;
}

function* gathering(): Coroutine<void> {
  const loop = getRunningLoop();
  yield* gather(...Array.from({ length: 4 }, () => loop.createTask(sleeping())));
}

function* grouping(): Coroutine<void> {
  yield* new TaskGroup().run(function* (group) {
    for (let i = 0; i < 4; i++) group.createTask(sleeping());
  });
}

/** 20,000 pending tasks: a quarter sleeping, a quarter awaiting futures, a quarter in gathers of 4, a quarter in TaskGroups of 4. */
function populate(): Array<Task<void>> {
  const loop = getRunningLoop();
  const roots: Array<Task<void>> = [];
  const quarter = TASKS / 4;
  for (let i = 0; i < quarter; i++) roots.push(loop.createTask(sleeping()));
  let future = loop.createFuture<void>();
  for (let i = 0; i < quarter; i++) {
    if (i % 100 === 0) future = loop.createFuture<void>();
    roots.push(loop.createTask(waiting(future)));
  }
  for (let i = 0; i < quarter / 5; i++) roots.push(loop.createTask(gathering()));
  for (let i = 0; i < quarter / 5; i++) roots.push(loop.createTask(grouping()));
  return roots;
}

/** The clients, in a process of their own; what they report when done. */
function startClients(url: string): Promise<ClientReport> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLIENTS_JS, url, String(CLIENTS), String(SECONDS)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      out += text;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`bench/monitor-clients.js exited with ${code}`));
      else resolve(JSON.parse(out) as ClientReport);
    });
  });
}

function* app(withClients: boolean): Coroutine<Measured> {
  const roots = populate();
  const monitor = yield* ensureFuture(startMonitor({ port: 0 }));
  try {
    // Every task parked, and the first snapshot's one-time costs (coroutine names) paid, before measuring.
    yield* sleep(0.2);
    if (withClients) yield* ensureFuture(fetch(`${monitor.url}snapshot.json`).then((response) => response.arrayBuffer()));
    const clients = withClients ? startClients(monitor.url) : null;
    const woke: number[] = [];
    const lags: number[] = [];
    const end = now() + SECONDS * 1000;
    while (now() < end) {
      const started = now();
      yield* sleep(PROBE);
      const lag = now() - started - PROBE * 1000;
      woke.push(lag);
      lags.push(lag);
      for (let missed = lag - PROBE * 1000; missed > 0; missed -= PROBE * 1000) lags.push(missed);
    }
    return { woke, lags, clients: clients === null ? null : yield* ensureFuture(clients) };
  } finally {
    for (const task of roots) task.cancel();
    yield* ensureFuture(monitor.close());
  }
}

/** Run the monitor workload: the app's loop lag with 16 clients polling, beside none. */
export async function monitorWorkloads(log: (line: string) => void): Promise<Row[]> {
  const quiet = await run(app(false));
  const polled = await run(app(true));
  const answers = polled.clients?.statuses['200'] ?? 0;
  const others = Object.entries(polled.clients?.statuses ?? {}).filter(([status]) => status !== '200');
  log(
    `  ${TASKS} tasks, ${CLIENTS} clients for ${SECONDS} s: ${answers} answers (${((polled.clients?.bytes ?? 0) / 1e6).toFixed(0)} MB)` +
      `${others.length > 0 ? `, others: ${others.map(([status, count]) => `${count} × ${status}`).join(', ')}` : ''}; ${polled.woke.length} probes, ${polled.lags.length} samples with the stalls counted in full (${quiet.woke.length} and ${quiet.lags.length} without clients)`,
  );
  const rows: Row[] = [];
  for (const [label, p, samples, target] of [
    ['p50', 50, 'lags', undefined],
    ['p99', 99, 'lags', '< 20 ms'],
    ['max', 100, 'lags', undefined],
    ['p99 (probes as they woke, stalls not counted in full)', 99, 'woke', '< 20 ms'],
  ] as const) {
    const value = percentile(polled[samples], p);
    const baseline = percentile(quiet[samples], p);
    rows.push({
      workload: `monitor: app loop lag ${label}, ${TASKS / 1000}k tasks, ${CLIENTS} clients polling`,
      unit: 'ms',
      value,
      baseline,
      baselineName: 'no client',
      higherIsBetter: false,
      ...(target === undefined ? {} : { target }),
    });
    log(`  lag ${label}: ${value.toFixed(2)} ms (no client: ${baseline.toFixed(2)} ms)`);
  }
  rows.push({ workload: `monitor: answers/s to ${CLIENTS} clients`, unit: 'answers/s', value: answers / SECONDS, baseline: null, baselineName: null, higherIsBetter: true });
  return rows;
}
