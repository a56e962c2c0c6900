import { expect } from 'chai';
import type { DataSource, EntityManager } from 'typeorm';
import {
  CheckpointError,
  eachBatch,
  eachPartition,
  type Json,
  list,
  listPartitions,
  reset,
  retryDead,
  runInTransaction,
  sqlSource,
  status,
} from '../src';
import { expectCode, rejection } from './support/expect-code';
import { count, DRIVER, sql, useTestDatabase } from './support/database';
import { countRoundTrips } from './support/round-trips';
import { SqlLog } from './support/sql-log';

type Row = Record<string, unknown>;

/** Runs a source to its end with eachBatch, returning every item and every cursor committed. */
async function drain(ds: DataSource, job: string, source: Awaited<ReturnType<typeof sqlSource>>, limit: number) {
  const items: Row[] = [];
  const cursors: Json[] = [];
  await eachBatch(
    ds,
    job,
    source,
    limit,
    (batch) => {
      items.push(...batch);
    },
    { onProgress: () => undefined },
  );
  for (let cursor: Json = null; ;) {
    const page = await ds.transaction((tx) => Promise.resolve(source(cursor, limit, tx)));
    if (page.items.length === 0) break;
    cursors.push(page.next);
    cursor = page.next;
  }
  return { items, cursors };
}

