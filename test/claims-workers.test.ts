import { expect } from 'chai';
import type { DataSource } from 'typeorm';
import { CheckpointError, CheckpointManager, type FileCheckpoint } from '../src';
import { type Child, kill, startChild } from './support/child';
import { count, createTestDatabase, DRIVER, sql, type TestDatabase } from './support/database';

const WORKER = 'test/fixtures/claims-worker.ts';
const STALL = 'test/fixtures/claims-stall.ts';
// The full-size race runs on PostgreSQL and MySQL/MariaDB; SQLite (one writer at a time) gets a smaller one.
const WORKERS = DRIVER === 'sqlite' ? 4 : 16;
const FILES = DRIVER === 'sqlite' ? 200 : 1000;
const RACE_FILES = DRIVER === 'sqlite' ? 20 : 50;

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls the file's row until its lease has expired by the caller's clock (the clock leases use). */
async function untilLeaseExpired(manager: CheckpointManager, fileUrl: string): Promise<FileCheckpoint> {
  for (;;) {
    const row = await manager.get(fileUrl);
    if (!row?.leaseExpiresAt) throw new Error(`${fileUrl} has no lease`);
    if (row.leaseExpiresAt.getTime() < Date.now()) return row;
    await pause(10);
  }
}

interface WorkerResult {
  workerId: string;
  raced: string[];
  drained: [string, number][];
}

