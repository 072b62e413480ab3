/**
 * multiloop/otel with the real OpenTelemetry SDK in the main thread and in worker threads (each
 * thread sets up its own provider, exporting to memory): a span started in the callee of a
 * LoopThread call, a pool call, a callSoonThreadsafe, a pool job is a child of the caller's span,
 * in one trace; a ThreadQueue consumer's span links to the producer's; `spans: true` makes a
 * CLIENT span in the caller and a SERVER span in the callee, `multiloop call <export>`. The
 * threads run dist/ (test/fixtures/otel-service.mjs), this test src/.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { afterAll, describe, expect, it } from 'vitest';
import {
  ContextVar,
  LoopThread,
  LoopThreadPool,
  PiscinaExecutor,
  ThreadQueue,
  getRunningLoop,
  registerAsyncLocalStorage,
  registerContextVar,
  run,
  sleep,
  toThread,
  workerFn,
  type Coroutine,
  type Future,
} from '../src/index.js';
import { runInCarriedStores } from '../src/internal/travel.js';
import { propagateTraceContext } from '../src/otel/index.js';
import { describe_, exporter, finished, spanTracer, type Described, type WhoAmI } from './helpers/otel.js';

const SERVICE = new URL('./fixtures/otel-service.mjs', import.meta.url);
const ROOT = fileURLToPath(new URL('..', import.meta.url));


/** Call `make()` inside a new span 'caller' of this thread; the span ends after the call settled. */
function* inSpan<T>(make: () => Future<T>): Coroutine<{ value: T; caller: Described }> {
  const span = spanTracer.startSpan('caller');
  const future = context.with(trace.setSpan(context.active(), span), make);
  const value = yield* future;
  span.end();
  return { value, caller: describe_(span) };
}

/** Check that `got` is a span started in the callee as a child of `parent`, in its trace. */
function expectChild(got: WhoAmI, parent: Described): void {
  expect(got.active).toEqual({ remote: true, traceId: parent.traceId, spanId: parent.spanId });
  expect(got.mine).toMatchObject({ name: 'callee', traceId: parent.traceId, parentSpanId: parent.spanId });
}

afterAll(() => {
  propagateTraceContext({ spans: false });
});

