/**
 * ThreadQueue across threads: one producer LoopThread putting into one consumer LoopThread's
 * gets, beside one postMessage per item into an asyncio-style Queue on the consumer's side (the
 * same threads, the same items, rounds alternating); and the hand-off latency of a consumer idle
 * in `get` beside the round trip of the ping-pong row (a call to a LoopThread and its reply),
 * measured in chunks alternating with it.
 */
import { MessageChannel } from 'node:worker_threads';
import { LoopThread, ThreadQueue, ensureFuture, move, run, type Coroutine } from '../src/index.js';
import { median, now, percentile, perSecond, type Row } from './harness.js';

const SERVICE = new URL('./fixtures/queue-service.js', import.meta.url);
const ECHO = new URL('./fixtures/echo-service.js', import.meta.url);
const ROUNDS = 9;
const ITEMS = 400_000;
const CHUNKS = 40;
const CHUNK = 250;

interface Pair {
  producer: LoopThread;
  consumer: LoopThread;
}

/** Items per second through a ThreadQueue. */
function* throughQueue({ producer, consumer }: Pair, maxsize: number, item: unknown): Coroutine<number> {
  const queue = new ThreadQueue({ maxsize, name: 'bench' });
  const started = now();
  const consumed = consumer.call<number>('consume', queue, ITEMS);
  yield* producer.call('produce', queue, ITEMS, item);
  const got = yield* consumed;
  const took = now() - started;
  if (got !== ITEMS) throw new Error(`the queue delivered ${got} of ${ITEMS}`);
  return perSecond(ITEMS, took);
}

/** Items per second as one postMessage each, put into an asyncio Queue where they arrive. */
function* throughPorts({ producer, consumer }: Pair, item: unknown): Coroutine<number> {
  const { port1, port2 } = new MessageChannel();
  const started = now();
  const consumed = consumer.call<number>('receiveEach', move(port2), ITEMS);
  yield* producer.call('postEach', move(port1), ITEMS, item);
  const got = yield* consumed;
  const took = now() - started;
  if (got !== ITEMS) throw new Error(`the ports delivered ${got} of ${ITEMS}`);
  return perSecond(ITEMS, took);
}

function* handOffs({ producer, consumer }: Pair, count: number, pause: number, samples: number[]): Coroutine<void> {
  const queue = new ThreadQueue<number>({ name: 'hand-off' });
  const acks = new ThreadQueue<number>({ name: 'acks' });
  const received = consumer.call<number[]>('receiveHandOffs', queue, acks, count);
  yield* producer.call('handOff', queue, acks, count, pause);
  samples.push(...(yield* received));
}

function* pingPongs(echo: LoopThread, count: number, samples: number[]): Coroutine<void> {
  for (let i = 0; i < count; i++) {
    const started = now();
    yield* echo.call<number>('echo', i);
    samples.push((now() - started) * 1000);
  }
}

/** Run the ThreadQueue workloads. */
export async function threadQueueWorkloads(log: (line: string) => void): Promise<Row[]> {
  const numbers: [number[], number[]] = [[], []];
  const bounded: number[] = [];
  const objects: [number[], number[]] = [[], []];
  const hot: number[] = [];
  const asleep: number[] = [];
  const pings: number[] = [];
  const object = { id: 7, name: 'item' };
  function* main(): Coroutine<void> {
    const pair: Pair = {
      producer: yield* ensureFuture(LoopThread.start(SERVICE, { name: 'bench-producer' })),
      consumer: yield* ensureFuture(LoopThread.start(SERVICE, { name: 'bench-consumer' })),
    };
    const echo = yield* ensureFuture(LoopThread.start(ECHO, { name: 'bench-echo' }));
    // Warm-up of every path.
    yield* throughQueue(pair, 0, 1);
    yield* throughPorts(pair, 1);
    yield* handOffs(pair, 1_000, 0, []);
    yield* pingPongs(echo, 1_000, []);
    for (let round = 0; round < ROUNDS; round++) {
      // Which goes first alternates: the second of a pair meets the garbage of the first.
      if (round % 2 === 0) {
        numbers[0].push(yield* throughQueue(pair, 0, 1));
        numbers[1].push(yield* throughPorts(pair, 1));
      } else {
        numbers[1].push(yield* throughPorts(pair, 1));
        numbers[0].push(yield* throughQueue(pair, 0, 1));
      }
      bounded.push(yield* throughQueue(pair, 1024, 1));
      objects[0].push(yield* throughQueue(pair, 0, object));
      objects[1].push(yield* throughPorts(pair, object));
    }
    for (let chunk = 0; chunk < CHUNKS; chunk++) {
      yield* handOffs(pair, CHUNK, 0, hot);
      yield* pingPongs(echo, CHUNK, pings);
    }
    // A consumer whose loop went to sleep in `get` (woken through Atomics.waitAsync, not polled).
    yield* handOffs(pair, 200, 0.002, asleep);
    yield* ensureFuture(pair.producer.close());
    yield* ensureFuture(pair.consumer.close());
    yield* ensureFuture(echo.close());
  }
  await run(main());
  const spread = (values: number[]): string => `${(Math.min(...values) / 1e6).toFixed(2)}–${(Math.max(...values) / 1e6).toFixed(2)} M/s`;
  log(`  spread of ${ROUNDS} rounds: numbers ${spread(numbers[0])} (ports ${spread(numbers[1])}), maxsize 1024 ${spread(bounded)}, objects ${spread(objects[0])} (ports ${spread(objects[1])})`);
  const rows: Row[] = [
    {
      workload: 'ThreadQueue 1 producer → 1 consumer LoopThread, numbers',
      unit: 'items/s',
      value: median(numbers[0]),
      baseline: median(numbers[1]),
      baselineName: 'one postMessage per item into a Queue',
      higherIsBetter: true,
      target: '>= 2 M/s and >= 5x baseline',
    },
    {
      workload: 'ThreadQueue 1 → 1, numbers, maxsize 1024',
      unit: 'items/s',
      value: median(bounded),
      baseline: median(numbers[1]),
      baselineName: 'one postMessage per item into a Queue',
      higherIsBetter: true,
    },
    {
      workload: 'ThreadQueue 1 → 1, small objects {id, name}',
      unit: 'items/s',
      value: median(objects[0]),
      baseline: median(objects[1]),
      baselineName: 'one postMessage per item into a Queue',
      higherIsBetter: true,
    },
    {
      workload: 'ThreadQueue hand-off p50, consumer idle in get',
      unit: 'µs',
      value: percentile(hot, 50),
      baseline: percentile(pings, 50),
      baselineName: 'ping-pong round trip p50 (lt.call)',
      higherIsBetter: false,
      target: '<= ping-pong round trip',
    },
    {
      workload: 'ThreadQueue hand-off p99, consumer idle in get',
      unit: 'µs',
      value: percentile(hot, 99),
      baseline: percentile(pings, 99),
      baselineName: 'ping-pong round trip p99 (lt.call)',
      higherIsBetter: false,
    },
    {
      workload: 'ThreadQueue hand-off p50, consumer loop asleep in get (2 ms apart)',
      unit: 'µs',
      value: percentile(asleep, 50),
      baseline: percentile(pings, 50),
      baselineName: 'ping-pong round trip p50 (lt.call)',
      higherIsBetter: false,
    },
  ];
  for (const row of rows) log(`  ${row.workload}: ${row.value.toFixed(1)} ${row.unit} (baseline ${row.baseline?.toFixed(1)})`);
  return rows;
}
