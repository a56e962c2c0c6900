// Hostile identifiers and conditions in sqlSource: table and column names with quotes, backticks,
// spaces, mixed case, SQL keywords, `:name` and `?` work as key, columns and in `where`; names
// that do not exist are INVALID_ARGUMENT; values (parameters, cursors, limits, job names) never
// reach the SQL text — checked on every statement TypeORM logged.
import { expect } from 'chai';
import { eachBatch, sqlSource, status } from '../src';
import { count, DRIVER, q, sql, useTestDatabase } from './support/database';
import { expectCode } from './support/expect-code';
import { SqlLog } from './support/sql-log';

const TABLE = 'Order Items"x';
const KEY = 'Key"Col';
const COLUMNS = ['select', 'we`ird col', 'MixedCase', 'a:lim', 'x?y', 'from'];
// Values that would break the SQL (or be found in it) if they were ever spliced into the text.
const EVIL = `it's "evil"; DROP TABLE ${q(TABLE)}; -- :lim ? $1 \\ \``;
const MIN_FROM = 777_000_001;

const placeholder = (n: number) => (DRIVER === 'postgres' ? `$${n}` : '?');

describe(`faults: hostile identifiers and conditions in sqlSource (${DRIVER})`, () => {
  const log = new SqlLog();
  const db = useTestDatabase('faults_identifiers', { logger: log });
  const keys = Array.from({ length: 23 }, (_, i) => 1_000_003 + i * 11);
  const textKeys = [
    "O'Brien",
    'say "hi"',
    'back`tick',
    ':lim',
    '?',
    '$1',
    '\'); DROP TABLE "select"; --',
    'back\\slash',
    'Zoë',
    '𝄞 clef',
    'plain',
  ];

  before(async () => {
    await db.ds.query(
      `CREATE TABLE ${q(TABLE)} (${q(KEY)} integer PRIMARY KEY, ${COLUMNS.slice(0, 5)
        .map((c) => `${q(c)} varchar(80)`)
        .join(', ')}, ${q('from')} integer NOT NULL)`,
    );
    for (const [i, key] of keys.entries()) {
      await db.ds.query(
        // Placeholders written out: sql() would rewrite the `?` inside "x?y" too.
        `INSERT INTO ${q(TABLE)} (${[KEY, ...COLUMNS].map(q).join(', ')}) VALUES (${[1, 2, 3, 4, 5, 6, 7].map(placeholder).join(', ')})`,
        // 'L' or 'K' (not 'l': MySQL's default collation compares text case-insensitively).
        [key, i % 3 === 0 ? EVIL : `s${i}`, `w${i}`, `M${i}`, i % 2 === 0 ? 'L' : 'K', `?${i}`, MIN_FROM + i],
      );
    }
    // A text key named by a keyword, in a table named by a keyword.
    await db.ds.query(`CREATE TABLE ${q('select')} (${q('order')} varchar(80) PRIMARY KEY, ${q('group')} integer)`);
    for (const [i, key] of textKeys.entries())
      await db.ds.query(sql(`INSERT INTO ${q('select')} (${q('order')}, ${q('group')}) VALUES (?, ?)`), [key, i]);
  });
  beforeEach(() => log.clear());

  /** No statement TypeORM ran since the last clear carries any of these strings in its SQL text. */
  function expectNotInSql(values: string[]): void {
    expect(log.queries.length).to.be.greaterThan(0);
    for (const query of log.queries) {
      for (const value of values) expect(query.sql, `a value reached the SQL text: ${value}`).to.not.include(value);
    }
  }

  it('key, columns and where over quoted, keyword, mixed-case, `:name` and `?` identifiers: every matching row once, in key order', async () => {
    const job = `job '"; DROP TABLE checkpoint_jobs; -- :lim ?`;
    const source = await sqlSource(db.ds, TABLE, KEY, {
      columns: COLUMNS,
      // A literal and a quoted name that look like parameters, a comment, and real parameters.
      where: `${q('a:lim')} = :lim AND ${q('select')} <> ':not_a_parameter' AND ${q('x?y')} <> '?' -- :neither\n AND ${q('from')} >= :min AND ${q('select')} <> :evil`,
      parameters: { lim: 'L', min: MIN_FROM, evil: EVIL },
    });
    const items: Record<string, unknown>[] = [];
    const result = await eachBatch(db.ds, job, source, 4, (batch) => {
      items.push(...batch);
    });
    const expected = keys.filter((_, i) => i % 2 === 0 && i % 3 !== 0);
    expect(items.map((item) => Number(item[KEY]))).to.deep.equal(expected);
    for (const item of items) {
      expect(Object.keys(item).sort()).to.deep.equal([KEY, ...COLUMNS].sort());
      expect(Object.getPrototypeOf(item)).to.equal(Object.prototype);
      expect(item['a:lim']).to.equal('L');
    }
    expect(result).to.include({ done: true, items: expected.length });
    expect(await status(db.ds, job)).to.include({ done: true, items: expected.length });
    expectNotInSql([EVIL, 'DROP TABLE', String(MIN_FROM), ...expected.map(String), 'LIMIT 4', job]);
    expect(await count(db.ds, `SELECT COUNT(*) FROM ${q(TABLE)}`)).to.equal(keys.length);
  });

  it('a text key with quotes, backslashes, `:name`, `?` and non-BMP characters: each row once, cursors always bound', async () => {
    const items: Record<string, unknown>[] = [];
    await eachBatch(db.ds, 'hostile text keys', await sqlSource(db.ds, 'select', 'order', { columns: ['group'] }), 2, (batch) => {
      items.push(...batch);
    });
    expect(items.map((item) => item.order).sort()).to.deep.equal([...textKeys].sort());
    expect(new Set(items.map((item) => item.order)).size).to.equal(textKeys.length);
    expectNotInSql(textKeys.filter((key) => key.length > 2));
    expect(await count(db.ds, `SELECT COUNT(*) FROM ${q('select')}`)).to.equal(textKeys.length);
  });

  if (DRIVER === 'postgres') {
    it('PostgreSQL casts, dollar quotes and E-strings in where are left alone', async () => {
      const source = await sqlSource(db.ds, TABLE, KEY, {
        where: `${q('from')}::text <> $q$:not_a_parameter$q$ AND ${q('x?y')} <> E'\\':nor_this' AND ${q('from')} = :f`,
        parameters: { f: MIN_FROM + 4 },
      });
      const page = await db.ds.transaction(async (tx) => source(null, 10, tx));
      expect(page.items.map((item) => Number(item[KEY]))).to.deep.equal([keys[4]]);
    });
  }

  it('names that do not exist, broken or unbound conditions and spliced parameters are INVALID_ARGUMENT; nothing runs', async () => {
    await expectCode(sqlSource(db.ds, 'Order Items"y', KEY), 'INVALID_ARGUMENT');
    await expectCode(sqlSource(db.ds, `${TABLE}"; DROP TABLE ${q(TABLE)}; --`, KEY), 'INVALID_ARGUMENT');
    await expectCode(sqlSource(db.ds, TABLE, 'Key"Col"'), 'INVALID_ARGUMENT');
    await expectCode(sqlSource(db.ds, TABLE, KEY, { columns: ['select', 'selec'] }), 'INVALID_ARGUMENT');
    await expectCode(sqlSource(db.ds, TABLE, KEY, { columns: ['we`ird col '] }), 'INVALID_ARGUMENT');
    if (DRIVER === 'postgres') {
      // Quoted names are case-sensitive there (SQLite matches names case-insensitively).
      await expectCode(sqlSource(db.ds, TABLE.toLowerCase(), KEY), 'INVALID_ARGUMENT');
      await expectCode(sqlSource(db.ds, TABLE, KEY, { columns: ['mixedcase'] }), 'INVALID_ARGUMENT');
    }
    // Unquoted: SQLite builds with double-quoted string literals enabled (node-sqlite3) read an unknown "name" as a string.
    await expectCode(sqlSource(db.ds, TABLE, KEY, { where: 'no_such_column = :v', parameters: { v: 1 } }), 'INVALID_ARGUMENT');
    await expectCode(sqlSource(db.ds, TABLE, KEY, { where: `${q('select')} = :missing`, parameters: { other: 1 } }), 'INVALID_ARGUMENT');
    await expectCode(sqlSource(db.ds, TABLE, KEY, { where: `${q('select')} = = :v`, parameters: { v: 1 } }), 'INVALID_ARGUMENT');
    await expectCode(
      sqlSource(db.ds, TABLE, KEY, { where: `${q('select')} = :v`, parameters: { v: () => `'x' OR 1 = 1` } }),
      'INVALID_ARGUMENT',
    );
    expect(log.queries.some((query) => query.sql.includes(`'x' OR 1 = 1`))).to.equal(false);
    expect(await count(db.ds, `SELECT COUNT(*) FROM ${q(TABLE)}`)).to.equal(keys.length);
  });
});
