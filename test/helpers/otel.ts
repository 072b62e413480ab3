/**
 * The OpenTelemetry SDK of the otel tests (test/fixtures/otel-sdk.mjs, which worker threads and
 * processes load too), seen with types: spans as plain records, comparable across threads.
 */
import type { Span, trace } from '@opentelemetry/api';
// @ts-expect-error: a JavaScript fixture without types
import { describeSpan, exporter as sdkExporter, finishedSpans, tracer } from '../fixtures/otel-sdk.mjs';

/** A span as the fixture describes it. */
export interface Described {
  name?: string;
  kind?: number;
  remote?: true;
  traceId: string;
  spanId: string;
  parentSpanId?: string | null;
  status?: number;
  links?: Array<{ traceId: string; spanId: string }>;
}

/** What a service reports of itself: the span active where it runs, and the one it started. */
export interface WhoAmI {
  active: Described | null;
  mine: Described;
}

export const describe_ = describeSpan as (span: Span | undefined) => Described;
export const finished = finishedSpans as () => Described[];
export const spanTracer = tracer as ReturnType<typeof trace.getTracer>;
export const exporter = sdkExporter as { reset(): void };
