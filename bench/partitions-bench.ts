// eachPartition: the speed-up of N worker processes over one, its overhead over eachBatch, the cost
// of planning, and composite-key sqlSource against a hand-written keyset loop over (created_at, id).
import { performance } from 'node:perf_hooks';
import type { DataSource, EntityManager } from 'typeorm';
import { eachBatch, eachPartition, listPartitions, pause, reset, resume, sqlSource } from '../src';
import { type Child, startChild } from '../test/support/child';
import { type BenchDriver, createBenchDatabase, placeholders } from './bench-database';
import { type BenchResult, result } from './bench-result';
import { mean, median, sideBySide, timed } from './timing';

const WORKER = 'bench/workers/partition-worker.ts';
const PARTITIONS = 32;
// Eight ranges per process: with four, the processes that happen to run slower (two cores shared by
// nine processes and the database) leave the others idle for up to one range's time at the end.
const IO_PARTITIONS = 64;
const WINDOW = 10;

export interface PartitionsBenchOptions {
  rows: number;
  repeats: number;
  /** Databases for the composite-key rows; the process speed-ups run on PostgreSQL. */
  drivers: BenchDriver[];
  log: (line: string) => void;
}

async function fillSource(ds: DataSource, driver: BenchDriver, rows: number): Promise<void> {
  for (const table of ['bench_source', 'bench_target']) {
    await ds.query(`CREATE TABLE ${table} (id integer PRIMARY KEY, name varchar(64) NOT NULL, amount integer NOT NULL)`);
  }
  if (driver === 'postgres') {
    await ds.query(`INSERT INTO bench_source SELECT g, 'customer-' || g, (g::bigint * 7919) % 100000 FROM generate_series(1, $1) g`, [
      rows,
    ]);
    await ds.query('ANALYZE bench_source');
  } else if (driver === 'mysql') {
    await ds.query(`INSERT INTO bench_source SELECT seq, CONCAT('customer-', seq), (seq * 7919) % 100000 FROM seq_1_to_${rows}`);
  } else {
    await ds.query(
      `WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?)
       INSERT INTO bench_source SELECT g, 'customer-' || g, (g * 7919) % 100000 FROM s`,
      [rows],
    );
  }
}

async function insertRows(
  tx: EntityManager,
  driver: BenchDriver,
  table: string,
  columns: string[],
  rows: Record<string, unknown>[],
): Promise<void> {
  const marks = `(${columns.map(() => '?').join(', ')})`;
  await tx.query(
    placeholders(driver, `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${rows.map(() => marks).join(', ')}`),
    rows.flatMap((row) => columns.map((column) => row[column])),
  );
}

interface Fleet {
  /** Milliseconds for the fleet's processes to finish one job together, from the go signal (TRUNCATE first: DELETE would leave each later round a bloated table). */
  round(job: string): Promise<number>;
  close(): Promise<void>;
}

/** `count` worker processes, started and ready (connected, source built) before any round is timed. */
async function startFleet(
  ds: DataSource,
  url: string,
  mode: 'io' | 'copy',
  limit: number,
  count: number,
  partitions: number,
): Promise<Fleet> {
  const children: Child[] = Array.from({ length: count }, () => startChild(WORKER, [url, mode, String(limit), String(partitions)]));
  const close = async () => {
    for (const child of children) child.send('exit');
    await Promise.all(children.map((child) => child.exited));
  };
  try {
    await Promise.all(children.map((child) => child.waitForLine((line) => line === 'ready')));
  } catch (error) {
    await close();
    throw error;
  }
  return {
    async round(job) {
      await ds.query('TRUNCATE bench_target');
      const marks = children.map((child) => child.lines.length);
      const started = performance.now();
      for (const child of children) child.send(`go ${job}`);
      await Promise.all(
        children.map((child, i) => child.waitForLine((line) => line.startsWith('done') && child.lines.lastIndexOf(line) >= marks[i])),
      );
      const ms = performance.now() - started;
      await reset(ds, job);
      return ms;
    },
    close,
  };
}

/**
 * Each fleet's median time and the median of the per-round ratios of the first fleet's time to
 * each other's: the fleets run in turn round by round, so load that drifts during the run (two
 * cores shared with other work) weighs on each alike.
 */
async function fleetRounds(
  ds: DataSource,
  url: string,
  mode: 'io' | 'copy',
  limit: number,
  counts: number[],
  partitions: number,
  rounds: number,
) {
  const fleets: Fleet[] = [];
  try {
    for (const count of counts) fleets.push(await startFleet(ds, url, mode, limit, count, partitions));
    const times: number[][] = counts.map(() => []);
    for (let round = 0; round < rounds; round++) {
      for (let f = 0; f < fleets.length; f++) times[f].push(await fleets[f].round(`bench-${mode}-${counts[f]}-${round}`));
    }
    return counts.map((_, f) => ({ ms: median(times[f]), speedup: median(times[0].map((first, r) => first / times[f][r])) }));
  } finally {
    await Promise.all(fleets.map((fleet) => fleet.close()));
  }
}

