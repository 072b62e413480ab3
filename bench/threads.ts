/**
 * Workloads across threads: a ping-pong between loops in two threads (round-trip p50/p99) and a
 * one-way callSoonThreadsafe burst, each beside a raw MessagePort doing the same in the same run.
 * The raw baseline runs between the same two threads: one end of its MessageChannel is moved
 * into the LoopThread's worker, where a plain 'message' handler answers (no loop involved).
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import * as Comlink from 'comlink';
import nodeAdapter from 'comlink/dist/umd/node-adapter.js';
import { LoopThread, ensureFuture, move, run, sleep, type Coroutine } from '../src/index.js';
import { median, now, percentile, perSecond, type Row } from './harness.js';

const ECHO = new URL('./fixtures/echo-service.js', import.meta.url);
/** comlink's adapter of Node ports (a CommonJS module whose default export is the function). */
const nodeEndpoint = nodeAdapter as unknown as typeof nodeAdapter.default;

type Echo = Comlink.Remote<{ echo(value: number): number }>;
const ROUNDS = 5;
/** How long both threads sit idle while their CPU time is measured (seconds). */
const IDLE_SECONDS = 0.5;

/** CPU time of the whole process (every thread) in microseconds. */
function cpuMicros(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

function* loopPingPong(thread: LoopThread, count: number, samples: number[]): Coroutine<void> {
  for (let i = 0; i < count; i++) {
    const started = now();
    yield* thread.call<number>('echo', i);
    samples.push((now() - started) * 1000);
  }
}

function* loopBurst(thread: LoopThread, count: number): Coroutine<number> {
  const started = now();
  for (let i = 0; i < count; i++) thread.callSoonThreadsafe('inc');
  const seen = yield* thread.call<number>('take');
  const took = now() - started;
  if (seen !== count) throw new Error(`burst delivered ${seen} of ${count}`);
  return perSecond(count, took);
}

function rawPingPong(port: MessagePort, count: number, samples: number[]): Promise<void> {
  return new Promise((resolve) => {
    let i = 0;
    let started = now();
    const onMessage = (): void => {
      samples.push((now() - started) * 1000);
      if (++i === count) {
        port.off('message', onMessage);
        resolve();
        return;
      }
      started = now();
      port.postMessage(i);
    };
    port.on('message', onMessage);
    port.postMessage(i);
  });
}

function rawBurst(port: MessagePort, count: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = now();
    port.once('message', (seen: number) => {
      if (seen !== count) reject(new Error(`raw burst delivered ${seen} of ${count}`));
      else resolve(perSecond(count, now() - started));
    });
    for (let i = 0; i < count; i++) port.postMessage(-1);
    port.postMessage('take');
  });
}

/** Round trips of a comlink client, awaited one after the other, as a comlink user writes them. */
async function comlinkPingPong(remote: Echo, count: number, samples: number[]): Promise<void> {
  for (let i = 0; i < count; i++) {
    const started = now();
    await remote.echo(i);
    samples.push((now() - started) * 1000);
  }
}

