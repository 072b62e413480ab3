/**
 * One OpenTelemetry trace across three threads and a BullMQ worker process: the main thread
 * starts a span 'checkout', asks a pricing thread for a quote, which asks an inventory thread
 * (a third thread) for stock; then a `multiloop worker` process ships the order as a BullMQ job.
 * Every thread and the process set up the SDK (examples/otel/tracing.ts) and call
 * `propagateTraceContext({ spans: true })`; each span is a child of the one that caused it, and
 * the example prints the tree of the trace, gathered from every thread and the process.
 *
 * The BullMQ part needs Debian's redis-server (apt-get install redis-server), started here on a
 * free port with persistence off; without it the example says so and prints the threads' trace.
 *
 * Run: npm run example:otel
 */
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { context, trace } from '@opentelemetry/api';
import {
  BullMQExecutor,
  LoopThread,
  PIPE,
  createSubprocessExec,
  gather,
  getRunningLoop,
  run,
  workerFn,
  type Coroutine,
  type Future,
  type Process,
} from 'multiloop';
import { finishedSpans, tracer, type SpanRecord } from './otel/tracing.js';
import { startRedis } from './redis-server.js';

/** Workers resolve `./otel/ship.js` from the directory of this (built) example. */
const ROOT = fileURLToPath(new URL('.', import.meta.url));
const WORKER = fileURLToPath(new URL('../bin/multiloop.js', import.meta.url));
const ship = workerFn<[string, number], string>('./otel/ship.js', 'ship');
const shipperSpans = workerFn<[string], SpanRecord[]>('./otel/ship.js', 'spans');

function onPath(command: string): boolean {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => dir !== '' && existsSync(join(dir, command)));
}

/** redis-server on a free port (persistence off) and a worker process serving its default queue. */
function* startShipping(): Coroutine<{ url: string; redis: Process; worker: Process }> {
  const { redis, port } = yield* startRedis();
  const url = `redis://127.0.0.1:${port}`;
  const worker = yield* createSubprocessExec(process.execPath, [WORKER, 'worker', '--connection', url, '--root', ROOT, '--allow', './otel/ship.js'], {
    stdout: PIPE,
  });
  // Its first line says it serves.
  yield* (worker.stdout as NonNullable<Process['stdout']>).readline();
  return { url, redis, worker };
}

/** Print the spans of one trace as a tree, children in the order they started. */
function printTree(spans: SpanRecord[]): void {
  const ids = new Set(spans.map((span) => span.spanId));
  const children = new Map<string | null, SpanRecord[]>();
  for (const span of spans) {
    const parent = span.parentSpanId !== null && ids.has(span.parentSpanId) ? span.parentSpanId : null;
    children.set(parent, [...(children.get(parent) ?? []), span]);
  }
  const print = (parent: string | null, depth: number): void => {
    for (const span of (children.get(parent) ?? []).sort((a, b) => a.start[0] - b.start[0] || a.start[1] - b.start[1])) {
      console.log(`${'  '.repeat(depth)}${span.name} [${span.kind}] in ${span.where}`);
      print(span.spanId, depth + 1);
    }
  };
  print(null, 0);
}

/** `make()` inside `span`. */
function within<T>(span: ReturnType<typeof tracer.startSpan>, make: () => Future<T>): Future<T> {
  return context.with(trace.setSpan(context.active(), span), make);
}

function* main(): Coroutine<void> {
  const loop = getRunningLoop();
  const shipping = onPath('redis-server') ? yield* startShipping() : null;
  if (shipping === null) console.log('skipped: install redis-server (apt-get install redis-server) for the BullMQ part; the threads go on');
  const executor = shipping === null ? null : new BullMQExecutor({ connection: shipping.url });
  const inventory = yield* LoopThread.start(new URL('./otel/inventory.js', import.meta.url), { name: 'inventory' });
  const pricing = yield* LoopThread.start(new URL('./otel/pricing.js', import.meta.url), { name: 'pricing' });
  try {
    const checkout = tracer.startSpan('checkout');
    const { traceId } = checkout.spanContext();
    // The inventory thread goes to the pricing thread as a LoopRef: it calls it directly.
    const price = yield* within(checkout, () => pricing.call<number>('quote', 'apple', 10, inventory));
    console.log(`10 apples cost ${price}`);
    if (executor !== null) console.log(yield* within(checkout, () => loop.runInExecutor(executor, ship, 'apple', 10)));
    checkout.end();

    const spans = [
      ...finishedSpans(traceId, 'main thread'),
      ...(yield* gather(pricing.call<SpanRecord[]>('spans', traceId), inventory.call<SpanRecord[]>('spans', traceId))).flat(),
      ...(executor === null ? [] : yield* loop.runInExecutor(executor, shipperSpans, traceId)),
    ];
    const places = new Set(spans.map((span) => span.where.replace(/ \d+$/, '')));
    console.log(`one trace (${traceId}), ${spans.length} spans from ${[...places].join(', ')}:`);
    printTree(spans);
  } finally {
    yield* gather(inventory.close(), pricing.close());
    if (executor !== null) yield* executor.shutdown();
    if (shipping !== null) {
      shipping.worker.terminate();
      yield* shipping.worker.wait();
      shipping.redis.terminate();
      yield* shipping.redis.wait();
    }
  }
}

await run(main());
