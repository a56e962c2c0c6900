// eachBatch + sqlSource copying a table in batches, against hand-written loops doing the same inserts.
import { performance } from 'node:perf_hooks';
import type { DataSource, EntityManager } from 'typeorm';
import { eachBatch, reset, sqlSource } from '../src';
import { type BenchDatabase, type BenchDriver, createBenchDatabase, placeholders } from './bench-database';
import { type BenchResult, result } from './bench-result';
import { mean, median, sideBySide } from './timing';

const LIMIT = 1000;
const JOB = 'bench-copy';
// Batch 0 also creates the job row; the flat-cost windows start after it.
const WINDOW = 10;
const SKIP = 1;

export interface EachBatchBenchOptions {
  rows: number;
  warmups: number;
  repeats: number;
  /** Runs of the OFFSET loop (no warm-up: it is printed for reference). */
  offsetRepeats: number;
  log: (line: string) => void;
}

type Row = { id: number; name: string; amount: number };

export async function createTables(dataSource: DataSource, driver: BenchDriver, rows: number): Promise<void> {
  for (const table of ['bench_source', 'bench_target']) {
    await dataSource.query(`CREATE TABLE ${table} (id integer PRIMARY KEY, name varchar(64) NOT NULL, amount integer NOT NULL)`);
  }
  if (driver === 'postgres') {
    await dataSource.query(
      `INSERT INTO bench_source (id, name, amount) SELECT g, 'customer-' || g, (g::bigint * 7919) % 100000 FROM generate_series(1, $1) g`,
      [rows],
    );
    await dataSource.query('ANALYZE bench_source');
  } else {
    await dataSource.query(
      `WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?)
       INSERT INTO bench_source (id, name, amount) SELECT g, 'customer-' || g, (g * 7919) % 100000 FROM s`,
      [rows],
    );
  }
}

/** The write both sides do per batch: one multi-row INSERT of the batch into the target table. */
async function insertRows(tx: EntityManager, driver: BenchDriver, rows: Record<string, unknown>[]): Promise<void> {
  const parameters: unknown[] = [];
  for (const row of rows) parameters.push(row.id, row.name, row.amount);
  await tx.query(
    placeholders(driver, `INSERT INTO bench_target (id, name, amount) VALUES ${rows.map(() => '(?, ?, ?)').join(', ')}`),
    parameters,
  );
}

/** Durations between consecutive commits, from the commit times. */
function durations(commits: number[]): number[] {
  return commits.slice(1).map((at, i) => at - commits[i]);
}

/** Each batch's time as its median over the runs, from the first batch after SKIP. */
function perBatchMedians(runs: number[][]): number[] {
  const batches = Math.min(...runs.map((run) => run.length));
  return Array.from({ length: batches }, (_, i) => median(runs.map((run) => run[i]))).slice(SKIP);
}

/**
 * The typical late batch over the typical early one: the median of the last WINDOW batches over
 * the median of the first WINDOW, each batch's time being its median over the runs (on a shared
 * machine a single batch can take 50× its usual time). A median within the window too, because
 * one batch in every 70–90 runs SQLite's WAL autocheckpoint in its commit (10–20× a batch), at
 * positions fixed by the pages each batch writes — the same in every run, so the median over runs
 * keeps it. Whether one falls into a window of ten decided the window's mean (the same keyset loop
 * measured 1.05 in one round, 1.70 in others), and eachBatch's checkpoints, which come more often
 * (its job row and that row's index entry: two more pages per batch), fell elsewhere than the
 * loop's, while no statement's time grew (the windows' means are printed beside, for reference).
 */
function flatness(runs: number[][]): number {
  const perBatch = perBatchMedians(runs);
  if (perBatch.length < 2 * WINDOW) return NaN;
  return median(perBatch.slice(-WINDOW)) / median(perBatch.slice(0, WINDOW));
}

/** The former figure: the mean of the last WINDOW batches over the mean of the first WINDOW. */
function windowMeanFlatness(runs: number[][]): number {
  const perBatch = perBatchMedians(runs);
  if (perBatch.length < 2 * WINDOW) return NaN;
  return mean(perBatch.slice(-WINDOW)) / mean(perBatch.slice(0, WINDOW));
}

/** eachBatch + sqlSource: one transaction per batch with the checkpoint. */
async function libraryCopy(dataSource: DataSource, driver: BenchDriver, commits: number[]): Promise<void> {
  commits.push(performance.now());
  const source = await sqlSource(dataSource, 'bench_source', 'id');
  const outcome = await eachBatch(dataSource, JOB, source, LIMIT, (items, tx) => insertRows(tx, driver, items), {
    onProgress: () => commits.push(performance.now()),
  });
  if (!outcome.done) throw new Error('eachBatch did not finish');
}

/** The hand-written keyset loop: same SELECT shape and inserts, one transaction per batch, no checkpoint. */
async function keysetCopy(dataSource: DataSource, driver: BenchDriver, commits: number[]): Promise<void> {
  commits.push(performance.now());
  let cursor: number | null = null;
  for (;;) {
    const rows: Row[] = await dataSource.transaction(async (tx) => {
      const page: Row[] = await tx.query(
        cursor === null
          ? `SELECT * FROM bench_source ORDER BY id LIMIT ${LIMIT}`
          : placeholders(driver, `SELECT * FROM bench_source WHERE id > ? ORDER BY id LIMIT ${LIMIT}`),
        cursor === null ? [] : [cursor],
      );
      if (page.length > 0) await insertRows(tx, driver, page);
      return page;
    });
    if (rows.length === 0) return;
    cursor = Number(rows[rows.length - 1].id);
    commits.push(performance.now());
  }
}

