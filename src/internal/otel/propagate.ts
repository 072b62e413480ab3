/**
 * OpenTelemetry's context on every hop (multiloop/otel). The active OpenTelemetry context is a
 * carrier of travel.ts: a call, job or ThreadQueue item takes it as the global propagator writes
 * it (W3C `traceparent`/`tracestate`, and whatever else the application's propagator writes), and
 * the callee runs inside what the propagator reads back, so a span started there is a child of
 * the caller's. With `spans`, each call also gets a CLIENT span in the caller and a SERVER span in
 * the callee, `multiloop call <export>`.
 *
 * @opentelemetry/api is an optional peer: it is loaded when `propagateTraceContext` is first
 * called (synchronously: the face returns void), never before. Its objects live on a process-wide
 * global of its own, so the copy loaded here works with the application's.
 */
import { createRequire } from 'node:module';
import type * as Api from '@opentelemetry/api';
import { shortName } from '../module-ref.js';
import { requireOptional } from '../optional.js';
import { registerCarrier, setCallSpans, setItemTrace, type CallSpan, type CallSpans, type Carrier, type ItemTrace } from '../travel.js';

type OtelApi = typeof Api;

/** The name the OpenTelemetry context travels under (a name no user variable may take). */
export const OTEL_NAME = 'multiloop.otel';

/** At most this many fields of a carried context are read: a peer may send anything. */
const MAX_FIELDS = 32;

let api: OtelApi | null = null;

/** @opentelemetry/api, loaded on first use; a RuntimeError naming it when it is not installed. */
export function loadApi(): OtelApi {
  if (api !== null) return api;
  const require = createRequire(import.meta.url);
  api = requireOptional('@opentelemetry/api', 'multiloop/otel', () => require('@opentelemetry/api') as OtelApi);
  return api;
}

/** What the propagator wrote, as it arrived: only its own string fields are read. */
const getter: Api.TextMapGetter<Record<string, unknown>> = {
  keys: (carrier) => Object.keys(carrier).filter((key) => typeof carrier[key] === 'string').slice(0, MAX_FIELDS),
  get: (carrier, key) => {
    if (!Object.hasOwn(carrier, key)) return undefined;
    const value = carrier[key];
    return typeof value === 'string' ? value : undefined;
  },
};

function carrierOf(otel: OtelApi): Carrier {
  return {
    current: () => otel.context.active(),
    write(current) {
      const fields: Record<string, string> = {};
      otel.propagation.inject(current as Api.Context, fields);
      for (const _ in fields) return fields;
      return undefined;
    },
    run(written, fn) {
      if (typeof written !== 'object' || written === null || Array.isArray(written)) return fn();
      return otel.context.with(extracted(otel, written, otel.context.active()), fn);
    },
  };
}

/** What a carrier's fields say, as a context of its own: an empty one when they say nothing readable. */
function extracted(otel: OtelApi, written: unknown, base: Api.Context): Api.Context {
  if (typeof written !== 'object' || written === null || Array.isArray(written)) return base;
  return otel.propagation.extract(base, written as Record<string, unknown>, getter);
}

/**
 * ThreadQueue items: a put takes the active context as the propagator writes it; the get that
 * takes the item adds a link to the producer's span to the span active there, if any.
 */
function itemTraceOf(otel: OtelApi, carrier: Carrier): ItemTrace {
  return {
    write: () => (otel.trace.getSpan(otel.context.active()) === undefined ? undefined : carrier.write(otel.context.active())),
    arrived(written) {
      const span = otel.trace.getSpan(otel.context.active());
      if (span === undefined || typeof span.addLink !== 'function') return;
      const producer = otel.trace.getSpanContext(extracted(otel, written, otel.ROOT_CONTEXT));
      if (producer !== undefined && otel.trace.isSpanContextValid(producer)) span.addLink({ context: producer });
    },
  };
}

function spansOf(otel: OtelApi): CallSpans {
  const tracer = otel.trace.getTracer('multiloop');
  const begin = (name: string, kind: Api.SpanKind): CallSpan => {
    const parent = otel.context.active();
    const span = tracer.startSpan(`multiloop call ${shortName(name)}`, { kind }, parent);
    const inside = otel.trace.setSpan(parent, span);
    return {
      run: (fn) => otel.context.with(inside, fn),
      end(error) {
        if (error !== null && error !== undefined) {
          if (error instanceof Error) span.recordException(error);
          span.setStatus({ code: otel.SpanStatusCode.ERROR, message: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
        }
        span.end();
      },
    };
  };
  return {
    client: (name) => begin(name, otel.SpanKind.CLIENT),
    server: (name) => begin(name, otel.SpanKind.SERVER),
  };
}

let carrier: Carrier | null = null;

/** Let the active OpenTelemetry context travel from now on; with `spans`, also span each call. */
export function propagate(spans: boolean): void {
  const otel = loadApi();
  carrier ??= carrierOf(otel);
  registerCarrier(carrier, OTEL_NAME);
  setItemTrace(itemTraceOf(otel, carrier));
  setCallSpans(spans ? spansOf(otel) : null);
}