async function insertRows(ds: DataSource, table: string, columns: string[], rows: unknown[][]): Promise<void> {
  for (let start = 0; start < rows.length; start += 200) {
    const chunk = rows.slice(start, start + 200);
    const values = chunk.map(() => `(${columns.map(() => '?').join(', ')})`).join(', ');
    await ds.query(sql(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${values}`), chunk.flat());
  }
}

const TIMESTAMP = DRIVER === 'postgres' ? 'timestamp(6)' : DRIVER === 'mysql' ? 'datetime(6)' : 'datetime';

/** `2024-03-10 01:59:59.999990` plus `micros` µs, as canonical text. */
function micros(base: number): string {
  const seconds = Math.floor(base / 1_000_000);
  const fraction = String(base % 1_000_000).padStart(6, '0');
  const date = new Date(Date.UTC(2024, 2, 10, 1, 59, 59) + seconds * 1000).toISOString().slice(0, 19).replace('T', ' ');
  return `${date}.${fraction}`;
}

describe(`composite and timestamp keys (${DRIVER})`, function () {
  const log = new SqlLog();
  const db = useTestDatabase('composite_keys', { logger: log });

  before(async () => {
    await db.ds.query(
      'CREATE TABLE tenant_rows (tenant integer NOT NULL, id integer NOT NULL, payload varchar(20), PRIMARY KEY (tenant, id))',
    );
    // Three tenants of 400 rows: one leading value spans many pages and many ranges.
    const rows: unknown[][] = [];
    for (let tenant = 1; tenant <= 3; tenant++) for (let id = 1; id <= 400; id++) rows.push([tenant, id * 3, `t${tenant}-${id}`]);
    await insertRows(db.ds, 'tenant_rows', ['tenant', 'id', 'payload'], rows);
  });

  it('pages a composite primary key in key order, every row once, the cursor an array of the last key', async () => {
    const source = await sqlSource(db.ds, 'tenant_rows', ['tenant', 'id']);
    const { items, cursors } = await drain(db.ds, 'composite-pk', source, 7);
    expect(items).to.have.length(1200);
    const keys = items.map((row) => [Number(row.tenant), Number(row.id)]);
    const sorted = [...keys].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    expect(keys).to.deep.equal(sorted);
    expect(new Set(keys.map((k) => k.join(':'))).size).to.equal(1200);
    expect(cursors[0]).to.deep.equal([1, 21]);
    expect((await status(db.ds, 'composite-pk'))!.cursor).to.deep.equal([3, 1200]);
    // A single-column key given as an array keeps its plain cursor.
    await db.ds.query('CREATE TABLE plain_rows (id integer PRIMARY KEY)');
    await insertRows(db.ds, 'plain_rows', ['id'], [[1], [2], [3]]);
    const plain = await drain(db.ds, 'plain', await sqlSource(db.ds, 'plain_rows', ['id']), 2);
    expect(plain.cursors).to.deep.equal([2, 3]);
  });

  it('accepts the key columns in any order (pages follow the given order) and refuses keys that are not unique', async () => {
    const reversed = await drain(db.ds, 'composite-reversed', await sqlSource(db.ds, 'tenant_rows', ['id', 'tenant']), 50);
    expect(reversed.items).to.have.length(1200);
    expect(reversed.items.slice(0, 3).map((row) => [Number(row.id), Number(row.tenant)])).to.deep.equal([
      [3, 1],
      [3, 2],
      [3, 3],
    ]);
    await expectCode(sqlSource(db.ds, 'tenant_rows', ['tenant']), 'NON_UNIQUE_KEY');
    await expectCode(sqlSource(db.ds, 'tenant_rows', ['tenant', 'payload']), 'NON_UNIQUE_KEY');
    // Extra columns beside a whole unique key are fine.
    expect(await sqlSource(db.ds, 'tenant_rows', ['tenant', 'id', 'payload'])).to.be.a('function');
    await expectCode(sqlSource(db.ds, 'tenant_rows', ['tenant', 'tenant', 'id']), 'INVALID_ARGUMENT');
    await expectCode(sqlSource(db.ds, 'tenant_rows', []), 'INVALID_ARGUMENT');
  });

  it('never visits rows with a NULL in any key column (a unique index over nullable columns)', async () => {
    await db.ds.query('CREATE TABLE nullable_keys (a integer, b varchar(10), note varchar(10))');
    await db.ds.query('CREATE UNIQUE INDEX nullable_keys_ab ON nullable_keys (a, b)');
    await insertRows(
      db.ds,
      'nullable_keys',
      ['a', 'b', 'note'],
      [
        [1, 'x', 'keep'],
        [1, null, 'skip'],
        [null, 'y', 'skip'],
        [2, 'a', 'keep'],
        [null, null, 'skip'],
        [1, 'y', 'keep'],
      ],
    );
    const { items } = await drain(db.ds, 'nullable', await sqlSource(db.ds, 'nullable_keys', ['a', 'b']), 1);
    expect(items.map((row) => [Number(row.a), row.b])).to.deep.equal([
      [1, 'x'],
      [1, 'y'],
      [2, 'a'],
    ]);
  });

  it('pages timestamp keys 1 µs apart, alone and composite, as canonical text with six fraction digits', async () => {
    await db.ds.query(`CREATE TABLE stamped (created_at ${TIMESTAMP} NOT NULL, id integer NOT NULL, PRIMARY KEY (created_at, id))`);
    await db.ds.query(`CREATE TABLE stamps (at ${TIMESTAMP} PRIMARY KEY)`);
    // 300 instants 1 µs apart crossing a second boundary; every instant shared by two ids.
    const instants = Array.from({ length: 300 }, (_, i) => micros(999_850 + i));
    await insertRows(
      db.ds,
      'stamped',
      ['created_at', 'id'],
      instants.flatMap((at, i) => [
        [at, i],
        [at, i + 1000],
      ]),
    );
    await insertRows(
      db.ds,
      'stamps',
      ['at'],
      instants.map((at) => [at]),
    );
    const composite = await drain(db.ds, 'stamped', await sqlSource(db.ds, 'stamped', ['created_at', 'id']), 9);
    expect(composite.items).to.have.length(600);
    expect(composite.items.map((row) => row.created_at)).to.deep.equal(instants.flatMap((at) => [at, at]));
    expect(composite.cursors[0]).to.deep.equal([instants[4], 4]);
    const alone = await drain(db.ds, 'stamps', await sqlSource(db.ds, 'stamps', 'at'), 7);
    expect(alone.items.map((row) => row.at)).to.deep.equal(instants);
    expect(alone.cursors.every((cursor) => typeof cursor === 'string' && /\.\d{6}$/.test(cursor))).to.equal(true);
  });

  if (DRIVER === 'postgres') {
    it('reads timestamptz keys as UTC text whatever the session time zone, across a DST change', async () => {
      await db.ds.query('CREATE TABLE zoned (at timestamptz PRIMARY KEY, d date NOT NULL)');
      const instants = Array.from({ length: 120 }, (_, i) => new Date(Date.UTC(2024, 2, 10, 6, 58) + i * 1000).toISOString());
      await insertRows(
        db.ds,
        'zoned',
        ['at', 'd'],
        instants.map((at) => [`${at.slice(0, 19)}.000001Z`, at.slice(0, 10)]),
      );
      const zoned = await db.open({ extra: { options: '-c TimeZone=America/New_York' } });
      expect((await zoned.query('SHOW TimeZone'))[0].TimeZone).to.equal('America/New_York');
      const { items, cursors } = await drain(zoned, 'zoned', await sqlSource(zoned, 'zoned', 'at'), 11);
      expect(items.map((row) => row.at)).to.deep.equal(instants.map((at) => `${at.slice(0, 19)}.000001Z`));
      expect(cursors[0]).to.equal(`${instants[10].slice(0, 19)}.000001Z`);
      await zoned.query('CREATE UNIQUE INDEX zoned_d_at ON zoned (d, at)');
      const dated = await drain(zoned, 'dated', await sqlSource(zoned, 'zoned', ['d', 'at']), 50);
      expect(dated.items[0].d).to.equal('2024-03-10');
      expect(dated.items).to.have.length(120);
    });
  }

  if (DRIVER === 'mysql') {
    it("reads DATETIME(6) keys unchanged whatever the session time zone and the driver's", async () => {
      await db.ds.query('CREATE TABLE zoned (at datetime(6) NOT NULL, id integer NOT NULL, PRIMARY KEY (at, id))');
      // Instants 1 µs apart across a second boundary, each shared by two ids.
      const instants = Array.from({ length: 60 }, (_, i) => micros(999_970 + i));
      await insertRows(
        db.ds,
        'zoned',
        ['at', 'id'],
        instants.flatMap((at, i) => [
          [at, i],
          [at, i + 100],
        ]),
      );
      // One connection, so the session's zone holds for every statement; the driver converts with another.
      const zoned = await db.open({ extra: { connectionLimit: 1, timezone: '+09:00' } });
      await zoned.query("SET time_zone = '-05:00'");
      expect((await zoned.query('SELECT @@session.time_zone AS zone'))[0].zone).to.equal('-05:00');
      const { items, cursors } = await drain(zoned, 'zoned', await sqlSource(zoned, 'zoned', ['at', 'id']), 7);
      expect(items.map((row) => row.at)).to.deep.equal(instants.flatMap((at) => [at, at]));
      expect(cursors[0]).to.deep.equal([instants[3], 3]);
      const result = await eachPartition(zoned, 'zoned-ranges', await sqlSource(zoned, 'zoned', ['at', 'id']), 5, () => undefined, {
        partitions: 4,
      });
      expect(result).to.include({ items: 120, done: true });
      expect(
        (await listPartitions(zoned, 'zoned-ranges'))
          .map((range) => range.upper)
          .slice(0, 3)
          .every((upper) => instants.includes((upper as string[])[0])),
      ).to.equal(true);
    });
  }

  it('reads a page in the middle of the table with an index range scan (EXPLAIN)', async () => {
    const source = await sqlSource(db.ds, 'tenant_rows', ['tenant', 'id']);
    if (DRIVER !== 'sqlite') await db.ds.query(DRIVER === 'postgres' ? 'ANALYZE tenant_rows' : 'ANALYZE TABLE tenant_rows');
    log.clear();
    await db.ds.transaction((tx) => Promise.resolve(source([2, 600], 50, tx)));
    const page = log.queries.find((query) => query.sql.includes('tenant_rows') && query.sql.includes('LIMIT'))!;
    expect(page, 'the page query was logged').to.not.equal(undefined);
    if (DRIVER === 'postgres') {
      const plan = (await db.ds.query(`EXPLAIN ${page.sql}`, page.parameters)) as { 'QUERY PLAN': string }[];
      const text = plan.map((row) => row['QUERY PLAN']).join('\n');
      expect(text).to.match(/Index (Only )?Scan using tenant_rows_pkey/);
      expect(text).to.match(/Index Cond: .*ROW\(tenant, id\) > ROW\(2, 600\)/);
    } else if (DRIVER === 'mysql') {
      const plan = (await db.ds.query(`EXPLAIN ${page.sql}`, page.parameters)) as { type: string; key: string }[];
      expect(plan[0]).to.include({ type: 'range', key: 'PRIMARY' });
    } else {
      const plan = (await db.ds.query(`EXPLAIN QUERY PLAN ${page.sql}`, page.parameters)) as { detail: string }[];
      expect(plan.map((row) => row.detail).join('\n')).to.match(/SEARCH tenant_rows USING INDEX \S+ \(\(tenant,id\)>\(\?,\?\)\)/);
    }
  });
});

describe(`eachPartition in one process (${DRIVER})`, function () {
  const db = useTestDatabase('partitions');
  const ROWS = 3000;

  before(async () => {
    // Skewed keys: half the rows dense at the bottom, the rest spread over a billion.
    await db.ds.query('CREATE TABLE skewed (id bigint PRIMARY KEY, payload varchar(20) NOT NULL)');
    await db.ds.query('CREATE TABLE copied (job varchar(40) NOT NULL, source_id bigint NOT NULL)');
    const ids = Array.from({ length: ROWS }, (_, i) => (i < ROWS / 2 ? i + 1 : 1_000_000 + (i - ROWS / 2) * 666_667));
    await insertRows(
      db.ds,
      'skewed',
      ['id', 'payload'],
      ids.map((id) => [id, `p${id}`]),
    );
  });

  const copy = (job: string) => async (items: Row[], tx: EntityManager) => {
    const values = items.map(() => '(?, ?)').join(', ');
    await tx.query(
      sql(`INSERT INTO copied (job, source_id) VALUES ${values}`),
      items.flatMap((row) => [job, row.id]),
    );
  };
  const copiedOnce = async (job: string) => {
    expect(await count(db.ds, sql('SELECT COUNT(*) FROM copied WHERE job = ?'), [job])).to.equal(ROWS);
    expect(await count(db.ds, sql('SELECT COUNT(DISTINCT source_id) FROM copied WHERE job = ?'), [job])).to.equal(ROWS);
  };

  it('plans ranges of similar row counts from skewed data, runs them all, and reports the job', async () => {
    const source = await sqlSource(db.ds, 'skewed', 'id');
    const result = await eachPartition(db.ds, 'skew', source, 97, copy('skew'), { partitions: 8, concurrency: 3 });
    expect(result).to.include({ partitions: 8, items: ROWS, done: true });
    await copiedOnce('skew');
    const ranges = await listPartitions(db.ds, 'skew');
    expect(ranges.map((range) => range.index)).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(ranges[0].lower).to.equal(null);
    expect(ranges[7].upper).to.equal(null);
    for (let i = 1; i < 8; i++) expect(ranges[i].lower).to.equal(ranges[i - 1].upper);
    const sizes = ranges.map((range) => range.items);
    expect(Math.max(...sizes)).to.be.at.most(2 * Math.min(...sizes));
    expect(ranges.every((range) => range.status === 'done' && range.attempts === 1 && typeof range.updatedAt === 'number')).to.equal(true);
    const stored = (await status(db.ds, 'skew'))!;
    expect(stored).to.include({ kind: 'partitioned', done: true, items: ROWS });
    expect(stored.partitions).to.deep.equal({ pending: 0, running: 0, done: 8, dead: 0 });
    expect((await list(db.ds, { kind: 'partitioned' })).map((job) => job.name)).to.include('skew');
    expect((await list(db.ds, { kind: 'batch' })).map((job) => job.name)).to.not.include('skew');
    // Done: a later call returns at once; another partitions count resumes the frozen plan.
    expect(await eachPartition(db.ds, 'skew', source, 97, copy('skew'), { partitions: 3 })).to.deep.equal({
      batches: 0,
      items: 0,
      partitions: 8,
      done: true,
    });
    await copiedOnce('skew');
    expect(await reset(db.ds, 'skew')).to.equal(true);
    expect(await listPartitions(db.ds, 'skew')).to.deep.equal([]);
    expect(await status(db.ds, 'skew')).to.equal(null);
  });

  if (DRIVER === 'postgres') {
    it('plans a big table from a sample of its rows (TABLESAMPLE BERNOULLI), still within 2x on skewed keys', async () => {
      await db.ds.query('CREATE TABLE big_skewed (id bigint PRIMARY KEY)');
      await db.ds.query(
        'INSERT INTO big_skewed SELECT CASE WHEN g <= 150000 THEN g ELSE 1000000 + g * 1000 END FROM generate_series(1, 300000) g',
      );
      await db.ds.query('ANALYZE big_skewed');
      const log = new SqlLog();
      const logged = await db.open({ logger: log });
      const result = await eachPartition(logged, 'sampled', await sqlSource(logged, 'big_skewed', 'id'), 20_000, () => undefined, {
        partitions: 8,
      });
      expect(result).to.include({ partitions: 8, items: 300_000, done: true });
      expect(log.queries.some((query) => query.sql.includes('TABLESAMPLE BERNOULLI'))).to.equal(true);
      const sizes = (await listPartitions(logged, 'sampled')).map((range) => range.items);
      // Rows sampled one by one: far inside 2x (a sample of whole pages gave ranges up to 5x apart).
      expect(Math.max(...sizes)).to.be.at.most(1.25 * Math.min(...sizes));
    });

    it('samples whole pages (TABLESAMPLE SYSTEM) only where every range gets enough of them', async () => {
      await db.ds.query('CREATE TABLE big_plain (id bigint PRIMARY KEY)');
      await db.ds.query('INSERT INTO big_plain SELECT g FROM generate_series(1, 450000) g');
      await db.ds.query('ANALYZE big_plain');
      const log = new SqlLog();
      const logged = await db.open({ logger: log });
      const source = await sqlSource(logged, 'big_plain', 'id');
      // 2 ranges: 40,000 rows from under a tenth of the pages. 8 ranges: that would be most of the table.
      const pages = await logged.transaction((tx) => source.partitioning.boundaries(2, tx));
      expect(
        log.queries.filter((query) => query.sql.includes('TABLESAMPLE')).map((query) => query.sql.match(/TABLESAMPLE \w+/)![0]),
      ).to.deep.equal(['TABLESAMPLE SYSTEM']);
      expect(pages).to.have.length(1);
      // The median of ~177 sampled pages of ~226 rows: σ ≈ 450,000·√(0.25/177) ≈ 17,000 rows, so
      // ±90,000 is over 5σ (±45,000, 2.7σ, failed about once in a hundred runs).
      expect(Number(pages[0])).to.be.within(225_000 - 90_000, 225_000 + 90_000);
      log.clear();
      expect(await logged.transaction((tx) => source.partitioning.boundaries(8, tx))).to.have.length(7);
      expect(log.queries.some((query) => query.sql.includes('TABLESAMPLE BERNOULLI'))).to.equal(true);
    });
  }

  it('splits one leading value of a composite key across ranges', async () => {
    await db.ds.query('CREATE TABLE one_tenant (tenant integer NOT NULL, id integer NOT NULL, PRIMARY KEY (tenant, id))');
    await insertRows(
      db.ds,
      'one_tenant',
      ['tenant', 'id'],
      Array.from({ length: 600 }, (_, i) => [i < 500 ? 7 : 8, i]),
    );
    const seen: Row[] = [];
    const result = await eachPartition(
      db.ds,
      'tenant',
      await sqlSource(db.ds, 'one_tenant', ['tenant', 'id']),
      40,
      (items) => {
        seen.push(...items);
      },
      { partitions: 4 },
    );
    expect(result).to.include({ partitions: 4, items: 600, done: true });
    const ranges = await listPartitions(db.ds, 'tenant');
    expect(ranges[1].lower).to.deep.equal([7, 149]);
    expect(ranges.map((range) => range.items)).to.deep.equal([150, 150, 150, 150]);
    expect(new Set(seen.map((row) => `${String(row.tenant)}:${String(row.id)}`)).size).to.equal(600);
  });

  it('fails a range whose handler throws (the error unchanged), kills it after 1 + maxRetries attempts, and retryDead revives it', async () => {
    const source = await sqlSource(db.ds, 'skewed', 'id');
    const failure = new Error('handler failed');
    let calls = 0;
    const failing = async (items: Row[], tx: EntityManager) => {
      if (items.some((row) => Number(row.id) === 1400)) {
        calls += 1;
        throw failure;
      }
      await copy('retry')(items, tx);
    };
    for (let attempt = 1; attempt <= 2; attempt++) {
      expect(await rejection(eachPartition(db.ds, 'retry', source, 100, failing, { partitions: 4, maxRetries: 1 }))).to.equal(failure);
    }
    expect(calls).to.equal(2);
    const ranges = await listPartitions(db.ds, 'retry');
    const dead = ranges.filter((range) => range.status === 'dead');
    expect(dead.map((range) => range.attempts)).to.deep.equal([2]);
    // The dead range is skipped: the others finish, the job is not done.
    const rest = await eachPartition(db.ds, 'retry', source, 100, failing, { partitions: 4, maxRetries: 1, wait: true });
    expect(rest.done).to.equal(false);
    expect((await status(db.ds, 'retry'))!.partitions).to.deep.equal({ pending: 0, running: 0, done: 3, dead: 1 });
    expect(await retryDead(db.ds, 'retry')).to.equal(1);
    expect(await retryDead(db.ds, 'retry')).to.equal(0);
    const healed = await eachPartition(db.ds, 'retry', source, 100, copy('retry'), {});
    expect(healed.done).to.equal(true);
    await copiedOnce('retry');
    expect((await status(db.ds, 'retry'))!.done).to.equal(true);
  });

  if (DRIVER === 'postgres') {
    it("costs three round trips a batch on PostgreSQL: the page, the handler's statement, and the fenced cursor update + COMMIT + next BEGIN", async () => {
      const counted = await db.open();
      try {
        const source = await sqlSource(counted, 'skewed', 'id');
        const counter = countRoundTrips(counted);
        const result = await eachPartition(counted, 'round-trips', source, 100, copy('round-trips'), { partitions: 1 });
        expect(result).to.deep.equal({ batches: 30, items: ROWS, partitions: 1, done: true });
        // 31 pages (the last one empty, ending the range). TypeORM's transactions would take five a
        // page (BEGIN, the page, the insert, the fenced update, COMMIT): about 170 here. Besides the
        // pages (16 here): the plan, the claims, the first BEGIN, the range's end and the job's.
        expect(counter.sent).to.be.at.most(3 * 31 + 20);
        await copiedOnce('round-trips');
      } finally {
        await counted.destroy();
      }
    });
  }

  it('stops on a signal after the batch in flight, releasing the range without counting an attempt; the next call resumes', async () => {
    const source = await sqlSource(db.ds, 'skewed', 'id');
    const controller = new AbortController();
    const first = await eachPartition(
      db.ds,
      'signal',
      source,
      100,
      async (items, tx) => {
        await copy('signal')(items, tx);
        controller.abort();
      },
      { partitions: 2, signal: controller.signal },
    );
    expect(first).to.deep.equal({ batches: 1, items: 100, partitions: 2, done: false, stopped: 'signal' });
    const ranges = await listPartitions(db.ds, 'signal');
    expect(ranges[0]).to.include({ status: 'pending', attempts: 0, batches: 1, items: 100 });
    expect(ranges[0].cursor).to.equal(100);
    expect(await eachPartition(db.ds, 'signal', source, 100, copy('signal'))).to.include({ done: true, items: ROWS - 100 });
    await copiedOnce('signal');
  });

  it('refuses to join a transaction, sources that cannot be split, bad options and another fingerprint', async () => {
    const source = await sqlSource(db.ds, 'skewed', 'id');
    await expectCode(
      runInTransaction(db.ds, () => eachPartition(db.ds, 'joined', source, 10, () => undefined)),
      'INVALID_ARGUMENT',
    );
    await expectCode(
      db.ds.transaction((tx) => eachPartition(tx, 'joined', source, 10, () => undefined)),
      'INVALID_ARGUMENT',
    );
    const plain = (cursor: Json) => ({ items: [], next: cursor });
    await expectCode(
      eachPartition(db.ds, 'plain', plain as never, 10, () => undefined),
      'INVALID_ARGUMENT',
    );
    await expectCode(
      eachPartition(db.ds, 'bad', source, 0, () => undefined),
      'INVALID_ARGUMENT',
    );
    await expectCode(
      eachPartition(db.ds, 'bad', source, 10, () => undefined, { partitions: 0 }),
      'INVALID_ARGUMENT',
    );
    await expectCode(
      eachPartition(db.ds, 'bad', source, 10, () => undefined, { concurrency: 1.5 }),
      'INVALID_ARGUMENT',
    );
    expect(await status(db.ds, 'joined')).to.equal(null);
    expect(await status(db.ds, 'bad')).to.equal(null);
    await eachPartition(db.ds, 'printed', source, 1000, () => undefined, { fingerprint: 'a' });
    await expectCode(
      eachPartition(db.ds, 'printed', source, 1000, () => undefined, { fingerprint: 'b' }),
      'FINGERPRINT_MISMATCH',
    );
    await eachBatch(db.ds, 'a-batch', source, 1000, () => undefined);
    const taken = await expectCode(
      eachPartition(db.ds, 'a-batch', source, 1000, () => undefined),
      'INVALID_ARGUMENT',
    );
    expect(taken).to.be.instanceOf(CheckpointError);
    expect(await listPartitions(db.ds, 'nobody')).to.deep.equal([]);
  });
});
