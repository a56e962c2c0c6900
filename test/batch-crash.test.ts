import { expect } from 'chai';
import { status } from '../src';
import { kill, runChild, startChild } from './support/child';
import { createCopyTables, expectCopiedOnce, ROWS } from './support/copy-tables';
import { count, DRIVER, sql, useTestDatabase } from './support/database';

const WORKER = 'test/fixtures/batch-copy-worker.ts';

describe('eachBatch survives SIGKILL (child processes)', function () {
  const db = useTestDatabase('batch_crash');
  before(() => createCopyTables(db.ds));

  const TRIALS = 12; // per driver: 24 across the SQLite and PostgreSQL runs
  for (let trial = 0; trial < TRIALS; trial++) {
    it(`trial ${trial + 1}: killed at random points, restarted, every row applied exactly once`, async () => {
      const job = `crash-${trial}`;
      // One or two kills per trial, each at a random batch, between commits or inside a batch (the
      // child freezes at that line, so the kill lands exactly there).
      const kills = 1 + (trial % 2);
      for (let k = 0; k < kills; k++) {
        const before = (await status(db.ds, job))?.batches ?? 0;
        const target = Math.floor(Math.random() * 40) + 1;
        const where = Math.random() < 0.5 ? 'handler' : 'batch';
        const child = startChild(WORKER, [db.url, job], { CK_FREEZE_AT: `${where} ${target}` });
        await child.waitForLine((line) => line === `${where} ${target}` || line === 'done');
        await kill(child);
        const after = (await status(db.ds, job))?.batches ?? 0;
        expect(after).to.be.at.least(before, `${DRIVER}: a kill at ${where} ${target} lost committed batches`);
      }
      const partial = await count(db.ds, sql('SELECT COUNT(*) FROM crash_dst WHERE job = ?'), [job]);
      expect(partial).to.be.below(ROWS);
      expect(partial % 100).to.equal(0);
      await runChild(WORKER, [db.url, job]);
      await expectCopiedOnce(db.ds, job);
    });
  }
});
