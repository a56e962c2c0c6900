import { expect } from 'chai';
import type { DataSource, QueryRunner } from 'typeorm';
import { CheckpointError, CheckpointManager } from '../src';
import { FileCheckpoints1764547200000 } from '../migrations/1764547200000-FileCheckpoints';
import { LongFileUrls1764720000000 } from '../migrations/1764720000000-LongFileUrls';
import { DashboardIndexes1764892800000 } from '../migrations/1764892800000-DashboardIndexes';
import { ClaimOrderIndex1765152000000 } from '../migrations/1765152000000-ClaimOrderIndex';
import { CheaperFileUpdates1765238400000 } from '../migrations/1765238400000-CheaperFileUpdates';
import { DashboardScale1765497600000 } from '../migrations/1765497600000-DashboardScale';
import { count, createTestDatabase, DRIVER, sql, type TestDatabase } from './support/database';

const FUNCTIONS = [
  ['claim_file(text,text,timestamp with time zone,text)', 'boolean'],
  ['claim_file_token(text,text,timestamp with time zone,text)', 'bigint'],
  ['complete_file(text,bigint,integer,integer,integer,integer)', 'boolean'],
  ['complete_file(text,integer,integer,integer,integer)', 'boolean'],
  ['fail_file(text,bigint,text)', 'boolean'],
  ['heartbeat_file(text,bigint,integer)', 'boolean'],
];

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Schema changes TypeORM would make to match the FileCheckpoint entity (schema:log). */
async function fileCheckpointDiff(ds: DataSource): Promise<string[]> {
  const log = await ds.driver.createSchemaBuilder().log();
  return log.upQueries.map((query) => query.query).filter((query) => query.includes('file_checkpoints'));
}

async function claimFunctions(ds: DataSource): Promise<string[][]> {
  const rows = (await ds.query(
    `SELECT p.oid::regprocedure::text AS signature, pg_get_function_result(p.oid) AS result FROM pg_proc p
      WHERE p.proname IN ('claim_file', 'claim_file_token', 'complete_file', 'fail_file', 'heartbeat_file')
      ORDER BY 1`,
  )) as { signature: string; result: string }[];
  return rows.map((row) => [row.signature, row.result]);
}