/** The OFFSET loop a keyset source replaces: each batch skips all rows before it. */
async function offsetCopy(dataSource: DataSource, driver: BenchDriver, commits: number[]): Promise<void> {
  commits.push(performance.now());
  for (let offset = 0; ; offset += LIMIT) {
    const count: number = await dataSource.transaction(async (tx) => {
      const page: Row[] = await tx.query(`SELECT * FROM bench_source ORDER BY id LIMIT ${LIMIT} OFFSET ${offset}`);
      if (page.length > 0) await insertRows(tx, driver, page);
      return page.length;
    });
    if (count === 0) return;
    commits.push(performance.now());
  }
}

async function clearTarget(dataSource: DataSource): Promise<void> {
  await dataSource.query('DELETE FROM bench_target');
  await reset(dataSource, JOB);
}

async function benchDriver(driver: BenchDriver, options: EachBatchBenchOptions): Promise<BenchResult[]> {
  const database: BenchDatabase = await createBenchDatabase(driver, 'batch');
  try {
    const dataSource = await database.open();
    options.log(`  ${driver}: filling ${options.rows.toLocaleString('en-US')} rows…`);
    await createTables(dataSource, driver, options.rows);
    const libraryRuns: number[][] = [];
    const keysetRuns: number[][] = [];
    const copy = (run: typeof libraryCopy, batchTimes?: number[][]) => async () => {
      const commits: number[] = [];
      await run(dataSource, driver, commits);
      batchTimes?.push(durations(commits));
      return commits[commits.length - 1] - commits[0];
    };
    options.log(`  ${driver}: eachBatch vs keyset loop, ${options.warmups} warm-up + ${options.repeats} rounds…`);
    const pair = await sideBySide({
      warmups: options.warmups,
      repeats: options.repeats,
      candidate: copy(libraryCopy, libraryRuns),
      baseline: copy(keysetCopy, keysetRuns),
      prepare: () => clearTarget(dataSource),
    });
    options.log(`  ${driver}: OFFSET loop…`);
    const offsetRuns: number[][] = [];
    for (let round = 0; round < options.offsetRepeats; round++) {
      await clearTarget(dataSource);
      await copy(offsetCopy, offsetRuns)();
    }
    // Drop the warm-up rounds' batch times.
    const libraryFlat = flatness(libraryRuns.slice(options.warmups));
    const keysetFlat = flatness(keysetRuns.slice(options.warmups));
    const offsetFlat = flatness(offsetRuns);
    const libraryMeanFlat = windowMeanFlatness(libraryRuns.slice(options.warmups));
    const keysetMeanFlat = windowMeanFlatness(keysetRuns.slice(options.warmups));
    const batches = Math.ceil(options.rows / LIMIT);
    const perBatch = (ms: number) => ms / batches;
    return [
      result(
        `eachBatch+sqlSource copy ${options.rows.toLocaleString('en-US')} rows vs keyset loop [${driver}]`,
        perBatch(pair.candidate),
        'ms/batch',
        perBatch(pair.baseline),
        pair.ratio,
        { max: 1.1 },
      ),
      // SQLite's inserts into a growing table slow down by themselves (the keyset loop's own figure
      // below): there the cursor's cost is judged as a ratio to that loop's; both raw figures print.
      driver === 'sqlite'
        ? result(
            `eachBatch flat cost (last ${WINDOW}/first ${WINDOW}) vs the keyset loop's [${driver}]`,
            libraryFlat,
            'ratio',
            keysetFlat,
            libraryFlat / keysetFlat,
            { max: 1.1 },
          )
        : result(`eachBatch flat cost, last ${WINDOW}/first ${WINDOW} batches [${driver}]`, libraryFlat, 'ratio', null, libraryFlat, {
            max: 1.2,
          }),
      // The same figure for the hand-written keyset loop: what the writes into a growing table cost by themselves.
      result(
        `keyset loop flat cost (same writes, no checkpoint), last ${WINDOW}/first ${WINDOW} batches [${driver}]`,
        keysetFlat,
        'ratio',
        null,
        keysetFlat,
        null,
      ),
      result(`OFFSET loop flat cost, last ${WINDOW}/first ${WINDOW} batches [${driver}]`, offsetFlat, 'ratio', null, offsetFlat, null),
      // For reference: the windows' means, which a WAL autocheckpoint batch inside a window decides (see flatness).
      result(
        `eachBatch vs keyset loop flat cost by the windows' means [${driver}]`,
        libraryMeanFlat,
        'ratio',
        keysetMeanFlat,
        libraryMeanFlat / keysetMeanFlat,
        null,
      ),
    ];
  } finally {
    await database.drop();
  }
}

export async function eachBatchBench(drivers: BenchDriver[], options: EachBatchBenchOptions): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  for (const driver of drivers) results.push(...(await benchDriver(driver, options)));
  return results;
}
