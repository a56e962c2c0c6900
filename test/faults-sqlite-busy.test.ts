// SQLite contention between processes on one database file (WAL): a writer that finds the write
// lock taken waits (busy timeout), the library retries SQLITE_BUSY a bounded number of times, and
// then fails with DATABASE_ERROR — never a skipped, repeated or half-written batch.
import { expect } from 'chai';
import { status } from '../src';
import { MAX_ATTEMPTS } from '../src/core/transaction';
import { type Child, kill, startChild } from './support/child';
import { createCopyTables, expectCopiedOnce } from './support/copy-tables';
import { count, DRIVER, sql, useTestDatabase } from './support/database';
import { expectNoLeaks, pause } from './support/fault-checks';

const WORKER = 'test/fixtures/faults-batch-worker.ts';
const HOLDER = 'test/fixtures/faults-lock-holder.ts';

if (DRIVER === 'sqlite')
  describe('faults: SQLite write lock held by other processes', function () {
    let holder: Child;
    let locks = 0;

    // Registered before the database's hooks: mocha runs `after` hooks in order, so the holder exits first.
    after(async () => {
      holder.send('exit');
      await kill(holder);
    });
    const db = useTestDatabase('faults_sqlite_busy');
    before(async () => {
      await createCopyTables(db.ds);
      holder = startChild(HOLDER, [db.url.replace(/^sqlite:/, '')]);
      await holder.waitForLine((line) => line === 'ready');
    });

    async function lock(): Promise<number> {
      const n = ++locks;
      holder.send('lock');
      await holder.waitForLine((line) => line === `locked ${n}`);
      return n;
    }
    async function release(n: number): Promise<void> {
      holder.send('release');
      await holder.waitForLine((line) => line === `released ${n}`);
    }
    const batchesOf = async (job: string) => (await status(db.ds, job))?.batches ?? 0;
    const lastBatchLine = (child: Child) =>
      Math.max(0, ...child.lines.filter((l) => l.startsWith('batch ')).map((l) => Number(l.slice(6))));

    it('two workers on one job wait out a lock held again and again (busy timeout): nothing commits meanwhile, every row once', async () => {
      const job = 'two-workers';
      const workers = [startChild(WORKER, [db.url, job, '30000']), startChild(WORKER, [db.url, job, '30000'])];
      try {
        for (let round = 1; round <= 4; round++) {
          // Let the workers commit some batches, then take the write lock away from them.
          const before = await batchesOf(job);
          while ((await batchesOf(job)) < Math.min(before + 10, 95) && workers.some((w) => w.process.exitCode === null)) await pause(5);
          const n = await lock();
          const held = await batchesOf(job);
          // Polled, not slept on: the stored checkpoint must not move while the lock is held.
          for (let i = 0; i < 10; i++) {
            await pause(15);
            expect(await batchesOf(job), 'a batch committed while another process held the write lock').to.equal(held);
          }
          await release(n);
        }
        const exits = await Promise.all(workers.map((w) => w.exited));
        exits.forEach((exit, i) => expect(exit.code, workers[i].lines.join('\n') + workers[i].stderr()).to.equal(0));
        for (const worker of workers) expect(worker.lines.some((l) => l.startsWith('error '))).to.equal(false);
        await expectCopiedOnce(db.ds, job);
        await expectNoLeaks(db.ds, db.ds);
      } finally {
        await Promise.all(workers.map(kill));
      }
    });

    it(`a lock held longer than the busy timeout: ${MAX_ATTEMPTS} attempts, then DATABASE_ERROR (SQLITE_BUSY); the checkpoint is intact and a rerun finishes once`, async () => {
      const job = 'short-timeout';
      const worker = startChild(WORKER, [db.url, job, '50', '3']);
      let n = 0;
      try {
        // The worker stops after batch 3 and waits: the lock is taken before its next batch starts.
        await worker.waitForLine((line) => line === 'paused');
        n = await lock();
        worker.send('go');
        const failure = await worker.waitForLine((line) => line.startsWith('error ') || line.startsWith('done '));
        expect((await worker.exited).code).to.equal(3);
        const [, code, codes, busy] = failure.split(' ');
        expect(code).to.equal('DATABASE_ERROR');
        expect(codes.split(',').some((c) => c.startsWith('SQLITE_BUSY'))).to.equal(true);
        expect(busy).to.equal(`busy=${MAX_ATTEMPTS}`);

        // What the worker reported committed is exactly what is stored: no batch lost, none half-applied.
        const committed = lastBatchLine(worker);
        expect(committed).to.be.at.least(3);
        expect(await batchesOf(job)).to.equal(committed);
        expect(await count(db.ds, sql('SELECT COUNT(*) FROM crash_dst WHERE job = ?'), [job])).to.equal(committed * 100);
      } finally {
        if (n) await release(n);
        await kill(worker);
      }
      const rerun = startChild(WORKER, [db.url, job, '50']);
      expect((await rerun.exited).code, rerun.lines.join('\n') + rerun.stderr()).to.equal(0);
      await expectCopiedOnce(db.ds, job);
      await expectNoLeaks(db.ds, db.ds);
    });
  });