/** Run the cross-thread workloads. */
export async function threadWorkloads(log: (line: string) => void): Promise<Row[]> {
  // Thread wake-up latency changes mode over time (cores busy or idle): round trips alternate
  // between multiloop and the baseline every 500, and percentiles are taken over the pooled samples.
  const oursSamples: number[] = [];
  const rawSamples: number[] = [];
  // CPU time (both threads) spent by the round trips of each side, and by both threads idle.
  let oursCpu = 0;
  let rawCpu = 0;
  let idleCpu = 0;

  const oursBurst: number[] = [];
  const rawBursts: number[] = [];
  const channel = new MessageChannel();
  const port = channel.port1;
  const comlinkChannel = new MessageChannel();
  const comlinkOurs: number[] = [];
  const comlinkRaw: number[] = [];
  let served: Echo | null = null;
  const raw = Comlink.wrap<{ echo(value: number): number }>(nodeEndpoint(comlinkChannel.port1));
  function* main(): Coroutine<void> {
    const thread = yield* ensureFuture(LoopThread.start(ECHO, { name: 'bench-echo' }));
    yield* thread.call('rawEcho', move(channel.port2));
    yield* thread.call('rawComlink', move(comlinkChannel.port2));
    served = Comlink.wrap<{ echo(value: number): number }>(nodeEndpoint(thread.comlinkPort()));
    yield* loopPingPong(thread, 2_000, []);
    yield* ensureFuture(rawPingPong(port, 2_000, []));
    yield* loopBurst(thread, 200_000);
    for (let chunk = 0; chunk < 100; chunk++) {
      let cpu = cpuMicros();
      yield* loopPingPong(thread, 500, oursSamples);
      oursCpu += cpuMicros() - cpu;
      cpu = cpuMicros();
      yield* ensureFuture(rawPingPong(port, 500, rawSamples));
      rawCpu += cpuMicros() - cpu;
    }
    // Both loops idle after the round trips: whatever they poll, they must stop doing it.
    yield* sleep(0.05);
    const idleStart = cpuMicros();
    yield* sleep(IDLE_SECONDS);
    idleCpu = cpuMicros() - idleStart;
    // comlink's round trips: the same client code, served by the LoopThread's loop or by bare comlink in the same thread.
    yield* ensureFuture(comlinkPingPong(served, 1_000, []));
    yield* ensureFuture(comlinkPingPong(raw, 1_000, []));
    for (let chunk = 0; chunk < 40; chunk++) {
      yield* ensureFuture(comlinkPingPong(served, 250, comlinkOurs));
      yield* ensureFuture(comlinkPingPong(raw, 250, comlinkRaw));
    }
    for (let round = 0; round < ROUNDS; round++) {
      oursBurst.push(yield* loopBurst(thread, 1_000_000));
      rawBursts.push(yield* ensureFuture(rawBurst(port, 1_000_000)));
    }
    yield* ensureFuture(thread.close());
  }
  await run(main());
  port.close();
  comlinkChannel.port1.close();
  const rows: Row[] = [
    {
      workload: 'ping-pong round trip p50',
      unit: 'µs',
      value: percentile(oursSamples, 50),
      baseline: percentile(rawSamples, 50),
      baselineName: 'raw MessagePort ping-pong',
      higherIsBetter: false,
      target: 'within 1.2x of raw',
    },
    {
      workload: 'ping-pong round trip p99',
      unit: 'µs',
      value: percentile(oursSamples, 99),
      baseline: percentile(rawSamples, 99),
      baselineName: 'raw MessagePort ping-pong',
      higherIsBetter: false,
    },
    {
      workload: 'ping-pong CPU per round trip (both threads)',
      unit: 'µs',
      value: oursCpu / oursSamples.length,
      baseline: rawCpu / rawSamples.length,
      baselineName: 'raw MessagePort ping-pong',
      higherIsBetter: false,
    },
    {
      workload: 'CPU of two idle loops (after the round trips)',
      unit: '% of a core',
      value: (idleCpu / (IDLE_SECONDS * 1e6)) * 100,
      baseline: null,
      baselineName: null,
      higherIsBetter: false,
      target: '~0: no polling while idle',
    },
    {
      workload: 'one-way callSoonThreadsafe burst',
      unit: 'calls/s',
      value: median(oursBurst),
      baseline: median(rawBursts),
      baselineName: 'raw postMessage burst',
      higherIsBetter: true,
      target: '>= 5 M/s',
    },
    {
      workload: 'comlink ping-pong via lt.comlinkPort() p50',
      unit: 'µs',
      value: percentile(comlinkOurs, 50),
      baseline: percentile(comlinkRaw, 50),
      baselineName: 'raw comlink ping-pong, same threads',
      higherIsBetter: false,
      target: '<= 1.1x raw comlink',
    },
  ];
  for (const row of rows) log(`  ${row.workload}: ${row.value.toFixed(1)} ${row.unit} (baseline ${row.baseline?.toFixed(1)})`);
  return rows;
}
