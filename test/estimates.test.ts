import { expect } from 'chai';
import type { DataSource } from 'typeorm';
import { eachBatch, eachPartition, type Json, type Page, type Progress, type Source, sqlSource, status } from '../src';
import { JobTotals1765584000000 } from '../migrations/1765584000000-JobTotals';
import { DRIVER, sql, useTestDatabase } from './support/database';
import { cli } from './support/cli-run';
import { expectCode } from './support/expect-code';
import { SqlLog } from './support/sql-log';

const ROWS = 60_000;
/** `day < :until` keeps 40 % of the rows (day = id % 1000, indexed: a typical `created_at < :until`). */
const UNTIL = 400;
const MATCHING = (ROWS * UNTIL) / 1000;
const WHERE = { where: 'day < :until', parameters: { until: UNTIL } };

/** Fills `table` with ids 1..rows, day = id % 1000, in multi-row INSERTs. */
async function fill(ds: DataSource, table: string, rows: number): Promise<void> {
  const chunk = 500;
  for (let from = 1; from <= rows; from += chunk) {
    const ids = Array.from({ length: Math.min(chunk, rows - from + 1) }, (_, i) => from + i);
    await ds.query(
      sql(`INSERT INTO ${table} (id, day, label) VALUES ${ids.map(() => '(?, ?, ?)').join(', ')}`),
      ids.flatMap((id) => [id, id % 1000, `row ${id}`]),
    );
  }
}

/** What a real table has: statistics the planner reads. */
async function analyze(ds: DataSource, table: string): Promise<void> {
  if (DRIVER === 'postgres') await ds.query(`ANALYZE ${table}`);
  if (DRIVER === 'mysql') await ds.query(`ANALYZE TABLE ${table}`);
}

/** Statements that estimate a source's rows, as each dialect writes them. */
const isEstimate = (text: string) => /^EXPLAIN|SUM\(matched\)|COUNT\(\*\) AS exact/.test(text.trim());

/** An in-memory source over 1..n (cursor: the last number), with a total of its own. */
function counting(n: number, total: number | null): Source<number> {
  const source = (cursor: Json, limit: number): Page<number> => {
    const from = cursor === null ? 1 : (cursor as number) + 1;
    const items = Array.from({ length: Math.max(0, Math.min(limit, n - from + 1)) }, (_, i) => from + i);
    return { items, next: items.length > 0 ? items[items.length - 1] : null };
  };
  return Object.assign(source, { total: async () => total });
}

