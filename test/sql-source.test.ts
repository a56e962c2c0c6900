import { expect } from 'chai';
import { type BeforeQueryEvent, Column, DataSource, Entity, type EntitySubscriberInterface, PrimaryColumn } from 'typeorm';
import { checkpointEntities, dataSourceOptionsFromUrl, eachBatch, type Json, sqlSource } from '../src';
import { DRIVER, sql, useTestDatabase } from './support/database';
import { expectCode } from './support/expect-code';
import { SqlLog } from './support/sql-log';

@Entity('widgets')
class Widget {
  @PrimaryColumn({ type: 'integer', name: 'widget_id' })
  widgetId!: number;

  @Column({ type: 'varchar', length: 40 })
  label!: string;
}

describe('sqlSource', () => {
  const log = new SqlLog();
  const db = useTestDatabase('sql_source', { entities: [Widget], logger: log });
  const ids = [5, 1, 100, 3, 42, 7, 8, 64, 2, 99, 1000, 11];

  before(async () => {
    await db.ds.query('CREATE TABLE src (id integer PRIMARY KEY, name varchar(50), grp integer, code varchar(20) UNIQUE)');
    for (const id of ids) {
      await db.ds.query(sql('INSERT INTO src (id, name, grp, code) VALUES (?, ?, ?, ?)'), [
        id,
        `n${id}`,
        id % 2,
        id % 3 === 0 ? null : `c${id}`,
      ]);
    }
    await db.ds.query('CREATE TABLE widgets (widget_id integer PRIMARY KEY, label varchar(40) NOT NULL)');
    await db.ds.query(sql('INSERT INTO widgets (widget_id, label) VALUES (?, ?), (?, ?)'), [2, 'b', 1, 'a']);
  });

  /** Runs a whole job over the source and returns every item it handled. */
  async function drain(name: string, source: Awaited<ReturnType<typeof sqlSource>>, limit = 3) {
    const items: Record<string, unknown>[] = [];
    await eachBatch(db.ds, name, source, limit, (batch) => {
      items.push(...batch);
    });
    return items;
  }

  it('visits every row once in key order, whatever the gaps, and never uses OFFSET', async () => {
    log.clear();
    const source = await sqlSource(db.ds, 'src', 'id');
    const seenCursors: Json[] = [];
    const items: Record<string, unknown>[] = [];
    await eachBatch(
      db.ds,
      'keyset',
      async (cursor, limit, tx) => {
        seenCursors.push(cursor);
        return source(cursor, limit, tx);
      },
      5,
      (batch) => {
        items.push(...batch);
      },
    );
    const sorted = [...ids].sort((a, b) => a - b);
    expect(items.map((r) => Number(r.id))).to.deep.equal(sorted);
    expect(seenCursors).to.deep.equal([null, sorted[4], sorted[9], sorted[11]]);
    const selects = log.queries.filter((q) => /FROM "src"|FROM `src`/.test(q.sql));
    expect(selects.length).to.be.greaterThan(0);
    for (const q of selects) {
      expect(q.sql).to.not.match(/OFFSET/i);
      expect(q.sql).to.match(/ORDER BY/i);
    }
    expect(Object.getPrototypeOf(items[0])).to.equal(Object.prototype);
  });

  it('reads its pages on better-sqlite3 as arrays made into rows; through TypeORM elsewhere and where a query subscriber listens', async () => {
    const isPage = (query: string) => /FROM [`"]?src[`"]? /.test(query) && /ORDER BY/.test(query);
    const pageLog = new SqlLog();
    const pages = () => pageLog.queries.filter((query) => isPage(query.sql));
    const seen: string[] = [];
    class QueryWatcher implements EntitySubscriberInterface {
      beforeQuery(event: BeforeQueryEvent): void {
        if (isPage(event.query)) seen.push(event.query);
      }
    }
    const run = async (watched: boolean) => {
      const ds = new DataSource({ ...dataSourceOptionsFromUrl(db.url), entities: checkpointEntities, logger: pageLog, logging: true });
      await ds.initialize();
      if (watched) ds.subscribers.push(new QueryWatcher());
      pageLog.clear();
      seen.length = 0;
      const items: Record<string, unknown>[] = [];
      try {
        await eachBatch(ds, `read-path-${watched}`, await sqlSource(ds, 'src', 'id'), 5, (batch) => void items.push(...batch));
      } finally {
        await ds.destroy();
      }
      return items;
    };
    const direct = await run(false);
    expect(pages().length).to.be.at.least(Math.ceil(ids.length / 5));
    const betterSqlite = db.ds.options.type === 'better-sqlite3';
    expect(pages().every((page) => page.viaRunner === !betterSqlite)).to.equal(true);
    expect(direct.map((row) => row.id)).to.deep.equal([...ids].sort((a, b) => a - b));

    const throughTypeorm = await run(true);
    expect(pages().every((page) => page.viaRunner)).to.equal(true);
    expect(seen).to.have.length(pages().length).and.not.be.empty;
    expect(throughTypeorm).to.deep.equal(direct);
  });

  it('never visits rows whose key is NULL', async () => {
    const items = await drain('nulls', await sqlSource(db.ds, 'src', 'code'));
    const expected = ids
      .filter((id) => id % 3 !== 0)
      .map((id) => `c${id}`)
      .sort();
    expect(items.map((r) => r.code).sort()).to.deep.equal(expected);
    expect(items.every((r) => r.code !== null)).to.equal(true);
  });

  it('binds where parameters and never splices them into SQL', async () => {
    log.clear();
    const evil = "x'); DROP TABLE src; --";
    const source = await sqlSource(db.ds, 'src', 'id', { where: 'grp = :g AND name <> :evil', parameters: { g: 1, evil } });
    const items = await drain('where', source);
    expect(items.map((r) => Number(r.id))).to.deep.equal(ids.filter((id) => id % 2 === 1).sort((a, b) => a - b));
    const texts = log.queries.map((q) => q.sql).join('\n');
    expect(texts).to.not.include('DROP TABLE');
    expect(log.queries.some((q) => q.parameters.includes(evil))).to.equal(true);
    expect((await db.ds.query('SELECT COUNT(*) AS n FROM src')) as unknown[]).to.have.length(1);
  });

  it('selects the given columns and always includes the key', async () => {
    const items = await drain('columns', await sqlSource(db.ds, 'src', 'id', { columns: ['name'] }));
    expect(items).to.have.length(ids.length);
    for (const item of items) expect(Object.keys(item).sort()).to.deep.equal(['id', 'name']);
  });

  it('accepts an entity target and property names', async () => {
    const items = await drain('entity', await sqlSource(db.ds, Widget, 'widgetId'));
    expect(items.map((r) => Number(r.widget_id))).to.deep.equal([1, 2]);
  });

  it('refuses keys that are not unique on their own with NON_UNIQUE_KEY (real catalogue)', async () => {
    await db.ds.query(
      'CREATE TABLE composite (a integer NOT NULL, b integer NOT NULL, c integer, d integer, e integer, f varchar(20), PRIMARY KEY (a, b))',
    );
    await db.ds.query('CREATE UNIQUE INDEX composite_cd ON composite (c, d)');
    await db.ds.query('CREATE INDEX src_grp ON src (grp)');
    // Unique indexes that do not make their column unique, as each database can express them:
    // MySQL/MariaDB have no partial indexes; a prefix index covers only the first characters.
    const notUniqueOnTheColumn: [string, string][] =
      DRIVER === 'mysql'
        ? [['f', 'CREATE UNIQUE INDEX composite_f_prefix ON composite (f(3))']]
        : [
            ['e', 'CREATE UNIQUE INDEX composite_e_partial ON composite (e) WHERE e > 0'],
            ['f', 'CREATE UNIQUE INDEX composite_f_lower ON composite (lower(f))'],
          ];
    for (const [, ddl] of notUniqueOnTheColumn) await db.ds.query(ddl);
    await expectCode(sqlSource(db.ds, 'src', 'grp'), 'NON_UNIQUE_KEY');
    await expectCode(sqlSource(db.ds, 'src', 'name'), 'NON_UNIQUE_KEY');
    await expectCode(sqlSource(db.ds, 'composite', 'a'), 'NON_UNIQUE_KEY');
    await expectCode(sqlSource(db.ds, 'composite', 'c'), 'NON_UNIQUE_KEY');
    await expectCode(sqlSource(db.ds, 'composite', 'e'), 'NON_UNIQUE_KEY');
    for (const [column] of notUniqueOnTheColumn) await expectCode(sqlSource(db.ds, 'composite', column), 'NON_UNIQUE_KEY');
    await db.ds.query('CREATE UNIQUE INDEX composite_e_full ON composite (e)');
    expect(await sqlSource(db.ds, 'composite', 'e')).to.be.a('function');
  });

  it('refuses unknown tables and columns, and unsupported key types, with INVALID_ARGUMENT', async () => {
    await expectCode(sqlSource(db.ds, 'no_such_table', 'id'), 'INVALID_ARGUMENT');
    await expectCode(sqlSource(db.ds, 'src', 'no_such_column'), 'INVALID_ARGUMENT');
    await expectCode(sqlSource(db.ds, 'src', 'id', { columns: ['name', 'nope'] }), 'INVALID_ARGUMENT');
    await expectCode(sqlSource(db.ds, 'src', 'id', { where: '' }), 'INVALID_ARGUMENT');
    const timeType = DRIVER === 'postgres' ? 'timestamp' : 'datetime';
    const floatType = DRIVER === 'postgres' ? 'double precision' : DRIVER === 'mysql' ? 'double' : 'real';
    await db.ds.query(`CREATE TABLE odd_keys (t ${timeType} UNIQUE, f ${floatType} UNIQUE, s varchar(10) PRIMARY KEY)`);
    // Timestamps are keys now (read as canonical text); floats never are.
    expect(await sqlSource(db.ds, 'odd_keys', 't')).to.be.a('function');
    await expectCode(sqlSource(db.ds, 'odd_keys', 'f'), 'INVALID_ARGUMENT');
    expect(await sqlSource(db.ds, 'odd_keys', 's')).to.be.a('function');
  });

  it("reads a table of another schema written schema.table (MySQL: a database; SQLite: an attached one), not the default schema's table of that name", async () => {
    const schema = DRIVER === 'mysql' ? `ck_src_${process.pid}` : 'other';
    const quoted = (name: string) => (DRIVER === 'mysql' ? `\`${name}\`` : `"${name}"`);
    if (DRIVER === 'sqlite') await db.ds.query(`ATTACH DATABASE ':memory:' AS ${quoted(schema)}`);
    else await db.ds.query(`CREATE ${DRIVER === 'mysql' ? 'DATABASE' : 'SCHEMA'} ${quoted(schema)}`);
    try {
      await db.ds.query(`CREATE TABLE ${quoted(schema)}.${quoted('src')} (id integer PRIMARY KEY, name varchar(50))`);
      await db.ds.query(`INSERT INTO ${quoted(schema)}.${quoted('src')} (id, name) VALUES (20, 'x'), (10, 'y'), (30, 'z')`);
      const items = await drain('other-schema', await sqlSource(db.ds, `${schema}.src`, 'id'), 2);
      expect(items.map((r) => `${Number(r.id)}:${r.name}`)).to.deep.equal(['10:y', '20:x', '30:z']);
      await expectCode(sqlSource(db.ds, 'no_such_schema.src', 'id'), 'INVALID_ARGUMENT');
    } finally {
      if (DRIVER === 'sqlite') await db.ds.query(`DETACH DATABASE ${quoted(schema)}`);
      else await db.ds.query(DRIVER === 'mysql' ? `DROP DATABASE ${quoted(schema)}` : `DROP SCHEMA ${quoted(schema)} CASCADE`);
    }
  });

  it('pages a text key in the database order, each row once', async () => {
    await db.ds.query('CREATE TABLE words (w varchar(20) PRIMARY KEY)');
    // MySQL's default collation is case-insensitive: there 'apple' would duplicate the key 'Apple'.
    const words = ['pear', 'Apple', ...(DRIVER === 'mysql' ? [] : ['apple']), 'zeta', 'Éclair', '10', '9', 'b'];
    for (const w of words) await db.ds.query(sql('INSERT INTO words (w) VALUES (?)'), [w]);
    const items = await drain('words', await sqlSource(db.ds, 'words', 'w'), 3);
    expect(items.map((r) => r.w).sort()).to.deep.equal([...words].sort());
  });

  if (DRIVER !== 'sqlite') {
    it('keeps a bigint key beyond 2^53 as a decimal string cursor', async () => {
      await db.ds.query('CREATE TABLE big (id bigint PRIMARY KEY)');
      const big = ['9007199254740993', '9007199254740995', '9007199254740997', '12', '9223372036854775807'];
      for (const id of big) await db.ds.query(sql('INSERT INTO big (id) VALUES (?)'), [id]);
      const cursors: Json[] = [];
      const source = await sqlSource(db.ds, 'big', 'id');
      const items: Record<string, unknown>[] = [];
      await eachBatch(
        db.ds,
        'big',
        async (cursor, limit, tx) => {
          cursors.push(cursor);
          return source(cursor, limit, tx);
        },
        2,
        (batch) => {
          items.push(...batch);
        },
      );
      expect(items.map((r) => String(r.id))).to.deep.equal([
        '12',
        '9007199254740993',
        '9007199254740995',
        '9007199254740997',
        '9223372036854775807',
      ]);
      expect(cursors).to.deep.equal([null, '9007199254740993', '9007199254740997', '9223372036854775807']);
    });
  }

  if (DRIVER === 'postgres') {
    it('pages a uuid key (PostgreSQL)', async () => {
      await db.ds.query('CREATE TABLE uu (id uuid PRIMARY KEY)');
      await db.ds.query('INSERT INTO uu (id) SELECT md5(g::text)::uuid FROM generate_series(1, 7) g');
      const items = await drain('uuid', await sqlSource(db.ds, 'uu', 'id'), 2);
      expect(new Set(items.map((r) => r.id)).size).to.equal(7);
    });
  }
});
