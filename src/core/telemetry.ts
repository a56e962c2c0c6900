import type * as OpenTelemetry from '@opentelemetry/api';
import { DeferredSpan, flushDeferredSpans } from './deferred-span';

/**
 * OpenTelemetry through `@opentelemetry/api` only (an optional peer; never the SDK): a tracer and
 * a meter named after the package, spans `checkpoint.<operation>`, attributes `checkpoint.*`.
 * The API is required on first use; without it installed every helper here just runs `fn`.
 */
const PACKAGE = 'typeorm-checkpoint';

export type Operation = 'batch' | 'import.chunk' | 'step' | 'file' | 'range';
type AttributeValue = string | number | boolean;

/** What the code inside a span tells it. */
export interface SpanScope {
  /** Adds attributes; names get the `checkpoint.` prefix. */
  set(attributes: Record<string, AttributeValue | undefined>): void;
  /** The unit of work committed `items` items; `batch` counts it in `checkpoint.batches`. */
  committed(items: number, batch: boolean): void;
}

/** Items and batches committed so far, by operation: what the observable counters report. */
type Totals = Map<Operation, { items: number; batches: number }>;

interface Instruments {
  api: typeof OpenTelemetry;
  /** False when neither a tracer nor a meter provider is registered: then nothing is recorded at all. */
  active: boolean;
  tracer: OpenTelemetry.Tracer;
  totals: Totals;
  failures: OpenTelemetry.Counter;
  duration: OpenTelemetry.Histogram;
  /** `checkpoint.throttle.wait`: each wait a `throttle` asked for, as it was waited. */
  throttleWait: OpenTelemetry.Histogram;
  /**
   * The global providers these were made from: an application may register its SDK later (the
   * global tracer provider is a proxy whose delegate is the SDK's, so the delegate is compared).
   */
  tracerProvider: OpenTelemetry.TracerProvider;
  meterProvider: OpenTelemetry.MeterProvider;
}

let api: typeof OpenTelemetry | null | undefined;
let instruments: Instruments | undefined;
/** The API's own no-op providers: what the globals are while no SDK is registered. */
let noop: { tracerProvider: OpenTelemetry.TracerProvider; meter: OpenTelemetry.Meter } | undefined;

function loadApi(): typeof OpenTelemetry | null {
  if (api === undefined) {
    try {
      // A guarded require: the optional peer may be absent, and then nothing is loaded at all.
      api = require('@opentelemetry/api') as typeof OpenTelemetry;
    } catch {
      api = null;
    }
  }
  return api;
}

/** The provider that does the work: the delegate of the API's proxy (where the SDK is registered). */
function tracerProviderOf(otel: typeof OpenTelemetry): OpenTelemetry.TracerProvider {
  const provider = otel.trace.getTracerProvider() as OpenTelemetry.TracerProvider & { getDelegate?: () => OpenTelemetry.TracerProvider };
  return typeof provider.getDelegate === 'function' ? provider.getDelegate() : provider;
}

/** The instruments of the registered providers, or null when nothing would be recorded (no API, or no SDK registered). */
function current(): Instruments | null {
  const otel = loadApi();
  if (otel === null) return null;
  const tracerProvider = tracerProviderOf(otel);
  const meterProvider = otel.metrics.getMeterProvider();
  if (instruments?.tracerProvider !== tracerProvider || instruments.meterProvider !== meterProvider)
    instruments = create(otel, tracerProvider, meterProvider);
  return instruments.active ? instruments : null;
}

/** Whether spans or metrics would be recorded now (an SDK registered): callers may skip preparing them otherwise. */
export function recording(): boolean {
  return current() !== null;
}

/** The totals of each meter: one set of observable counters per meter, however often its provider is registered again. */
const meterTotals = new WeakMap<OpenTelemetry.Meter, Totals>();

/**
 * Items and batches are counted in plain numbers and observed by the meter when it collects
 * (asynchronous counters: the same cumulative sums a counter exports), rather than added to a
 * counter per batch: an SDK counter's `add` hashes its attributes every time, and a batch would
 * pay that twice.
 */
function totalsOf(meter: OpenTelemetry.Meter): Totals {
  let totals = meterTotals.get(meter);
  if (totals === undefined) {
    const counted: Totals = new Map();
    const items = meter.createObservableCounter('checkpoint.items', {
      description: 'Items committed (batch items, import rows, file rows persisted)',
      unit: '{item}',
    });
    const batches = meter.createObservableCounter('checkpoint.batches', {
      description: 'Batches and import chunks committed',
      unit: '{batch}',
    });
    meter.addBatchObservableCallback(
      (result) => {
        // Durations of deferred spans are recorded when they are flushed: before this collection.
        flushDeferredSpans();
        for (const [operation, total] of counted) {
          if (total.items > 0) result.observe(items, total.items, metricAttributes(operation));
          if (total.batches > 0) result.observe(batches, total.batches, metricAttributes(operation));
        }
      },
      [items, batches],
    );
    totals = counted;
    meterTotals.set(meter, totals);
  }
  return totals;
}

