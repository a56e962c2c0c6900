// Step cache hits against a primary-key SELECT, and @Checkpointed against a direct step call.
import { performance } from 'node:perf_hooks';
import type { DataSource } from 'typeorm';
import { Checkpointed, step } from '../src';
import { type BenchDriver, createBenchDatabase, placeholders } from './bench-database';
import { type BenchResult, result } from './bench-result';
import { sideBySide } from './timing';

export interface StepBenchOptions {
  calls: number;
  warmups: number;
  repeats: number;
  log: (line: string) => void;
}

class BenchBilling {
  constructor(readonly dataSource: DataSource) {}

  @Checkpointed()
  async charge(customer: string, cents: number): Promise<{ customer: string; cents: number }> {
    return { customer, cents };
  }
}

/** Microseconds per call of `call`, over `calls` sequential calls. */
function perCall(calls: number, call: (i: number) => Promise<unknown>): () => Promise<number> {
  return async () => {
    const started = performance.now();
    for (let i = 0; i < calls; i++) await call(i);
    return ((performance.now() - started) * 1000) / calls;
  };
}

async function benchDriver(driver: BenchDriver, options: StepBenchOptions): Promise<BenchResult[]> {
  const database = await createBenchDatabase(driver, 'step');
  try {
    const dataSource = await database.open();
    await dataSource.query('CREATE TABLE bench_lookup (id integer PRIMARY KEY, payload varchar(200) NOT NULL)');
    for (let id = 1; id <= 1000; id++) {
      await dataSource.query(placeholders(driver, 'INSERT INTO bench_lookup (id, payload) VALUES (?, ?)'), [
        id,
        JSON.stringify({ customer: `c${id}`, cents: id * 100 }),
      ]);
    }
    const billing = new BenchBilling(dataSource);
    const value = { customer: 'c1', cents: 100 };
    // Record the steps once: everything measured below is a cache hit.
    await step(dataSource, 'bench-step', () => value);
    await billing.charge('c1', 100);
    const select = placeholders(driver, 'SELECT * FROM bench_lookup WHERE id = ?');

    // A PostgreSQL round trip costs ~20× SQLite's call: fewer calls per round keep the rounds short,
    // so both sides of a round see the same machine load.
    const calls = driver === 'postgres' ? Math.ceil(options.calls / 5) : options.calls;
    options.log(`  ${driver}: step hit vs primary-key SELECT, ${calls} calls × ${options.repeats} rounds…`);
    const hit = await sideBySide({
      warmups: options.warmups,
      repeats: options.repeats,
      candidate: perCall(calls, () => step(dataSource, 'bench-step', () => value)),
      baseline: perCall(calls, (i) => dataSource.query(select, [(i % 1000) + 1])),
    });
    options.log(`  ${driver}: @Checkpointed vs step…`);
    const decorated = await sideBySide({
      warmups: options.warmups,
      repeats: options.repeats,
      candidate: perCall(calls, () => billing.charge('c1', 100)),
      baseline: perCall(calls, () => step(dataSource, 'BenchBilling.charge("c1",100)', () => value)),
    });
    return [
      result(`step cache hit vs primary-key SELECT [${driver}]`, hit.candidate, 'µs/call', hit.baseline, hit.ratio, { max: 2 }),
      result(
        `@Checkpointed call vs direct step call (hits) [${driver}]`,
        decorated.candidate,
        'µs/call',
        decorated.baseline,
        decorated.ratio,
        {
          max: 1.1,
        },
      ),
    ];
  } finally {
    await database.drop();
  }
}

export async function stepBench(drivers: BenchDriver[], options: StepBenchOptions): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  for (const driver of drivers) results.push(...(await benchDriver(driver, options)));
  return results;
}
