// File claims by 8 worker processes on PostgreSQL against hand-written SQL, graphile-worker and pg-boss.
import { performance } from 'node:perf_hooks';
import type { DataSource } from 'typeorm';
import { makeWorkerUtils, runMigrations } from 'graphile-worker';
import PgBoss from 'pg-boss';
import { CheckpointManager } from '../src';
import { type Child, startChild } from '../test/support/child';
import { createBenchDatabase } from './bench-database';
import { type BenchResult, result } from './bench-result';
import { median, sideBySide } from './timing';
import { FILE_TIMESTAMP, FILE_TYPE, fileUrl } from './workers/worker-protocol';

export interface ClaimsBenchOptions {
  files: number;
  workers: number;
  warmups: number;
  repeats: number;
  log: (line: string) => void;
}

/** A set of worker processes that run rounds on command. */
export interface Pool {
  children: Child[];
  /** Starts a round: the caller has prepared the queue. Resolves with every processed index. */
  round(start: () => Promise<void>): Promise<number[]>;
  close(): Promise<void>;
}

export function okIndexes(lines: string[], from: number): number[] {
  const found: number[] = [];
  for (let i = from; i < lines.length; i++) if (lines[i].startsWith('ok ')) found.push(Number(lines[i].slice(3)));
  return found;
}

/**
 * Starts `count` workers and waits until each printed "ready". A round runs `start` (which sends
 * "go") and ends when every worker printed "done". Continuous workers (graphile-worker) print no
 * "done": their rounds are timed by counting "ok" lines instead.
 */
export async function workerPool(script: string, argsOf: (worker: number) => string[], count: number, continuous: boolean): Promise<Pool> {
  const children = Array.from({ length: count }, (_, w) => startChild(script, argsOf(w)));
  await Promise.all(children.map((child) => child.waitForLine((line) => line === 'ready')));
  return {
    children,
    async round(start) {
      const marks = children.map((child) => child.lines.length);
      await start();
      if (!continuous) await Promise.all(children.map((child, w) => waitForLineAfter(child, marks[w], 'done')));
      return children.flatMap((child, w) => okIndexes(child.lines, marks[w]));
    },
    async close() {
      for (const child of children) child.send('exit');
      await Promise.all(children.map((child) => child.exited));
    },
  };
}

/** Waits for `line` written after the first `mark` lines (an earlier round's "done" does not count). */
function waitForLineAfter(child: Child, mark: number, line: string): Promise<string> {
  return child.waitForLine((candidate) => candidate === line && child.lines.lastIndexOf(line) >= mark);
}

/** Throws unless every file was processed exactly once in the round. */
export function checkExactlyOnce(label: string, indexes: number[], files: number): void {
  const unique = new Set(indexes);
  if (indexes.length !== files || unique.size !== files) {
    throw new Error(
      `${label}: ${indexes.length} files processed, ${unique.size} distinct, of ${files}: ${indexes.length - unique.size} duplicates`,
    );
  }
}