describe('propagateTraceContext', () => {
  it('refuses bad options', () => {
    expect(() => propagateTraceContext(null as never)).toThrow(new TypeError('propagateTraceContext(): options must be an object'));
    expect(() => propagateTraceContext({ spans: 'yes' } as never)).toThrow(new TypeError('propagateTraceContext(): options.spans must be a boolean'));
  });

  it('keeps its name from user variables and storages', () => {
    propagateTraceContext();
    expect(() => registerContextVar(new ContextVar('multiloop.otel'))).toThrow(
      new TypeError("registerContextVar(): multiloop/otel's trace context is registered as 'multiloop.otel' (a name stands for one variable in every thread)"),
    );
    expect(() => registerAsyncLocalStorage(new AsyncLocalStorage(), { name: 'multiloop.otel' })).toThrow(
      new TypeError("registerAsyncLocalStorage(): multiloop/otel's trace context is registered as 'multiloop.otel' (a name stands for one storage in every thread)"),
    );
  });

  it('makes a span of the callee of lt.call a child of the caller span, a coroutine and an async function too, and callSoonThreadsafe', async () => {
    propagateTraceContext();
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const lt = yield* LoopThread.start(SERVICE);
        try {
          const none = (yield* lt.call('whoAmI')) as WhoAmI;
          const plain = yield* inSpan(() => lt.call('whoAmI') as Future<WhoAmI>);
          const later = yield* inSpan(() => lt.call('whoAmILater') as Future<WhoAmI>);
          const afterAwait = yield* inSpan(() => lt.call('whoAmIAfterAwait') as Future<WhoAmI>);
          const noted = yield* inSpan(() => {
            lt.callSoonThreadsafe('note');
            return lt.call('notesSoFar') as Future<WhoAmI[]>;
          });
          const after = (yield* lt.call('whoAmI')) as WhoAmI;
          return { none, plain, later, afterAwait, noted, after };
        } finally {
          yield* lt.close();
        }
      })(),
    );
    const none = out.none as WhoAmI;
    expect(none.active).toBeNull();
    expect(none.mine.parentSpanId).toBeNull();
    for (const key of ['plain', 'later', 'afterAwait']) {
      const { value, caller } = out[key] as { value: WhoAmI; caller: Described };
      expectChild(value, caller);
    }
    const noted = out.noted as { value: WhoAmI[]; caller: Described };
    expect(noted.value).toHaveLength(1);
    expectChild(noted.value[0] as WhoAmI, noted.caller);
    // The caller's spans were each a trace of their own; after them nothing travels.
    const traces = new Set(['plain', 'later', 'afterAwait', 'noted'].map((key) => (out[key] as { caller: Described }).caller.traceId));
    expect(traces.size).toBe(4);
    expect((out.after as WhoAmI).active).toBeNull();
    exporter.reset();
  });

  it('carries it with pool calls and executor jobs (an async job across its awaits)', async () => {
    propagateTraceContext();
    const out = await run(
      (function* (): Coroutine<Record<string, { value: WhoAmI; caller: Described }>> {
        const pool = yield* LoopThreadPool.start(SERVICE, { size: 2 });
        try {
          const pooled = yield* inSpan(() => pool.call('whoAmILater') as Future<WhoAmI>);
          const job = yield* inSpan(() => toThread(workerFn<[], WhoAmI>(SERVICE, 'whoAmI')));
          const asyncJob = yield* inSpan(() => toThread(workerFn<[], WhoAmI>(SERVICE, 'whoAmIAfterAwait')));
          return { pooled, job, asyncJob };
        } finally {
          yield* pool.close();
        }
      })(),
    );
    for (const { value, caller } of Object.values(out)) expectChild(value, caller);
    exporter.reset();
  });

  it("links the span that takes a ThreadQueue item to the producer's span", async () => {
    propagateTraceContext();
    const out = await run(
      (function* (): Coroutine<Record<string, unknown>> {
        const lt = yield* LoopThread.start(SERVICE);
        const queue = new ThreadQueue<unknown>({ name: 'traced' });
        try {
          // Put before the get: taken at once; and put while the consumer waits.
          const producer = spanTracer.startSpan('producer');
          context.with(trace.setSpan(context.active(), producer), () => queue.putNowait({ n: 1 }));
          producer.end();
          const first = yield* lt.call('consume', queue);
          const waiting = lt.call('consume', queue);
          yield* sleep(0.05);
          const second = spanTracer.startSpan('producer');
          context.with(trace.setSpan(context.active(), second), () => queue.putNowait(2));
          second.end();
          const taken = yield* waiting;
          // Put outside any span: a plain item, no link.
          queue.putNowait('plain');
          const plain = yield* lt.call('consume', queue);
          return { producer: describe_(producer), first, second: describe_(second), taken, plain };
        } finally {
          yield* lt.close();
        }
      })(),
    );
    const producer = out.producer as Described;
    const second = out.second as Described;
    const first = out.first as { item: unknown; consumer: Described };
    const taken = out.taken as { item: unknown; consumer: Described };
    const plain = out.plain as { item: unknown; consumer: Described };
    expect(first.item).toEqual({ n: 1 });
    expect(first.consumer.links).toEqual([{ traceId: producer.traceId, spanId: producer.spanId }]);
    // The consumer's span is of its own trace: a link, not a parent.
    expect(first.consumer.parentSpanId).toBeNull();
    expect(first.consumer.traceId).not.toBe(producer.traceId);
    expect(taken.item).toBe(2);
    expect(taken.consumer.links).toEqual([{ traceId: second.traceId, spanId: second.spanId }]);
    expect(plain.item).toBe('plain');
    expect(plain.consumer.links).toEqual([]);
    exporter.reset();
  });

  it('with spans: a CLIENT span in the caller and a SERVER span in the callee per call, job and callSoonThreadsafe, named after the export', async () => {
    propagateTraceContext({ spans: true });
    process.env.MULTILOOP_OTEL_SPANS = '1';
    let out: Record<string, unknown>;
    // Its thread starts after the environment says spans.
    const executor = new PiscinaExecutor({ maxThreads: 1 });
    try {
      out = await run(
        (function* (): Coroutine<Record<string, unknown>> {
          const lt = yield* LoopThread.start(SERVICE);
          try {
            const called = yield* inSpan(() => lt.call('whoAmILater') as Future<WhoAmI>);
            const job = yield* inSpan(() => getRunningLoop().runInExecutor(executor, workerFn<[], WhoAmI>(SERVICE, 'whoAmIAfterAwait')));
            let failure: unknown = null;
            const failed = spanTracer.startSpan('caller');
            try {
              yield* context.with(trace.setSpan(context.active(), failed), () => lt.call('fails'));
            } catch (error) {
              failure = error;
            }
            failed.end();
            const noted = yield* inSpan(() => {
              lt.callSoonThreadsafe('note');
              return lt.call('notesSoFar') as Future<WhoAmI[]>;
            });
            // submit: a ConcurrentFuture, its result read blocking.
            const submitter = spanTracer.startSpan('caller');
            const submitted = context.with(trace.setSpan(context.active(), submitter), () => lt.submit<WhoAmI>('whoAmI')).result(30);
            submitter.end();
            const there = (yield* lt.call('finishedSpans')) as Described[];
            // Done callbacks end the CLIENT spans: let them run.
            yield* sleep(0);
            return { called, job, failed: describe_(failed), failure, noted, submitted, submitter: describe_(submitter), there, here: finished() };
          } finally {
            yield* lt.close();
          }
        })(),
      );
    } finally {
      await executor.shutdown(true);
      delete process.env.MULTILOOP_OTEL_SPANS;
      propagateTraceContext({ spans: false });
    }
    const here = out.here as Described[];
    const there = out.there as Described[];
    const clientOf = (caller: Described, name: string): Described => {
      const found = here.filter((span) => span.parentSpanId === caller.spanId && span.name === `multiloop call ${name}`);
      expect(found).toHaveLength(1);
      expect(found[0]).toMatchObject({ kind: SpanKind.CLIENT, traceId: caller.traceId });
      return found[0] as Described;
    };
    const serverOf = (client: Described, name: string, spans: Described[]): Described => {
      const found = spans.filter((span) => span.parentSpanId === client.spanId);
      expect(found).toHaveLength(1);
      expect(found[0]).toMatchObject({ name: `multiloop call ${name}`, kind: SpanKind.SERVER, traceId: client.traceId });
      return found[0] as Described;
    };
    // lt.call: caller → CLIENT → SERVER (in the thread) → the callee's span.
    const called = out.called as { value: WhoAmI; caller: Described };
    const callClient = clientOf(called.caller, 'whoAmILater');
    const callServer = serverOf(callClient, 'whoAmILater', there);
    expect(called.value.active).toMatchObject({ name: 'multiloop call whoAmILater', kind: SpanKind.SERVER, spanId: callServer.spanId });
    expect(called.value.mine).toMatchObject({ name: 'callee', parentSpanId: callServer.spanId, traceId: called.caller.traceId });
    // A pool job: the SERVER span is the one active in the job (it ends in the pool thread).
    const job = out.job as { value: WhoAmI; caller: Described };
    const jobClient = clientOf(job.caller, 'whoAmIAfterAwait');
    expect(job.value.active).toMatchObject({ name: 'multiloop call whoAmIAfterAwait', kind: SpanKind.SERVER, parentSpanId: jobClient.spanId, traceId: job.caller.traceId });
    expect(job.value.mine).toMatchObject({ name: 'callee', parentSpanId: job.value.active?.spanId });
    // A call that fails: both spans end, the CLIENT one with its error.
    expect(out.failure).toBeInstanceOf(RangeError);
    const failedClient = clientOf(out.failed as Described, 'fails');
    expect(failedClient.status).toBe(SpanStatusCode.ERROR);
    expect(serverOf(failedClient, 'fails', there).status).toBe(SpanStatusCode.ERROR);
    expect(callClient.status).toBe(SpanStatusCode.UNSET);
    // callSoonThreadsafe: a CLIENT span that ends when sent, a SERVER span around the call there.
    const noted = out.noted as { value: WhoAmI[]; caller: Described };
    const noteClient = clientOf(noted.caller, 'note');
    clientOf(noted.caller, 'notesSoFar');
    expect(noted.value[0]?.active).toMatchObject({ name: 'multiloop call note', kind: SpanKind.SERVER, parentSpanId: noteClient.spanId });
    const submitted = out.submitted as WhoAmI;
    const submitClient = clientOf(out.submitter as Described, 'whoAmI');
    expect(submitted.active).toMatchObject({ name: 'multiloop call whoAmI', kind: SpanKind.SERVER, parentSpanId: submitClient.spanId });
    // Each span of the thread is a SERVER span of a call or a span a callee started.
    expect(there.map((span) => span.name).sort()).toEqual(
      ['callee', 'multiloop call whoAmILater', 'multiloop call fails', 'multiloop call note', 'callee', 'multiloop call notesSoFar', 'callee', 'multiloop call whoAmI'].sort(),
    );
  });
});

