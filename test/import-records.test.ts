import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { Column, Entity, PrimaryColumn } from 'typeorm';
import { checkpoint, fileDigest, importFile, InvalidInputError, runInTransaction, values } from '../src';
import { DuplicateIds, numberHash } from '../src/import/duplicate-ids';
import { expectCode } from './support/expect-code';
import { count, DRIVER, q, sql, useTestDatabase } from './support/database';

@Entity('prices')
class Price {
  @PrimaryColumn({ type: 'varchar', length: 20 })
  sku!: string;

  @Column({ name: 'unit_price', type: 'decimal', precision: 10, scale: 2 })
  unitPrice!: string;

  @Column({ type: 'varchar', length: 40, nullable: true })
  label!: string | null;

  @Column({ type: 'simple-enum', enum: ['eur', 'usd'], default: 'eur' })
  currency!: string;
}

// An entity's uuid over a VARCHAR(36) column: what TypeORM makes of it on SQLite (and on MySQL without a UUID type).
@Entity('tokens')
class Token {
  @PrimaryColumn({ type: 'integer' })
  n!: number;

  @Column({ type: 'uuid', nullable: true })
  uid!: string | null;
}

// A schema of the test's own (MySQL: a database; SQLite: an attached database file).
const SALES = DRIVER === 'mysql' ? `ck_sales_${process.pid}` : 'sales';

@Entity({ name: 'orders', schema: SALES })
class SalesOrder {
  @PrimaryColumn({ type: 'varchar', length: 20 })
  sku!: string;

  @Column({ name: 'unit_price', type: 'decimal', precision: 10, scale: 2 })
  unitPrice!: string;
}

/** SQL reading a column as text: no driver conversion (a Date would drop microseconds). */
function asText(column: string): string {
  if (DRIVER === 'postgres') return `${q(column)}::text`;
  if (DRIVER === 'mysql') return `CAST(${q(column)} AS CHAR)`;
  return `CAST(${q(column)} AS TEXT)`;
}

const TYPED_TABLE: Record<typeof DRIVER, string[]> = {
  postgres: [
    "CREATE TYPE color_t AS ENUM ('red', 'green', 'Blue')",
    `CREATE TABLE typed (n INTEGER PRIMARY KEY, req INTEGER NOT NULL, small SMALLINT, big BIGINT, num NUMERIC(6,2), flt DOUBLE PRECISION,
       flag BOOLEAN, day DATE, at TIMESTAMP(6), atz TIMESTAMPTZ, uid UUID, doc JSONB, name VARCHAR(5), color color_t, other INTERVAL,
       flt4 REAL, at0 TIMESTAMP(0))`,
  ],
  mysql: [
    `CREATE TABLE typed (n INT PRIMARY KEY, req INT NOT NULL, small SMALLINT, big BIGINT, num DECIMAL(6,2), flt DOUBLE,
       flag BOOLEAN, day DATE, at DATETIME(6), atz DATETIME(6), uid UUID, doc JSON, name VARCHAR(5), color ENUM('red', 'green', 'Blue'), other TIME,
       flt4 FLOAT, at0 DATETIME)`,
  ],
  sqlite: [
    `CREATE TABLE typed (n INTEGER PRIMARY KEY, req INTEGER NOT NULL, small SMALLINT, big BIGINT, num DECIMAL(6,2), flt DOUBLE,
       flag BOOLEAN, day DATE, at DATETIME, atz DATETIME, uid UUID, doc JSON, name VARCHAR(5), color VARCHAR(10), other BLOB,
       flt4 REAL, at0 DATETIME)`,
  ],
};

/** One case of the type table: the field's value in an NDJSON row, accepted (with the stored text, when checked) or refused. */
interface TypeCase {
  column: string;
  value: unknown;
  stored?: string | ((text: string) => boolean) | null;
  refused?: boolean;
  only?: (typeof DRIVER)[];
}

