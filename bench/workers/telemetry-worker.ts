// One side of the telemetry bench: a process started once, as an application is, so the library's
// instruments are made once and its code runs warm, as it does in production.
//   sdk <db url>       registers the OpenTelemetry SDK at start-up, as the Node SDK does: the
//                      AsyncLocalStorage context manager, a BasicTracerProvider with a
//                      BatchSpanProcessor and a MeterProvider with a periodic reader, both
//                      exporting to no-op exporters
//   none <db url>      registers nothing (the API is installed: the library loads it and finds
//                      no SDK)
// Each "run" line copies the database's (SQLite or PostgreSQL) bench_source into bench_target with
// eachBatch (50,000 rows in batches of 1,000) and prints "<CPU ms> <wall ms>" of the eachBatch
// call: the process's CPU time (every thread's: the SDK's timers and garbage collection included;
// on PostgreSQL the parent adds the backends') and the wall time.
// The run's preparation (resetting the job, emptying the target) is not timed.
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { context, metrics, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MeterProvider, PeriodicExportingMetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { DataSource } from 'typeorm';
import { checkpointEntities, checkpointMigrations, dataSourceOptionsFromUrl, eachBatch, reset, sqlSource } from '../../src';
import { commands } from './worker-protocol';

const [mode, url] = process.argv.slice(2);

/** `ExportResultCode.SUCCESS` of `@opentelemetry/core` (not a dependency of its own here). */
const EXPORTED = { code: 0 };

class NoopSpanExporter implements SpanExporter {
  export(_spans: unknown[], done: (result: typeof EXPORTED) => void): void {
    done(EXPORTED);
  }
  async shutdown(): Promise<void> {}
}

class NoopMetricExporter implements PushMetricExporter {
  export(_metrics: unknown, done: (result: typeof EXPORTED) => void): void {
    done(EXPORTED);
  }
  async forceFlush(): Promise<void> {}
  async shutdown(): Promise<void> {}
}

/** Registers the SDK; returns its shutdown. */
function registerSdk(): () => Promise<void> {
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(new NoopSpanExporter())] });
  const meterProvider = new MeterProvider({
    readers: [new PeriodicExportingMetricReader({ exporter: new NoopMetricExporter(), exportIntervalMillis: 1000 })],
  });
  // Spans are active across awaits, as with the context manager the Node SDK sets up.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  return async () => {
    await tracerProvider.shutdown();
    await meterProvider.shutdown();
  };
}

/** The placeholders of the `i`th row of the batch's INSERT. */
const marks = url.startsWith('postgres') ? (_: unknown, i: number) => `($${3 * i + 1}, $${3 * i + 2}, $${3 * i + 3})` : () => '(?, ?, ?)';

async function copy(ds: DataSource): Promise<string> {
  await reset(ds, 'telemetry-bench');
  await ds.query('DELETE FROM bench_target');
  const cpuStarted = process.cpuUsage();
  const started = performance.now();
  const source = await sqlSource(ds, 'bench_source', 'id');
  await eachBatch(ds, 'telemetry-bench', source, 1000, async (items, tx) => {
    const parameters = items.flatMap((row) => [row.id, row.name, row.amount]);
    await tx.query(`INSERT INTO bench_target (id, name, amount) VALUES ${items.map(marks).join(', ')}`, parameters);
  });
  const wallMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuStarted);
  return `${(cpu.user + cpu.system) / 1000} ${wallMs}`;
}

async function main(): Promise<void> {
  if (mode !== 'sdk' && mode !== 'none') throw new Error(`mode must be sdk or none, not ${mode}`);
  const shutdown = mode === 'sdk' ? registerSdk() : async () => undefined;
  const ds = new DataSource({ ...dataSourceOptionsFromUrl(url), entities: checkpointEntities, migrations: checkpointMigrations });
  await ds.initialize();
  try {
    process.stdout.write('ready\n');
    for await (const command of commands()) {
      if (command !== 'run') throw new Error(`unknown command ${command}`);
      process.stdout.write(`${await copy(ds)}\n`);
    }
  } finally {
    await ds.destroy();
    await shutdown();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
