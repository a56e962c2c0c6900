import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { context, metrics, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncHooksContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { expect } from 'chai';
import { CheckpointManager, eachBatch, eachPartition, importAll, importFile, sqlSource, step } from '../src';
import { DRIVER, useTestDatabase } from './support/database';
import { expectCode, rejection } from './support/expect-code';
import { runChild } from './support/child';

describe(`OpenTelemetry spans and metrics (${DRIVER})`, function () {
  const db = useTestDatabase('telemetry');
  const spans = new InMemorySpanExporter();
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.DELTA);
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  const meterProvider = new MeterProvider({ readers: [reader] });
  let dir: string;

  before(() => {
    context.setGlobalContextManager(new AsyncHooksContextManager().enable());
    trace.setGlobalTracerProvider(tracerProvider);
    metrics.setGlobalMeterProvider(meterProvider);
    dir = mkdtempSync(join(tmpdir(), 'ck-telemetry-'));
  });

  after(async () => {
    await meterProvider.shutdown();
    await tracerProvider.shutdown();
    trace.disable();
    metrics.disable();
    context.disable();
    rmSync(dir, { recursive: true, force: true });
  });

  beforeEach(async () => {
    await reader.forceFlush();
    metricExporter.reset();
    spans.reset();
  });

  function named(name: string): ReadableSpan[] {
    return spans.getFinishedSpans().filter((span) => span.name === name);
  }

  /** Data points of metric `name` since the last test, by their attributes. */
  async function points(name: string): Promise<DataPoint<number | Histogram>[]> {
    await reader.forceFlush();
    return metricExporter
      .getMetrics()
      .flatMap((resource) => resource.scopeMetrics)
      .filter((scope) => scope.scope.name === 'typeorm-checkpoint')
      .flatMap((scope) => scope.metrics)
      .filter((metric) => metric.descriptor.name === name)
      .flatMap((metric) => metric.dataPoints as DataPoint<number | Histogram>[]);
  }

  async function sum(name: string, attributes: Record<string, string>): Promise<number> {
    const matching = (await points(name)).filter((point) => Object.entries(attributes).every(([k, v]) => point.attributes[k] === v));
    return matching.reduce((total, point) => total + (typeof point.value === 'number' ? point.value : point.value.count), 0);
  }

  it('eachBatch: a checkpoint.batch span per batch (job, index, items, outcome), the handler inside it; batches, items and durations', async () => {
    const tracer = trace.getTracer('test');
    const items = [1, 2, 3, 4, 5];
    await eachBatch(
      db.ds,
      'telemetry-job',
      (cursor, limit) => {
        const from = cursor === null ? 0 : Number(cursor);
        const page = items.slice(from, from + limit);
        return { items: page, next: from + limit >= items.length ? null : from + limit };
      },
      2,
      async () => tracer.startActiveSpan('handler', async (span) => span.end()),
    );
    const batches = named('checkpoint.batch');
    expect(batches.map((span) => span.attributes)).to.deep.equal(
      [0, 1, 2].map((index) => ({
        'checkpoint.job': 'telemetry-job',
        'checkpoint.index': index,
        'checkpoint.items': index < 2 ? 2 : 1,
        'checkpoint.outcome': 'committed',
      })),
    );
    expect(batches[0].instrumentationScope.name).to.equal('typeorm-checkpoint');
    const handlers = named('handler');
    expect(handlers.map((span) => span.parentSpanContext?.spanId)).to.deep.equal(batches.map((span) => span.spanContext().spanId));
    expect(await sum('checkpoint.batches', { 'checkpoint.operation': 'batch' })).to.equal(3);
    expect(await sum('checkpoint.items', { 'checkpoint.operation': 'batch' })).to.equal(5);
    expect(await sum('checkpoint.duration', { 'checkpoint.operation': 'batch', 'checkpoint.outcome': 'committed' })).to.equal(3);
  });

  it('batch spans go to the SDK in groups, with their own start and end: 64 at a time, a second after the first, at a metric collection, and when the loop ends', async () => {
    const ms = (time: [number, number]) => time[0] * 1000 + time[1] / 1e6;
    const exported = () => named('checkpoint.batch').map((span) => span.attributes['checkpoint.index']);
    const pages = (count: number) => (cursor: unknown) => {
      const from = cursor === null ? 0 : Number(cursor);
      return { items: [from], next: from + 1 < count ? from + 1 : null };
    };
    // While the loop runs, the batches before are not exported yet: nothing needed their spans.
    const seen: unknown[][] = [];
    const times: [number, number][] = [];
    const caller = trace.getTracer('test').startSpan('caller');
    const run = () =>
      eachBatch(db.ds, 'telemetry-deferred', pages(3), 1, async (items) => {
        const started = Date.now();
        seen.push(exported());
        // The active span takes what the handler gives it, before and after the SDK's span exists.
        if (items[0] === 1) trace.getActiveSpan()!.setAttribute('test.before', 1).addEvent('marked').setAttribute('test.after', 2);
        await Promise.resolve();
        times.push([started, Date.now()]);
      });
    await context.with(trace.setSpan(context.active(), caller), run);
    caller.end();
    expect(seen).to.deep.equal([[], [], []]);
    const batches = named('checkpoint.batch');
    expect(batches.map((span) => span.attributes['checkpoint.index'])).to.deep.equal([0, 1, 2]);
    // Siblings under the span the loop was called in.
    expect(batches.map((span) => span.parentSpanContext?.spanId)).to.deep.equal(Array(3).fill(caller.spanContext().spanId));
    expect(
      batches.map((span) => [span.attributes['test.before'], span.attributes['test.after'], span.events.map((event) => event.name)]),
    ).to.deep.equal([
      [undefined, undefined, []],
      [1, 2, ['marked']],
      [undefined, undefined, []],
    ]);
    batches.forEach((span, i) => {
      expect(ms(span.startTime)).to.be.at.most(times[i][0]);
      expect(ms(span.endTime)).to.be.at.least(times[i][1] - 1);
      if (i > 0) expect(ms(span.startTime)).to.be.at.least(ms(batches[i - 1].endTime) - 1);
    });

    // 64 ended spans go at once, while the loop runs.
    spans.reset();
    const at64: unknown[] = [];
    await eachBatch(db.ds, 'telemetry-deferred-64', pages(66), 1, async (items) => {
      if (items[0] === 64) at64.push(...exported());
    });
    expect(at64).to.deep.equal(Array.from({ length: 64 }, (_, i) => i));
    expect(exported()).to.have.length(66);

    // A metric collection hands the ended spans over first, their durations with them.
    spans.reset();
    await reader.forceFlush();
    metricExporter.reset();
    const collected: number[] = [];
    await eachBatch(db.ds, 'telemetry-deferred-collect', pages(3), 1, async (items) => {
      if (items[0] !== 2) return;
      collected.push(
        await sum('checkpoint.duration', { 'checkpoint.operation': 'batch', 'checkpoint.outcome': 'committed' }),
        exported().length,
      );
    });
    expect(collected).to.deep.equal([2, 2]);

    // A span that ends a second or more after the first waiting one ended takes them all along.
    spans.reset();
    const later: unknown[][] = [];
    let firstEnded = 0;
    await eachBatch(db.ds, 'telemetry-deferred-second', pages(4), 1, async (items) => {
      later.push(exported());
      // Batch 1 begins once batch 0's span has ended (whatever its commit took on a loaded machine).
      if (items[0] === 1) firstEnded = Date.now();
      // The clock is what this bound is about: batch 2 ends a second after batch 0 did.
      if (items[0] === 2) await new Promise((resolve) => setTimeout(resolve, Math.max(0, firstEnded + 1_050 - Date.now())));
    });
    expect(later).to.deep.equal([[], [], [], [0, 1, 2]]);
  });

  it('a failing batch: span status ERROR with the error code, a failure counted, the error unchanged', async () => {
    const boom = new Error('handler failed');
    expect(
      await rejection(
        eachBatch(
          db.ds,
          'telemetry-failing-job',
          () => ({ items: [1], next: null }),
          1,
          () => Promise.reject(boom),
        ),
      ),
    ).to.equal(boom);
    const [span] = named('checkpoint.batch');
    expect(span.status.code).to.equal(SpanStatusCode.ERROR);
    expect(span.attributes).to.include({ 'checkpoint.outcome': 'failed', 'checkpoint.error_code': 'Error', 'checkpoint.index': 0 });
    expect(span.events.map((event) => event.name)).to.deep.equal(['exception']);
    expect(await sum('checkpoint.failures', { 'checkpoint.operation': 'batch', 'checkpoint.error_code': 'Error' })).to.equal(1);
    expect(await sum('checkpoint.batches', { 'checkpoint.operation': 'batch' })).to.equal(0);
  });

  it('a failing step, a step refused NON_SERIALIZABLE, then a recorded and a cached step', async () => {
    await rejection(step(db.ds, 'telemetry-step-throws', () => Promise.reject(new TypeError('nope'))));
    await rejection(step(db.ds, 'telemetry-step-date', () => new Date() as never));
    expect(await step(db.ds, 'telemetry-step-ok', () => 42)).to.equal(42);
    expect(await step(db.ds, 'telemetry-step-ok', () => 43)).to.equal(42);
    const steps = named('checkpoint.step');
    expect(
      steps.map((span) => [
        span.attributes['checkpoint.job'],
        span.attributes['checkpoint.outcome'],
        span.attributes['checkpoint.error_code'],
        span.attributes['checkpoint.cached'],
      ]),
    ).to.deep.equal([
      ['telemetry-step-throws', 'failed', 'TypeError', false],
      ['telemetry-step-date', 'failed', 'NON_SERIALIZABLE', false],
      ['telemetry-step-ok', 'ok', undefined, false],
      ['telemetry-step-ok', 'ok', undefined, true],
    ]);
    expect(steps[0].status.code).to.equal(SpanStatusCode.ERROR);
    expect(await sum('checkpoint.failures', { 'checkpoint.operation': 'step' })).to.equal(2);
    expect(await sum('checkpoint.failures', { 'checkpoint.operation': 'step', 'checkpoint.error_code': 'NON_SERIALIZABLE' })).to.equal(1);
    expect(await sum('checkpoint.duration', { 'checkpoint.operation': 'step', 'checkpoint.outcome': 'ok' })).to.equal(2);
  });

  it('imports: a checkpoint.import.chunk span per committed chunk (importAll and importFile), rows and chunks counted', async () => {
    const rows = JSON.stringify(Array.from({ length: 5 }, (_, i) => ({ id: `r${i}`, value: i })));
    expect(await importAll(db.ds, 'telemetry-import', rows, { size: 2 })).to.equal(5);
    const file = join(dir, 'rows.ndjson');
    writeFileSync(file, Array.from({ length: 7 }, (_, i) => JSON.stringify({ id: `f${i}`, value: i })).join('\n'));
    await importFile(db.ds, 'telemetry-import-file', file, { size: 3 });
    const chunks = named('checkpoint.import.chunk');
    expect(
      chunks.map((span) => [span.attributes['checkpoint.job'], span.attributes['checkpoint.index'], span.attributes['checkpoint.items']]),
    ).to.deep.equal([
      ['telemetry-import', 0, 2],
      ['telemetry-import', 2, 2],
      ['telemetry-import', 4, 1],
      ['telemetry-import-file', 0, 3],
      ['telemetry-import-file', 3, 3],
      ['telemetry-import-file', 6, 1],
    ]);
    expect(await sum('checkpoint.items', { 'checkpoint.operation': 'import.chunk' })).to.equal(12);
    expect(await sum('checkpoint.batches', { 'checkpoint.operation': 'import.chunk' })).to.equal(6);
  });

  it('records imports: the same checkpoint.import.chunk span and metrics (job, index, items, outcome, error code), skipped and invalid counted', async () => {
    await db.ds.query('CREATE TABLE telemetry_stock (code VARCHAR(20) PRIMARY KEY, qty INTEGER NOT NULL)');
    const file = join(dir, 'stock.csv');
    // Row 1 invalid (recorded as a reject), row 2 skipped by map, rows 0, 3, 4 written.
    writeFileSync(file, 'code,qty\na,1\nb,many\nskip,2\nc,3\nd,4\n');
    const map = (record: Record<string, unknown>) => (record.code === 'skip' ? null : record);
    await importFile(db.ds, 'telemetry-records', file, { into: 'telemetry_stock', invalid: 'skip', map, size: 2 });
    const chunks = named('checkpoint.import.chunk');
    expect(chunks.map((span) => span.attributes)).to.deep.equal([
      {
        'checkpoint.job': 'telemetry-records',
        'checkpoint.index': 0,
        'checkpoint.skipped': 0,
        'checkpoint.invalid': 1,
        'checkpoint.items': 1,
        'checkpoint.outcome': 'committed',
      },
      {
        'checkpoint.job': 'telemetry-records',
        'checkpoint.index': 2,
        'checkpoint.skipped': 1,
        'checkpoint.invalid': 0,
        'checkpoint.items': 1,
        'checkpoint.outcome': 'committed',
      },
      {
        'checkpoint.job': 'telemetry-records',
        'checkpoint.index': 4,
        'checkpoint.skipped': 0,
        'checkpoint.invalid': 0,
        'checkpoint.items': 1,
        'checkpoint.outcome': 'committed',
      },
    ]);
    expect(await sum('checkpoint.items', { 'checkpoint.operation': 'import.chunk' })).to.equal(3);
    expect(await sum('checkpoint.batches', { 'checkpoint.operation': 'import.chunk' })).to.equal(3);

    // A handler's own spans nest under the chunk's; a key the table holds fails its chunk's span with the error code.
    const tracer = trace.getTracer('test');
    const handled = join(dir, 'handled.ndjson');
    writeFileSync(handled, '{"n":1}\n{"n":2}\n{"n":3}\n');
    await importFile(db.ds, 'telemetry-handler', handled, {
      records: true,
      size: 2,
      handler: () => tracer.startActiveSpan('handler', (span) => span.end()),
    });
    const handlerChunks = named('checkpoint.import.chunk').filter((span) => span.attributes['checkpoint.job'] === 'telemetry-handler');
    expect(named('handler').map((span) => span.parentSpanContext?.spanId)).to.deep.equal(
      handlerChunks.map((span) => span.spanContext().spanId),
    );
    const clash = join(dir, 'clash.csv');
    writeFileSync(clash, 'code,qty\nx,1\na,2\n');
    await expectCode(importFile(db.ds, 'telemetry-clash', clash, { into: 'telemetry_stock', size: 1 }), 'INVALID_INPUT');
    const failed = named('checkpoint.import.chunk').filter((span) => span.attributes['checkpoint.job'] === 'telemetry-clash');
    expect(
      failed.map((span) => [
        span.attributes['checkpoint.index'],
        span.attributes['checkpoint.outcome'],
        span.attributes['checkpoint.error_code'],
      ]),
    ).to.deep.equal([
      [0, 'committed', undefined],
      [1, 'failed', 'INVALID_INPUT'],
    ]);
    expect(failed[1].status.code).to.equal(SpanStatusCode.ERROR);
    expect(await sum('checkpoint.failures', { 'checkpoint.operation': 'import.chunk', 'checkpoint.error_code': 'INVALID_INPUT' })).to.equal(
      1,
    );
  });

  it('processFile: a checkpoint.file span (URL, type, worker, claimed, rows persisted); a failing one with its error', async () => {
    const manager = new CheckpointManager(db.ds, { workerId: 'telemetry-worker' });
    await manager.processFile('s3://telemetry/a.csv', 'csv', new Date(0), () => ({ totalRows: 10, filteredRows: 2, persistedRows: 8 }));
    await manager.processFile('s3://telemetry/a.csv', 'csv', new Date(0), () => ({ totalRows: 1, filteredRows: 0, persistedRows: 1 }));
    await rejection(manager.processFile('s3://telemetry/b.csv', 'csv', new Date(0), () => Promise.reject(new RangeError('bad row'))));
    const files = named('checkpoint.file');
    expect(files.map((span) => span.attributes)).to.deep.equal([
      {
        'checkpoint.file_url': 's3://telemetry/a.csv',
        'checkpoint.file_type': 'csv',
        'checkpoint.worker': 'telemetry-worker',
        'checkpoint.claimed': true,
        'checkpoint.items': 8,
        'checkpoint.outcome': 'committed',
      },
      {
        'checkpoint.file_url': 's3://telemetry/a.csv',
        'checkpoint.file_type': 'csv',
        'checkpoint.worker': 'telemetry-worker',
        'checkpoint.claimed': false,
        'checkpoint.outcome': 'ok',
      },
      {
        'checkpoint.file_url': 's3://telemetry/b.csv',
        'checkpoint.file_type': 'csv',
        'checkpoint.worker': 'telemetry-worker',
        'checkpoint.outcome': 'failed',
        'checkpoint.error_code': 'RangeError',
      },
    ]);
    expect(await sum('checkpoint.items', { 'checkpoint.operation': 'file' })).to.equal(8);
    expect(await sum('checkpoint.failures', { 'checkpoint.operation': 'file', 'checkpoint.error_code': 'RangeError' })).to.equal(1);
    expect(await sum('checkpoint.batches', { 'checkpoint.operation': 'file' })).to.equal(0);
  });

  it("work(): a checkpoint.file span per file, the handler inside it; with commitEvery, spans end with their chunk and a rolled-back chunk's files run again in spans of their own", async () => {
    const manager = new CheckpointManager(db.ds, { workerId: 'telemetry-work', maxRetries: 0 });
    const urls = ['s3://telemetry-work/a.csv', 's3://telemetry-work/b.csv', 's3://telemetry-work/c-bad.csv'];
    await manager.register(urls.map((fileUrl) => ({ fileUrl, fileType: 'work-csv', fileTimestamp: new Date(0) })));
    const tracer = trace.getTracer('test');
    const handler = (file: { fileUrl: string }) =>
      tracer.startActiveSpan('handler', { attributes: { url: file.fileUrl } }, async (span) => {
        span.end();
        if (file.fileUrl.includes('bad')) throw new RangeError('bad file');
        return { totalRows: 5, filteredRows: 1, persistedRows: 4 };
      });
    // Only this test's files (processFile's failed one above is claimable again).
    await manager.work(handler, { drain: true, commitEvery: 3, fileType: 'work-csv' }).done;

    const files = named('checkpoint.file');
    const outcomes = files.map((span) => [
      span.attributes['checkpoint.file_url'],
      span.attributes['checkpoint.outcome'],
      span.attributes['checkpoint.items'] ?? null,
    ]);
    // The chunk of three rolled back (the failing file's span failed, the others' ended 'ok'), then each file ran on its own.
    expect(outcomes.filter(([, outcome]) => outcome === 'committed')).to.have.deep.members([
      [urls[0], 'committed', 4],
      [urls[1], 'committed', 4],
    ]);
    expect(outcomes.filter(([, outcome]) => outcome === 'ok')).to.have.deep.members([
      [urls[0], 'ok', null],
      [urls[1], 'ok', null],
    ]);
    expect(outcomes.filter(([, outcome]) => outcome === 'failed').map(([url]) => url)).to.deep.equal([urls[2], urls[2]]);
    expect(files).to.have.length(6);
    for (const span of files) {
      expect(span.attributes).to.include({ 'checkpoint.file_type': 'work-csv', 'checkpoint.worker': 'telemetry-work' });
      if (span.attributes['checkpoint.outcome'] === 'committed') expect(span.attributes['checkpoint.claimed']).to.equal(true);
    }
    expect(
      files.filter((span) => span.attributes['checkpoint.file_url'] === urls[2]).map((span) => span.attributes['checkpoint.error_code']),
    ).to.deep.equal(['RangeError', 'RangeError']);
    // Every handler's span is a child of a file span of its own file.
    const byId = new Map(files.map((span) => [span.spanContext().spanId, span]));
    const handlers = named('handler');
    expect(handlers).to.have.length(6);
    for (const span of handlers)
      expect(byId.get(span.parentSpanContext!.spanId)?.attributes['checkpoint.file_url']).to.equal(span.attributes.url);
    expect(await sum('checkpoint.items', { 'checkpoint.operation': 'file' })).to.equal(8);
    expect(await sum('checkpoint.failures', { 'checkpoint.operation': 'file', 'checkpoint.error_code': 'RangeError' })).to.equal(2);
  });

  it('eachPartition: a checkpoint.range span per range run, its batches checkpoint.batch spans inside it; a failing handler fails both with its error', async () => {
    await db.ds.query('CREATE TABLE telemetry_rows (id integer PRIMARY KEY)');
    await db.ds.query(`INSERT INTO telemetry_rows (id) VALUES ${Array.from({ length: 20 }, (_, i) => `(${i + 1})`).join(', ')}`);
    const source = await sqlSource(db.ds, 'telemetry_rows', 'id');
    const result = await eachPartition(db.ds, 'telemetry-ranges', source, 3, () => undefined, { partitions: 2 });
    expect(result.items).to.equal(20);
    const ranges = named('checkpoint.range');
    expect(ranges.map((span) => [span.attributes['checkpoint.job'], span.attributes['checkpoint.outcome']])).to.deep.equal([
      ['telemetry-ranges', 'committed'],
      ['telemetry-ranges', 'committed'],
    ]);
    expect(ranges.map((span) => span.attributes['checkpoint.index']).sort()).to.deep.equal([0, 1]);
    expect(ranges.reduce((total, span) => total + Number(span.attributes['checkpoint.items']), 0)).to.equal(20);
    const rangeIds = new Map(ranges.map((span) => [span.spanContext().spanId, span.attributes['checkpoint.index']]));
    const batches = named('checkpoint.batch');
    for (const span of batches) expect(rangeIds.get(span.parentSpanContext!.spanId)).to.equal(span.attributes['checkpoint.range']);
    // Each range's batches are numbered from 0 in the order they committed.
    for (const range of [0, 1]) {
      const indexes = batches
        .filter((span) => span.attributes['checkpoint.range'] === range)
        .map((span) => span.attributes['checkpoint.index']);
      expect(indexes).to.deep.equal(indexes.map((_, i) => i));
    }
    expect(batches.reduce((total, span) => total + Number(span.attributes['checkpoint.items'] ?? 0), 0)).to.equal(20);
    // Items are counted once, by the batches.
    expect(await sum('checkpoint.items', { 'checkpoint.operation': 'batch' })).to.equal(20);
    expect(await sum('checkpoint.items', { 'checkpoint.operation': 'range' })).to.equal(0);
    expect(await sum('checkpoint.duration', { 'checkpoint.operation': 'range', 'checkpoint.outcome': 'committed' })).to.equal(2);

    spans.reset();
    await rejection(
      eachPartition(db.ds, 'telemetry-ranges-failing', source, 3, () => Promise.reject(new RangeError('bad batch')), { partitions: 2 }),
    );
    const [failedRange] = named('checkpoint.range');
    expect(failedRange.attributes).to.include({
      'checkpoint.job': 'telemetry-ranges-failing',
      'checkpoint.outcome': 'failed',
      'checkpoint.error_code': 'RangeError',
    });
    expect(failedRange.status.code).to.equal(SpanStatusCode.ERROR);
    const [failedBatch] = named('checkpoint.batch');
    expect(failedBatch.attributes).to.include({ 'checkpoint.outcome': 'failed', 'checkpoint.error_code': 'RangeError' });
    expect(failedBatch.parentSpanContext!.spanId).to.equal(failedRange.spanContext().spanId);
  });

  it('with the API but no SDK registered, no span is started (none active inside a batch); an SDK registered later records again', async () => {
    const run = (job: string) => {
      const active: (string | undefined)[] = [];
      return eachBatch(
        db.ds,
        job,
        () => ({ items: [1, 2], next: null }),
        10,
        async () => {
          active.push(trace.getActiveSpan()?.constructor.name);
        },
      ).then(() => active);
    };
    trace.disable();
    metrics.disable();
    try {
      // A no-op tracer would still make a (non-recording) span the active one.
      expect(await run('telemetry-no-sdk')).to.deep.equal([undefined]);
    } finally {
      trace.setGlobalTracerProvider(tracerProvider);
      metrics.setGlobalMeterProvider(meterProvider);
    }
    expect(named('checkpoint.batch')).to.deep.equal([]);
    expect(await sum('checkpoint.batches', { 'checkpoint.operation': 'batch' })).to.equal(0);
    expect((await run('telemetry-sdk-again')).map((name) => name !== undefined)).to.deep.equal([true]);
    expect(named('checkpoint.batch').map((span) => span.attributes['checkpoint.job'])).to.deep.equal(['telemetry-sdk-again']);
    expect(await sum('checkpoint.batches', { 'checkpoint.operation': 'batch' })).to.equal(1);
  });

  it('without @opentelemetry/api installed, everything works and no OpenTelemetry module is loaded', async () => {
    const child = await runChild('test/fixtures/without-opentelemetry.ts', [db.url]);
    expect(JSON.parse(child.lines[child.lines.length - 1])).to.deep.equal({ items: 4, value: 7, imported: 1, claimed: true, loaded: [] });
  });
});