/**
 * How far a pause reaches: `count` processes run one I/O-bound job; once each has ended a batch,
 * another connection pauses the job. Each process's batches that ended after the pause committed
 * (the batch in flight is one) — the figure is the largest. The job is then resumed and run to its
 * end, and its items must be the source's rows, every row once.
 */
async function pauseReach(ds: DataSource, url: string, rows: number, count: number): Promise<{ worst: number; mean: number }> {
  const children: Child[] = Array.from({ length: count }, () => startChild(WORKER, [url, 'io', '500', String(IO_PARTITIONS)]));
  const job = 'bench-pause-reach';
  const run = async () => {
    const marks = children.map((child) => child.lines.length);
    const after = (child: Child, i: number, prefix: string) =>
      child.waitForLine((line) => line.startsWith(prefix) && child.lines.lastIndexOf(line) >= marks[i]);
    for (const child of children) child.send(`go ${job}`);
    return {
      started: Promise.all(children.map((child, i) => after(child, i, 'started'))),
      done: Promise.all(children.map((child, i) => after(child, i, 'done'))),
    };
  };
  try {
    await Promise.all(children.map((child) => child.waitForLine((line) => line === 'ready')));
    const first = await run();
    await first.started;
    await pause(ds, job);
    const pausedAt = Date.now();
    const stopped = (await first.done).map((line) => line.split(' '));
    if (stopped.some(([, , reason]) => reason !== 'paused'))
      throw new Error(`pause bench: a process did not stop paused: ${stopped.join(' | ')}`);
    const late = stopped.map(([, , , ends]) => (JSON.parse(ends) as number[]).filter((end) => end >= pausedAt).length);
    await resume(ds, job);
    const second = await run();
    const finished = (await second.done).map((line) => line.split(' '));
    const items = [...stopped, ...finished].reduce((sum, [, n]) => sum + Number(n), 0);
    if (items !== rows) throw new Error(`pause bench: ${items} items for ${rows} rows`);
    await reset(ds, job);
    return { worst: Math.max(...late), mean: mean(late) };
  } finally {
    for (const child of children) child.send('exit');
    await Promise.all(children.map((child) => child.exited));
  }
}

/** Mean of the last WINDOW batches over the first WINDOW, each batch's time its median over the runs. */
function flatness(runs: number[][]): number {
  const batches = Math.min(...runs.map((run) => run.length));
  const perBatch = Array.from({ length: batches }, (_, i) => median(runs.map((run) => run[i]))).slice(1);
  if (perBatch.length < 2 * WINDOW) return NaN;
  return mean(perBatch.slice(-WINDOW)) / mean(perBatch.slice(0, WINDOW));
}

