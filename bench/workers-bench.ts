// manager.work() by 8 worker processes on PostgreSQL against graphile-worker and pg-boss doing the
// same database work (one row per file, inserted by the handler), the README's hand-written loop,
// and the wake-up latency of an idle worker (register → handler start, LISTEN/NOTIFY).
import { performance } from 'node:perf_hooks';
import { makeWorkerUtils, runMigrations } from 'graphile-worker';
import PgBoss from 'pg-boss';
import type { DataSource } from 'typeorm';
import { CheckpointManager } from '../src';
import { startChild } from '../test/support/child';
import { createBenchDatabase } from './bench-database';
import { type BenchResult, result } from './bench-result';
import { checkExactlyOnce, okIndexes, type Pool, workerPool } from './claims-bench';
import { backendPids, cpuOf, cpuSpent } from './process-cpu';
import { median } from './timing';
import { FILE_TIMESTAMP, FILE_TYPE, fileUrl } from './workers/worker-protocol';

export interface WorkersBenchOptions {
  files: number;
  workers: number;
  warmups: number;
  repeats: number;
  /** Wake-up samples (each a register and a handler start). */
  wakeups: number;
  log: (line: string) => void;
}

/** Rows written in the round: one per file, or the round does not count. */
export async function checkBenchRows(dataSource: DataSource, label: string, files: number): Promise<void> {
  const [row] = (await dataSource.query('SELECT COUNT(*) AS n, COUNT(DISTINCT file_index) AS d FROM bench_rows')) as {
    n: string;
    d: string;
  }[];
  if (Number(row.n) !== files || Number(row.d) !== files) throw new Error(`${label}: ${row.n} rows for ${row.d} of ${files} files`);
}

