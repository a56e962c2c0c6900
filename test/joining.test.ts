import { expect } from 'chai';
import type { EntityManager } from 'typeorm';
import { currentManager, eachBatch, runInTransaction, type Source, status } from '../src';
import { count, sql, useTestDatabase } from './support/database';
import { SqlLog } from './support/sql-log';

const numbers =
  (n: number): Source<number> =>
  (cursor, limit) => {
    const from = cursor === null ? 1 : (cursor as number) + 1;
    const items = Array.from({ length: Math.max(0, Math.min(limit, n - from + 1)) }, (_, i) => from + i);
    return { items, next: items.length ? items[items.length - 1] : null };
  };

describe("joining the caller's transaction", () => {
  const log = new SqlLog();
  const db = useTestDatabase('joining', { logger: log });
  const other = useTestDatabase('joining_other');
  before(() => db.ds.query('CREATE TABLE joined (job varchar(40) NOT NULL, n integer NOT NULL)'));

  const write = (job: string) => async (items: number[], tx: EntityManager) => {
    for (const n of items) await tx.query(sql('INSERT INTO joined (job, n) VALUES (?, ?)'), [job, n]);
  };
  const rows = (job: string) => count(db.ds, sql('SELECT COUNT(*) FROM joined WHERE job = ?'), [job]);

  it("runs each batch as a savepoint of the caller's transaction (EntityManager)", async () => {
    log.clear();
    await db.ds.transaction(async (tx) => {
      const result = await eachBatch(tx, 'sp', numbers(5), 2, write('sp'));
      expect(result).to.deep.equal({ batches: 3, items: 5, done: true, cursor: 5 });
    });
    const statements = log.queries.map((q) => q.sql);
    const savepoints = statements.filter((s) => /^SAVEPOINT checkpoint_sp_/.test(s));
    expect(savepoints.length).to.be.at.least(3);
    expect(statements.filter((s) => /^(START TRANSACTION|BEGIN)/i.test(s))).to.have.length(1);
    expect(statements.filter((s) => /^COMMIT/i.test(s))).to.have.length(1);
    expect(await rows('sp')).to.equal(5);
    expect(await status(db.ds, 'sp')).to.include({ done: true, items: 5 });
  });

  it('erases both the writes and the checkpoint when the caller rolls back', async () => {
    const rollback = new Error('caller rolls back');
    let caught: unknown;
    try {
      await db.ds.transaction(async (tx) => {
        await eachBatch(tx, 'undone', numbers(6), 2, write('undone'));
        throw rollback;
      });
    } catch (error) {
      caught = error;
    }
    expect(caught).to.equal(rollback);
    expect(await rows('undone')).to.equal(0);
    expect(await status(db.ds, 'undone')).to.equal(null);
  });

  it("rolls a failing batch back to its savepoint and leaves the caller's transaction usable", async () => {
    const boom = new Error('batch 2 fails');
    await db.ds.transaction(async (tx) => {
      await tx.query(sql('INSERT INTO joined (job, n) VALUES (?, ?)'), ['caller', 1]);
      let caught: unknown;
      try {
        await eachBatch(tx, 'partial', numbers(6), 2, async (items, btx) => {
          await write('partial')(items, btx);
          if (items.includes(3)) throw boom;
        });
      } catch (error) {
        caught = error;
      }
      expect(caught).to.equal(boom);
      // Still usable: further statements succeed (PostgreSQL would refuse them in an aborted transaction).
      await tx.query(sql('INSERT INTO joined (job, n) VALUES (?, ?)'), ['caller', 2]);
      const resumed = await eachBatch(tx, 'partial', numbers(6), 2, write('partial'));
      expect(resumed).to.include({ batches: 2, items: 4, done: true });
    });
    expect(await rows('caller')).to.equal(2);
    expect(await rows('partial')).to.equal(6);
    expect(await status(db.ds, 'partial')).to.include({ batches: 3, items: 6, done: true });
  });

  it('joins the transaction of runInTransaction bound to the async context', async () => {
    let caught: unknown;
    const rollback = new Error('rollback');
    try {
      await runInTransaction(db.ds, async (tx) => {
        expect(currentManager(db.ds)).to.equal(tx);
        expect(currentManager()).to.equal(tx);
        await eachBatch(db.ds, 'context', numbers(3), 2, async (items, btx) => {
          expect(btx.queryRunner).to.equal(tx.queryRunner);
          expect(currentManager().queryRunner).to.equal(tx.queryRunner);
          await write('context')(items, btx);
        });
        throw rollback;
      });
    } catch (error) {
      caught = error;
    }
    expect(caught).to.equal(rollback);
    expect(await rows('context')).to.equal(0);
    expect(await status(db.ds, 'context')).to.equal(null);
  });

  it('does not join a transaction of another DataSource', async () => {
    await runInTransaction(other.ds, async (otherTx) => {
      expect(currentManager(db.ds)).to.equal(db.ds.manager);
      expect(currentManager()).to.equal(otherTx);
      await eachBatch(db.ds, 'independent', numbers(2), 5, write('independent'));
    }).catch(() => undefined);
    expect(await status(db.ds, 'independent')).to.include({ done: true });
    expect(await status(other.ds, 'independent')).to.equal(null);
  });

  it('never commits what it did not start: the caller decides after eachBatch returns', async () => {
    const runner = db.ds.createQueryRunner();
    await runner.startTransaction();
    try {
      await eachBatch(runner.manager, 'caller-owned', numbers(4), 2, write('caller-owned'));
      expect(runner.isTransactionActive).to.equal(true);
      await runner.rollbackTransaction();
    } finally {
      await runner.release();
    }
    expect(await rows('caller-owned')).to.equal(0);
    expect(await status(db.ds, 'caller-owned')).to.equal(null);
  });
});