const TYPE_CASES: TypeCase[] = [
  { column: 'small', value: '32767', stored: '32767' },
  { column: 'small', value: -32768, stored: '-32768' },
  { column: 'small', value: '32768', refused: true },
  { column: 'small', value: '1.5', refused: true },
  { column: 'small', value: '1e3', refused: true },
  { column: 'small', value: '', refused: true },
  { column: 'big', value: '9223372036854775807', stored: '9223372036854775807' },
  { column: 'big', value: '-9223372036854775809', refused: true },
  { column: 'num', value: '1234.56', stored: (t) => Number(t) === 1234.56 },
  { column: 'num', value: '1.2e2', stored: (t) => Number(t) === 120 },
  { column: 'num', value: '-0.5', stored: (t) => Number(t) === -0.5 },
  { column: 'num', value: '1234.567', refused: true },
  { column: 'num', value: '12345.6', refused: true },
  { column: 'num', value: 'abc', refused: true },
  { column: 'num', value: '+5', refused: true },
  { column: 'flt', value: '1.5', stored: (t) => Number(t) === 1.5 },
  { column: 'flt', value: 'NaN', stored: 'NaN', only: ['postgres'] },
  { column: 'flt', value: 'NaN', refused: true, only: ['sqlite', 'mysql'] },
  { column: 'flt', value: 'x', refused: true },
  { column: 'flt', value: '-Infinity', stored: '-Infinity', only: ['postgres'] },
  { column: 'flt', value: 'Infinity', refused: true, only: ['sqlite', 'mysql'] },
  { column: 'flt', value: 2.5e-7, stored: (t) => Number(t) === 2.5e-7 },
  // Beyond a double's range, or a non-zero value a double would store as 0: refused in pass 1, not by the database mid-import.
  { column: 'flt', value: '1e400', refused: true },
  { column: 'flt', value: '-2.5e-400', refused: true },
  { column: 'flt4', value: '3.5', stored: (t) => Number(t) === 3.5 },
  { column: 'flt4', value: '1e39', refused: true, only: ['postgres', 'mysql'] },
  { column: 'flt4', value: '1e-50', refused: true, only: ['postgres', 'mysql'] },
  { column: 'flag', value: 'YES', stored: (t) => t === 'true' || t === '1' },
  { column: 'flag', value: 'f', stored: (t) => t === 'false' || t === '0' },
  { column: 'flag', value: true, stored: (t) => t === 'true' || t === '1' },
  { column: 'flag', value: 0, stored: (t) => t === 'false' || t === '0' },
  { column: 'flag', value: '2', refused: true },
  { column: 'day', value: '2024-02-29', stored: '2024-02-29' },
  { column: 'day', value: '2023-02-29', refused: true },
  { column: 'day', value: '2024-13-01', refused: true },
  { column: 'day', value: '2024-1-01', refused: true },
  { column: 'at', value: '2024-01-02T03:04:05.123456', stored: '2024-01-02 03:04:05.123456' },
  { column: 'at', value: '2024-01-02 03:04:05.000001+02:00', stored: '2024-01-02 01:04:05.000001' },
  { column: 'at', value: '2024-01-01T00:30:00.5-01:00', stored: (t) => t.startsWith('2024-01-01 01:30:00.5') },
  { column: 'at', value: '2024-01-02T03:04:05.654321Z', stored: '2024-01-02 03:04:05.654321' },
  { column: 'at', value: '2024-01-02T03:04:05', stored: (t) => t.startsWith('2024-01-02 03:04:05') },
  { column: 'at', value: '2024-01-02T03:04:05.1234567', refused: true },
  // Up to 6 fraction digits whatever the column keeps: the database rounds them to its precision.
  { column: 'at0', value: '2024-01-02T03:04:05.123456', stored: (t) => t.startsWith('2024-01-02 03:04:05') },
  { column: 'at', value: '2024-01-02', refused: true },
  { column: 'at', value: '2024-02-30T00:00:00', refused: true },
  { column: 'at', value: 'yesterday', refused: true },
  { column: 'atz', value: '2024-06-30T23:59:59.999999', stored: '2024-06-30 23:59:59.999999+00', only: ['postgres'] },
  { column: 'atz', value: '2024-06-30T23:59:59.999999+05:30', stored: '2024-06-30 18:29:59.999999+00', only: ['postgres'] },
  {
    column: 'uid',
    value: 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11',
    stored: (t) => t.toLowerCase() === 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
  },
  { column: 'uid', value: 'a0eebc99-9c0b-4ef8-bb6d', refused: true },
  {
    column: 'doc',
    value: { a: [1, 'two', null], b: { c: true } },
    stored: (t) => JSON.stringify(JSON.parse(t)) === '{"a":[1,"two",null],"b":{"c":true}}',
  },
  { column: 'doc', value: [1, 2], stored: (t) => JSON.stringify(JSON.parse(t)) === '[1,2]' },
  { column: 'uid', value: 'a0eebc999c0b4ef8bb6d6bb9bd380a11', refused: true },
  { column: 'uid', value: 'g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', refused: true },
  // PostgreSQL's own uuid input takes these forms (MariaDB's, one without hyphens): refused in pass 1 all the same.
  { column: 'uid', value: '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}', refused: true },
  { column: 'uid', value: '{a0eebc999c0b4ef8bb6d6bb9bd380a11}', refused: true },
  { column: 'big', value: 42, stored: '42' },
  { column: 'big', value: 1.5, refused: true },
  { column: 'num', value: 7, stored: (t) => Number(t) === 7 },
  { column: 'num', value: '1.', refused: true },
  { column: 'flag', value: 'No', stored: (t) => t === 'false' || t === '0' },
  { column: 'day', value: '2024-01-01T00:00:00', refused: true },
  { column: 'name', value: 'héllo', stored: 'héllo' },
  { column: 'name', value: 123, stored: '123' },
  { column: 'name', value: 'toolong', refused: true },
  { column: 'name', value: true, refused: true },
  { column: 'name', value: false, refused: true },
  { column: 'name', value: { a: 1 }, refused: true },
  { column: 'name', value: [1], refused: true },
  { column: 'name', value: 'a\u0000b', refused: true, only: ['postgres'] },
  { column: 'color', value: 'red', stored: 'red', only: ['postgres', 'mysql'] },
  { column: 'color', value: 'blue', refused: true, only: ['postgres', 'mysql'] },
  // A label as declared, capitals included.
  { column: 'color', value: 'Blue', stored: 'Blue', only: ['postgres', 'mysql'] },
  { column: 'req', value: null, refused: true },
];