describe(`file claims across worker processes (${DRIVER})`, function () {
  let database: TestDatabase;
  let ds: DataSource;

  before(async () => {
    database = await createTestDatabase('claims_workers');
    ds = await database.open();
    await ds.query(
      'CREATE TABLE claim_effects (file_url varchar(768) NOT NULL, worker varchar(255) NOT NULL, claim_token bigint NOT NULL)',
    );
    await ds.query('CREATE TABLE claim_gate (opened integer NOT NULL)');
  });
  after(() => database.drop());
  beforeEach(() => ds.query('DELETE FROM claim_effects'));

  it(`${WORKERS} workers × ${FILES} registered files: every file completed exactly once, never held by two workers`, async () => {
    const parent = new CheckpointManager(ds);
    const files = Array.from({ length: FILES }, (_, i) => ({
      fileUrl: `s3://bucket/queue/${String(i).padStart(5, '0')}.csv`,
      fileType: 'queue',
      fileTimestamp: new Date(1_700_000_000_000 + i),
    }));
    expect(await parent.register(files)).to.equal(FILES);
    expect(await parent.register(files)).to.equal(0);

    const children: Child[] = [];
    try {
      for (let w = 0; w < WORKERS; w++) children.push(startChild(WORKER, [database.url, `w${w}`, String(RACE_FILES)]));
      // Every worker polls for the gate row once it is ready: inserting it releases them together.
      await Promise.all(children.map((child) => child.waitForLine((line) => line === 'waiting')));
      await ds.query('INSERT INTO claim_gate (opened) VALUES (1)');
      const lines = await Promise.all(children.map((child) => child.waitForLine((line) => line.startsWith('result '))));
      const results = lines.map((line) => JSON.parse(line.slice('result '.length)) as WorkerResult);

      // claimFile race: each shared file was won by exactly one worker.
      const raced = results.flatMap((r) => r.raced);
      expect(raced).to.have.length(RACE_FILES);
      expect(new Set(raced).size).to.equal(RACE_FILES);

      // claimNext: no file was ever handed to two workers, each claimed once (token 1).
      const drained = results.flatMap((r) => r.drained);
      expect(drained).to.have.length(FILES);
      expect(new Set(drained.map(([url]) => url)).size).to.equal(FILES);
      expect(drained.every(([, token]) => token === 1)).to.equal(true);
      // On SQLite the write lock serialises workers, so one may legitimately drain the whole queue.
      if (DRIVER !== 'sqlite') expect(results.filter((r) => r.drained.length > 0).length).to.be.greaterThan(1);

      // The side effects committed with the completions: one per file, by the worker that held it.
      expect(await count(ds, 'SELECT COUNT(*) FROM claim_effects')).to.equal(FILES);
      expect(await count(ds, 'SELECT COUNT(DISTINCT file_url) FROM claim_effects')).to.equal(FILES);
      const owners = new Map(results.flatMap((r) => r.drained.map(([url]) => [url, r.workerId] as const)));
      const effects = (await ds.query('SELECT file_url, worker, claim_token FROM claim_effects')) as {
        file_url: string;
        worker: string;
        claim_token: number | string;
      }[];
      for (const effect of effects) {
        expect(effect.worker).to.equal(owners.get(effect.file_url));
        expect(Number(effect.claim_token)).to.equal(1);
      }

      expect(await parent.summary()).to.deep.equal({
        pending: 0,
        processing: 0,
        completed: FILES + RACE_FILES,
        failed: 0,
        cancelled: 0,
        deadLetters: 0,
        recordsTotal: 3 * FILES + RACE_FILES,
        recordsFiltered: FILES,
        recordsPersisted: 2 * FILES + RACE_FILES,
        processingTimeMs: FILES,
        pausedTypes: [],
      });
      for (const child of children) expect((await child.exited).code).to.equal(0);
    } finally {
      for (const child of children) await kill(child);
    }
  });

  it('a worker killed with SIGKILL after claiming: once its lease expires another worker takes the file over', async () => {
    const fileUrl = 'https://files.example/killed-after-claim.json';
    const child = startChild(STALL, ['claim', database.url, fileUrl, '300']);
    try {
      expect(await child.waitForLine((line) => line.startsWith('claimed '))).to.equal('claimed 1');
    } finally {
      await kill(child);
    }
    const other = new CheckpointManager(ds, { workerId: 'rescuer' });
    expect(await other.claimFile(fileUrl, 'stall', new Date(0))).to.equal(false);
    const expired = await untilLeaseExpired(other, fileUrl);
    expect(expired).to.include({ status: 'processing', retryCount: 0, claimToken: 1 });

    expect(await other.claimFile(fileUrl, 'stall', new Date(0))).to.equal(true);
    expect(await other.get(fileUrl)).to.include({ status: 'processing', retryCount: 1, claimToken: 2, processedBy: 'rescuer' });
    await other.completeFile(fileUrl, { totalRows: 4, filteredRows: 0, persistedRows: 4, durationMs: 2 });
    expect(await other.get(fileUrl)).to.include({ status: 'completed', recordsTotal: 4, retryCount: 1 });
    expect(await other.isProcessed(fileUrl)).to.equal(true);
  });

  it('SIGKILL inside the processFile handler leaves neither its writes nor a completion', async () => {
    const fileUrl = 'https://files.example/killed-in-handler.json';
    const child = startChild(STALL, ['handler', database.url, fileUrl, '300']);
    try {
      await child.waitForLine((line) => line === 'in handler');
    } finally {
      await kill(child);
    }
    const other = new CheckpointManager(ds, { workerId: 'rescuer' });
    expect(await count(ds, sql('SELECT COUNT(*) FROM claim_effects WHERE file_url = ?'), [fileUrl])).to.equal(0);
    expect(await other.get(fileUrl)).to.include({ status: 'processing', claimToken: 1, recordsTotal: 0, completedAt: null });
    expect(await other.isProcessed(fileUrl)).to.equal(false);

    await untilLeaseExpired(other, fileUrl);
    const result = await other.processFile(fileUrl, 'stall', new Date(0), async (tx) => {
      await tx!.query(sql('INSERT INTO claim_effects (file_url, worker, claim_token) VALUES (?, ?, ?)'), [fileUrl, 'rescuer', 2]);
      return { totalRows: 1, filteredRows: 0, persistedRows: 1, durationMs: 0 };
    });
    expect(result.claimed).to.equal(true);
    expect(await count(ds, sql('SELECT COUNT(*) FROM claim_effects WHERE file_url = ?'), [fileUrl])).to.equal(1);
    expect(await other.get(fileUrl)).to.include({ status: 'completed', retryCount: 1, claimToken: 2 });
  });

  it('a stalled worker process loses its claim: its later writes are fenced off', async () => {
    const fileUrl = 'https://files.example/stalled.json';
    const stalled = new CheckpointManager(ds, { workerId: 'stalled', leaseMs: 200 });
    expect(await stalled.claimFile(fileUrl, 'stall', new Date(0))).to.equal(true);
    const other = new CheckpointManager(ds, { workerId: 'other' });
    await untilLeaseExpired(other, fileUrl);
    expect(await other.claimFile(fileUrl, 'stall', new Date(0))).to.equal(true);
    const before = await other.get(fileUrl);
    const lost = await stalled.completeFile(fileUrl, { totalRows: 1, filteredRows: 1, persistedRows: 1, durationMs: 1 }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(lost).to.be.instanceOf(CheckpointError);
    expect((lost as CheckpointError).code).to.equal('CLAIM_LOST');
    expect(await other.get(fileUrl)).to.deep.equal(before);
  });
});