function create(
  otel: typeof OpenTelemetry,
  tracerProvider: OpenTelemetry.TracerProvider,
  meterProvider: OpenTelemetry.MeterProvider,
): Instruments {
  noop ??= { tracerProvider: new otel.ProxyTracerProvider().getDelegate(), meter: otel.createNoopMeter() };
  const meter = meterProvider.getMeter(PACKAGE);
  return {
    api: otel,
    active: tracerProvider !== noop.tracerProvider || meter !== noop.meter,
    tracer: tracerProvider.getTracer(PACKAGE),
    totals: totalsOf(meter),
    failures: meter.createCounter('checkpoint.failures', {
      description: 'Batches, chunks, steps, files and ranges that failed',
      unit: '{failure}',
    }),
    duration: meter.createHistogram('checkpoint.duration', {
      description: 'Duration of batches, chunks, steps, files and ranges',
      unit: 'ms',
    }),
    throttleWait: meter.createHistogram('checkpoint.throttle.wait', {
      description: 'Time a batch job, partitioned job or import waited on its throttle before a batch',
      unit: 'ms',
    }),
    tracerProvider,
    meterProvider,
  };
}

// Metric attribute sets are few (operation × outcome × error code): made once, not per record.
const attributeSets = new Map<string, Record<string, AttributeValue>>();

function metricAttributes(operation: Operation, extra?: [name: string, value: string]): Record<string, AttributeValue> {
  const key = extra ? `${operation}\0${extra[0]}\0${extra[1]}` : operation;
  let set = attributeSets.get(key);
  if (set === undefined) {
    set = { 'checkpoint.operation': operation, ...(extra ? { [extra[0]]: extra[1] } : {}) };
    // Error codes are bounded (library codes and error class names), but never let the map grow without end.
    if (attributeSets.size < 1000) attributeSets.set(key, set);
  }
  return set;
}

const NO_SCOPE: SpanScope = { set: () => undefined, committed: () => undefined };

// Span and attribute names, made once rather than per span.
const SPAN_NAMES: Record<Operation, string> = {
  batch: 'checkpoint.batch',
  'import.chunk': 'checkpoint.import.chunk',
  step: 'checkpoint.step',
  file: 'checkpoint.file',
  range: 'checkpoint.range',
};
const attributeNames = new Map<string, string>();

/** `{ job: 'x' }` → `{ 'checkpoint.job': 'x' }`, undefined values left out. */
function prefixed(values: Record<string, AttributeValue | undefined>): OpenTelemetry.Attributes {
  const out: OpenTelemetry.Attributes = {};
  for (const name in values) {
    const value = values[name];
    if (value === undefined) continue;
    let prefixedName = attributeNames.get(name);
    if (prefixedName === undefined) {
      prefixedName = `checkpoint.${name}`;
      // The names are the library's own few; never let the map grow without end.
      if (attributeNames.size < 100) attributeNames.set(name, prefixedName);
    }
    out[prefixedName] = value;
  }
  return out;
}

/** The stable code of a library error, else the error's class name. */
function errorCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code !== '') return code;
  return error instanceof Error ? error.name : typeof error;
}

/** The attribute sets of `checkpoint.duration`, by operation and outcome: made once, so recording one allocates nothing. */
const OUTCOMES = ['committed', 'ok', 'failed'] as const;
const DURATION_ATTRIBUTES = Object.fromEntries(
  Object.keys(SPAN_NAMES).map((operation) => [
    operation,
    Object.fromEntries(OUTCOMES.map((outcome) => [outcome, metricAttributes(operation as Operation, ['checkpoint.outcome', outcome])])),
  ]),
) as Record<Operation, Record<(typeof OUTCOMES)[number], Record<string, AttributeValue>>>;

/** What the code inside one span told it: the attributes to give the span when it ends, and what it committed. */
class SpanState implements SpanScope {
  // Given to the span once, when it ends: one call into the SDK, not one each.
  readonly attributes: OpenTelemetry.Attributes = {};
  done = false;
  items = 0;
  batch = false;

  set(values: Record<string, AttributeValue | undefined>): void {
    const attributes = prefixed(values);
    for (const name in attributes) this.attributes[name] = attributes[name];
  }

  committed(items: number, batch: boolean): void {
    this.done = true;
    this.items = items;
    this.batch = batch;
  }
}

/** `fn` without telemetry, as an async call (a synchronous throw becomes a rejection). */
async function untraced<T>(fn: (scope: SpanScope) => Promise<T>): Promise<T> {
  return fn(NO_SCOPE);
}

