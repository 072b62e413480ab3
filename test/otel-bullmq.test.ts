/**
 * multiloop/otel with BullMQ jobs, a real redis-server and a real `multiloop worker` process that
 * sets up the OpenTelemetry SDK in the job module (test/fixtures/otel-service.mjs): a span the
 * job starts is a child of the caller's span, in its trace; with spans on both sides, a CLIENT
 * span here and a SERVER span in the worker, `multiloop call <export>`.
 */
import { context, SpanKind, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BullMQExecutor } from '../src/bullmq.js';
import { propagateTraceContext } from '../src/otel/index.js';
import { workerFn } from '../src/worker-fn.js';
import { killWorker, resultOf, startRedis, startWorker, type RedisServer, type WorkerProcess } from './helpers/redis.js';
import { needProgram } from './helpers/system.js';
import { describe_, finished, spanTracer, type WhoAmI } from './helpers/otel.js';

const SERVICE = './test/fixtures/otel-service.mjs';
const whoAmI = workerFn<[], WhoAmI>(SERVICE, 'whoAmI');
const whoAmILater = workerFn<[], WhoAmI>(SERVICE, 'whoAmILater');


const hasRedis = needProgram('redis-server', 'apt-get install redis-server', 'the BullMQ OpenTelemetry tests');

describe.runIf(hasRedis)('BullMQ jobs carry the OpenTelemetry context to a worker process', () => {
  let redis: RedisServer;
  let plainWorker: WorkerProcess;
  let spansWorker: WorkerProcess;
  let plain: BullMQExecutor;
  let spanned: BullMQExecutor;

  beforeAll(async () => {
    redis = await startRedis();
    plainWorker = await startWorker(redis.url, ['--queue', 'otel', '--allow', SERVICE]);
    spansWorker = await startWorker(redis.url, ['--queue', 'otel-spans', '--allow', SERVICE], { MULTILOOP_OTEL_SPANS: '1' });
    plain = new BullMQExecutor({ connection: redis.url, queue: 'otel' });
    spanned = new BullMQExecutor({ connection: redis.url, queue: 'otel-spans' });
  });

  afterAll(async () => {
    propagateTraceContext({ spans: false });
    await plain?.shutdown(true, { cancelFutures: true });
    await spanned?.shutdown(true, { cancelFutures: true });
    if (plainWorker !== undefined) await killWorker(plainWorker);
    if (spansWorker !== undefined) await killWorker(spansWorker);
    await redis?.kill();
  });

  it("makes the job's span a child of the caller's, a function and a coroutine; no span, no parent", async () => {
    propagateTraceContext();
    const caller = spanTracer.startSpan('caller');
    const [now, later] = context.with(trace.setSpan(context.active(), caller), () => [plain.submit(whoAmI), plain.submit(whoAmILater)]);
    const { traceId, spanId } = caller.spanContext();
    for (const outcome of [await resultOf(now), await resultOf(later)]) {
      expect(outcome.active).toEqual({ remote: true, traceId, spanId });
      expect(outcome.mine).toMatchObject({ name: 'callee', traceId, parentSpanId: spanId });
    }
    caller.end();
    const alone = await resultOf(plain.submit(whoAmI));
    expect(alone.active).toBeNull();
    expect(alone.mine.parentSpanId).toBeNull();
    finished();
  });

  it('with spans: a CLIENT span here, a SERVER span in the worker, named after the export', async () => {
    propagateTraceContext({ spans: true });
    try {
      const caller = spanTracer.startSpan('caller');
      const future = context.with(trace.setSpan(context.active(), caller), () => spanned.submit(whoAmILater));
      const outcome = await resultOf(future);
      caller.end();
      const described = describe_(caller);
      const client = finished().filter((span) => span.parentSpanId === described.spanId);
      expect(client).toHaveLength(1);
      expect(client[0]).toMatchObject({ name: 'multiloop call whoAmILater', kind: SpanKind.CLIENT, traceId: described.traceId });
      expect(outcome.active).toMatchObject({ name: 'multiloop call whoAmILater', kind: SpanKind.SERVER, traceId: described.traceId, parentSpanId: client[0]?.spanId });
      expect(outcome.mine).toMatchObject({ name: 'callee', traceId: described.traceId, parentSpanId: outcome.active?.spanId });
    } finally {
      propagateTraceContext({ spans: false });
    }
  });
});