describe(`file_checkpoints migration (${DRIVER})`, function () {
  let database: TestDatabase;
  let ds: DataSource;

  before(async () => {
    database = await createTestDatabase('claims_migration');
    ds = await database.open();
  });
  after(() => database.drop());

  it('leaves nothing for schema:log to change against the FileCheckpoint entity', async () => {
    expect(await fileCheckpointDiff(ds)).to.deep.equal([]);
  });

  it('is safe to run twice, and down() removes the table (and the SQL functions) again', async () => {
    // The file_checkpoints migrations in order: the table, then its upgrade to long URLs.
    const created = new FileCheckpoints1764547200000();
    const upgraded = new LongFileUrls1764720000000();
    // The later migrations that index file_checkpoints (the dashboard's, the claim order) run after these two.
    const indexed = new DashboardIndexes1764892800000();
    const ordered = new ClaimOrderIndex1765152000000();
    const cheaper = new CheaperFileUpdates1765238400000();
    const scaled = new DashboardScale1765497600000();
    const migration = {
      up: async (runner: QueryRunner) => {
        await created.up(runner);
        await upgraded.up(runner);
        await indexed.up(runner);
        await ordered.up(runner);
        await cheaper.up(runner);
        await scaled.up(runner);
      },
      down: async (runner: QueryRunner) => {
        await scaled.down(runner);
        await cheaper.down(runner);
        await ordered.down(runner);
        await indexed.down(runner);
        await upgraded.down(runner);
        await created.down(runner);
      },
    };
    const runner = ds.createQueryRunner();
    try {
      await new CheckpointManager(ds).register([{ fileUrl: 'kept.csv', fileType: 't', fileTimestamp: new Date(5) }]);
      await migration.up(runner);
      await migration.up(runner);
      expect(await new CheckpointManager(ds).get('kept.csv')).to.include({ status: 'pending' });
      expect(await fileCheckpointDiff(ds)).to.deep.equal([]);

      await migration.down(runner);
      expect(await runner.hasTable('file_checkpoints')).to.equal(false);
      if (DRIVER === 'postgres') expect(await claimFunctions(ds)).to.deep.equal([]);
      await migration.down(runner);

      await migration.up(runner);
      expect(await runner.hasTable('file_checkpoints')).to.equal(true);
      expect(await fileCheckpointDiff(ds)).to.deep.equal([]);
      if (DRIVER === 'postgres') expect(await claimFunctions(ds)).to.deep.equal(FUNCTIONS);
    } finally {
      await runner.release();
    }
  });

  it('upgrades an existing table to long URLs, rows kept, and back', async () => {
    const upgraded = new LongFileUrls1764720000000();
    const runner = ds.createQueryRunner();
    const manager = new CheckpointManager(ds);
    try {
      // Migrations revert latest first: the ones after it, then it.
      await new DashboardScale1765497600000().down(runner);
      await new CheaperFileUpdates1765238400000().down(runner);
      await upgraded.down(runner);
      expect((await runner.getTable('file_checkpoints'))!.findColumnByName('url_hash')).to.equal(undefined);
      await ds.query(
        sql(
          "INSERT INTO file_checkpoints (file_url, file_type, file_timestamp, status, created_at) VALUES (?, 't', 5, 'pending', 1), (?, 't', 6, 'failed', 2)",
        ),
        ['old/é.csv', 'old/failed.csv'],
      );
      await upgraded.up(runner);
      await upgraded.up(runner);
      // The migrations after it, as migration:run would.
      await new DashboardIndexes1764892800000().up(runner);
      await new ClaimOrderIndex1765152000000().up(runner);
      await new CheaperFileUpdates1765238400000().up(runner);
      await new DashboardScale1765497600000().up(runner);
      expect(await fileCheckpointDiff(ds)).to.deep.equal([]);
      if (DRIVER === 'postgres') {
        // The URL search's table is filled from the rows already there.
        const urls = (await ds.query("SELECT file_url FROM file_checkpoint_urls WHERE file_url LIKE 'old/%'")) as { file_url: string }[];
        expect(urls.map((row) => row.file_url).sort()).to.deep.equal(['old/failed.csv', 'old/é.csv']);
      }
      const kept = (await manager.get('old/é.csv'))!;
      expect(kept).to.include({ status: 'pending', fileType: 't' });
      expect(kept.createdAt.getTime()).to.equal(1);
      expect(await manager.requeue('old/failed.csv')).to.equal(true);
      expect((await manager.claimNext(10, { fileType: 't' })).map((f) => f.fileUrl)).to.deep.equal(['old/é.csv', 'old/failed.csv']);
      for (const url of ['old/é.csv', 'old/failed.csv'])
        await manager.completeFile(url, { totalRows: 1, filteredRows: 0, persistedRows: 1, durationMs: 0 });
      expect(await manager.isProcessed('old/é.csv')).to.equal(true);
      await ds.query(sql('DELETE FROM file_checkpoints WHERE file_type = ?'), ['t']);
    } finally {
      await runner.release();
    }
    // The SQL functions on PostgreSQL are the upgraded ones again.
    if (DRIVER === 'postgres') expect(await claimFunctions(ds)).to.deep.equal(FUNCTIONS);
  });

  it('URLs of 2,048 and 4,096 characters, multibyte ones too, are files like any other', async () => {
    const manager = new CheckpointManager(ds, { maxRetries: 0 });
    const long = [`s3://bucket/${'k'.repeat(2036)}`, `s3://bucket/${'日本語'.repeat(1361)}`, `s3://${'🚀'.repeat(2043)}`, 'x'.repeat(4096)];
    // Two URLs that differ only in their last character stay two files.
    long.push(`${long[1].slice(0, -1)}x`);
    expect(await manager.register(long.map((fileUrl) => ({ fileUrl, fileType: 'long-url', fileTimestamp: new Date(3) })))).to.equal(
      long.length,
    );
    const claimed = await manager.claimNext(10, { fileType: 'long-url' });
    expect(claimed.map((f) => f.fileUrl).sort()).to.deep.equal([...long].sort());
    await manager.heartbeat(long[1]);
    await manager.failFile(long[2], 'bad');
    expect(await manager.requeue(long[2])).to.equal(true);
    expect(await manager.claimFile(long[2], 'long-url', new Date(3))).to.equal(true);
    for (const url of long) await manager.completeFile(url, { totalRows: 2, filteredRows: 0, persistedRows: 2, durationMs: 1 });
    for (const url of long) expect(await manager.get(url)).to.include({ fileUrl: url, status: 'completed', recordsTotal: 2 });
    expect(await manager.get(`${long[1].slice(0, -1)}y`)).to.equal(null);
    const work = [
      `s3://work/${'k'.repeat(2040)}`,
      `s3://work/${'日本語'.repeat(1360)}`,
      `s3://work/${'🚀'.repeat(2000)}`,
      `s3://work/${'ü'.repeat(4000)}`,
    ];
    await manager.register(work.map((fileUrl) => ({ fileUrl, fileType: 'long-url-work', fileTimestamp: new Date(3) })));
    const worker = manager.work(() => ({ totalRows: 1, filteredRows: 0, persistedRows: 1 }), {
      fileType: 'long-url-work',
      drain: true,
      commitEvery: 3,
    });
    expect((await worker.done).processed).to.equal(work.length);
    expect(
      await count(ds, sql("SELECT COUNT(*) FROM file_checkpoints WHERE file_type = 'long-url-work' AND status = 'completed'")),
    ).to.equal(work.length);
  });

  if (DRIVER === 'postgres') {
    it('the SQL functions take long multibyte URLs', async () => {
      const url = `s3://functions/${'日本語'.repeat(1300)}`;
      expect(await ds.query('SELECT claim_file_token($1, $2, $3, $4) AS token', [url, 'fn-long', new Date(0), 'py'])).to.deep.equal([
        { token: '1' },
      ]);
      expect(await ds.query('SELECT complete_file($1, 1::bigint, 1, 0, 1, 2) AS done', [url])).to.deep.equal([{ done: true }]);
      expect(await new CheckpointManager(ds).get(url)).to.include({ status: 'completed', processingTimeMs: 2 });
    });

    describe('SQL functions for workers in other languages', function () {
      const scalar = async (text: string, parameters: unknown[]): Promise<unknown> =>
        Object.values(((await ds.query(text, parameters)) as Record<string, unknown>[])[0])[0];
      const untilLeaseExpired = async (fileUrl: string): Promise<void> => {
        while (
          (await count(ds, 'SELECT COUNT(*) FROM file_checkpoints WHERE file_url = $1 AND lease_expires_at >= $2', [fileUrl, Date.now()])) >
          0
        ) {
          await pause(10);
        }
      };

      it('exist with the seed signatures plus the fenced variants', async () => {
        expect(await claimFunctions(ds)).to.deep.equal(FUNCTIONS);
      });

      it('claim_file / complete_file (unfenced) make rows the manager reads like its own', async () => {
        const manager = new CheckpointManager(ds, { workerId: 'ts-worker' });
        const ts = new Date(1_700_000_000_456);
        expect(await scalar('SELECT claim_file($1, $2, $3, $4)', ['fn/one.csv', 'events', ts, 'py-worker'])).to.equal(true);
        expect(await scalar('SELECT claim_file($1, $2, $3, $4)', ['fn/one.csv', 'events', ts, 'go-worker'])).to.equal(false);
        const row = (await manager.get('fn/one.csv'))!;
        expect(row).to.include({
          fileType: 'events',
          status: 'processing',
          processedBy: 'py-worker',
          claimToken: 1,
          retryCount: 0,
          maxRetries: 3,
          errorMessage: null,
        });
        expect(row.fileTimestamp.getTime()).to.equal(ts.getTime());
        expect(row.leaseExpiresAt!.getTime() - row.startedAt!.getTime()).to.equal(5 * 60 * 1000);
        expect(await manager.claimFile('fn/one.csv', 'events', ts)).to.equal(false);

        expect(await scalar('SELECT complete_file($1, $2, $3, $4, $5)', ['fn/one.csv', 9, 2, 7, 40])).to.equal(true);
        expect(await manager.get('fn/one.csv')).to.include({
          status: 'completed',
          recordsTotal: 9,
          recordsFiltered: 2,
          recordsPersisted: 7,
          processingTimeMs: 40,
          leaseExpiresAt: null,
        });
        expect(await manager.isProcessed('fn/one.csv')).to.equal(true);
        expect(await scalar('SELECT complete_file($1, $2, $3, $4, $5)', ['fn/one.csv', 1, 1, 1, 1])).to.equal(false);
        expect(await scalar('SELECT claim_file($1, $2, $3, $4)', ['fn/one.csv', 'events', ts, 'py-worker'])).to.equal(false);
      });

      it('claim_file_token takes over a lease the manager let expire; the manager is fenced off, the token completes', async () => {
        const manager = new CheckpointManager(ds, { workerId: 'ts-worker', leaseMs: 150 });
        expect(await manager.claimFile('fn/two.csv', 'events', new Date(0))).to.equal(true);
        expect(await scalar('SELECT claim_file_token($1, $2, $3, $4)', ['fn/two.csv', 'events', new Date(0), 'py-worker'])).to.equal(null);
        await untilLeaseExpired('fn/two.csv');
        const token = Number(await scalar('SELECT claim_file_token($1, $2, $3, $4)', ['fn/two.csv', 'events', new Date(0), 'py-worker']));
        expect(token).to.equal(2);
        const before = await manager.get('fn/two.csv');
        expect(before).to.include({ status: 'processing', retryCount: 1, claimToken: 2, processedBy: 'py-worker' });

        const lost = await manager
          .completeFile('fn/two.csv', { totalRows: 1, filteredRows: 0, persistedRows: 1, durationMs: 1 })
          .catch((e: unknown) => e);
        expect(lost).to.be.instanceOf(CheckpointError);
        expect((lost as CheckpointError).code).to.equal('CLAIM_LOST');
        expect(await manager.get('fn/two.csv')).to.deep.equal(before);

        expect(await scalar('SELECT heartbeat_file($1, $2, $3)', ['fn/two.csv', 1, 600_000])).to.equal(false);
        expect(await scalar('SELECT heartbeat_file($1, $2, $3)', ['fn/two.csv', token, 600_000])).to.equal(true);
        expect((await manager.get('fn/two.csv'))!.leaseExpiresAt!.getTime()).to.be.greaterThan(before!.leaseExpiresAt!.getTime());
        expect(await scalar('SELECT complete_file($1, $2, $3, $4, $5, $6)', ['fn/two.csv', 1, 3, 0, 3, 12])).to.equal(false);
        expect(await scalar('SELECT complete_file($1, $2, $3, $4, $5, $6)', ['fn/two.csv', token, 3, 0, 3, 12])).to.equal(true);
        expect(await manager.get('fn/two.csv')).to.include({ status: 'completed', recordsTotal: 3, processingTimeMs: 12, retryCount: 1 });
      });

      it('follow the row’s retry limit and dead-letter rules, and the manager picks up what they fail', async () => {
        const manager = new CheckpointManager(ds, { workerId: 'ts-worker', maxRetries: 1, leaseMs: 150 });
        expect(await manager.register([{ fileUrl: 'fn/three.csv', fileType: 'fn', fileTimestamp: new Date(0) }])).to.equal(1);
        const token = Number(await scalar('SELECT claim_file_token($1, $2, $3, $4)', ['fn/three.csv', 'fn', new Date(0), 'py-worker']));
        expect(token).to.equal(1);
        expect(await manager.get('fn/three.csv')).to.include({ status: 'processing', retryCount: 0, maxRetries: 1 });
        expect(await scalar('SELECT fail_file($1, $2, $3)', ['fn/three.csv', token, 'bad header'])).to.equal(true);
        expect(await manager.get('fn/three.csv')).to.include({ status: 'failed', errorMessage: 'bad header' });

        const [retried] = await manager.claimNext(5, { fileType: 'fn' });
        expect(retried).to.include({ fileUrl: 'fn/three.csv', retryCount: 1, claimToken: 2, processedBy: 'ts-worker' });
        // The last attempt's lease expires: the function turns the row into a dead letter.
        await untilLeaseExpired('fn/three.csv');
        expect(await scalar('SELECT claim_file($1, $2, $3, $4)', ['fn/three.csv', 'fn', new Date(0), 'py-worker'])).to.equal(false);
        expect(await manager.get('fn/three.csv')).to.include({ status: 'failed', errorMessage: 'lease expired', retryCount: 1 });
        expect((await manager.deadLetters()).map((r) => r.fileUrl)).to.include('fn/three.csv');
        expect(await manager.requeue('fn/three.csv')).to.equal(true);
        expect(await scalar('SELECT claim_file($1, $2, $3, $4)', ['fn/three.csv', 'fn', new Date(0), 'py-worker'])).to.equal(true);
        expect(
          await count(ds, sql("SELECT COUNT(*) FROM file_checkpoints WHERE file_url = ? AND status = 'processing'"), ['fn/three.csv']),
        ).to.equal(1);
      });
    });
  }
});