async function processSpeedups(options: PartitionsBenchOptions): Promise<BenchResult[]> {
  const database = await createBenchDatabase('postgres', 'partitions');
  try {
    const ds = await database.open();
    const rows = options.rows;
    options.log(`  postgres: filling ${rows.toLocaleString('en-US')} rows…`);
    await fillSource(ds, 'postgres', rows);
    const rounds = Math.max(1, Math.min(3, options.repeats));
    const ioLimit = 500;
    options.log(`  postgres: I/O-bound handler (10 ms per batch), 1 and 8 processes, ${IO_PARTITIONS} ranges…`);
    const [, io8] = await fleetRounds(ds, database.url, 'io', ioLimit, [1, 8], IO_PARTITIONS, rounds);
    options.log('  postgres: a pause reaching 8 running processes…');
    const reach = await pauseReach(ds, database.url, rows, 8);
    options.log('  postgres: CPU-bound copy, 1, 2 and 4 processes…');
    const [, copy2, copy4] = await fleetRounds(ds, database.url, 'copy', 1000, [1, 2, 4], PARTITIONS, rounds);

    options.log('  postgres: eachPartition (1 process) vs eachBatch, same copy…');
    const source = await sqlSource(ds, 'bench_source', 'id');
    const copy = (items: Record<string, unknown>[], tx: EntityManager) =>
      insertRows(tx, 'postgres', 'bench_target', ['id', 'name', 'amount'], items);
    let run = 0;
    const pair = await sideBySide({
      warmups: 1,
      repeats: options.repeats,
      prepare: async () => {
        await ds.query('TRUNCATE bench_target');
        run += 1;
      },
      candidate: () => timed(() => eachPartition(ds, `overhead-p-${run}`, source, 1000, copy, { partitions: PARTITIONS })),
      baseline: () => timed(() => eachBatch(ds, `overhead-b-${run}`, source, 1000, copy)),
    });
    options.log('  postgres: planning…');
    const planning = median(
      await Promise.all(
        Array.from({ length: 3 }, () => 0).map(() => timed(() => ds.transaction((tx) => source.partitioning.boundaries(PARTITIONS, tx)))),
      ),
    );
    // How even the planned ranges came out (the last one-process job's): an uneven plan leaves the
    // processes that drew the small ranges idle at the end.
    const sizes = (await listPartitions(ds, `overhead-p-${run}`)).map((range) => range.items);
    const label = `${rows.toLocaleString('en-US')} rows, ${PARTITIONS} ranges`;
    const ioLabel = `${rows.toLocaleString('en-US')} rows, ${IO_PARTITIONS} ranges`;
    return [
      result(`eachPartition I/O-bound (10 ms/batch) 8 processes vs 1, ${ioLabel} [postgres]`, io8.speedup, '× faster', null, io8.speedup, {
        min: 6,
      }),
      result(
        `eachPartition pause from another connection: batches ended after it, worst of 8 processes (mean ${reach.mean.toFixed(2)}), ${ioLabel} [postgres]`,
        reach.worst,
        'batches',
        null,
        null,
        { max: 1 },
        'value',
      ),
      result(`eachPartition CPU-bound copy 2 processes vs 1, ${label} [postgres]`, copy2.speedup, '× faster', null, copy2.speedup, {
        min: 1.3,
      }),
      result(`eachPartition CPU-bound copy 4 processes vs 1, ${label} [postgres]`, copy4.speedup, '× faster', null, copy4.speedup, null),
      result(`eachPartition (1 process) vs eachBatch, same copy, ${label} [postgres]`, pair.candidate, 'ms', pair.baseline, pair.ratio, {
        max: 1.1,
      }),
      // The target is set at 1M rows (--full): below 200,000 rows planning is an exact index walk.
      result(
        `eachPartition planned ranges, largest / smallest row count, ${label} [postgres]`,
        Math.max(...sizes),
        'rows',
        Math.min(...sizes),
        Math.max(...sizes) / Math.min(...sizes),
        null,
      ),
      result(
        `eachPartition planning / job time, ${label} [postgres]`,
        planning,
        'ms',
        pair.candidate,
        planning / pair.candidate,
        rows >= 1_000_000 ? { max: 0.02 } : null,
      ),
    ];
  } finally {
    await database.drop();
  }
}

/** `created_at` text for row `i`: one instant per 3 rows, 1 µs apart, so leading values repeat across pages. */
function createdAt(driver: BenchDriver, column: string): string {
  if (driver === 'postgres') return `timestamp '2026-01-01' + ((${column} / 3) * interval '1 microsecond')`;
  if (driver === 'mysql') return `TIMESTAMPADD(MICROSECOND, ${column} DIV 3, '2026-01-01 00:00:00')`;
  return `strftime('%Y-%m-%d %H:%M:%f', '2026-01-01', '+' || (${column} / 3000) || ' seconds') || printf('%03d', ${column} % 1000)`;
}

