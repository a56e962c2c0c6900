import { expect } from 'chai';
import type { EventEmitter } from 'node:events';
import type { DataSource } from 'typeorm';
import { CheckpointManager, currentManager } from '../src';
import { count, createTestDatabase, DRIVER, sql, type TestDatabase } from './support/database';

// A worker slot's transactions, one file after another: on PostgreSQL one kept runner whose COMMIT
// travels with the fenced completion and the next file's BEGIN; elsewhere TypeORM's transactions.
// Either way each file is its own transaction, a lost claim keeps none of the handler's writes, and
// nothing is left open on a connection afterwards.

const STATS = { totalRows: 1, filteredRows: 0, persistedRows: 1 };

function files(prefix: string, n: number) {
  return Array.from({ length: n }, (_, i) => ({
    fileUrl: `s3://bucket/${prefix}/${String(i).padStart(4, '0')}.csv`,
    fileType: prefix,
    fileTimestamp: new Date(1_700_000_000_000 + i),
  }));
}

describe(`manager.work(): a slot's transactions one after another (${DRIVER})`, function () {
  let database: TestDatabase;
  let ds: DataSource;
  let insert: string;

  before(async () => {
    database = await createTestDatabase('claims_work_lane');
    ds = await database.open();
    await ds.query('CREATE TABLE lane_effects (file_url varchar(255) NOT NULL, claim_token bigint NOT NULL)');
    insert = sql('INSERT INTO lane_effects (file_url, claim_token) VALUES (?, ?)');
  });
  after(() => database.drop());

  const effects = (fileUrl: string) => count(ds, sql('SELECT COUNT(*) FROM lane_effects WHERE file_url = ?'), [fileUrl]);

  it('a completion refused with CLAIM_LOST rolls the handler\'s writes back; the next file runs in a clean transaction of its own', async () => {
    const manager = new CheckpointManager(ds, { leaseMs: 60_000 });
    const queue = files('lost-one', 3);
    await manager.register(queue);
    const seen: { active: boolean; current: boolean }[] = [];
    const worker = manager.work(
      async (file, tx) => {
        await tx!.query(insert, [file.fileUrl, file.claimToken]);
        if (file.fileUrl === queue[1].fileUrl) {
          // Another party fences this claim off while the handler runs (as a takeover would).
          await ds.query(sql("UPDATE file_checkpoints SET claim_token = claim_token + 1 WHERE file_url = ? AND status = 'processing'"), [file.fileUrl]);
        }
        // TypeORM sees a transaction, the async context binds it, and a nested transaction is a savepoint of it.
        await tx!.transaction((inner) => inner.query(insert, [`${file.fileUrl}#nested`, file.claimToken]));
        seen.push({ active: tx!.queryRunner!.isTransactionActive, current: currentManager(ds) === tx });
        return STATS;
      },
      { fileType: 'lost-one', batchSize: 3, drain: true },
    );
    expect(await worker.done).to.include({ processed: 2, failed: 0, claimLost: 1 });
    expect(seen).to.deep.equal([0, 1, 2].map(() => ({ active: true, current: true })));
    for (const [i, file] of queue.entries()) {
      expect(await effects(file.fileUrl)).to.equal(i === 1 ? 0 : 1);
      expect(await effects(`${file.fileUrl}#nested`)).to.equal(i === 1 ? 0 : 1);
    }
    expect(await manager.get(queue[1].fileUrl)).to.include({ status: 'processing' });
    expect(await manager.get(queue[2].fileUrl)).to.include({ status: 'completed' });
  });

  it('each file commits on its own: a failing file between two others keeps theirs and loses only its own', async () => {
    const manager = new CheckpointManager(ds, { maxRetries: 0 });
    const queue = files('one-each', 5);
    await manager.register(queue);
    const worker = manager.work(
      async (file, tx) => {
        await tx!.query(insert, [file.fileUrl, file.claimToken]);
        if (file.fileUrl === queue[2].fileUrl) throw new Error('bad file');
        return STATS;
      },
      { fileType: 'one-each', batchSize: 5, drain: true },
    );
    expect(await worker.done).to.include({ processed: 4, failed: 1, claimLost: 0 });
    for (const [i, file] of queue.entries()) expect(await effects(file.fileUrl)).to.equal(i === 2 ? 0 : 1);
    expect(await manager.get(queue[2].fileUrl)).to.include({ status: 'failed', errorMessage: 'bad file' });
  });

  if (DRIVER === 'postgres') {
    it('each file is a transaction of its own, and no connection is left inside one once the worker stops', async () => {
      const manager = new CheckpointManager(ds);
      const queue = files('own-xact', 6);
      await manager.register(queue);
      const xacts: string[] = [];
      const worker = manager.work(
        async (file, tx) => {
          await tx!.query(insert, [file.fileUrl, file.claimToken]);
          xacts.push(((await tx!.query('SELECT txid_current()::text AS xact')) as { xact: string }[])[0].xact);
          return STATS;
        },
        { fileType: 'own-xact', batchSize: 4, concurrency: 2, drain: true },
      );
      expect(await worker.done).to.include({ processed: 6 });
      expect(new Set(xacts).size).to.equal(6);
      const open = await count(
        ds,
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
      );
      expect(open).to.equal(0);
    });

    it('files that follow one another cost two round trips each: the handler\'s statement, and completion + COMMIT + next BEGIN', async () => {
      const counted = await database.open();
      try {
        // Every statement or pipeline sent on a pooled connection of this DataSource (the listening
        // connection is a client of its own).
        let sent = 0;
        const pool = (counted.driver as unknown as { master: EventEmitter }).master;
        pool.on('connect', (client: { query: (...args: unknown[]) => unknown }) => {
          const query = client.query;
          client.query = function (this: unknown, ...args: unknown[]) {
            sent += 1;
            return query.apply(this, args);
          };
        });
        const manager = new CheckpointManager(counted);
        const queue = files('round-trips', 40);
        await manager.register(queue);
        sent = 0;
        const worker = manager.work(
          async (file, tx) => {
            await tx!.query(insert, [file.fileUrl, file.claimToken]);
            return STATS;
          },
          { fileType: 'round-trips', batchSize: 10, drain: true },
        );
        expect(await worker.done).to.include({ processed: 40 });
        // 2 a file, plus per batch a claim and at most a BEGIN and a ROLLBACK; TypeORM's own
        // transactions would take 4 a file (BEGIN, the handler's insert, the completion, COMMIT).
        expect(sent).to.be.at.most(2 * 40 + 5 * 3 + 1);
        for (const file of queue) expect(await effects(file.fileUrl)).to.equal(1);
      } finally {
        await counted.destroy();
      }
    });
  }
});
