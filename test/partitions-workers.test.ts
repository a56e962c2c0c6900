import { expect } from 'chai';
import { listPartitions, status } from '../src';
import { type Child, kill, startChild } from './support/child';
import { count, DRIVER, useTestDatabase } from './support/database';

const WORKER = 'test/fixtures/partition-copy-worker.ts';
const ROWS = 200_000;
const PARTITIONS = 32;
const LIMIT = 2000;
const WORKERS = DRIVER === 'postgres' ? 6 : DRIVER === 'mysql' ? 3 : 2;
// Short enough that a killed worker's range is taken over quickly; heartbeats keep live ones.
const LEASE_MS = 3000;

/** Fills part_src with ROWS ids (gaps every 9th id) in one statement per database. */
async function createTables(ds: import('typeorm').DataSource): Promise<void> {
  await ds.query('CREATE TABLE part_src (id integer PRIMARY KEY, payload varchar(20) NOT NULL)');
  await ds.query('CREATE TABLE part_dst (source_id integer NOT NULL, worker integer NOT NULL)');
  await ds.query('CREATE INDEX part_dst_source ON part_dst (source_id)');
  const ids =
    DRIVER === 'postgres'
      ? `SELECT g + g / 9, 'row' FROM generate_series(1, ${ROWS}) AS g`
      : DRIVER === 'mysql'
        ? `SELECT seq + seq DIV 9, 'row' FROM seq_1_to_${ROWS}`
        : `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ${ROWS}) SELECT n + n / 9, 'row' FROM g`;
  await ds.query(`INSERT INTO part_src (id, payload) ${ids}`);
}

describe(`eachPartition across worker processes (${DRIVER})`, function () {
  const db = useTestDatabase('partition_workers');
  before(() => createTables(db.ds));

  async function expectEveryRowOnce(): Promise<void> {
    expect(await count(db.ds, 'SELECT COUNT(*) FROM part_dst')).to.equal(ROWS);
    expect(await count(db.ds, 'SELECT COUNT(DISTINCT source_id) FROM part_dst')).to.equal(ROWS);
    expect(
      await count(db.ds, 'SELECT COUNT(*) FROM part_src s WHERE NOT EXISTS (SELECT 1 FROM part_dst d WHERE d.source_id = s.id)'),
    ).to.equal(0);
  }

  it(`${WORKERS} workers over ${ROWS} rows in ${PARTITIONS} ranges, 3 of them SIGKILLed at random points: every row exactly once`, async () => {
    const job = 'copy';
    const start = (...flags: string[]) => startChild(WORKER, [db.url, job, String(PARTITIONS), String(LIMIT), String(LEASE_MS), ...flags]);
    // Every process starts, then all begin together: none can take every range before another is up.
    const workers: Child[] = Array.from({ length: WORKERS }, () => start('--go'));
    await Promise.all(workers.map((worker) => worker.waitForLine((line) => line === 'ready')));
    for (const worker of workers) worker.send('go');
    for (let k = 0; k < 3; k++) {
      // Killed inside an uncommitted batch or right after a commit (the first kill always after
      // one): the victim is the first live worker to get that far, so it holds a range. On SQLite
      // one process may keep the write lock batch after batch while another waits, so a victim
      // picked at random could be one that never ran a batch.
      const at = 1 + Math.floor(Math.random() * 3);
      const where = k === 0 || Math.random() < 0.5 ? 'batch' : 'handler';
      const marks = workers.map((worker) => worker.lines.length);
      const reached = (worker: Child, i: number) => {
        const since = worker.lines.slice(marks[i]);
        return since.filter((line) => line.startsWith(`${where} `)).length >= at || since.some((line) => line.startsWith('done'));
      };
      const victim = await Promise.race(workers.map((worker, i) => worker.waitForLine(() => reached(worker, i)).then(() => worker)));
      await kill(victim);
      workers.splice(workers.indexOf(victim), 1, start());
    }
    const results = await Promise.all(
      workers.map(async (worker) => {
        await worker.waitForLine((line) => line.startsWith('done'));
        const { code } = await worker.exited;
        expect(code, worker.stderr()).to.equal(0);
        return JSON.parse(worker.lines.find((line) => line.startsWith('done'))!.slice(5)) as { done: boolean; partitions: number };
      }),
    );
    expect(results.every((result) => result.done && result.partitions === PARTITIONS)).to.equal(true);
    await expectEveryRowOnce();
    const stored = (await status(db.ds, job))!;
    expect(stored).to.include({ kind: 'partitioned', done: true, items: ROWS });
    expect(stored.partitions).to.deep.equal({ pending: 0, running: 0, done: PARTITIONS, dead: 0 });
    // More than one process did the work: the first victim committed a batch before it was killed
    // (short of the whole job), the others the rest.
    expect(await count(db.ds, 'SELECT COUNT(DISTINCT worker) FROM part_dst')).to.be.greaterThan(1);
  });

  // Inside a batch on SQLite the process holds the database write lock (its first statement takes
  // it, so its reads cannot go stale): no one can claim anything until it ends, so no takeover can
  // happen there. A SQLite worker stalls between two batches instead, holding its claim but no lock.
  const stallWhere = DRIVER === 'sqlite' ? 'after its first commit' : 'inside its second batch';
  it(`a worker stalled ${stallWhere} loses its range and commits nothing more (CLAIM_LOST); the range resumes at its committed cursor elsewhere`, async () => {
    await db.ds.query('DELETE FROM part_dst');
    const job = 'stall';
    // One range; the worker stalls (SIGSTOP: no heartbeat) with one batch committed.
    const stall = DRIVER === 'sqlite' ? ['--stall-after', '1'] : ['--stall-at', '2'];
    const stalled = startChild(WORKER, [db.url, job, '1', String(LIMIT), '1000', ...stall]);
    await stalled.waitForLine((line) => line === 'stalled');
    stalled.process.kill('SIGSTOP');
    const taker = startChild(WORKER, [db.url, job, '1', String(LIMIT), '1000']);
    await taker.waitForLine((line) => line.startsWith('done'));
    expect((await taker.exited).code, taker.stderr()).to.equal(0);
    const [range] = await listPartitions(db.ds, job);
    // Taken over at least once (a starved taker may lose and re-claim it too; it resumes all the same).
    expect(range).to.include({ status: 'done', items: ROWS });
    expect(range.attempts).to.be.at.least(2);
    stalled.process.kill('SIGCONT');
    stalled.send('go');
    await stalled.waitForLine((line) => line.startsWith('rejected'));
    expect(stalled.lines).to.include('rejected CLAIM_LOST');
    expect((await stalled.exited).code, stalled.stderr()).to.equal(0);
    // The stalled worker ran its next batch (its handler wrote) before the fenced commit refused it.
    expect(stalled.lines).to.include('handler 2');
    await expectEveryRowOnce();
    // The stalled worker's one committed batch stays; the taker resumed right after it.
    expect(await count(db.ds, `SELECT COUNT(*) FROM part_dst WHERE worker = ${stalled.process.pid!}`)).to.equal(LIMIT);
    expect(await count(db.ds, `SELECT COUNT(*) FROM part_dst WHERE worker = ${taker.process.pid!}`)).to.equal(ROWS - LIMIT);
  });
});