describe(`importFile records mode (${DRIVER})`, () => {
  const database = useTestDatabase('records', { entities: [Price, Token] });
  let dir: string;
  let files = 0;
  const file = (name: string, content: string | Buffer) => {
    const path = join(dir, `${++files}-${name}`);
    writeFileSync(path, content);
    return path;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'records-'));
    await database.ds.query(
      `CREATE TABLE prices (sku VARCHAR(20) PRIMARY KEY, unit_price DECIMAL(10,2) NOT NULL, label VARCHAR(40), currency VARCHAR(3) NOT NULL DEFAULT 'eur')`,
    );
    for (const statement of TYPED_TABLE[DRIVER]) await database.ds.query(statement);
    await database.ds.query('CREATE TABLE tokens (n INTEGER PRIMARY KEY, uid VARCHAR(36))');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  beforeEach(async () => {
    await database.ds.query('DELETE FROM prices');
    await database.ds.query('DELETE FROM checkpoint_import_rejects');
  });

  const prices = async () =>
    (
      (await database.ds.query(`SELECT sku, ${asText('unit_price')} AS price, label, currency FROM prices ORDER BY sku`)) as Record<
        string,
        string
      >[]
    ).map((row) => `${row.sku}:${Number(row.price)}:${row.label}:${row.currency}`);

  describe('reading records', () => {
    it('JSON, NDJSON and CSV records go into an entity by property name; a rerun is a no-op', async () => {
      const records = [
        { sku: 'a1', unitPrice: '12.50', label: 'Apple', currency: 'usd' },
        { sku: 'b2', unitPrice: 3, label: null },
        { sku: 'c3', unit_price: 0.99, label: 'Cherry, "red"\nfresh' },
      ];
      const expected = ['a1:12.5:Apple:usd', 'b2:3:null:eur', 'c3:0.99:Cherry, "red"\nfresh:eur'];
      const sources = {
        json: file('prices.json', JSON.stringify(records)),
        ndjson: file('prices.ndjson', `${records.map((r) => JSON.stringify(r)).join('\r\n')}\r\n\r\n`),
        csv: file(
          'prices.csv',
          '\uFEFFsku,unitPrice,label,currency\r\na1,12.50,Apple,usd\r\nb2,3,,eur\r\nc3,0.99,"Cherry, ""red""\nfresh",eur\r\n',
        ),
      };
      for (const [format, path] of Object.entries(sources)) {
        await database.ds.query('DELETE FROM prices');
        const result = await importFile(database.ds, `prices-${format}`, path, { into: Price, size: 2 });
        expect(result, format).to.deep.include({
          nextIndex: 3,
          rows: 3,
          done: true,
          skipped: 0,
          invalid: 0,
          digest: await fileDigest(path),
        });
        expect(await prices(), format).to.deep.equal(expected);
        expect(await checkpoint(database.ds, `prices-${format}`)).to.equal(3);
        expect(await values(database.ds, `prices-${format}`)).to.deep.equal([]);
        const again = await importFile(database.ds, `prices-${format}`, path, { into: Price, size: 2 });
        expect(again).to.deep.include({ rows: 0, done: true });
      }
    });

    it('a UTF-8 BOM is not part of the first record in JSON, NDJSON or CSV; CRLF ends lines in NDJSON and CSV', async () => {
      const sources = {
        json: '\uFEFF[{"sku":"m1","unit_price":1},\r\n{"sku":"m2","unit_price":2}]',
        ndjson: '\uFEFF{"sku":"m1","unit_price":1}\r\n{"sku":"m2","unit_price":2}\r\n',
        csv: '\uFEFFsku,unit_price\r\nm1,1\r\nm2,2\r\n',
      };
      for (const [format, content] of Object.entries(sources)) {
        await database.ds.query('DELETE FROM prices');
        const result = await importFile(database.ds, `bom-${format}`, file(`bom.${format}`, content), { into: 'prices', size: 1 });
        expect(result, format).to.include({ rows: 2, invalid: 0, done: true });
        expect(await prices(), format).to.deep.equal(['m1:1:null:eur', 'm2:2:null:eur']);
      }
    });

    it('CSV options: no header with csv.columns, delimiter, quote and escape, a null text', async () => {
      const path = file('semi.csv', "a1;'1.5';NULL\nb2;2;'it\\'s'\nc3;3;''\n");
      const result = await importFile(database.ds, 'semi', path, {
        into: 'prices',
        csv: { columns: ['sku', 'unit_price', 'label'], delimiter: ';', quote: "'", escape: '\\', null: 'NULL' },
      });
      expect(result).to.include({ rows: 3, done: true });
      expect(await prices()).to.deep.equal(['a1:1.5:null:eur', "b2:2:it's:eur", 'c3:3::eur']);
    });

    it('ragged CSV records are invalid rows; an empty or repeated header name rejects the file', async () => {
      const ragged = file('ragged.csv', 'sku,unit_price\na1,1\nb2\nc3,3,x\nd4,4\n');
      const error = (await expectCode(importFile(database.ds, 'ragged', ragged, { into: 'prices' }), 'INVALID_INPUT')) as InvalidInputError;
      expect(error.index).to.equal(1);
      const skipped = await importFile(database.ds, 'ragged-skip', ragged, { into: 'prices', invalid: 'skip' });
      expect(skipped).to.include({ rows: 2, invalid: 2 });
      expect(await prices()).to.deep.equal(['a1:1:null:eur', 'd4:4:null:eur']);
      for (const header of ['sku,,unit_price\n', 'sku,sku,unit_price\n']) {
        const path = file('header.csv', `${header}a,b,1\n`);
        await expectCode(importFile(database.ds, 'header', path, { into: 'prices', invalid: 'skip' }), 'INVALID_INPUT');
        expect(await checkpoint(database.ds, 'header')).to.equal(null);
      }
    });

    it('a JSON item that is not an object, or malformed inside, is an invalid row; a broken array rejects the file', async () => {
      const path = file('mixed.json', '[{"sku":"a1","unit_price":1}, 7, {"sku": }, ["x"], {"sku":"e5","unit_price":5}]');
      const result = await importFile(database.ds, 'mixed', path, { into: 'prices', invalid: 'skip' });
      expect(result).to.include({ rows: 2, invalid: 3, nextIndex: 5 });
      const rejects = (await database.ds.query(
        sql('SELECT row_index, raw FROM checkpoint_import_rejects WHERE batch = ? ORDER BY row_index'),
        ['mixed'],
      )) as {
        row_index: number | string;
        raw: string;
      }[];
      expect(rejects.map((r) => [Number(r.row_index), r.raw])).to.deep.equal([
        [1, '7'],
        [2, '{"sku": }'],
        [3, '["x"]'],
      ]);
      const broken = file('broken.json', '[{"sku":"a1","unit_price":1} {"sku":"b2","unit_price":2}]');
      await expectCode(importFile(database.ds, 'broken', broken, { into: 'prices', invalid: 'skip' }), 'INVALID_INPUT');
      expect(await checkpoint(database.ds, 'broken')).to.equal(null);
    });

    it('a number item is no record either: an invalid row, as a string, null, an array or a boolean, in a JSON array and in NDJSON', async () => {
      const items = ['{"sku":"a1","unit_price":1}', '42', '"x"', 'null', '[1]', 'true', '-0.5e3', '{"sku":"d4","unit_price":4}'];
      const sources = { json: `[${items.join(', ')}]`, ndjson: `${items.join('\n')}\n` };
      for (const [format, content] of Object.entries(sources)) {
        const path = file(`items.${format}`, content);
        const error = (await expectCode(
          importFile(database.ds, `items-${format}`, path, { records: true, handler: () => undefined }),
          'INVALID_INPUT',
        )) as InvalidInputError;
        expect(error.index, format).to.equal(1);
        expect(await checkpoint(database.ds, `items-${format}`), format).to.equal(null);
        // `into` a table: the row is refused as a whole, not for a column its number cannot fill.
        const into = (await expectCode(
          importFile(database.ds, `items-into-${format}`, path, { into: 'prices' }),
          'INVALID_INPUT',
        )) as InvalidInputError;
        expect([into.index, into.field], format).to.deep.equal([1, undefined]);
        const seen: unknown[] = [];
        const result = await importFile(database.ds, `items-skip-${format}`, path, {
          records: true,
          invalid: 'skip',
          handler: (records: Record<string, unknown>[]) => void seen.push(...records),
        });
        expect(result, format).to.include({ rows: 2, invalid: 6, nextIndex: 8 });
        expect(seen, format).to.deep.equal([
          { sku: 'a1', unit_price: 1 },
          { sku: 'd4', unit_price: 4 },
        ]);
        const rejects = (await database.ds.query(
          sql('SELECT row_index, raw FROM checkpoint_import_rejects WHERE batch = ? ORDER BY row_index'),
          [`items-skip-${format}`],
        )) as { row_index: number | string; raw: string }[];
        expect(
          rejects.map((r) => [Number(r.row_index), r.raw]),
          format,
        ).to.deep.equal(items.slice(1, 7).map((raw, i) => [i + 1, raw]));
      }
    });

    it("a reject's raw text is cut to 4,096 UTF-8 bytes at a character boundary", async () => {
      const long = 'é'.repeat(3000);
      const path = file('long.csv', `sku,unit_price\n${long},1\nok,2\n`);
      expect(await importFile(database.ds, 'long', path, { into: 'prices', invalid: 'skip' })).to.include({ rows: 1, invalid: 1 });
      const [reject] = (await database.ds.query(sql('SELECT raw FROM checkpoint_import_rejects WHERE batch = ?'), ['long'])) as {
        raw: string;
      }[];
      expect(Buffer.byteLength(reject.raw)).to.equal(4096);
      expect(reject.raw).to.equal('é'.repeat(2048));
    });

    it('records: true hands records (JSON types kept) to the handler with the chunk start', async () => {
      const path = file('handler.ndjson', '{"a":1,"b":[true,{"c":"x"}]}\n{"a":2.5}\n{"a":null}\n');
      const seen: [number, unknown[]][] = [];
      const result = await importFile(database.ds, 'handler', path, {
        records: true,
        size: 2,
        handler: (records: Record<string, unknown>[], _tx, start) => void seen.push([start, records]),
      });
      expect(result).to.include({ rows: 3, done: true });
      expect(seen).to.deep.equal([
        [0, [{ a: 1, b: [true, { c: 'x' }] }, { a: 2.5 }]],
        [2, [{ a: null }]],
      ]);
    });
  });

  describe('the type table', () => {
    const cases = TYPE_CASES.filter((c) => !c.only || c.only.includes(DRIVER));

    /**
     * Checks what the import `batch` made of `cases` (row i has n = base + i): refused ones are
     * rejects naming their column, accepted ones stored as the case says. Returns the stored rows by n.
     */
    async function expectCases(
      batch: string,
      cases: TypeCase[],
      base: number,
      extraRejects: [index: number, column: string][] = [],
    ): Promise<Map<number, Record<string, string | null>>> {
      const refused = cases.flatMap((c, i) => (c.refused ? [[i, c.column] as [number, string]] : []));
      const rejects = (await database.ds.query(
        sql('SELECT row_index, reason FROM checkpoint_import_rejects WHERE batch = ? ORDER BY row_index'),
        [batch],
      )) as {
        row_index: number | string;
        reason: string;
      }[];
      const expected = [...refused, ...extraRejects];
      expect(rejects.map((r) => Number(r.row_index))).to.deep.equal(expected.map(([i]) => i));
      rejects.forEach((reject, r) => expect(reject.reason, `row ${expected[r][0]}`).to.match(new RegExp(`^${expected[r][1]}: `)));
      const columns = [...new Set([...cases.map((c) => c.column), 'big', 'num'])];
      const rows = (await database.ds.query(`SELECT n, ${columns.map((c) => `${asText(c)} AS ${q(c)}`).join(', ')} FROM typed`)) as Record<
        string,
        string | null
      >[];
      const byN = new Map(rows.map((row) => [Number(row.n), row]));
      cases.forEach((c, i) => {
        const n = base + i;
        if (c.refused) return expect(byN.has(n), `row ${i} (${c.column} ${JSON.stringify(c.value)})`).to.equal(false);
        const stored = byN.get(n)?.[c.column];
        expect(stored, `row ${i} (${c.column} ${JSON.stringify(c.value)})`).to.not.equal(undefined);
        if (typeof c.stored === 'function') expect(c.stored(String(stored)), `row ${i}: ${stored}`).to.equal(true);
        else if (c.stored === null) expect(stored, `row ${i}`).to.equal(null);
        else if (c.stored !== undefined) expect(String(stored), `row ${i}`).to.equal(c.stored);
      });
      return byN;
    }

    it('accepts and refuses each type as the table says, microseconds kept, nothing rounded', async () => {
      const lines = cases.map((c, n) => JSON.stringify(c.column === 'req' ? { n, req: c.value } : { n, req: 1, [c.column]: c.value }));
      lines.push(JSON.stringify({ n: cases.length }));
      // An int8 beyond 2^53 written as a JSON number keeps every digit; a text column gets a number's source text.
      lines.push(`{"n": ${cases.length + 1}, "req": 1, "big": 9007199254740993, "num": 12.50, "name": 12.50}`);
      const path = file('typed.ndjson', `${lines.join('\n')}\n`);
      const result = await importFile(database.ds, 'typed', path, { into: 'typed', invalid: 'skip' });
      expect(result).to.include({ done: true, invalid: cases.filter((c) => c.refused).length + 1 });
      const byN = await expectCases('typed', cases, 0, [[cases.length, 'req']]);
      expect(byN.get(cases.length + 1)?.big).to.equal('9007199254740993');
      expect(Number(byN.get(cases.length + 1)?.num)).to.equal(12.5);
      expect(byN.get(cases.length + 1)?.name).to.equal('12.50');
    });

    // Only PostgreSQL's numeric without a typmod shows it: it keeps the scale it is given.
    if (DRIVER === 'postgres') {
      it('a JSON number or decimal text fills an unconstrained numeric with its digits as given (12.50 stays 12.50)', async () => {
        await database.ds.query('CREATE TABLE exact_numbers (n integer PRIMARY KEY, v numeric, s numeric(6,2))');
        const given = ['12.50', '1.50e1', '1e3', '-0.00', '0.0015', '7'];
        const expected = ['12.50', '15.0', '1000', '0.00', '0.0015', '7'];
        const json = given.map((v, n) => `{"n": ${n}, "v": ${v}, "s": ${n === 0 ? '12.500' : '1'}}`).join('\n');
        const csv = `n,v,s\n${given.map((v, n) => `${n + 100},${v},${n === 0 ? '12.500' : '1'}`).join('\n')}\n`;
        await importFile(database.ds, 'exact-json', file('exact.ndjson', `${json}\n`), { into: 'exact_numbers' });
        await importFile(database.ds, 'exact-csv', file('exact.csv', csv), { into: 'exact_numbers' });
        const rows = (await database.ds.query('SELECT n, v::text AS v, s::text AS s FROM exact_numbers ORDER BY n')) as {
          n: number;
          v: string;
          s: string;
        }[];
        expect(rows.map((row) => row.v)).to.deep.equal([...expected, ...expected]);
        expect(rows.filter((row) => row.n % 100 === 0).map((row) => row.s)).to.deep.equal(['12.50', '12.50']);
      });
    }

    // MySQL's TEXT types hold bytes (a TINYTEXT 255), VARCHAR characters; the database would refuse at the chunk.
    if (DRIVER === 'mysql') {
      it('a TEXT-type column holds bytes: a TINYTEXT takes 255 bytes of UTF-8, checked in pass 1 (a latin1 one, 255 characters)', async () => {
        await database.ds.query(
          'CREATE TABLE tiny_texts (n INT PRIMARY KEY, t TINYTEXT, l TINYTEXT CHARACTER SET latin1) DEFAULT CHARSET=utf8mb4',
        );
        const rows = [
          { n: 1, t: '€'.repeat(85), l: 'é'.repeat(255) }, // 255 bytes of UTF-8; 255 latin1 characters
          { n: 2, t: `${'€'.repeat(85)}a` }, // 256 bytes
          { n: 3, l: 'é'.repeat(256) },
        ];
        const path = file('tiny.ndjson', `${rows.map((row) => JSON.stringify(row)).join('\n')}\n`);
        const result = await importFile(database.ds, 'tiny', path, { into: 'tiny_texts', invalid: 'skip' });
        expect(result).to.include({ rows: 1, invalid: 2 });
        const reasons = (await database.ds.query(
          sql('SELECT row_index, reason FROM checkpoint_import_rejects WHERE batch = ? ORDER BY row_index'),
          ['tiny'],
        )) as {
          row_index: number;
          reason: string;
        }[];
        expect(reasons.map((r) => Number(r.row_index))).to.deep.equal([1, 2]);
        expect(reasons[0].reason).to.match(/256 bytes of UTF-8, the column holds 255/);
        expect(reasons[1].reason).to.match(/256 characters, the column holds 255/);
        const [stored] = (await database.ds.query('SELECT CHAR_LENGTH(t) AS t, CHAR_LENGTH(l) AS l FROM tiny_texts')) as {
          t: number;
          l: number;
        }[];
        expect([Number(stored.t), Number(stored.l)]).to.deep.equal([85, 255]);
      });
    }

    it('the same table through CSV text: the same values accepted and refused, an empty field NULL, a json field parsed', async () => {
      const BASE = 1000;
      // A CSV field is text: the cases whose JSON value is a string or a number, as that text.
      const textCases: TypeCase[] = [
        ...cases
          .filter((c) => (typeof c.value === 'string' && c.value !== '') || typeof c.value === 'number')
          .map((c) => ({ ...c, value: String(c.value) })),
        {
          column: 'doc',
          value: '{"a":[1,"two",null],"b":{"c":true}}',
          stored: (t) => JSON.stringify(JSON.parse(t)) === '{"a":[1,"two",null],"b":{"c":true}}',
        },
        { column: 'doc', value: '{"a":', refused: true },
        { column: 'name', value: 'true', stored: 'true' },
        { column: 'small', value: '', stored: null },
        { column: 'req', value: '', refused: true },
      ];
      const columns = ['n', 'req', ...new Set(textCases.map((c) => c.column).filter((c) => c !== 'req'))];
      const field = (value: string) => (value === '' ? '' : `"${value.replace(/"/g, '""')}"`);
      const lines = textCases.map((c, i) =>
        columns
          .map((column) =>
            column === 'n' ? String(BASE + i) : column === c.column ? field(c.value as string) : column === 'req' ? '1' : '',
          )
          .join(','),
      );
      const path = file('typed.csv', `${columns.join(',')}\r\n${lines.join('\r\n')}\r\n`);
      const result = await importFile(database.ds, 'typed-csv', path, { into: 'typed', invalid: 'skip', size: 7 });
      expect(result).to.include({ done: true, invalid: textCases.filter((c) => c.refused).length });
      await expectCases('typed-csv', textCases, BASE);
      await database.ds.query(sql('DELETE FROM typed WHERE n >= ?'), [BASE]);
    });

    it("an entity's metadata types the columns too: its enum's values, its varchar length, its NOT NULL without a default", async () => {
      const path = file(
        'entity-types.ndjson',
        [
          { sku: 'e1', unitPrice: '1.00', currency: 'usd' },
          { sku: 'e2', unitPrice: '1.00', currency: 'gbp' },
          { sku: 'e3', unitPrice: '1.00', label: 'x'.repeat(41) },
          { sku: 'e4', label: 'no price' },
          { sku: 'e5', unitPrice: '1.005' },
        ]
          .map((record) => JSON.stringify(record))
          .join('\n'),
      );
      const result = await importFile(database.ds, 'entity-types', path, { into: Price, invalid: 'skip' });
      expect(result).to.include({ rows: 1, invalid: 4 });
      const rejects = (await database.ds.query(
        sql('SELECT row_index, reason FROM checkpoint_import_rejects WHERE batch = ? ORDER BY row_index'),
        ['entity-types'],
      )) as {
        row_index: number | string;
        reason: string;
      }[];
      expect(rejects.map((r) => [Number(r.row_index), r.reason.split(':')[0]])).to.deep.equal([
        [1, 'currency'],
        [2, 'label'],
        [3, 'unit_price'],
        [4, 'unitPrice'],
      ]);
      expect(await prices()).to.deep.equal(['e1:1:null:usd']);
    });

    it("an entity's uuid over a varchar column takes only the canonical 8-4-4-4-12 form, in JSON and in CSV", async () => {
      const given = [
        'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
        'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A12',
        '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a13}',
        'a0eebc999c0b4ef8bb6d6bb9bd380a14',
        'urn:uuid:a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a15',
        'a0eebc99-9c0b4ef8-bb6d-6bb9bd380a16a',
      ];
      const sources = {
        ndjson: `${given.map((uid, n) => JSON.stringify({ n, uid })).join('\n')}\n`,
        csv: `n,uid\n${given.map((uid, n) => `${n},${uid}`).join('\n')}\n`,
      };
      for (const [format, content] of Object.entries(sources)) {
        await database.ds.query('DELETE FROM tokens');
        const path = file(`tokens.${format}`, content);
        const error = (await expectCode(
          importFile(database.ds, `tokens-${format}`, path, { into: Token }),
          'INVALID_INPUT',
        )) as InvalidInputError;
        expect(error, format).to.include({ index: 2, field: 'uid' });
        const result = await importFile(database.ds, `tokens-skip-${format}`, path, { into: Token, invalid: 'skip' });
        expect(result, format).to.include({ rows: 2, invalid: 4 });
        const stored = (await database.ds.query('SELECT n, uid FROM tokens ORDER BY n')) as { n: number | string; uid: string }[];
        expect(
          stored.map((row) => [Number(row.n), row.uid]),
          format,
        ).to.deep.equal(given.slice(0, 2).map((uid, n) => [n, uid]));
      }
    });

    it('other types pass as text and the database decides: its refusal is DATABASE_ERROR at that chunk, earlier chunks kept', async () => {
      const path = file('other.ndjson', '{"n":2001,"req":1,"other":"01:02:03"}\n{"n":2002,"req":1,"other":"not a time"}\n');
      const stored = async () =>
        ((await database.ds.query(`SELECT ${asText('other')} AS other FROM typed WHERE n > 2000 ORDER BY n`)) as { other: string }[]).map(
          (row) => row.other,
        );
      if (DRIVER === 'sqlite') {
        // A BLOB column takes any text.
        expect(await importFile(database.ds, 'other', path, { into: 'typed', size: 1 })).to.include({ rows: 2, done: true });
        expect(await stored()).to.deep.equal(['01:02:03', 'not a time']);
      } else {
        await expectCode(importFile(database.ds, 'other', path, { into: 'typed', size: 1, invalid: 'skip' }), 'DATABASE_ERROR');
        expect(await checkpoint(database.ds, 'other')).to.equal(1);
        expect(await stored()).to.deep.equal(['01:02:03']);
      }
      await database.ds.query('DELETE FROM typed WHERE n > 2000');
    });

    it('the first invalid row rejects the file with index and field; nothing is written', async () => {
      const path = file('bad.csv', 'n,req,day\n101,1,2024-01-01\n102,1,2024-02-30\n103,x,2024-01-03\n');
      const error = (await expectCode(
        importFile(database.ds, 'bad', path, { into: 'typed', size: 1 }),
        'INVALID_INPUT',
      )) as InvalidInputError;
      expect(error).to.be.instanceOf(InvalidInputError);
      expect(error).to.include({ index: 1, field: 'day' });
      expect(await count(database.ds, 'SELECT COUNT(*) FROM typed WHERE n > 100')).to.equal(0);
      expect(await checkpoint(database.ds, 'bad')).to.equal(null);
      const limited = (await expectCode(
        importFile(database.ds, 'bad', path, { into: 'typed', invalid: 'skip', maxInvalid: 1 }),
        'INVALID_INPUT',
      )) as InvalidInputError;
      expect(limited).to.include({ index: 2, field: 'req' });
      expect(await checkpoint(database.ds, 'bad')).to.equal(null);
      const checked = await importFile(database.ds, 'bad', path, { into: 'typed', check: true });
      expect(checked).to.deep.include({ rows: 1, invalid: 2, skipped: 0 });
      expect(checked.errors).to.have.length(2);
      expect(checked.errors![0]).to.include({ index: 1, field: 'day' });
      expect(checked.errors![1]).to.include({ index: 2, field: 'req' });
      expect(await checkpoint(database.ds, 'bad')).to.equal(null);
      expect(await count(database.ds, 'SELECT COUNT(*) FROM typed WHERE n > 100')).to.equal(0);
    });

    it('check reports at most 100 errors and writes nothing', async () => {
      const path = file('many.csv', `sku,unit_price\n${Array.from({ length: 150 }, (_, i) => `s${i},bad`).join('\n')}\n`);
      const checked = await importFile(database.ds, 'many', path, { into: 'prices', check: true });
      expect(checked).to.include({ rows: 0, invalid: 150 });
      expect(checked.errors!.map((e) => e.index)).to.deep.equal(Array.from({ length: 100 }, (_, i) => i));
      expect(await checkpoint(database.ds, 'many')).to.equal(null);
    });
  });

  describe('keys, map and conflicts', () => {
    it('key: a repeated key is INVALID_INPUT at the later occurrence, or a reject with invalid: skip', async () => {
      const path = file('dupes.ndjson', ['a', 'b', 'a', 'c', 'b', 'a'].map((sku, i) => JSON.stringify({ sku, unit_price: i })).join('\n'));
      const error = (await expectCode(
        importFile(database.ds, 'dupes', path, { into: Price, key: 'sku' }),
        'INVALID_INPUT',
      )) as InvalidInputError;
      expect(error).to.include({ index: 2, field: 'sku' });
      const result = await importFile(database.ds, 'dupes-skip', path, { into: Price, key: 'sku', invalid: 'skip', size: 2 });
      expect(result).to.include({ rows: 3, invalid: 3 });
      expect(await prices()).to.deep.equal(['a:0:null:eur', 'b:1:null:eur', 'c:3:null:eur']);
    });

    it('every repeated id is found past the exact phase, through spilled runs (bounded memory)', async () => {
      const duplicates = new DuplicateIds({ collect: true, exactBytes: 0, runEntries: 64 });
      const ids = Array.from({ length: 1000 }, (_, i) => `k${i % 700}`);
      try {
        for (const [i, id] of ids.entries()) await duplicates.add(id, i);
        const found = await duplicates.everyDuplicate(async (indexes) => new Map(indexes.map((i) => [i, ids[i]])));
        expect(found).to.deep.equal(Array.from({ length: 300 }, (_, i) => 700 + i));
      } finally {
        await duplicates.close();
      }
    });

    it('number keys: integers kept as bits, other numbers hashed from their float64 bits; every repeat found past either budget', async () => {
      for (const exactBytes of [0, 4096]) {
        const duplicates = new DuplicateIds({ collect: true, exactBytes, runEntries: 64 });
        const ids = [...Array.from({ length: 1000 }, (_, i) => (i % 700) * 2 ** 40 + 0.5), 0, -0, 2 ** 53 + 2];
        try {
          for (const [i, id] of ids.entries()) await duplicates.add(id, i);
          const found = await duplicates.everyDuplicate(async (indexes) => new Map(indexes.map((i) => [i, String(ids[i])])));
          expect(found, `exactBytes ${exactBytes}`).to.deep.equal([...Array.from({ length: 300 }, (_, i) => 700 + i), 1001]);
        } finally {
          await duplicates.close();
        }
      }
      // Integers go to bits; past their budget (ids 2^16 apart take a page each), a repeat of an
      // earlier one is still found there, and the later ones are hashed.
      const integers = [...Array.from({ length: 3000 }, (_, i) => i * 65536), 0, 5 * 65536, 2999 * 65536, 7, 7];
      const bits = new DuplicateIds({ collect: true });
      try {
        for (const [i, id] of integers.entries()) await bits.add(id, i);
        const found = await bits.everyDuplicate(async (indexes) => new Map(indexes.map((i) => [i, String(integers[i])])));
        expect(found).to.deep.equal([3000, 3001, 3002, 3004]);
      } finally {
        await bits.close();
      }
      // The high half picks the bucket a run is grouped by: small integers (zero low word) spread over them all.
      const out = new Uint32Array(2);
      const buckets = new Set<number>();
      for (let n = 1; n <= 100_000; n++) {
        numberHash(n, out);
        buckets.add(out[0] >>> 20);
      }
      expect(buckets.size).to.equal(4096);
      // Through an import: the table's integer primary key is the key by default.
      await database.ds.query('DELETE FROM tokens');
      const path = file(
        'int-keys.csv',
        `n,uid\n${[1, 2, 3, 2, 5].map((n, i) => `${n},00000000-0000-4000-8000-00000000000${i}`).join('\n')}\n`,
      );
      const error = (await expectCode(importFile(database.ds, 'int-keys', path, { into: 'tokens' }), 'INVALID_INPUT')) as InvalidInputError;
      expect(error).to.include({ index: 3, field: 'n' });
      expect(await count(database.ds, 'SELECT COUNT(*) FROM tokens')).to.equal(0);
    });

    it('a column named with a question mark is a column like any other (no placeholder is read in a quoted name)', async () => {
      await database.ds.query(`CREATE TABLE asks (id INTEGER PRIMARY KEY, ${q('ok?')} VARCHAR(10))`);
      try {
        const path = file('asks.csv', 'id,ok?\n1,yes\n2,no\n');
        expect(await importFile(database.ds, 'asks', path, { into: 'asks' })).to.include({ rows: 2, done: true });
        expect(await importFile(database.ds, 'asks-update', path, { into: 'asks', conflict: 'update' })).to.include({ rows: 2 });
        const rows = (await database.ds.query(`SELECT id, ${q('ok?')} AS ok FROM asks ORDER BY id`)) as { id: number; ok: string }[];
        expect(rows.map((row) => `${Number(row.id)}:${row.ok}`)).to.deep.equal(['1:yes', '2:no']);
      } finally {
        await database.ds.query('DROP TABLE asks');
      }
    });

    it('map: runs in both passes, null skips and counts, its fields matched to columns', async () => {
      const path = file(
        'map.json',
        JSON.stringify([
          { code: 'x1', cents: 150 },
          { code: 'skip-me', cents: 1 },
          { code: 'x2', cents: 5 },
        ]),
      );
      const calls: number[] = [];
      const result = await importFile(database.ds, 'mapped', path, {
        into: 'prices',
        map: (record, index) => {
          calls.push(index);
          return record.code === 'skip-me' ? null : { sku: record.code, unit_price: (record.cents as number) / 100 };
        },
      });
      expect(result).to.include({ rows: 2, skipped: 1, invalid: 0, nextIndex: 3 });
      expect(calls).to.deep.equal([0, 1, 2, 0, 1, 2]);
      expect(await prices()).to.deep.equal(['x1:1.5:null:eur', 'x2:0.05:null:eur']);
    });

    it("conflict against pre-existing rows: 'error' fails the chunk (earlier chunks and their rejects stay), 'skip' keeps, 'update' overwrites", async () => {
      await database.ds.query(`INSERT INTO prices (sku, unit_price, label) VALUES ('p3', 1, 'old')`);
      const path = file('conflict.csv', 'sku,unit_price,label\np1,10,new\np2,oops,new\np3,30,new\np4,bad,new\np5,50,new\n');
      const error = (await expectCode(
        importFile(database.ds, 'conflict', path, { into: Price, invalid: 'skip', size: 2 }),
        'INVALID_INPUT',
      )) as InvalidInputError;
      expect(error).to.include({ index: 2, field: 'sku' });
      expect(await checkpoint(database.ds, 'conflict')).to.equal(2);
      expect(await prices()).to.deep.equal(['p1:10:new:eur', 'p3:1:old:eur']);
      // The failed chunk's reject (row 3) rolled back with it; the committed chunk's (row 1) stayed.
      const rejects = (await database.ds.query(sql('SELECT row_index FROM checkpoint_import_rejects WHERE batch = ?'), ['conflict'])) as {
        row_index: number | string;
      }[];
      expect(rejects.map((r) => Number(r.row_index))).to.deep.equal([1]);

      const skipped = await importFile(database.ds, 'conflict', path, { into: Price, invalid: 'skip', size: 2, conflict: 'skip' });
      expect(skipped).to.include({ rows: 2, invalid: 1, done: true });
      expect(await prices()).to.deep.equal(['p1:10:new:eur', 'p3:1:old:eur', 'p5:50:new:eur']);

      const updated = await importFile(database.ds, 'conflict-update', path, { into: Price, invalid: 'skip', conflict: 'update' });
      expect(updated).to.include({ rows: 3, invalid: 2 });
      expect(await prices()).to.deep.equal(['p1:10:new:eur', 'p3:30:new:eur', 'p5:50:new:eur']);
    });

    it("into a table of another schema: a table name written schema.table, or an entity's schema; the same name in the default schema untouched", async () => {
      const schemaTable = `${q(SALES)}.${q('orders')}`;
      if (DRIVER === 'sqlite') await database.ds.query(`ATTACH DATABASE '${join(dir, 'sales.sqlite')}' AS ${q(SALES)}`);
      else await database.ds.query(`CREATE ${DRIVER === 'mysql' ? 'DATABASE' : 'SCHEMA'} ${q(SALES)}`);
      try {
        await database.ds.query(`CREATE TABLE ${schemaTable} (sku VARCHAR(20) PRIMARY KEY, unit_price DECIMAL(10,2) NOT NULL)`);
        await database.ds.query(`CREATE TABLE orders (id INTEGER PRIMARY KEY, note VARCHAR(20))`);
        const orders = async () =>
          (
            (await database.ds.query(`SELECT sku, ${asText('unit_price')} AS price FROM ${schemaTable} ORDER BY sku`)) as Record<
              string,
              string
            >[]
          ).map((row) => `${row.sku}:${Number(row.price)}`);
        const path = file('orders.csv', 'sku,unit_price\ns1,1.50\ns2,2\ns3,3.25\n');
        // COPY on PostgreSQL (conflict 'error'), a multi-row INSERT elsewhere.
        expect(await importFile(database.ds, 'sales-1', path, { into: `${SALES}.orders`, size: 2 })).to.include({ rows: 3, done: true });
        expect(await orders()).to.deep.equal(['s1:1.5', 's2:2', 's3:3.25']);
        expect(await count(database.ds, 'SELECT COUNT(*) AS n FROM orders')).to.equal(0);
        // A key already there: INVALID_INPUT naming it, read back from the schema's table; then skip.
        const again = file('orders-again.csv', 'sku,unit_price\ns4,4\ns2,20\n');
        const error = (await expectCode(
          importFile(database.ds, 'sales-2', again, { into: `${SALES}.orders` }),
          'INVALID_INPUT',
        )) as InvalidInputError;
        expect(error).to.include({ index: 1, field: 'sku' });
        expect(await importFile(database.ds, 'sales-3', again, { into: `${SALES}.orders`, conflict: 'skip' })).to.include({
          rows: 2,
          done: true,
        });
        expect(await orders()).to.deep.equal(['s1:1.5', 's2:2', 's3:3.25', 's4:4']);
        // TypeORM's SQLite drivers name an attached database by `database`, not `schema`: the entity is PostgreSQL's and MySQL's.
        if (DRIVER !== 'sqlite') {
          const byEntity = file('orders-entity.ndjson', '{"sku":"s5","unitPrice":"5.50"}\n');
          const withEntity = await database.open({ entities: [SalesOrder] });
          expect(await importFile(withEntity, 'sales-4', byEntity, { into: SalesOrder })).to.include({ rows: 1, done: true });
          await withEntity.destroy();
          expect(await orders()).to.deep.equal(['s1:1.5', 's2:2', 's3:3.25', 's4:4', 's5:5.5']);
        }
        await expectCode(importFile(database.ds, 'sales-5', path, { into: 'no_such_schema.orders' }), 'INVALID_ARGUMENT');
        expect(await checkpoint(database.ds, 'sales-5')).to.equal(null);
      } finally {
        await database.ds.query('DROP TABLE orders');
        if (DRIVER === 'sqlite') await database.ds.query(`DETACH DATABASE ${q(SALES)}`);
        else await database.ds.query(DRIVER === 'mysql' ? `DROP DATABASE ${q(SALES)}` : `DROP SCHEMA ${q(SALES)} CASCADE`);
      }
    });

    it('two runners of one import at once write every row once, rejects included', async () => {
      const lines = Array.from({ length: 3000 }, (_, i) => (i % 301 === 7 ? `r${i},bad` : `r${i},${i % 1000}`));
      const path = file('race.csv', `sku,unit_price\n${lines.join('\n')}\n`);
      const options = { into: Price, invalid: 'skip' as const, size: 50 };
      const results = await Promise.all([importFile(database.ds, 'race', path, options), importFile(database.ds, 'race', path, options)]);
      const invalid = lines.filter((line) => line.endsWith(',bad')).length;
      expect(results[0].rows + results[1].rows).to.equal(3000 - invalid);
      expect(results[0].invalid! + results[1].invalid!).to.equal(invalid);
      expect(results.every((result) => result.done)).to.equal(true);
      expect(await count(database.ds, 'SELECT COUNT(*) FROM prices')).to.equal(3000 - invalid);
      expect(await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_import_rejects WHERE batch = ?'), ['race'])).to.equal(invalid);
    });

    it('joins a caller transaction: its rollback takes the rows, the rejects and the checkpoint', async () => {
      const path = file('joined.csv', 'sku,unit_price\nj1,1\nj2,x\n');
      await expectCode(
        runInTransaction(database.ds, async (tx) => {
          const result = await importFile(tx, 'joined', path, { into: Price, invalid: 'skip' });
          expect(result).to.include({ rows: 1, invalid: 1 });
          throw new InvalidInputError('caller rolls back');
        }),
        'INVALID_INPUT',
      );
      expect(await prices()).to.deep.equal([]);
      expect(await checkpoint(database.ds, 'joined')).to.equal(null);
      expect(await count(database.ds, 'SELECT COUNT(*) FROM checkpoint_import_rejects')).to.equal(0);
    });
  });

  describe('options', () => {
    it('commits every chunk but the last asynchronously on PostgreSQL; durable: true and a caller transaction commit synchronously', async () => {
      const path = file('sync.ndjson', '{"a":1}\n{"a":2}\n{"a":3}\n');
      const settings = async (db: Parameters<typeof importFile>[0], batch: string, durable?: boolean) => {
        const seen: string[] = [];
        await importFile(db, batch, path, {
          records: true,
          size: 1,
          durable,
          handler: async (_records: Record<string, unknown>[], tx) => {
            if (DRIVER !== 'postgres') return void seen.push('n/a');
            const [row] = (await tx.query('SHOW synchronous_commit')) as { synchronous_commit: string }[];
            seen.push(row.synchronous_commit);
          },
        });
        return seen;
      };
      const expected = (values: string[]) => (DRIVER === 'postgres' ? values : ['n/a', 'n/a', 'n/a']);
      expect(await settings(database.ds, 'sync-async')).to.deep.equal(expected(['off', 'off', 'on']));
      expect(await settings(database.ds, 'sync-durable', true)).to.deep.equal(expected(['on', 'on', 'on']));
      expect(await runInTransaction(database.ds, (tx) => settings(tx, 'sync-joined'))).to.deep.equal(expected(['on', 'on', 'on']));
    });

    it('refuses options that do not fit, before reading the file', async () => {
      const path = file('opts.csv', 'sku,unit_price\na,1\n');
      await expectCode(importFile(database.ds, 'o1', path, { into: 'no_such_table' }), 'INVALID_ARGUMENT');
      await expectCode(importFile(database.ds, 'o2', path, { into: Price, handler: () => undefined }), 'INVALID_ARGUMENT');
      await expectCode(importFile(database.ds, 'o3', path, { into: Price, key: 'nope' }), 'INVALID_ARGUMENT');
      await expectCode(importFile(database.ds, 'o4', path, { key: 'sku' }), 'INVALID_ARGUMENT');
      await expectCode(importFile(database.ds, 'o5', path, { into: Price, maxInvalid: 3 }), 'INVALID_ARGUMENT');
      await expectCode(importFile(database.ds, 'o6', path, { into: Price, csv: { delimiter: ';;' } }), 'INVALID_ARGUMENT');
      await expectCode(importFile(database.ds, 'o7', path, { into: Price, conflict: 'merge' as 'skip' }), 'INVALID_ARGUMENT');
      await expectCode(importFile(database.ds, 'o8', path, { records: true }), 'INVALID_ARGUMENT');
      expect(await importFile(database.ds, 'o9', path, { records: true, check: true })).to.include({ rows: 1, invalid: 0 });
      for (const batch of ['o1', 'o2', 'o3', 'o4', 'o5', 'o6', 'o7', 'o8', 'o9'])
        expect(await checkpoint(database.ds, batch)).to.equal(null);
    });

    it('check on lab rows: the first invalid row reported, nothing written', async () => {
      const path = file('lab.csv', 'id,value\na,1\nb,1.5\nc,3\n');
      const checked = await importFile(database.ds, 'lab-check', path, { check: true });
      expect(checked).to.deep.include({ invalid: 1, rows: 1 });
      expect(checked.errors).to.have.length(1);
      expect(checked.errors![0]).to.include({ index: 1 });
      expect(await checkpoint(database.ds, 'lab-check')).to.equal(null);
    });
  });

  describe('compressed input and a changing file', () => {
    const csv = `sku,unit_price\n${Array.from({ length: 40 }, (_, i) => `g${String(i).padStart(2, '0')},${i}`).join('\n')}\n`;

    it('.gz: the format from the name before .gz, the digest over the compressed bytes', async () => {
      const path = file('prices.csv.gz', gzipSync(csv));
      const result = await importFile(database.ds, 'gz', path, { into: 'prices', size: 7 });
      expect(result).to.include({ rows: 40, done: true, digest: await fileDigest(path) });
      expect(await count(database.ds, 'SELECT COUNT(*) FROM prices')).to.equal(40);
    });

    it('a truncated or corrupt .gz is INVALID_INPUT and nothing is written', async () => {
      const whole = gzipSync(csv);
      const corrupt = Buffer.from(whole);
      corrupt[Math.floor(corrupt.length / 2)] ^= 0xff;
      for (const [name, bytes] of [
        ['truncated', whole.subarray(0, whole.length - 12)],
        ['corrupt', corrupt],
      ] as const) {
        const path = file(`${name}.csv.gz`, bytes);
        await expectCode(importFile(database.ds, name, path, { into: 'prices', size: 5 }), 'INVALID_INPUT');
        await expectCode(importFile(database.ds, `${name}-lab`, path.replace('.csv.gz', '.csv.gz'), { size: 5 }), 'INVALID_INPUT');
        expect(await checkpoint(database.ds, name)).to.equal(null);
      }
      expect(await count(database.ds, 'SELECT COUNT(*) FROM prices')).to.equal(0);
    });

    it('lab rows from a .gz file as well, in every format', async () => {
      const sources = {
        'lab.ndjson.gz': '{"id":"a","value":1}\n{"id":"b","value":2}\n',
        'lab.json.gz': '[{"id":"a","value":1},{"id":"b","value":2}]',
        'lab.csv.gz': 'id,value\na,1\nb,2\n',
      };
      for (const [name, content] of Object.entries(sources)) {
        const path = file(name, gzipSync(content));
        expect(await importFile(database.ds, `lab-gz-${name}`, path, { size: 1 }), name).to.include({ rows: 2, done: true });
        expect(await values(database.ds, `lab-gz-${name}`)).to.deep.equal([
          ['a', 1],
          ['b', 2],
        ]);
      }
    });

    it('a file changed between the passes is FINGERPRINT_MISMATCH; the chunks before the change stay', async () => {
      // Far past the first chunk and the block read ahead of it.
      const big = `sku,unit_price\n${Array.from({ length: 30000 }, (_, i) => `z${i},${i % 100}`).join('\n')}\n`;
      const path = file('changing.csv', big);
      let changed = false;
      await expectCode(
        importFile(database.ds, 'changing', path, {
          into: 'prices',
          size: 1000,
          onProgress() {
            if (changed) return;
            changed = true;
            writeFileSync(path, big.replace(/z28000,/, 'y28000,'));
          },
        }),
        'FINGERPRINT_MISMATCH',
      );
      const committed = (await checkpoint(database.ds, 'changing'))!;
      expect(committed).to.be.greaterThan(0).and.lessThan(28000);
      expect(await count(database.ds, 'SELECT COUNT(*) FROM prices')).to.equal(committed);
      expect(readFileSync(path, 'utf8')).to.include('y28000');
    });
  });
});
