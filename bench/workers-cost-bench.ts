// The control plane's cost to file claims: manager.work() with its defaults in 8 worker processes
// on PostgreSQL, run by this tree's library and by the library just before the control plane
// (before-control-plane.ts), taking turns round by round over the same queue in the same database.
import { performance } from 'node:perf_hooks';
import type { DataSource } from 'typeorm';
import { CheckpointManager } from '../src';
import { BEFORE, controlPlaneCost, ROOT, unpackBefore } from './before-control-plane';
import { createBenchDatabase } from './bench-database';
import type { BenchResult } from './bench-result';
import { checkExactlyOnce, type Pool, workerPool } from './claims-bench';
import { sideBySide } from './timing';
import { FILE_TIMESTAMP, FILE_TYPE, fileUrl } from './workers/worker-protocol';

export interface WorkersCostOptions {
  files: number;
  workers: number;
  warmups: number;
  repeats: number;
  log: (line: string) => void;
}

/** Every file once, and one bench_rows row for each, or the round does not count. */
async function checkRows(dataSource: DataSource, label: string, files: number): Promise<void> {
  const [row] = (await dataSource.query('SELECT COUNT(*) AS n, COUNT(DISTINCT file_index) AS d FROM bench_rows')) as {
    n: string;
    d: string;
  }[];
  if (Number(row.n) !== files || Number(row.d) !== files) throw new Error(`${label}: ${row.n} rows for ${row.d} of ${files} files`);
}

export async function workersCostBench(options: WorkersCostOptions): Promise<BenchResult[]> {
  const { files, workers, log } = options;
  const before = unpackBefore(log, 'work() cost of the control plane');
  if (before === null) return [];
  const database = await createBenchDatabase('postgres', 'workers-cost');
  const pools: Pool[] = [];
  try {
    const dataSource = await database.open();
    await dataSource.query('CREATE TABLE bench_rows (file_index integer NOT NULL, worker varchar(255) NOT NULL)');
    const registrar = new CheckpointManager(dataSource);
    const fileRefs = Array.from({ length: files }, (_, i) => ({ fileUrl: fileUrl(i), fileType: FILE_TYPE, fileTimestamp: FILE_TIMESTAMP }));
    const start = async (label: string, root: string) => {
      log(`  ${label}: starting ${workers} workers…`);
      const pool = await workerPool('bench/workers/work-worker.ts', (w) => ['work', database.url, String(w), root], workers, false);
      pools.push(pool);
      return pool;
    };
    const now = await start('this tree', ROOT);
    const then = await start(BEFORE.slice(0, 7), before.root);
    /** Milliseconds for the pool to drain the queue, after checking every file ran once. */
    const round = async (label: string, pool: Pool) => {
      let started = 0;
      const indexes = await pool.round(async () => {
        started = performance.now();
        for (const child of pool.children) child.send('go');
      });
      const ms = performance.now() - started;
      checkExactlyOnce(label, indexes, files);
      await checkRows(dataSource, label, files);
      return ms;
    };
    log(`  work() defaults, ${files.toLocaleString('en-US')} files: this tree vs ${BEFORE.slice(0, 7)} (before the control plane)…`);
    const pair = await sideBySide({
      warmups: options.warmups,
      repeats: options.repeats,
      prepare: async () => {
        await dataSource.query('TRUNCATE bench_rows');
        await dataSource.query('DELETE FROM file_checkpoints');
        await registrar.register(fileRefs);
        await dataSource.query('VACUUM ANALYZE file_checkpoints');
      },
      candidate: () => round('this tree', now),
      baseline: () => round(BEFORE.slice(0, 7), then),
    });
    log(
      `  rounds (ms), this tree: ${pair.candidateSamples.map(Math.round).join(', ')}; before: ${pair.baselineSamples.map(Math.round).join(', ')}`,
    );
    for (const pool of pools.splice(0)) await pool.close();
    return [
      controlPlaneCost(
        'work() defaults',
        `, ${files.toLocaleString('en-US')} files, ${workers} workers, one row per file [postgres]`,
        pair,
      ),
    ];
  } finally {
    for (const pool of pools) for (const child of pool.children) child.process.kill('SIGKILL');
    await database.drop();
    before.remove();
  }
}
