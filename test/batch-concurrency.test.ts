import { expect } from 'chai';
import { startChild } from './support/child';
import { count, DRIVER, sql, useTestDatabase } from './support/database';
import { createCopyTables, expectCopiedOnce } from './support/copy-tables';

const WORKER = 'test/fixtures/batch-copy-worker.ts';

describe('eachBatch with several processes on one job', function () {
  const db = useTestDatabase('batch_concurrency');
  before(() => createCopyTables(db.ds));

  const workers = DRIVER === 'sqlite' ? 2 : 4;
  for (let round = 1; round <= 2; round++) {
    it(`round ${round}: ${workers} processes started together apply every row exactly once`, async () => {
      const job = `shared-${round}`;
      const children = Array.from({ length: workers }, () => startChild(WORKER, [db.url, job, '--wait-for-go']));
      await Promise.all(children.map((child) => child.waitForLine((line) => line === 'ready')));
      for (const child of children) child.send('go');
      const exits = await Promise.all(children.map((child) => child.exited));
      exits.forEach((exit, i) => expect(exit.code, children[i].stderr()).to.equal(0));
      await expectCopiedOnce(db.ds, job);
      // Which worker applied how many rows: printed, not asserted (scheduling decides).
      const split = (await db.ds.query(sql('SELECT worker, COUNT(*) AS n FROM crash_dst WHERE job = ? GROUP BY worker'), [
        job,
      ])) as unknown[];
      console.log(`      ${DRIVER}: rows per worker ${JSON.stringify(split)}`);
      expect(await count(db.ds, sql('SELECT COUNT(*) FROM crash_dst WHERE job = ?'), [job])).to.equal(10_000);
    });
  }
});