async function compositeCopy(driver: BenchDriver, options: PartitionsBenchOptions): Promise<BenchResult[]> {
  const database = await createBenchDatabase(driver, 'composite');
  try {
    const ds = await database.open();
    const stamp = driver === 'postgres' ? 'timestamp(6)' : driver === 'mysql' ? 'datetime(6)' : 'text';
    for (const table of ['events_source', 'events_target']) {
      await ds.query(
        `CREATE TABLE ${table} (created_at ${stamp} NOT NULL, id integer NOT NULL, amount integer NOT NULL, PRIMARY KEY (created_at, id))`,
      );
    }
    options.log(`  ${driver}: filling ${options.rows.toLocaleString('en-US')} events…`);
    if (driver === 'postgres') {
      await ds.query(`INSERT INTO events_source SELECT ${createdAt(driver, 'g')}, g, g % 1000 FROM generate_series(1, $1) g`, [
        options.rows,
      ]);
      await ds.query('ANALYZE events_source');
    } else if (driver === 'mysql') {
      await ds.query(`INSERT INTO events_source SELECT ${createdAt(driver, 'seq')}, seq, seq % 1000 FROM seq_1_to_${options.rows}`);
    } else {
      await ds.query(
        `WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?) INSERT INTO events_source SELECT ${createdAt(driver, 'g')}, g, g % 1000 FROM s`,
        [options.rows],
      );
    }
    const LIMIT = 1000;
    const columns = ['created_at', 'id', 'amount'];
    const source = await sqlSource(ds, 'events_source', ['created_at', 'id']);
    const libraryRuns: number[][] = [];
    const loopRuns: number[][] = [];
    const commitsOf = async (runs: number[][], body: (commit: () => void) => Promise<unknown>) => {
      const commits = [performance.now()];
      await body(() => commits.push(performance.now()));
      runs.push(commits.slice(1).map((at, i) => at - commits[i]));
      return commits[commits.length - 1] - commits[0];
    };
    // The same canonical text the library reads, and the same keyset condition (row values; on MySQL the expanded form).
    const read =
      driver === 'postgres'
        ? `to_char(created_at, 'YYYY-MM-DD HH24:MI:SS.US') AS created_at`
        : driver === 'mysql'
          ? `DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s.%f') AS created_at`
          : 'created_at';
    const bound = driver === 'postgres' ? '?::timestamp' : driver === 'mysql' ? 'CAST(? AS DATETIME(6))' : '?';
    const after =
      driver === 'mysql'
        ? `events_source.created_at >= ${bound} AND (events_source.created_at > ${bound} OR (events_source.created_at = ${bound} AND events_source.id > ?))`
        : `(events_source.created_at, events_source.id) > (${bound}, ?)`;
    const afterValues = (cursor: [string, number]) => (driver === 'mysql' ? [cursor[0], cursor[0], cursor[0], cursor[1]] : cursor);
    const handLoop = async (commit: () => void) => {
      let cursor: [string, number] | null = null;
      for (;;) {
        const page: Record<string, unknown>[] = await ds.transaction(async (tx) => {
          const rows: Record<string, unknown>[] = await tx.query(
            placeholders(
              driver,
              `SELECT ${read}, id, amount FROM events_source WHERE ${cursor === null ? '1 = 1' : after} ` +
                `ORDER BY events_source.created_at, events_source.id LIMIT ${LIMIT}`,
            ),
            cursor === null ? [] : afterValues(cursor),
          );
          if (rows.length > 0) await insertRows(tx, driver, 'events_target', columns, rows);
          return rows;
        });
        if (page.length === 0) return;
        const last = page[page.length - 1];
        cursor = [String(last.created_at), Number(last.id)];
        commit();
      }
    };
    let run = 0;
    options.log(`  ${driver}: composite-key sqlSource vs hand-written keyset loop…`);
    const pair = await sideBySide({
      warmups: 1,
      repeats: options.repeats,
      prepare: async () => {
        // TRUNCATE on the servers: a million deleted rows would leave the next run a bloated table (and InnoDB's purge running behind it).
        await ds.query(driver === 'sqlite' ? 'DELETE FROM events_target' : 'TRUNCATE events_target');
        run += 1;
      },
      candidate: () =>
        commitsOf(libraryRuns, (commit) =>
          eachBatch(ds, `events-${run}`, source, LIMIT, (items, tx) => insertRows(tx, driver, 'events_target', columns, items), {
            onProgress: commit,
          }),
        ),
      baseline: () => commitsOf(loopRuns, handLoop),
    });
    const libraryFlat = flatness(libraryRuns.slice(1));
    const loopFlat = flatness(loopRuns.slice(1));
    const label = `${options.rows.toLocaleString('en-US')} rows [${driver}]`;
    const rowsOut = [
      result(`composite-key (created_at, id) sqlSource copy vs keyset loop, ${label}`, pair.candidate, 'ms', pair.baseline, pair.ratio, {
        max: 1.1,
      }),
    ];
    if (driver === 'sqlite') {
      // SQLite's inserts into a growing table slow down by themselves: judged against the loop's own figure.
      rowsOut.push(
        result(
          `composite-key flat cost (last ${WINDOW}/first ${WINDOW}) vs the keyset loop's, ${label}`,
          libraryFlat,
          'ratio',
          loopFlat,
          libraryFlat / loopFlat,
          { max: 1.1 },
        ),
      );
    } else {
      rowsOut.push(
        result(`composite-key flat cost, last ${WINDOW}/first ${WINDOW} batches, ${label}`, libraryFlat, 'ratio', null, libraryFlat, {
          max: 1.2,
        }),
      );
    }
    rowsOut.push(result(`keyset loop flat cost (reference), ${label}`, loopFlat, 'ratio', null, loopFlat, null));
    return rowsOut;
  } finally {
    await database.drop();
  }
}

export async function partitionsBench(options: PartitionsBenchOptions): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  if (options.drivers.includes('postgres')) results.push(...(await processSpeedups(options)));
  for (const driver of options.drivers) results.push(...(await compositeCopy(driver, options)));
  return results;
}