describe('estimates and totals of batch jobs', () => {
  const log = new SqlLog();
  const db = useTestDatabase('estimates', { logger: log });

  before(async () => {
    await db.ds.query('CREATE TABLE est_rows (id integer PRIMARY KEY, day integer NOT NULL, label varchar(40) NOT NULL)');
    await db.ds.query('CREATE INDEX est_rows_day ON est_rows (day)');
    await fill(db.ds, 'est_rows', ROWS);
    await analyze(db.ds, 'est_rows');
  });

  it(`estimates the rows a sqlSource visits, where included, within ±20 % (${DRIVER})`, async () => {
    const source = await sqlSource(db.ds, 'est_rows', 'id', WHERE);
    const estimate = await db.ds.transaction((tx) => source.total!(tx));
    console.log(`      ${DRIVER}: estimated ${estimate} of ${MATCHING} rows (${(((estimate! - MATCHING) / MATCHING) * 100).toFixed(1)} %)`);
    expect(estimate).to.be.within(MATCHING * 0.8, MATCHING * 1.2);
    const all = await db.ds.transaction(async (tx) => (await sqlSource(db.ds, 'est_rows', 'id')).total!(tx));
    expect(all).to.be.within(ROWS * 0.8, ROWS * 1.2);
  });

  it('stores the estimate on the job once, shows it in status() and Progress.total, and ends with the item count', async () => {
    const source = await sqlSource(db.ds, 'est_rows', 'id', WHERE);
    const controller = new AbortController();
    const seen: Progress[] = [];
    log.clear();
    await eachBatch(db.ds, 'estimated', source, 1000, () => undefined, {
      signal: controller.signal,
      onProgress: (progress) => {
        seen.push(progress);
        if (seen.length === 3) controller.abort();
      },
    });
    expect(log.queries.filter((query) => isEstimate(query.sql))).to.have.length(1);
    const running = (await status(db.ds, 'estimated'))!;
    expect(running.items).to.equal(3000);
    expect(running.totalEstimated).to.equal(true);
    expect(running.total).to.be.within(MATCHING * 0.8, MATCHING * 1.2);
    expect(seen.map((progress) => progress.total)).to.deep.equal([running.total, running.total, running.total]);

    // A job with a total resumes without estimating again, and no batch estimates anything.
    log.clear();
    const resumed: Progress[] = [];
    const result = await eachBatch(db.ds, 'estimated', source, 1000, () => undefined, { onProgress: (p) => resumed.push(p) });
    expect(result.done).to.equal(true);
    expect(log.queries.filter((query) => isEstimate(query.sql))).to.deep.equal([]);
    expect(resumed[0].total).to.equal(running.total);
    const ended = (await status(db.ds, 'estimated'))!;
    expect(ended).to.include({ done: true, items: MATCHING, total: MATCHING, totalEstimated: false });
  });

  it('takes a custom source’s own total, and ends with the item count whatever it said', async () => {
    const seen: Progress[] = [];
    const controller = new AbortController();
    await eachBatch(db.ds, 'custom-total', counting(250, 300), 100, () => controller.abort(), {
      signal: controller.signal,
      onProgress: (progress) => seen.push(progress),
    });
    expect(seen[0].total).to.equal(300);
    expect(await status(db.ds, 'custom-total')).to.include({ total: 300, totalEstimated: true, items: 100 });
    await eachBatch(db.ds, 'custom-total', counting(250, 300), 100, () => undefined);
    expect(await status(db.ds, 'custom-total')).to.include({ done: true, items: 250, total: 250, totalEstimated: false });
  });

  it('leaves the total unknown for a source without one, and estimates when such a job resumes with one', async () => {
    const plain: Source<number> = (cursor, limit) => {
      const from = cursor === null ? 1 : (cursor as number) + 1;
      return { items: Array.from({ length: limit }, (_, i) => from + i), next: from + limit - 1 };
    };
    const seen: Progress[] = [];
    const controller = new AbortController();
    await eachBatch(db.ds, 'no-total', plain, 10, () => controller.abort(), {
      signal: controller.signal,
      onProgress: (progress) => seen.push(progress),
    });
    expect(seen[0]).to.not.have.property('total');
    expect(await status(db.ds, 'no-total')).to.include({ total: null, totalEstimated: false, done: false });
    await eachBatch(db.ds, 'no-total', counting(50, 50), 10, () => undefined);
    expect(await status(db.ds, 'no-total')).to.include({ done: true, total: 50, totalEstimated: false });
  });

  it('refuses a total that is not a finite number >= 0 or null, before any batch', async () => {
    let handled = 0;
    const error = await expectCode(
      eachBatch(db.ds, 'bad-total', counting(10, -1), 5, () => {
        handled += 1;
      }),
      'INVALID_ARGUMENT',
    );
    expect(error.message).to.match(/total/);
    expect(handled).to.equal(0);
  });

  it('gives a partitioned job the whole source’s estimate, then its item count', async () => {
    const source = await sqlSource(db.ds, 'est_rows', 'id', WHERE);
    const controller = new AbortController();
    const seen: Progress[] = [];
    await eachPartition(db.ds, 'partitioned-total', source, 500, () => undefined, {
      partitions: 4,
      signal: controller.signal,
      onProgress: (progress) => {
        seen.push(progress);
        controller.abort();
      },
    });
    const running = (await status(db.ds, 'partitioned-total'))!;
    expect(running.totalEstimated).to.equal(true);
    expect(running.total).to.be.within(MATCHING * 0.8, MATCHING * 1.2);
    expect(seen[0].total).to.equal(running.total);
    await eachPartition(db.ds, 'partitioned-total', source, 2000, () => undefined, { partitions: 4 });
    expect(await status(db.ds, 'partitioned-total')).to.include({ done: true, items: MATCHING, total: MATCHING, totalEstimated: false });
  });

  it('shows a bar and an ETA in the CLI’s status and list', async () => {
    const source = await sqlSource(db.ds, 'est_rows', 'id', WHERE);
    const controller = new AbortController();
    await eachBatch(db.ds, 'cli-eta', source, 1000, () => undefined, {
      signal: controller.signal,
      onProgress: (progress) => {
        if (progress.batches === 2) controller.abort();
      },
    });
    const shown = await cli(['status', 'cli-eta', '--db', db.url]);
    expect(shown.code, shown.stderr).to.equal(0);
    const line = shown.stdout.find((text) => text.startsWith('  progress '));
    expect(line).to.match(/^ {2}progress \[#+-+\] \d+% of ~[\d,]+ items, ETA (\d+[smh]|\d+m\d\ds|\d+h\d\dm)$/);
    const listed = await cli(['list', '--db', db.url]);
    expect(listed.stdout[0]).to.include('PROGRESS');
    expect(listed.stdout.find((text) => text.startsWith('cli-eta'))).to.match(/ \d+% ETA \S+ /);
  });

  it('adds its columns once: the migration is a no-op when run again', async () => {
    const runner = db.ds.createQueryRunner();
    try {
      await new JobTotals1765584000000().up(runner);
      const table = await runner.getTable('checkpoint_jobs');
      expect(table!.columns.filter((column) => ['total', 'total_estimated'].includes(column.name))).to.have.length(2);
    } finally {
      await runner.release();
    }
  });

  if (DRIVER === 'sqlite') {
    it('estimates from a sample beyond 1M rows on SQLite, within ±20 %', async () => {
      const rows = 1_200_000;
      await db.ds.query('CREATE TABLE big_rows (id integer PRIMARY KEY, day integer NOT NULL)');
      await db.ds.query(
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${rows}) INSERT INTO big_rows SELECT i, abs(random()) % 1000 FROM n`,
      );
      const source = await sqlSource(db.ds, 'big_rows', 'id', WHERE);
      log.clear();
      const estimate = (await db.ds.transaction((tx) => source.total!(tx)))!;
      const [{ matching }] = (await db.ds.query('SELECT COUNT(*) AS matching FROM big_rows WHERE day < ?', [UNTIL])) as {
        matching: number;
      }[];
      console.log(
        `      sqlite sample: estimated ${estimate} of ${matching} rows (${(((estimate - matching) / matching) * 100).toFixed(1)} %)`,
      );
      expect(estimate).to.be.within(matching * 0.8, matching * 1.2);
      // Counted in rowid windows, not row by row.
      expect(log.queries.some((query) => query.sql.includes('rowid BETWEEN'))).to.equal(true);
    });
  }
});
