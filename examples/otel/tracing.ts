/**
 * The OpenTelemetry SDK of the otel example, set up in each thread and process that imports it
 * (every module of the example does): spans are kept in memory, for the example to print; the
 * context lives in AsyncLocalStorage; the propagator is W3C trace context; multiloop/otel makes
 * the context travel, with a CLIENT and a SERVER span per call.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Future } from 'multiloop';
import { propagateTraceContext } from 'multiloop/otel';

const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());
propagateTraceContext({ spans: true });

export const tracer = trace.getTracer('multiloop-example');

/** A finished span as the example prints it. */
export interface SpanRecord {
  name: string;
  kind: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  /** The thread or process that made it. */
  where: string;
  /** When it started: [seconds, nanoseconds]. */
  start: [number, number];
}

const KINDS = ['INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'];

/** The spans this thread finished, of the trace `traceId`, as records made `where`. */
export function finishedSpans(traceId: string, where: string): SpanRecord[] {
  return exporter
    .getFinishedSpans()
    .filter((span) => span.spanContext().traceId === traceId)
    .map((span) => ({
      name: span.name,
      kind: KINDS[span.kind] ?? String(span.kind),
      traceId,
      spanId: span.spanContext().spanId,
      parentSpanId: span.parentSpanContext?.spanId ?? null,
      where,
      start: [span.startTime[0], span.startTime[1]],
    }));
}

/** Start `fn()`'s Future inside a new span `name` of this thread; the span ends when it is done. */
export function inSpan<T>(name: string, fn: () => Future<T>): Future<T> {
  const span = tracer.startSpan(name);
  const future = context.with(trace.setSpan(context.active(), span), fn);
  future.addDoneCallback(() => span.end());
  return future;
}
