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
    expect(await count(db.ds, 'SELECT COUNT(*) FROM part_src s WHERE NOT EXISTS (SELECT 1 FROM part_dst d WHERE d.source_id = s.id)')).to.equal(0);
  }

  it(`${WORKERS} workers over ${ROWS} rows in ${PARTITIONS} ranges, 3 of them SIGKILLed at random points: every row exactly once`, async () => {
    const job = 'copy';
    const start = () => startChild(WORKER, [db.url, job, String(PARTITIONS), String(LIMIT), String(LEASE_MS)]);
    const workers: Child[] = Array.from({ length: WORKERS }, start);
    for (let k = 0; k < 3; k++) {
      // A random live worker, killed inside an uncommitted batch or right after a commit.
      const victim = workers[Math.floor(Math.random() * workers.length)];
      const at = 1 + Math.floor(Math.random() * 3);
      const where = Math.random() < 0.5 ? 'handler' : 'batch';
      const seen = victim.lines.filter((line) => line.startsWith(`${where} `)).length;
      await victim.waitForLine((line) => line === `${where} ${seen + at}` || line.startsWith('done'));
      await kill(victim);
      workers.splice(workers.indexOf(victim), 1, start());
    }
    const results = await Promise.all(workers.map(async (worker) => {
      await worker.waitForLine((line) => line.startsWith('done'));
      const { code } = await worker.exited;
      expect(code, worker.stderr()).to.equal(0);
      return JSON.parse(worker.lines.find((line) => line.startsWith('done'))!.slice(5)) as { done: boolean; partitions: number };
    }));
    expect(results.every((result) => result.done && result.partitions === PARTITIONS)).to.equal(true);
    await expectEveryRowOnce();
    const stored = (await status(db.ds, job))!;
    expect(stored).to.include({ kind: 'partitioned', done: true, items: ROWS });
    expect(stored.partitions).to.deep.equal({ pending: 0, running: 0, done: PARTITIONS, dead: 0 });
    // More than one process did the work — where workers run concurrently: on SQLite the write lock
    // serialises batches and one process may take every range (failed once in CI).
    if (DRIVER !== 'sqlite') expect(await count(db.ds, 'SELECT COUNT(DISTINCT worker) FROM part_dst')).to.be.greaterThan(1);
  });

  // On SQLite a batch holds the database write lock: a process stalled inside one blocks every
  // writer, so no takeover can happen until it ends (and then its own commit renews the lease).
  if (DRIVER !== 'sqlite') {
    it('a stalled worker loses its range and commits nothing (CLAIM_LOST); the range resumes at its committed cursor elsewhere', async () => {
      await db.ds.query('DELETE FROM part_dst');
      const job = 'stall';
      // One range; the worker stalls (SIGSTOP: no heartbeat) inside its second batch.
      const stalled = startChild(WORKER, [db.url, job, '1', String(LIMIT), '1000', '--stall-at', '2']);
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
      await expectEveryRowOnce();
      // The stalled worker's one committed batch stays; the taker resumed right after it.
      expect(await count(db.ds, `SELECT COUNT(*) FROM part_dst WHERE worker = ${stalled.process.pid!}`)).to.equal(LIMIT);
      expect(await count(db.ds, `SELECT COUNT(*) FROM part_dst WHERE worker = ${taker.process.pid!}`)).to.equal(ROWS - LIMIT);
    });
  }
});
