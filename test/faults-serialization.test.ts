// Serialization failures, deadlocks and other database errors on the library's own statements:
// 40001/40P01 (and SQLITE_BUSY, see faults-sqlite-busy) are retried a bounded number of times by
// the transaction the library opened; anything else surfaces at once as DATABASE_ERROR; errors of
// user callbacks pass through unchanged and are never retried, whatever their code.
import { expect } from 'chai';
import type { DataSource, EntityManager, Logger } from 'typeorm';
import { CheckpointError, CheckpointManager, eachBatch, type Page, step, status } from '../src';
import { MAX_ATTEMPTS } from '../src/core/transaction';
import { count, DRIVER, LOCK_POLL_MS, sql, useTestDatabase } from './support/database';
import { expectCode, rejection } from './support/expect-code';
import { allowVictims, codesOf, expectNoLeaks, openVictim, pause } from './support/fault-checks';

/** Records the SQLSTATE / driver code and SQL of every failed statement. */
class ErrorLog implements Logger {
  readonly errors: { code: string; sql: string }[] = [];
  logQueryError(error: string | Error, query: string): void {
    this.errors.push({ code: String((error as { code?: unknown }).code), sql: query });
  }
  logQuery(): void {}
  logQuerySlow(): void {}
  logSchemaBuild(): void {}
  logMigration(): void {}
  log(): void {}
}

/** A source over 0…n−1 (the cursor is the next index). */
function arraySource(n: number) {
  return (cursor: unknown, limit: number): Page<number> => {
    const start = (cursor as number | null) ?? 0;
    const end = Math.min(n, start + limit);
    return { items: Array.from({ length: end - start }, (_, i) => start + i), next: end >= n ? null : end };
  };
}

