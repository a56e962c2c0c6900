// One claims worker process. Modes:
//   claim-file  CheckpointManager.claimFile + completeFile over the files announced to this worker
//   sql-file    the same walk with a hand-written per-file FOR UPDATE SKIP LOCKED claim + fenced complete
//   sql-queue   a hand-written queue loop: claim the next pending file FOR UPDATE SKIP LOCKED, complete it
//   claim-next  CheckpointManager.claimNext(10) + processFile
//   sql-next-tx the same by hand with TypeORM: claim 10 (SKIP LOCKED) in one statement, then per file a
//               transaction holding the fenced completion (where the file's own writes would go)
// Each "go" line runs one round over the prepared queue and ends with "done"; "exit" ends the process.
import 'reflect-metadata';
import { DataSource, type EntityManager } from 'typeorm';
import { CheckpointManager, checkpointEntities, dataSourceOptionsFromUrl } from '../../src';
import { commands, emit, FILE_TIMESTAMP, FILE_TYPE, fileUrl, flush, processStats } from './worker-protocol';

const [mode, url, filesArg, workerArg, workersArg] = process.argv.slice(2);
const files = Number(filesArg);
const worker = Number(workerArg);
const workers = Number(workersArg);
const workerId = `bench-${mode}-${worker}-${process.pid}`;
const LEASE_MS = 5 * 60 * 1000;

/**
 * The files announced to this worker: every file is announced to two workers (i mod W and
 * i + 1 mod W), as at-least-once delivery would, and both reach it at about the same time, so
 * the claim decides which one processes it.
 */
function* walk(): Generator<number> {
  for (let i = 0; i < files; i++) if (i % workers === worker || (i + 1) % workers === worker) yield i;
}

const indexOf = (url: string) => Number(url.slice(-10, -4));

async function claimFileRound(manager: CheckpointManager): Promise<void> {
  for (const i of walk()) {
    if (!(await manager.claimFile(fileUrl(i), FILE_TYPE, FILE_TIMESTAMP))) continue;
    await manager.completeFile(fileUrl(i), processStats(i));
    emit(`ok ${i}`);
  }
}

async function claimNextRound(manager: CheckpointManager): Promise<void> {
  for (;;) {
    const claimed = await manager.claimNext(10);
    if (claimed.length === 0) return;
    for (const file of claimed) {
      const i = indexOf(file.fileUrl);
      const outcome = await manager.processFile(file.fileUrl, file.fileType, file.fileTimestamp, () => processStats(i));
      if (outcome.claimed) emit(`ok ${i}`);
    }
  }
}

// Hand-written, with leases (lease_expires_at) and fencing (claim_token) as the library has them.
const CLAIM_ONE = `UPDATE bench_claims SET status = 'processing', claim_token = claim_token + 1, processed_by = $2,
    started_at = $3, lease_expires_at = $4
  WHERE file_url = (SELECT file_url FROM bench_claims WHERE file_url = $1
    AND (status = 'pending' OR (status = 'processing' AND lease_expires_at <= $3)) FOR UPDATE SKIP LOCKED)
  RETURNING claim_token`;
const CLAIM_NEXT = `UPDATE bench_claims SET status = 'processing', claim_token = claim_token + 1, processed_by = $1,
    started_at = $2, lease_expires_at = $3
  WHERE file_url = (SELECT file_url FROM bench_claims WHERE status = 'pending' LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING file_url, claim_token`;
const COMPLETE = `UPDATE bench_claims SET status = 'completed', records_total = $3, records_filtered = $4,
    records_persisted = $5, processing_time_ms = $6, completed_at = $7, lease_expires_at = NULL
  WHERE file_url = $1 AND claim_token = $2 AND status = 'processing'`;

async function complete(dataSource: DataSource | EntityManager, url: string, token: unknown, i: number): Promise<void> {
  const stats = processStats(i);
  const [, affected] = (await dataSource.query(COMPLETE, [
    url,
    token,
    stats.totalRows,
    stats.filteredRows,
    stats.persistedRows,
    stats.durationMs,
    Date.now(),
  ])) as [unknown, number];
  if (affected !== 1) throw new Error(`claim of ${url} lost`);
}

async function sqlFileRound(dataSource: DataSource): Promise<void> {
  for (const i of walk()) {
    const now = Date.now();
    const [rows] = (await dataSource.query(CLAIM_ONE, [fileUrl(i), workerId, now, now + LEASE_MS])) as [{ claim_token: string }[], number];
    if (rows.length === 0) continue;
    await complete(dataSource, fileUrl(i), rows[0].claim_token, i);
    emit(`ok ${i}`);
  }
}

async function sqlQueueRound(dataSource: DataSource): Promise<void> {
  for (;;) {
    const now = Date.now();
    const [rows] = (await dataSource.query(CLAIM_NEXT, [workerId, now, now + LEASE_MS])) as [
      { file_url: string; claim_token: string }[],
      number,
    ];
    if (rows.length === 0) return;
    const i = indexOf(rows[0].file_url);
    await complete(dataSource, rows[0].file_url, rows[0].claim_token, i);
    emit(`ok ${i}`);
  }
}

const CLAIM_TEN = `UPDATE bench_claims f SET status = 'processing', claim_token = f.claim_token + 1, processed_by = $1,
    started_at = $2, lease_expires_at = $3
  FROM (SELECT file_url FROM bench_claims WHERE status = 'pending' ORDER BY created_at, file_url LIMIT 10 FOR UPDATE SKIP LOCKED) picked
  WHERE f.file_url = picked.file_url RETURNING f.file_url, f.claim_token`;

async function sqlNextTxRound(dataSource: DataSource): Promise<void> {
  for (;;) {
    const now = Date.now();
    const [rows] = (await dataSource.query(CLAIM_TEN, [workerId, now, now + LEASE_MS])) as [
      { file_url: string; claim_token: string }[],
      number,
    ];
    if (rows.length === 0) return;
    for (const row of rows) {
      const i = indexOf(row.file_url);
      await dataSource.transaction((tx) => complete(tx, row.file_url, row.claim_token, i));
      emit(`ok ${i}`);
    }
  }
}

async function main(): Promise<void> {
  const dataSource = new DataSource({ ...dataSourceOptionsFromUrl(url), entities: checkpointEntities });
  await dataSource.initialize();
  const manager = new CheckpointManager(dataSource, { workerId, leaseMs: LEASE_MS });
  emit('ready');
  flush();
  for await (const command of commands()) {
    if (command === 'exit') break;
    if (mode === 'claim-file') await claimFileRound(manager);
    else if (mode === 'claim-next') await claimNextRound(manager);
    else if (mode === 'sql-file') await sqlFileRound(dataSource);
    else if (mode === 'sql-queue') await sqlQueueRound(dataSource);
    else if (mode === 'sql-next-tx') await sqlNextTxRound(dataSource);
    else throw new Error(`unknown mode ${mode}`);
    emit('done');
    flush();
  }
  await dataSource.destroy();
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
