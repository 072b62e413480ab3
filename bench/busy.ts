/**
 * A busy loop hearing other threads: a ping (a coroutine call) to a LoopThread whose loop runs K
 * CPU-slicing tasks, counted in that loop's rounds, beside CPython's asyncio doing the same
 * (run_coroutine_threadsafe to a loop in a thread, bench/peers/busy_ping.py) in the same run.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { LoopThread, run, sleep, type Coroutine } from '../src/index.js';
import { median, type Row } from './harness.js';

const SERVICE = new URL('./fixtures/busy-service.js', import.meta.url);
const PEER = fileURLToPath(new URL('../../bench/peers/busy_ping.py', import.meta.url));
const TASKS = 200;
const MICROS = 25;
const PINGS = 40;

function* pings(): Coroutine<number[]> {
  const lt = yield* LoopThread.start(SERVICE, { name: 'busy' });
  try {
    const words = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
    yield* lt.call('startBusy', words.buffer, TASKS, MICROS);
    while (Atomics.load(words, 0) < 3) yield* sleep(0.005);
    const seen: number[] = [];
    for (let i = 0; i < PINGS; i++) {
      const sent = Atomics.load(words, 0);
      seen.push((yield* lt.call<number>('ping')) - sent);
    }
    yield* lt.call('stopBusy');
    return seen;
  } finally {
    yield* lt.close();
  }
}

/** CPython asyncio's median rounds, or null (with a line saying why) when no python3 runs it. */
function asyncioRounds(log: (line: string) => void): number | null {
  for (const python of ['/usr/bin/python3', 'python3']) {
    const ran = spawnSync(python, [PEER, String(TASKS), String(MICROS), String(PINGS)], { encoding: 'utf8', timeout: 120_000 });
    if (ran.status === 0) return (JSON.parse(ran.stdout) as { median: number }).median;
    if (ran.error === undefined) {
      log(`  asyncio busy ping failed (exit ${ran.status}): ${ran.stderr.trim().split('\n').pop() ?? ''}`);
      return null;
    }
  }
  log('  asyncio busy ping skipped: install python3');
  return null;
}

export async function busyWorkloads(log: (line: string) => void): Promise<Row[]> {
  const rounds = median(await run(pings()));
  log(`  ping to a loop running ${TASKS} tasks of ${MICROS} µs steps: ${rounds} rounds`);
  const peer = asyncioRounds(log);
  if (peer !== null) log(`  asyncio: ${peer} rounds`);
  return [
    {
      workload: `ping (coroutine call) to a LoopThread running ${TASKS} CPU-slicing tasks (${MICROS} µs steps), in its loop's rounds`,
      unit: 'rounds',
      value: rounds,
      baseline: peer,
      baselineName: peer === null ? null : "CPython asyncio's run_coroutine_threadsafe, same workload",
      higherIsBetter: false,
      target: "<= asyncio's",
    },
  ];
}
