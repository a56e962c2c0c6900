import type * as OpenTelemetry from '@opentelemetry/api';

/**
 * The span of one unit a library loop runs many of in a row (a batch, an import chunk), handed to
 * the SDK later, in groups.
 *
 * Between two batches of in-process work (SQLite) the SDK's span code runs cold: its start and end
 * cost ~100 µs a batch where a tight loop of the same spans costs ~2 µs each. So the span active
 * during the batch is this stand-in, and the SDK's span is started — with the batch's start time —
 * only when something needs it: a span started inside the batch (its parent), context propagation
 * or anything else that reads `spanContext()`, `isRecording()`, an event, a status. Otherwise it
 * is started and ended with the batch's times when the stand-in is flushed: 64 ended spans at a
 * time, at the end of a span when the first of them ended a second ago or more, when the meter
 * collects, and when the loop ends. (No timer: a flush runs inside a library call or a collection,
 * where a span processor's error goes where it went when each batch ended its own span.)
 */
export class DeferredSpan implements OpenTelemetry.Span {
  private sdkSpan: OpenTelemetry.Span | undefined;
  private ended = false;
  private endTime: OpenTelemetry.TimeInput = 0;
  /** Epoch ms, as the SDK stamps a span's start; the end adds the monotonic clock's duration, as it does. */
  private readonly startTime = Date.now();
  private readonly startedAt = performance.now();
  private duration: { histogram: OpenTelemetry.Histogram; ms: number; attributes: OpenTelemetry.Attributes } | undefined;

  constructor(
    private readonly tracer: OpenTelemetry.Tracer,
    private name: string,
    private readonly parent: OpenTelemetry.Context,
    private readonly attributes: OpenTelemetry.Attributes,
  ) {}

  /** The SDK's span, started (at this span's start time, under its parent) the first time something needs it. */
  private get started(): OpenTelemetry.Span {
    this.sdkSpan ??= this.tracer.startSpan(this.name, { attributes: this.attributes, startTime: this.startTime }, this.parent);
    return this.sdkSpan;
  }

  spanContext(): OpenTelemetry.SpanContext {
    return this.started.spanContext();
  }

  isRecording(): boolean {
    return !this.ended && this.started.isRecording();
  }

  setAttribute(key: string, value: OpenTelemetry.AttributeValue): this {
    return this.setAttributes({ [key]: value });
  }

  setAttributes(attributes: OpenTelemetry.Attributes): this {
    // An ended span takes no more changes, as the SDK's own.
    if (this.ended) return this;
    if (this.sdkSpan === undefined) Object.assign(this.attributes, attributes);
    else this.sdkSpan.setAttributes(attributes);
    return this;
  }

  addEvent(name: string, attributesOrTime?: OpenTelemetry.Attributes | OpenTelemetry.TimeInput, time?: OpenTelemetry.TimeInput): this {
    if (!this.ended) this.started.addEvent(name, attributesOrTime, time);
    return this;
  }

  addLink(link: OpenTelemetry.Link): this {
    if (!this.ended) this.started.addLink(link);
    return this;
  }

  addLinks(links: OpenTelemetry.Link[]): this {
    if (!this.ended) this.started.addLinks(links);
    return this;
  }

  setStatus(status: OpenTelemetry.SpanStatus): this {
    if (!this.ended) this.started.setStatus(status);
    return this;
  }

  updateName(name: string): this {
    if (this.ended) return this;
    if (this.sdkSpan === undefined) this.name = name;
    else this.sdkSpan.updateName(name);
    return this;
  }

  recordException(exception: OpenTelemetry.Exception, time?: OpenTelemetry.TimeInput): void {
    if (!this.ended) this.started.recordException(exception, time);
  }

  /** Ends the span now; the SDK's span ends with this time when the span is flushed. */
  end(endTime?: OpenTelemetry.TimeInput): void {
    if (this.ended) return;
    this.ended = true;
    const now = performance.now();
    this.endTime = endTime ?? this.startTime + (now - this.startedAt);
    if (ended.length === 0) firstEndedAt = now;
    ended.push(this);
    if (ended.length >= FLUSH_AT || now - firstEndedAt >= FLUSH_AFTER_MS) flushDeferredSpans();
  }

  /** Records `ms` in `histogram` when the span is flushed. */
  recordDuration(histogram: OpenTelemetry.Histogram, ms: number, attributes: OpenTelemetry.Attributes): void {
    this.duration = { histogram, ms, attributes };
  }

  /** Hands the ended span to the SDK: starts it if nothing has, ends it, records its duration. */
  flush(): void {
    this.started.end(this.endTime);
    if (this.duration) this.duration.histogram.record(this.duration.ms, this.duration.attributes);
  }
}

const FLUSH_AT = 64;
const FLUSH_AFTER_MS = 1000;
/** Deferred spans that ended and wait for `flushDeferredSpans`, in the order they ended. */
const ended: DeferredSpan[] = [];
/** When the first of `ended` ended (`performance.now()`). */
let firstEndedAt = 0;

/** Hands every ended deferred span to the SDK. Called when a library loop ends, and by the bounds above. */
export function flushDeferredSpans(): void {
  for (const span of ended.splice(0)) span.flush();
}