describe(`faults: serialization failures, deadlocks and non-retryable errors (${DRIVER})`, function () {
  const db = useTestDatabase('faults_serialization');

  before(async () => {
    await db.ds.query('CREATE TABLE ser_effects (job varchar(64) NOT NULL, item integer NOT NULL)');
    await db.ds.query('CREATE TABLE fault_switch (code varchar(8) NOT NULL)');
    // A failure injected into the library's own UPDATE of checkpoint_jobs (a batch or step being
    // recorded), raised with whatever code fault_switch holds.
    if (DRIVER === 'postgres') {
      await db.ds.query(`CREATE FUNCTION inject_fault() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE injected varchar;
        BEGIN
          SELECT code INTO injected FROM fault_switch LIMIT 1;
          IF injected IS NOT NULL THEN RAISE EXCEPTION 'injected fault' USING ERRCODE = injected; END IF;
          RETURN NEW;
        END $$`);
      await db.ds.query(`CREATE TRIGGER inject_fault BEFORE UPDATE ON checkpoint_jobs FOR EACH ROW
        WHEN (NEW.batches <> OLD.batches OR NEW.done <> OLD.done) EXECUTE FUNCTION inject_fault()`);
    } else if (DRIVER === 'mysql') {
      // SIGNAL takes a literal SQLSTATE: 40001 is raised as error 1213 (ER_LOCK_DEADLOCK), as InnoDB does.
      await db.ds.query(`CREATE TRIGGER inject_fault BEFORE UPDATE ON checkpoint_jobs FOR EACH ROW
        BEGIN
          IF NEW.batches <> OLD.batches OR NEW.done <> OLD.done THEN
            IF EXISTS (SELECT 1 FROM fault_switch WHERE code = '40001') THEN
              SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'injected fault';
            ELSEIF EXISTS (SELECT 1 FROM fault_switch) THEN
              SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'injected fault';
            END IF;
          END IF;
        END`);
    } else {
      await db.ds.query(`CREATE TRIGGER inject_fault BEFORE UPDATE ON checkpoint_jobs
        WHEN (NEW.batches <> OLD.batches OR NEW.done <> OLD.done) AND EXISTS (SELECT 1 FROM fault_switch)
        BEGIN SELECT RAISE(ABORT, 'injected fault'); END`);
    }
  });
  afterEach(() => db.ds.query('DELETE FROM fault_switch'));

  // The driver code a non-retryable injected fault surfaces with, and what fault_switch holds for it.
  const nonRetryable = DRIVER === 'postgres' ? 'P0001' : DRIVER === 'mysql' ? 'ER_SIGNAL_EXCEPTION' : 'SQLITE_CONSTRAINT';
  const nonRetryableSwitch = DRIVER === 'mysql' ? '45000' : nonRetryable;
  // How a persistent serialization failure (fault_switch '40001') surfaces.
  const serializationFailure = DRIVER === 'mysql' ? 'ER_LOCK_DEADLOCK' : '40001';

  it('a non-retryable error on its own statement is DATABASE_ERROR at once: the batch ran once, nothing of it stays', async () => {
    const job = 'non-retryable';
    let calls = 0;
    const handler = async (items: number[], tx: EntityManager) => {
      calls++;
      await tx.query(
        sql(`INSERT INTO ser_effects (job, item) VALUES ${items.map(() => '(?, ?)').join(', ')}`),
        items.flatMap((i) => [job, i]),
      );
    };
    await db.ds.query(sql('INSERT INTO fault_switch (code) VALUES (?)'), [nonRetryableSwitch]);
    const error = await expectCode(eachBatch(db.ds, job, arraySource(20), 5, handler), 'DATABASE_ERROR');
    expect(codesOf(error).some((c) => c.startsWith(nonRetryable))).to.equal(true);
    expect(calls, 'retried a non-retryable error').to.equal(1);
    expect(await status(db.ds, job)).to.include({ done: false, batches: 0, items: 0, cursor: null });
    expect(await count(db.ds, sql('SELECT COUNT(*) FROM ser_effects WHERE job = ?'), [job])).to.equal(0);

    let stepCalls = 0;
    const stepError = await rejection(step(db.ds, 'non-retryable-step', () => ++stepCalls));
    expect((stepError as CheckpointError).code).to.equal('DATABASE_ERROR');
    expect(stepCalls).to.equal(1);
    expect(await status(db.ds, 'non-retryable-step')).to.equal(null);

    await db.ds.query('DELETE FROM fault_switch');
    expect(await eachBatch(db.ds, job, arraySource(20), 5, handler)).to.deep.equal({ batches: 4, items: 20, done: true, cursor: null });
    expect(await count(db.ds, sql('SELECT COUNT(DISTINCT item) FROM ser_effects WHERE job = ?'), [job])).to.equal(20);
    expect(await count(db.ds, sql('SELECT COUNT(*) FROM ser_effects WHERE job = ?'), [job])).to.equal(20);
    await expectNoLeaks(db.ds, db.ds);
  });

  it('an error the handler throws passes through unchanged and is not retried, even with a retryable code', async () => {
    for (const code of ['40001', '40P01', 'SQLITE_BUSY']) {
      const thrown = Object.assign(new Error('the handler gave up'), { code });
      let calls = 0;
      const error = await rejection(
        eachBatch(db.ds, `user-${code}`, arraySource(10), 5, () => {
          calls++;
          throw thrown;
        }),
      );
      expect(error).to.equal(thrown);
      expect(calls).to.equal(1);
      expect(await status(db.ds, `user-${code}`)).to.include({ batches: 0, done: false });
    }
    await expectNoLeaks(db.ds, db.ds);
  });

  if (DRIVER === 'sqlite') return;

  it(`a serialization failure that persists is retried ${MAX_ATTEMPTS} times in all, then DATABASE_ERROR; nothing is recorded`, async () => {
    const job = 'always-40001';
    let calls = 0;
    await db.ds.query("INSERT INTO fault_switch (code) VALUES ('40001')");
    const error = await rejection(
      eachBatch(db.ds, job, arraySource(10), 5, async (items, tx) => {
        calls++;
        await tx.query(
          sql(`INSERT INTO ser_effects (job, item) VALUES ${items.map(() => '(?, ?)').join(', ')}`),
          items.flatMap((i) => [job, i]),
        );
      }),
    );
    expect((error as CheckpointError).code).to.equal('DATABASE_ERROR');
    expect(codesOf(error)).to.include(serializationFailure);
    expect(calls).to.equal(MAX_ATTEMPTS);
    expect(await count(db.ds, sql('SELECT COUNT(*) FROM ser_effects WHERE job = ?'), [job])).to.equal(0);
    expect(await status(db.ds, job)).to.include({ batches: 0, done: false });
    await expectNoLeaks(db.ds, db.ds);
  });

  // MySQL's SERIALIZABLE takes locks instead of failing with 40001: its conflicts are the deadlocks below.
  if (DRIVER === 'postgres')
    describe('under SERIALIZABLE (default_transaction_isolation on the DataSource)', () => {
      let serializable: DataSource;
      const log = new ErrorLog();

      before(async () => {
        serializable = await openVictim(db.url, {
          logger: log,
          extra: { options: '-c default_transaction_isolation=serializable -c deadlock_timeout=50ms' },
        });
        expect(await serializable.query('SHOW transaction_isolation')).to.deep.equal([{ transaction_isolation: 'serializable' }]);
      });
      after(() => serializable.destroy());
      beforeEach(() => (log.errors.length = 0));

      /** Polls the database until some backend of this database waits for a lock. */
      async function untilSomeoneWaits(): Promise<void> {
        const waiting = async () =>
          count(
            db.ds,
            'SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.datname = current_database()',
          );
        while ((await waiting()) === 0) await pause(5);
      }

      /** Failed statements of the library itself (on its own tables) with this code. */
      const ownFailures = (code: string) => log.errors.filter((e) => e.code === code && /"(checkpoint_jobs|file_checkpoints)"/.test(e.sql));

      it('concurrent calls of one step: real 40001s on its own INSERT are retried; f runs once and every caller gets its value', async () => {
        let runs = 0;
        const results = await Promise.all(
          Array.from({ length: 6 }, () =>
            step(serializable, 'serializable-step', async (tx) => {
              runs++;
              await tx.query("INSERT INTO ser_effects (job, item) VALUES ('serializable-step', 1)");
              // Commits only once another caller waits on this step's uncommitted row: that caller's
              // snapshot cannot see the row, so its INSERT fails with 40001 when this one commits.
              await untilSomeoneWaits();
              return { invoice: 42 };
            }),
          ),
        );
        expect(runs).to.equal(1);
        expect(results).to.deep.equal(Array.from({ length: 6 }, () => ({ invoice: 42 })));
        expect(ownFailures('40001').length, 'no serialization failure was provoked').to.be.greaterThan(0);
        expect(await count(db.ds, "SELECT COUNT(*) FROM ser_effects WHERE job = 'serializable-step'")).to.equal(1);
        await expectNoLeaks(serializable, db.ds);
      });

      it('three runners of one job at once: retried or surfaced as DATABASE_ERROR (40001), never a batch twice', async () => {
        const job = 'serializable-job';
        const n = 300;
        const userErrors = new Set<unknown>();
        const run = () =>
          eachBatch(serializable, job, arraySource(n), 10, async (items, tx) => {
            try {
              await tx.query('INSERT INTO ser_effects (job, item) SELECT $1, unnest($2::int[])', [job, items]);
            } catch (error) {
              userErrors.add(error);
              throw error;
            }
          });
        const settled = await Promise.allSettled([run(), run(), run()]);
        for (const outcome of settled) {
          if (outcome.status === 'rejected' && !userErrors.has(outcome.reason)) {
            expect(outcome.reason).to.be.instanceOf(CheckpointError);
            expect((outcome.reason as CheckpointError).code).to.equal('DATABASE_ERROR');
            expect(codesOf(outcome.reason)).to.include('40001');
          }
        }
        expect(ownFailures('40001').length, 'no serialization failure was provoked').to.be.greaterThan(0);
        // Whoever gave up reruns: the job is already done, or resumes where it is.
        expect(await run()).to.include({ done: true });
        expect(await count(db.ds, sql('SELECT COUNT(*) FROM ser_effects WHERE job = ?'), [job])).to.equal(n);
        expect(await count(db.ds, sql('SELECT COUNT(DISTINCT item) FROM ser_effects WHERE job = ?'), [job])).to.equal(n);
        expect(await status(db.ds, job)).to.include({ done: true, items: n, batches: n / 10 });
        await expectNoLeaks(serializable, db.ds);
      });
    });
  describe('deadlocks', () => {
    let readCommitted: DataSource;
    const log = new ErrorLog();
    const deadlock = DRIVER === 'mysql' ? 'ER_LOCK_DEADLOCK' : '40P01';
    const ownTable = DRIVER === 'mysql' ? '`file_checkpoints`' : '"file_checkpoints"';

    before(async () => {
      await allowVictims(db.ds);
      // A short deadlock_timeout on this side only, so the library's statement is the deadlock's victim.
      readCommitted = await openVictim(db.url, { logger: log, extra: { options: '-c deadlock_timeout=50ms' } });
    });
    after(() => readCommitted.destroy());

    it("a real deadlock on processFile's own completion is retried: fn's writes and the completion commit once", async () => {
      await db.ds.query('CREATE TABLE ser_counter (id integer PRIMARY KEY, n integer NOT NULL)');
      await db.ds.query('INSERT INTO ser_counter (id, n) VALUES (1, 0)');
      const manager = new CheckpointManager(readCommitted);
      expect(await manager.claimFile('s3://deadlock/1.csv', 'csv', new Date(0))).to.equal(true);
      const tokenBefore = (await manager.get('s3://deadlock/1.csv'))!.claimToken;

      // Another session holds the file's row, and will ask for the counter row fn locks.
      const other = db.ds.createQueryRunner();
      await other.connect();
      try {
        // So this session is never the victim: PostgreSQL's waits longest before it checks; InnoDB
        // rolls back the transaction that changed fewer rows.
        if (DRIVER === 'postgres') await other.query("SET deadlock_timeout = '60s'");
        const [{ pid }] = (await other.query(DRIVER === 'mysql' ? 'SELECT CONNECTION_ID() AS pid' : 'SELECT pg_backend_pid() AS pid')) as {
          pid: number;
        }[];
        await other.startTransaction();
        if (DRIVER === 'mysql') {
          await other.query(
            `INSERT INTO ser_effects (job, item) VALUES ${Array.from({ length: 50 }, (_, i) => `('deadlock-weight', ${i})`).join(', ')}`,
          );
        }
        await other.query("UPDATE file_checkpoints SET processed_by = processed_by WHERE file_url = 's3://deadlock/1.csv'");

        let attempts = 0;
        let holding!: () => void;
        const fnHoldsCounter = new Promise<void>((resolve) => (holding = resolve));
        let proceed!: () => void;
        const mayProceed = new Promise<void>((resolve) => (proceed = resolve));
        const processing = manager.processFile('s3://deadlock/1.csv', 'csv', new Date(0), async (tx) => {
          attempts++;
          await tx!.query('UPDATE ser_counter SET n = n + 1 WHERE id = 1');
          if (attempts === 1) {
            holding();
            await mayProceed;
          }
          return { totalRows: 1, filteredRows: 0, persistedRows: 1 };
        });
        await fnHoldsCounter;
        const otherWaits = other.query('UPDATE ser_counter SET n = n + 10 WHERE id = 1');
        // Polls the database until the other session really waits for fn's row lock.
        const waits =
          DRIVER === 'mysql'
            ? "SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'"
            : 'SELECT COUNT(*) AS n FROM pg_locks WHERE pid = $1 AND NOT granted';
        while (Number((await db.ds.query(waits, [pid]))[0].n) === 0) {
          await pause(DRIVER === 'mysql' ? LOCK_POLL_MS : 5);
        }
        proceed(); // the completion now waits for the other session: a deadlock, and fn's side is the victim
        await otherWaits;
        if (DRIVER === 'mysql') await other.query("DELETE FROM ser_effects WHERE job = 'deadlock-weight'");
        await other.commitTransaction();
        const result = await processing;

        expect(result.claimed).to.equal(true);
        expect(attempts).to.equal(2);
        expect(
          log.errors.filter((e) => e.code === deadlock && e.sql.includes(ownTable)).length,
          'the deadlock did not hit the completion',
        ).to.be.greaterThan(0);
        const row = (await manager.get('s3://deadlock/1.csv'))!;
        expect(row).to.include({ status: 'completed', claimToken: tokenBefore, recordsPersisted: 1 });
        expect(await count(db.ds, 'SELECT n FROM ser_counter WHERE id = 1')).to.equal(11);
      } finally {
        if (other.isTransactionActive) await other.rollbackTransaction();
        await other.release();
      }
      await expectNoLeaks(readCommitted, db.ds);
    });
  });
});
