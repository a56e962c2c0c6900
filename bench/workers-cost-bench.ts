// The control plane's cost to file claims: manager.work() with its defaults in 8 worker processes
// on PostgreSQL, run by this tree's library and by the library just before the control plane
// (before-control-plane.ts), taking turns round by round over the same queue in the same database.
import { performance } from 'node:perf_hooks';
import { CheckpointManager } from '../src';
import { BEFORE, controlPlaneCost, ROOT, unpackBefore } from './before-control-plane';
import { createBenchDatabase } from './bench-database';
import { type BenchResult, result } from './bench-result';
import { backendPids, cpuOf, cpuSpent } from './process-cpu';
import { checkExactlyOnce, type Pool, workerPool } from './claims-bench';
import { median, sideBySide } from './timing';
import { checkBenchRows, refillQueue } from './workers-bench';

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

/** One round of a pool: its wall time, and the CPU of its worker processes and of the database's backends. */
interface Round {
  wall: number;
  node: number;
  server: number;
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
    const rounds: Record<'now' | 'then', Round[]> = { now: [], then: [] };
    /**
     * CPU ms (the pool's processes and the database's backends) for the pool to drain the queue,
     * after checking every file ran once; the round's figures go to `rounds`. With 8 processes on
     * two cores the wall time of identical rounds moves by ±40 %, their CPU by a few per cent: on a
     * machine the workers keep busy, files per second go as the inverse of the CPU per file.
     */
    const round = async (label: string, pool: Pool, kept: Round[]) => {
      const nodePids = pool.children.map((child) => child.process.pid!);
      const cpuBefore = { node: cpuOf(nodePids), server: cpuOf(await backendPids(dataSource)) };
      let started = 0;
      const indexes = await pool.round(async () => {
        started = performance.now();
        for (const child of pool.children) child.send('go');
      });
      const wall = performance.now() - started;
      const node = cpuSpent(cpuBefore.node, cpuOf(nodePids));
      const server = cpuSpent(cpuBefore.server, cpuOf(await backendPids(dataSource)));
      kept.push({ wall, node, server });
      checkExactlyOnce(label, indexes, files);
      await checkBenchRows(dataSource, label, files);
      return node + server;
    };
    log(`  work() defaults, ${files.toLocaleString('en-US')} files: this tree vs ${BEFORE.slice(0, 7)} (before the control plane)…`);
    const pair = await sideBySide({
      warmups: options.warmups,
      repeats: options.repeats,
      prepare: () => refillQueue(dataSource, registrar, files),
      candidate: () => round('this tree', now, rounds.now),
      baseline: () => round(BEFORE.slice(0, 7), then, rounds.then),
    });
    const measured = (of: Round[], pick: (r: Round) => number) => of.slice(options.warmups).map(pick);
    const wallNow = measured(rounds.now, (r) => r.wall);
    const wallThen = measured(rounds.then, (r) => r.wall);
    const wallRatio = median(wallNow.map((ms, i) => ms / wallThen[i]));
    log(
      `  rounds, CPU ms this tree: ${pair.candidateSamples.map(Math.round).join(', ')}; before: ${pair.baselineSamples.map(Math.round).join(', ')}`,
    );
    const parts = (of: Round[]) =>
      `Node ${Math.round(median(measured(of, (r) => r.node)))} + PostgreSQL ${Math.round(median(measured(of, (r) => r.server)))}`;
    log(`  CPU ms, medians: this tree ${parts(rounds.now)}; before ${parts(rounds.then)}`);
    log(
      `  rounds, wall ms this tree: ${wallNow.map(Math.round).join(', ')}; before: ${wallThen.map(Math.round).join(', ')} ` +
        `(median of per-round ratios ${wallRatio.toFixed(2)}×)`,
    );
    for (const pool of pools.splice(0)) await pool.close();
    const detail = `, ${files.toLocaleString('en-US')} files, ${workers} workers, one row per file [postgres]`;
    return [
      controlPlaneCost('work() defaults, CPU (worker processes + PostgreSQL backends)', detail, pair),
      result(
        `work() defaults with the control plane vs before it, wall time (for reference: ±40 % between identical rounds)${detail}`,
        median(wallNow),
        'ms',
        median(wallThen),
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