describe('a trace context as it arrives', () => {
  it('runs the callee in no span when the carried fields are not what a propagator writes (a hostile or broken peer)', () => {
    propagateTraceContext();
    const good = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' };
    const seen = (written: unknown): string | undefined =>
      runInCarriedStores([['multiloop.otel'], [written]], () => trace.getSpanContext(context.active())?.spanId);
    expect(seen(good)).toBe('b7ad6b7169203331');
    for (const bad of [null, 7, 'traceparent', [good.traceparent], { traceparent: 7 }, { traceparent: 'x'.repeat(100_000) }, Object.create(good) as unknown]) {
      expect(seen(bad)).toBeUndefined();
    }
  });
});

describe('multiloop/otel without @opentelemetry/api', () => {
  it("says which package to install", () => {
    // An application whose node_modules has multiloop (its build) and its dependencies, and no OpenTelemetry.
    const app = mkdtempSync(join(tmpdir(), 'multiloop-otel-'));
    try {
      const installed = join(app, 'node_modules', 'multiloop');
      mkdirSync(installed, { recursive: true });
      cpSync(join(ROOT, 'package.json'), join(installed, 'package.json'));
      cpSync(join(ROOT, 'dist', 'lib'), join(installed, 'dist', 'lib'), { recursive: true });
      for (const dependency of ['piscina', 'comlink']) symlinkSync(join(ROOT, 'node_modules', dependency), join(app, 'node_modules', dependency), 'dir');
      writeFileSync(
        join(app, 'main.mjs'),
        "import { propagateTraceContext } from 'multiloop/otel';\n" +
          'try { propagateTraceContext(); } catch (error) { console.log(`${error.name}: ${error.message}`); }\n',
      );
      const printed = execFileSync(process.execPath, ['main.mjs'], { cwd: app, encoding: 'utf8' });
      expect(printed.trim()).toBe("RuntimeError: multiloop/otel needs the optional package '@opentelemetry/api': npm install @opentelemetry/api");
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  });
});
