// The control plane's cost to file claims: manager.work() with its defaults in 8 worker processes
// on PostgreSQL, run by this tree's library and by the library just before the control plane
// (before-control-plane.ts), taking turns round by round over the same queue in the same database.
import { performance } from 'node:perf_hooks';
import type { DataSource } from 'typeorm';
import { CheckpointManager } from '../src';
import { BEFORE, controlPlaneCost, ROOT, unpackBefore } from './before-control-plane';
import { createBenchDatabase } from './bench-database';
import { type BenchResult, result } from './bench-result';
import { backendPids, cpuOf, cpuSpent } from './process-cpu';
import { checkExactlyOnce, type Pool, workerPool } from './claims-bench';
import { median, sideBySide } from './timing';
import { FILE_TIMESTAMP, FILE_TYPE, fileUrl } from './workers/worker-protocol';

/**
 * The pools keep their connections between rounds (two pools of 8 stay far under max_connections):
 * a round that opened its connections again would count their backends' start-up as its own CPU.
 */
const KEEP_CONNECTIONS_MS = 10 * 60 * 1000;

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
      const pool = await workerPool(
        'bench/workers/work-worker.ts',
        (w) => ['work', database.url, String(w), root, String(KEEP_CONNECTIONS_MS)],
        workers,
        false,
      );
      pools.push(pool);
      return pool;
    };
    const now = await start('this tree', ROOT);
    const then = await start(BEFORE.slice(0, 7), before.root);
    const wall: Record<string, number[]> = { now: [], then: [] };
    const split: Record<string, [number, number][]> = { now: [], then: [] };
    /**
     * CPU ms (the pool's processes and the database's backends) for the pool to drain the queue,
     * after checking every file ran once; its wall time goes to `wall`. With 8 processes on two
     * cores the wall time of identical rounds moves by ±40 %, their CPU by a few per cent: on a
     * machine the workers keep busy, files per second go as the inverse of the CPU per file.
     */
    const round = async (label: string, pool: Pool, times: number[]) => {
      const nodePids = pool.children.map((child) => child.process.pid!);
      const before = { node: cpuOf(nodePids), server: cpuOf(await backendPids(dataSource)) };
      let started = 0;
      const indexes = await pool.round(async () => {
        started = performance.now();
        for (const child of pool.children) child.send('go');
      });
      times.push(performance.now() - started);
      const node = cpuSpent(before.node, cpuOf(nodePids));
      const server = cpuSpent(before.server, cpuOf(await backendPids(dataSource)));
      split[label === 'this tree' ? 'now' : 'then'].push([node, server]);
      const cpu = node + server;
      checkExactlyOnce(label, indexes, files);
      await checkRows(dataSource, label, files);
      return cpu;
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
      candidate: () => round('this tree', now, wall.now),
      baseline: () => round(BEFORE.slice(0, 7), then, wall.then),
    });
    const measured = (times: number[]) => times.slice(options.warmups);
    const wallRatio = median(measured(wall.now).map((ms, i) => ms / measured(wall.then)[i]));
    log(
      `  rounds, CPU ms this tree: ${pair.candidateSamples.map(Math.round).join(', ')}; before: ${pair.baselineSamples.map(Math.round).join(', ')}`,
    );
    const parts = (rounds: [number, number][]) =>
      `Node ${Math.round(median(measured(rounds.map(([node]) => node))))} + PostgreSQL ${Math.round(median(measured(rounds.map(([, server]) => server))))}`;
    log(`  CPU ms, medians: this tree ${parts(split.now)}; before ${parts(split.then)}`);
    log(
      `  rounds, wall ms this tree: ${measured(wall.now).map(Math.round).join(', ')}; before: ${measured(wall.then).map(Math.round).join(', ')} ` +
        `(median of per-round ratios ${wallRatio.toFixed(2)}×)`,
    );
    for (const pool of pools.splice(0)) await pool.close();
    const detail = `, ${files.toLocaleString('en-US')} files, ${workers} workers, one row per file [postgres]`;
    return [
      controlPlaneCost('work() defaults, CPU (worker processes + PostgreSQL backends)', detail, pair),
      result(
        `work() defaults with the control plane vs before it, wall time (for reference: ±40 % between identical rounds)${detail}`,
        median(measured(wall.now)),
        'ms',
        median(measured(wall.then)),
        wallRatio,
        null,
      ),
    ];
  } finally {
    for (const pool of pools) for (const child of pool.children) child.process.kill('SIGKILL');
    await database.drop();
    before.remove();
  }
}