/** An empty bench_rows and a queue of `files` pending files, its statistics fresh. */
export async function refillQueue(dataSource: DataSource, registrar: CheckpointManager, files: number): Promise<void> {
  await dataSource.query('TRUNCATE bench_rows');
  await dataSource.query('DELETE FROM file_checkpoints');
  await registrar.register(
    Array.from({ length: files }, (_, i) => ({ fileUrl: fileUrl(i), fileType: FILE_TYPE, fileTimestamp: FILE_TIMESTAMP })),
  );
  await dataSource.query('VACUUM ANALYZE file_checkpoints');
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export async function workersBench(options: WorkersBenchOptions): Promise<BenchResult[]> {
  const { files, workers, log } = options;
  const database = await createBenchDatabase('postgres', 'workers');
  const pools: Pool[] = [];
  const rounds = options.warmups + options.repeats;
  try {
    const dataSource: DataSource = await database.open();
    await dataSource.query('CREATE TABLE bench_rows (file_index integer NOT NULL, worker varchar(255) NOT NULL)');
    const registrar = new CheckpointManager(dataSource);

    const checkRows = (label: string) => checkBenchRows(dataSource, label, files);
    const prepareLibrary = () => refillQueue(dataSource, registrar, files);

    /** CPU ms per file of a round's worker processes (Node) and of the database's backends (PostgreSQL). */
    const cpuPerFile: Record<string, { node: number[]; server: number[] }> = {};
    const cpuMeter = async (label: string, pool: Pool) => {
      const nodePids = pool.children.map((child) => child.process.pid!);
      const node = cpuOf(nodePids);
      const server = cpuOf(await backendPids(dataSource));
      return async () => {
        const nodeMs = cpuSpent(node, cpuOf(nodePids));
        const serverMs = cpuSpent(server, cpuOf(await backendPids(dataSource)));
        cpuPerFile[label] ??= { node: [], server: [] };
        cpuPerFile[label].node.push(nodeMs / files);
        cpuPerFile[label].server.push(serverMs / files);
      };
    };

    /** A timed round of a go/done pool: files per second, after checking every file ran once. */
    const goRound = async (label: string, pool: Pool, prepare: () => Promise<void>) => {
      await prepare();
      let started = 0;
      const meter = await cpuMeter(label, pool);
      const indexes = await pool.round(async () => {
        started = performance.now();
        for (const child of pool.children) child.send('go');
      });
      const rate = files / ((performance.now() - started) / 1000);
      await meter();
      checkExactlyOnce(label, indexes, files);
      await checkRows(label);
      return rate;
    };
    const startPool = async (label: string, script: string, args: (w: number) => string[]) => {
      log(`  ${label}: starting ${workers} workers…`);
      const pool = await workerPool(script, args, workers, false);
      pools.push(pool);
      return pool;
    };
    // graphile-worker: continuous workers; a round starts when its jobs are committed.
    log('  graphile-worker: migrating…');
    await runMigrations({ connectionString: database.url, logger: undefined });
    const utils = await makeWorkerUtils({ connectionString: database.url });
    log('  pg-boss: migrating…');
    const boss = new PgBoss({ connectionString: database.url, supervise: false, schedule: false });
    boss.on('error', (error) => log(String(error)));
    await boss.start();
    await boss.createQueue('bench');

    // Every pool is started first and the five loops run their rounds in turn, so load that drifts
    // during the run (a shared machine) weighs on the library and the baselines alike.
    const modes = ['work', 'work-chunk', 'hand-loop'];
    const libraryPools = [];
    for (const mode of modes)
      libraryPools.push(await startPool(mode, 'bench/workers/work-worker.ts', (w) => [mode, database.url, String(w)]));
    log(`  graphile-worker (task inserts the row): starting ${workers} workers…`);
    const graphilePool = await workerPool('bench/workers/graphile-insert-worker.ts', (w) => [database.url, String(w)], workers, true);
    pools.push(graphilePool);
    const bossPool = await startPool('pg-boss batch 10', 'bench/workers/pg-boss-insert-worker.ts', (w) => [database.url, String(w)]);

    const graphileRound = async () => {
      await dataSource.query('TRUNCATE bench_rows');
      const marks = graphilePool.children.map((child) => child.lines.length);
      await utils.addJobs(Array.from({ length: files }, (_, i) => ({ identifier: 'bench', payload: { i } })));
      // From here on, as the timing: the jobs' insert (the parent's connection) is not the workers' cost.
      const meter = await cpuMeter('graphile-worker', graphilePool);
      const started = performance.now();
      const processed = () => graphilePool.children.reduce((sum, child, w) => sum + okIndexes(child.lines, marks[w]).length, 0);
      while (processed() < files) await new Promise((resolve) => setTimeout(resolve, 5));
      const rate = files / ((performance.now() - started) / 1000);
      await meter();
      checkExactlyOnce(
        'graphile-worker',
        graphilePool.children.flatMap((child, w) => okIndexes(child.lines, marks[w])),
        files,
      );
      await checkRows('graphile-worker');
      return rate;
    };
    const prepareBoss = async () => {
      await dataSource.query('TRUNCATE bench_rows');
      await boss.insert(Array.from({ length: files }, (_, i) => ({ name: 'bench', data: { i } })));
    };
    const libraryRates: number[][] = modes.map(() => []);
    const graphileRates: number[] = [];
    const bossRates: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const measured = round >= options.warmups;
      const rates: number[] = [];
      for (const [m, mode] of modes.entries()) {
        rates.push(await goRound(mode, libraryPools[m], prepareLibrary));
        if (measured) libraryRates[m].push(rates[m]);
      }
      rates.push(await graphileRound(), await goRound('pg-boss batch 10', bossPool, prepareBoss));
      if (measured) {
        graphileRates.push(rates[3]);
        bossRates.push(rates[4]);
      }
      const names = [...modes, 'graphile-worker', 'pg-boss'];
      log(
        `  round ${round + 1}/${rounds}${measured ? '' : ' (warm-up)'}: ${names.map((name, i) => `${name} ${Math.round(rates[i])}`).join(', ')} files/s`,
      );
    }
    for (const [label, cpu] of Object.entries(cpuPerFile)) {
      const node = median(cpu.node);
      const server = median(cpu.server);
      log(
        `  CPU per file, median of rounds, ${label}: Node ${node.toFixed(3)} ms + PostgreSQL backends ${server.toFixed(3)} ms = ${(node + server).toFixed(3)} ms`,
      );
    }
    for (const pool of [...libraryPools, graphilePool, bossPool]) await pool.close();
    await utils.release();
    await boss.stop({ graceful: false, wait: true });
    const [workDefault, workChunk, handLoop] = libraryRates.map(median);
    const graphile = median(graphileRates);
    const pgBoss = median(bossRates);

    // Wake-up latency: one idle worker (pollMs 5000), files registered one at a time.
    log(`  wake-up latency, ${options.wakeups} samples…`);
    await dataSource.query('DELETE FROM file_checkpoints');
    const waker = startChild('bench/workers/work-worker.ts', ['wake', database.url, '0']);
    const latencies: number[] = [];
    try {
      await waker.waitForLine((line) => line === 'ready');
      // Let the worker's first (empty) claim and its LISTEN settle, so every sample starts idle.
      await new Promise((resolve) => setTimeout(resolve, 500));
      for (let i = 0; i < options.wakeups; i++) {
        const sent = performance.timeOrigin + performance.now();
        await registrar.register([{ fileUrl: fileUrl(files + i), fileType: FILE_TYPE, fileTimestamp: FILE_TIMESTAMP }]);
        const line = await waker.waitForLine((text) => text.startsWith(`start ${files + i} `));
        latencies.push(Number(line.split(' ')[2]) - sent);
        // The worker claims again after each file: wait until it is idle again before the next sample.
        await new Promise((resolve) => setTimeout(resolve, 30));
      }
    } finally {
      waker.send('exit');
      await waker.exited;
    }

    const label = `${files.toLocaleString('en-US')} files, ${workers} workers, one row per file, 0 duplicates [postgres]`;
    return [
      result(
        `work() defaults vs graphile-worker 0.17 (local queue 10, task inserts the row), ${label}`,
        workDefault,
        'files/s',
        graphile,
        workDefault / graphile,
        { min: 1 },
      ),
      result(
        `work() defaults vs pg-boss 10 (batch 10, handler inserts the row), ${label}`,
        workDefault,
        'files/s',
        pgBoss,
        workDefault / pgBoss,
        { min: 1 },
      ),
      result(`work({ commitEvery: 10 }) vs graphile-worker 0.17 (same), ${label}`, workChunk, 'files/s', graphile, workChunk / graphile, {
        min: 2,
      }),
      result(`work({ commitEvery: 10 }) vs pg-boss 10 (same), ${label}`, workChunk, 'files/s', pgBoss, workChunk / pgBoss, { min: 2 }),
      result(
        `work() defaults vs the hand-written loop (claimNext(10) + processFile), ${label}`,
        workDefault,
        'files/s',
        handLoop,
        workDefault / handLoop,
        { min: 1 },
      ),
      result(
        `wake-up latency p50, register → handler start, idle worker with pollMs 5000 [postgres]`,
        percentile(latencies, 50),
        'ms',
        null,
        null,
        { max: 20 },
        'value',
      ),
      result(
        `wake-up latency p99, register → handler start, idle worker with pollMs 5000 [postgres]`,
        percentile(latencies, 99),
        'ms',
        null,
        null,
        { max: 100 },
        'value',
      ),
    ];
  } finally {
    for (const pool of pools) for (const child of pool.children) child.process.kill('SIGKILL');
    await database.drop();
  }
}