export async function claimsBench(options: ClaimsBenchOptions): Promise<BenchResult[]> {
  const { files, workers, log } = options;
  const database = await createBenchDatabase('postgres', 'claims');
  const pools: Pool[] = [];
  try {
    const dataSource: DataSource = await database.open();
    await dataSource.query(`CREATE TABLE bench_claims (
      file_url varchar(768) PRIMARY KEY, file_type varchar(255) NOT NULL, file_timestamp bigint NOT NULL,
      status varchar(16) NOT NULL DEFAULT 'pending', records_total bigint NOT NULL DEFAULT 0,
      records_filtered bigint NOT NULL DEFAULT 0, records_persisted bigint NOT NULL DEFAULT 0,
      processing_time_ms bigint NOT NULL DEFAULT 0, error_message text, retry_count integer NOT NULL DEFAULT 0,
      max_retries integer NOT NULL DEFAULT 3, processed_by varchar(255), claim_token bigint NOT NULL DEFAULT 0,
      lease_expires_at bigint, started_at bigint, completed_at bigint, created_at bigint NOT NULL)`);
    await dataSource.query('CREATE INDEX bench_claims_status ON bench_claims (status)');
    const registrar = new CheckpointManager(dataSource);
    const fileRefs = Array.from({ length: files }, (_, i) => ({ fileUrl: fileUrl(i), fileType: FILE_TYPE, fileTimestamp: FILE_TIMESTAMP }));
    const prepareLibrary = async () => {
      await dataSource.query('DELETE FROM file_checkpoints');
      await registrar.register(fileRefs);
      await dataSource.query('VACUUM ANALYZE file_checkpoints');
    };
    const prepareSql = async () => {
      await dataSource.query('DELETE FROM bench_claims');
      await dataSource.query(
        `INSERT INTO bench_claims (file_url, file_type, file_timestamp, created_at)
         SELECT 's3://bench-bucket/incoming/file-' || lpad(g::text, 6, '0') || '.csv', $2, $3, $4 FROM generate_series(0, $1 - 1) g`,
        [files, FILE_TYPE, FILE_TIMESTAMP.getTime(), Date.now()],
      );
      await dataSource.query('VACUUM ANALYZE bench_claims');
    };

    const claimPool = async (mode: string) => {
      log(`  starting ${workers} ${mode} workers…`);
      const pool = await workerPool(
        'bench/workers/claim-worker.ts',
        (w) => [mode, database.url, String(files), String(w), String(workers)],
        workers,
        false,
      );
      pools.push(pool);
      return pool;
    };
    /** One timed round of a go/done pool: files per second. */
    const goRound = (label: string, pool: Pool, prepare: () => Promise<void>) => async () => {
      await prepare();
      let started = 0;
      const indexes = await pool.round(async () => {
        started = performance.now();
        for (const child of pool.children) child.send('go');
      });
      const rate = files / ((performance.now() - started) / 1000);
      checkExactlyOnce(label, indexes, files);
      return rate;
    };

    // 1. claimFile/completeFile vs the same walk in hand-written SQL.
    const claimFilePool = await claimPool('claim-file');
    const sqlFilePool = await claimPool('sql-file');
    log(`  claimFile vs hand-written SKIP LOCKED per file, ${files} files…`);
    const perFile = await sideBySide({
      warmups: options.warmups,
      repeats: options.repeats,
      candidate: goRound('claimFile', claimFilePool, prepareLibrary),
      baseline: goRound('sql-file', sqlFilePool, prepareSql),
    });
    await claimFilePool.close();
    await sqlFilePool.close();

    // 2. The hand-written queue loop, for reference: no file list, no wasted attempts.
    const sqlQueuePool = await claimPool('sql-queue');
    const queueRates: number[] = [];
    for (let round = 0; round < options.warmups + options.repeats; round++) {
      const rate = await goRound('sql-queue', sqlQueuePool, prepareSql)();
      if (round >= options.warmups) queueRates.push(rate);
    }
    await sqlQueuePool.close();

    // 3. claimNext(10) + processFile vs graphile-worker with a local queue of 10.
    log('  graphile-worker: migrating…');
    await runMigrations({ connectionString: database.url, logger: undefined });
    const utils = await makeWorkerUtils({ connectionString: database.url });
    const claimNextPool = await claimPool('claim-next');
    log(`  starting ${workers} graphile-worker workers…`);
    const graphilePool = await workerPool('bench/workers/graphile-worker.ts', () => [database.url], workers, true);
    pools.push(graphilePool);
    const graphileRound = async () => {
      const marks = graphilePool.children.map((child) => child.lines.length);
      const specs = Array.from({ length: files }, (_, i) => ({ identifier: 'bench', payload: { i } }));
      // The round starts when the jobs are committed; the workers are listening already.
      await utils.addJobs(specs);
      const started = performance.now();
      const processed = () => graphilePool.children.reduce((sum, child, w) => sum + okIndexes(child.lines, marks[w]).length, 0);
      while (processed() < files) await new Promise((resolve) => setTimeout(resolve, 5));
      const rate = files / ((performance.now() - started) / 1000);
      checkExactlyOnce(
        'graphile-worker',
        graphilePool.children.flatMap((child, w) => okIndexes(child.lines, marks[w])),
        files,
      );
      return rate;
    };
    log(`  claimNext(10)+processFile vs graphile-worker, ${files} files…`);
    const queue = await sideBySide({
      warmups: options.warmups,
      repeats: options.repeats,
      candidate: goRound('claimNext', claimNextPool, prepareLibrary),
      baseline: graphileRound,
    });
    await graphilePool.close();
    await utils.release();

    // The same guarantee written by hand with TypeORM (claim 10, then a transaction per file holding
    // the fenced completion): what processFile's transaction costs by itself, beside graphile-worker's
    // completion, which is one autocommit statement not atomic with the job's own writes.
    const sqlNextPool = await claimPool('sql-next-tx');
    log(`  claimNext(10)+processFile vs the same by hand with TypeORM, ${files} files…`);
    const byHand = await sideBySide({
      warmups: options.warmups,
      repeats: options.repeats,
      candidate: goRound('claimNext', claimNextPool, prepareLibrary),
      baseline: goRound('sql-next-tx', sqlNextPool, prepareSql),
    });
    await claimNextPool.close();
    await sqlNextPool.close();

    // 4. pg-boss, batch 1 and 10, for reference.
    log('  pg-boss: migrating…');
    const boss = new PgBoss({ connectionString: database.url, supervise: false, schedule: false });
    boss.on('error', (error) => log(String(error)));
    await boss.start();
    await boss.createQueue('bench');
    const bossRates: Record<number, number[]> = {};
    for (const batch of [1, 10]) {
      log(`  starting ${workers} pg-boss workers (batch ${batch})…`);
      const pool = await workerPool('bench/workers/pg-boss-worker.ts', () => [database.url, String(batch)], workers, false);
      pools.push(pool);
      const prepareBoss = async () => {
        await boss.insert(Array.from({ length: files }, (_, i) => ({ name: 'bench', data: { i } })));
      };
      bossRates[batch] = [];
      // One timed round after the warm-up: a reference figure, and pg-boss 10 fetches slowly from a
      // large queue (≈ 110 jobs/s at 20,000), so more rounds would dominate the whole bench.
      for (let round = 0; round < options.warmups + 1; round++) {
        const rate = await goRound(`pg-boss batch ${batch}`, pool, prepareBoss)();
        if (round >= options.warmups) bossRates[batch].push(rate);
      }
      await pool.close();
    }
    await boss.stop({ graceful: false, wait: true });

    // checkExactlyOnce threw otherwise: every figure below is of rounds with 0 duplicates.
    const label = `${files.toLocaleString('en-US')} files, ${workers} workers, 0 duplicates [postgres]`;
    return [
      result(
        `claimFile+completeFile vs SQL SKIP LOCKED per file, ${label}`,
        perFile.candidate,
        'files/s',
        perFile.baseline,
        perFile.ratio,
        { min: 1 },
      ),
      result(`hand-written SKIP LOCKED queue loop (no file list), ${label}`, median(queueRates), 'files/s', null, null, null),
      // Reference only: this graphile-worker task writes nothing (the `workers` section has the fair baselines).
      result(
        `reference: claimNext(10)+processFile vs graphile-worker 0.17 (local queue 10) no-op task, ${label}`,
        queue.candidate,
        'files/s',
        queue.baseline,
        queue.ratio,
        null,
      ),
      result(
        `claimNext(10)+processFile vs hand-written claim 10 + a TypeORM transaction per file, ${label}`,
        byHand.candidate,
        'files/s',
        byHand.baseline,
        byHand.ratio,
        null,
      ),
      result(`pg-boss 10 fetch/complete batch 1, ${label}`, median(bossRates[1]), 'files/s', null, null, null),
      result(`pg-boss 10 fetch/complete batch 10, ${label}`, median(bossRates[10]), 'files/s', null, null, null),
    ];
  } finally {
    for (const pool of pools) for (const child of pool.children) child.process.kill('SIGKILL');
    await database.drop();
  }
}