/**
 * Runs `fn` as the span `checkpoint.<operation>` (the active span inside, so database
 * instrumentations nest under it), then records the metrics: duration and outcome always,
 * items/batches when committed, a failure with its error code when `fn` throws (re-raised unchanged).
 */
export function traced<T>(
  operation: Operation,
  attributes: Record<string, AttributeValue | undefined>,
  fn: (scope: SpanScope) => Promise<T>,
): Promise<T> {
  const otel = current();
  if (otel === null) return untraced(fn);
  // The span's promise is returned as it is (not awaited by an async function of its own: one
  // promise and its resolution steps fewer per span).
  return otel.tracer.startActiveSpan(SPAN_NAMES[operation], { attributes: prefixed(attributes) }, (span) =>
    inSpan(otel, operation, span, fn),
  );
}

/**
 * The spans of one library loop's units (its batches, its import chunks): each a `DeferredSpan`,
 * handed to the SDK in groups. The providers and the parent context are read once, when the loop
 * starts — its units are siblings under the context it was called in — since between two batches
 * of in-process work every extra lookup runs cold.
 */
export class LoopSpans {
  private readonly otel = current();
  private readonly parent = this.otel?.api.context.active();

  /** `traced` for one unit of the loop. */
  traced<T>(
    operation: Operation,
    attributes: Record<string, AttributeValue | undefined>,
    fn: (scope: SpanScope) => Promise<T>,
  ): Promise<T> {
    const { otel, parent } = this;
    if (otel === null || parent === undefined) return untraced(fn);
    const span = new DeferredSpan(otel.tracer, SPAN_NAMES[operation], parent, prefixed(attributes));
    return otel.api.context.with(otel.api.trace.setSpan(parent, span), inSpan<T>, undefined, otel, operation, span, fn);
  }

  /** Hands the ended spans to the SDK: the loop calls it when it ends, however it ends. */
  flush(): void {
    flushDeferredSpans();
  }
}

async function inSpan<T>(
  otel: Instruments,
  operation: Operation,
  span: OpenTelemetry.Span | DeferredSpan,
  fn: (scope: SpanScope) => Promise<T>,
): Promise<T> {
  const started = performance.now();
  const state = new SpanState();
  const later = state.attributes;
  try {
    const result = await fn(state);
    const outcome = state.done ? 'committed' : 'ok';
    // A range's items are counted by its batches' spans: the range only tells them.
    if (state.done) later['checkpoint.items'] = state.items;
    if (state.done && operation !== 'range') {
      let total = otel.totals.get(operation);
      if (total === undefined) {
        total = { items: 0, batches: 0 };
        otel.totals.set(operation, total);
      }
      total.items += state.items;
      if (state.batch) total.batches += 1;
    }
    later['checkpoint.outcome'] = outcome;
    span.setAttributes(later);
    recordDuration(otel, span, performance.now() - started, DURATION_ATTRIBUTES[operation][outcome]);
    return result;
  } catch (error) {
    const code = errorCode(error);
    if (state.done) later['checkpoint.items'] = state.items;
    later['checkpoint.outcome'] = 'failed';
    later['checkpoint.error_code'] = code;
    span.setAttributes(later);
    span.recordException(error instanceof Error ? error : String(error));
    span.setStatus({ code: otel.api.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    otel.failures.add(1, metricAttributes(operation, ['checkpoint.error_code', code]));
    recordDuration(otel, span, performance.now() - started, DURATION_ATTRIBUTES[operation].failed);
    throw error;
  } finally {
    span.end();
  }
}

/** Records a span's duration in `checkpoint.duration`: a deferred span's when it is handed to the SDK, with its span. */
function recordDuration(
  otel: Instruments,
  span: OpenTelemetry.Span | DeferredSpan,
  ms: number,
  attributes: Record<string, AttributeValue>,
): void {
  if (span instanceof DeferredSpan) span.recordDuration(otel.duration, ms, attributes);
  else otel.duration.record(ms, attributes);
}

/**
 * A control event (`checkpoint.pause`, `checkpoint.resume`, `checkpoint.cancel`,
 * `checkpoint.throttle`, `checkpoint.stop`) on the active span, if there is one: the operator's
 * request, or the loop that waited or stopped.
 */
export function controlEvent(event: string, attributes: Record<string, AttributeValue | undefined>): void {
  const otel = current();
  if (otel === null) return;
  otel.api.trace.getActiveSpan()?.addEvent(`checkpoint.${event}`, prefixed(attributes));
}

/** Records a throttle's wait in `checkpoint.throttle.wait` (and as a `checkpoint.throttle` event on the active span). */
export function recordThrottleWait(ms: number, job: string): void {
  const otel = current();
  if (otel === null) return;
  // No attributes: a job's name would make one series per job.
  otel.throttleWait.record(ms);
  otel.api.trace.getActiveSpan()?.addEvent('checkpoint.throttle', prefixed({ job, wait_ms: ms }));
}
