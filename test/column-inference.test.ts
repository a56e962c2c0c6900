import { expect } from 'chai';
import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import type { InvalidInputError } from '../src/core/errors';
import { dialectOf, type Dialect, type RecordColumn } from '../src/dialect';
import { mysql } from '../src/dialect/mysql';
import { postgres } from '../src/dialect/postgres';
import { sqlite } from '../src/dialect/sqlite';
import { ColumnInference, type InferredColumn, type InferredKind } from '../src/import/records/column-inference';
import { convertValue } from '../src/import/records/column-values';
import { JsonNumber } from '../src/import/records/json-values';
import { readRecords } from '../src/import/records/record-readers';
import { targetTable } from '../src/import/records/target-table';
import { DRIVER, useTestDatabase } from './support/database';
import { expectCode, rejection } from './support/expect-code';

type Format = 'json' | 'csv';

/** The records the real readers give for a file's text. */
async function recordsOf(format: Format, text: string): Promise<Record<string, unknown>[]> {
  async function* blocks() {
    yield Buffer.from(text);
  }
  const records: Record<string, unknown>[] = [];
  for await (const group of readRecords(format, blocks(), {})) {
    for (const item of group) {
      expect(item.problem, item.raw).to.equal(null);
      records.push(item.fields!);
    }
  }
  return records;
}

function inferred(records: Record<string, unknown>[], jsonSource = true): InferredColumn[] {
  const inference = new ColumnInference({ jsonSource });
  for (const record of records) inference.add(record);
  return inference.columns();
}

/** The one column of values given as field `x` of one record each. */
function columnOf(values: unknown[], jsonSource = false): InferredColumn {
  const [column] = inferred(
    values.map((x) => ({ x })),
    jsonSource,
  );
  return column;
}

const kindOf = (values: unknown[], jsonSource = false) => columnOf(values, jsonSource).kind;
const numbers = (...texts: string[]) => texts.map((text) => new JsonNumber(text));

describe('column inference', () => {
  describe('types, in order of preference', () => {
    it('integers: int4, then bigint within int8, then numeric', () => {
      expect(kindOf(['1', '-5', '2147483647', '-2147483648', '007'])).to.equal('integer');
      expect(kindOf(numbers('0', '2147483647'), true)).to.equal('integer');
      expect(kindOf(['1', '2147483648'])).to.equal('bigint');
      expect(kindOf(['-2147483649'])).to.equal('bigint');
      expect(kindOf(['9223372036854775807', '-9223372036854775808', '0009223372036854775807'])).to.equal('bigint');
      expect(kindOf(numbers('9223372036854775807'), true)).to.equal('bigint');
      expect(columnOf(['9223372036854775808'])).to.include({ kind: 'numeric', precision: 19, scale: 0 });
      expect(columnOf(['-9223372036854775809', '5'])).to.include({ kind: 'numeric', precision: 19, scale: 0 });
    });

    it('numeric with the most integer and fraction digits seen, trailing zeros kept', () => {
      expect(columnOf(numbers('12.50', '3.125'), true)).to.include({ kind: 'numeric', precision: 5, scale: 3 });
      expect(columnOf(['12.50'])).to.include({ kind: 'numeric', precision: 4, scale: 2 });
      expect(columnOf(['1', '2.5'])).to.include({ kind: 'numeric', precision: 2, scale: 1 });
      expect(columnOf(['0.5', '-0.001'])).to.include({ kind: 'numeric', precision: 3, scale: 3 });
      expect(columnOf(['00012.5'])).to.include({ kind: 'numeric', precision: 3, scale: 1 });
      // Up to MySQL/MariaDB's DECIMAL(65, 30); beyond, a double.
      expect(columnOf([`${'9'.repeat(35)}.${'1'.repeat(30)}`])).to.include({ kind: 'numeric', precision: 65, scale: 30 });
      expect(kindOf([`${'9'.repeat(36)}.${'1'.repeat(30)}`])).to.equal('double');
      expect(kindOf([`0.${'1'.repeat(31)}`])).to.equal('double');
      expect(kindOf(['9'.repeat(66)])).to.equal('double');
    });

    it('double for an exponent, .5 and 5., mixed with integers and decimals; text beyond a double', () => {
      expect(kindOf(numbers('1e3'), true)).to.equal('double');
      expect(kindOf(['1', '2.5', '1.5E-3'])).to.equal('double');
      expect(kindOf(['.5', '-5.'])).to.equal('double');
      expect(kindOf(['0e-400', '1'])).to.equal('double');
      expect(kindOf(['1e400'])).to.equal('text');
      expect(kindOf(['1e-400'])).to.equal('text');
      expect(kindOf(['1'.repeat(400)])).to.equal('text');
      expect(kindOf(['NaN', 'Infinity'])).to.equal('text');
    });

    it('boolean for true/false/t/f/yes/no in any case and JSON booleans; 1 and 0 are integers unless beside them', () => {
      expect(kindOf(['true', 'F', 'yes', 'No', 't', 'FALSE', 'tRuE'])).to.equal('boolean');
      expect(kindOf([true, false], true)).to.equal('boolean');
      expect(kindOf(['1', '0'])).to.equal('integer');
      expect(kindOf(['1', '0', 'yes'])).to.equal('boolean');
      expect(kindOf([true, ...numbers('1', '0')], true)).to.equal('boolean');
      expect(kindOf(['2', 'yes'])).to.equal('text');
      expect(kindOf(['1.0', 'true'])).to.equal('text');
      expect(kindOf(['00', 'true'])).to.equal('text');
      expect(kindOf(['on', 'off'])).to.equal('text');
      // A text column takes no JSON boolean: json holds both.
      expect(kindOf([true, ...numbers('5')], true)).to.equal('json');
      expect(kindOf([true, 'maybe'], true)).to.equal('json');
    });

    it('date for real calendar dates', () => {
      expect(kindOf(['2024-02-29', '0001-01-01', '9999-12-31'])).to.equal('date');
      expect(kindOf(['2023-02-29'])).to.equal('text');
      expect(kindOf(['2024-13-01'])).to.equal('text');
      expect(kindOf(['0000-01-01'])).to.equal('text');
      expect(kindOf(['2024-1-01'])).to.equal('text');
    });

    it('timestamp without a zone, timestamptz when any value gives one', () => {
      expect(kindOf(['2024-01-02T10:30', '2024-01-02 10:30:59.123456', '2024-01-02t00:00:00'])).to.equal('timestamp');
      expect(kindOf(['2024-01-02T10:30:00Z', '2024-01-02 10:30+05:30', '2024-01-02T10:30:00.5-0130', '2024-01-02T10:30z'])).to.equal(
        'timestamptz',
      );
      expect(kindOf(['2024-01-02T10:30:00', '2024-01-02T10:30:00+01'])).to.equal('timestamptz');
      for (const invalid of [
        '2024-01-02T24:00',
        '2024-01-02T10:60',
        '2024-01-02T10:30:60',
        '2024-01-02T10:30:00.1234567',
        '2024-01-02T10:30+24',
      ]) {
        expect(kindOf([invalid]), invalid).to.equal('text');
      }
      // Shifted to UTC, these leave years 1 to 9999.
      expect(kindOf(['0001-01-01T00:30+01:00'])).to.equal('text');
      expect(kindOf(['9999-12-31T23:30-01:00'])).to.equal('text');
      expect(kindOf(['0001-01-01T00:30-01:00'])).to.equal('timestamptz');
    });

    it('a date beside a timestamp is text (a timestamp column takes no bare date)', () => {
      expect(kindOf(['2024-01-02', '2024-01-02T10:00'])).to.equal('text');
    });

    it('json for objects and arrays, and anything beside them', () => {
      expect(kindOf([{ a: 1 }, [1, 2]], true)).to.equal('json');
      expect(kindOf([{ a: 1 }, 'x', ...numbers('1.5'), true], true)).to.equal('json');
    });

    it('text for anything else and any other mix', () => {
      for (const values of [
        ['x'],
        ['1', 'x'],
        ['2024-01-02', '5'],
        ['', '1'],
        ['+5'],
        [' 5'],
        ['1 '],
        ['-'],
        ['.'],
        ['1e'],
        ['0x1F'],
        ['yes', '2024-01-02'],
      ]) {
        expect(kindOf(values), JSON.stringify(values)).to.equal('text');
      }
      expect(kindOf(['x', ...numbers('1')], true)).to.equal('text');
    });

    it('values a map returns: JavaScript numbers and bigints as their text, booleans, Dates as json', () => {
      expect(kindOf([5, 10n])).to.equal('integer');
      expect(columnOf([0.25, 1])).to.include({ kind: 'numeric', precision: 3, scale: 2 });
      expect(kindOf([1e21])).to.equal('double');
      expect(kindOf([true, 'no'])).to.equal('boolean');
      expect(kindOf([new Date(0)], true)).to.equal('json');
    });
  });

  describe('nullability, order and length', () => {
    it('NOT NULL only when no value was NULL or absent', () => {
      const columns = inferred([
        { always: '1', sometimes: null, late: undefined },
        { always: '2', sometimes: '3' },
        { always: '3', sometimes: '4', late: 'x' },
      ]);
      expect(columns.map((c) => [c.name, c.nullable])).to.deep.equal([
        ['always', false],
        ['sometimes', true],
        ['late', true],
      ]);
      expect(columns[1].kind).to.equal('integer');
    });

    it('a field first seen in a later record, or only ever NULL, is nullable (NULL alone: text)', () => {
      const columns = inferred([{ a: '1' }, { a: '2', b: 'x' }, { a: '3', b: 'y', c: null }]);
      expect(columns.find((c) => c.name === 'b')).to.include({ nullable: true, kind: 'text' });
      expect(columns.find((c) => c.name === 'c')).to.include({ nullable: true, kind: 'text' });
    });

    it('columns come in the order their fields were first seen', () => {
      const columns = inferred([
        { b: '1', a: '2' },
        { c: '3', a: '4' },
        { d: '5', b: '6', e: '7' },
      ]);
      expect(columns.map((c) => c.name)).to.deep.equal(['b', 'a', 'c', 'd', 'e']);
    });

    it('maxLength counts characters, numbers by their source text', () => {
      expect(columnOf(['😀😀', 'abc', 'é']).maxLength).to.equal(3);
      expect(columnOf(numbers('-12.500'), true).maxLength).to.equal(7);
      expect(columnOf([null]).maxLength).to.equal(0);
    });
  });

  describe('createTable statements', () => {
    const columns: InferredColumn[] = [
      { name: 'id', kind: 'bigint', nullable: false, maxLength: 19 },
      { name: 'price', kind: 'numeric', precision: 5, scale: 3, nullable: true, maxLength: 6 },
      { name: 'at', kind: 'timestamptz', nullable: false, maxLength: 20 },
      { name: 'doc', kind: 'json', nullable: true, maxLength: 0 },
    ];

    it('each database in its own types, with NOT NULL and the primary key', () => {
      expect(postgres.createTable({ name: 'prices', schema: 'app' }, columns, ['id'])).to.equal(
        'CREATE TABLE IF NOT EXISTS "app"."prices" (\n' +
          '  "id" bigint NOT NULL,\n  "price" numeric(5, 3),\n  "at" timestamptz(6) NOT NULL,\n  "doc" json,\n  PRIMARY KEY ("id")\n)',
      );
      // json has no equality: a key column of objects or arrays is jsonb, which an index can hold.
      expect(postgres.createTable({ name: 'docs' }, columns.slice(3), ['doc'])).to.equal(
        'CREATE TABLE IF NOT EXISTS "docs" (\n  "doc" jsonb NOT NULL,\n  PRIMARY KEY ("doc")\n)',
      );
      expect(mysql.createTable({ name: 'prices' }, columns, ['id'])).to.equal(
        'CREATE TABLE IF NOT EXISTS `prices` (\n' +
          '  `id` BIGINT NOT NULL,\n  `price` DECIMAL(5, 3),\n  `at` DATETIME(6) NOT NULL,\n  `doc` JSON,\n  PRIMARY KEY (`id`)\n) DEFAULT CHARACTER SET utf8mb4',
      );
      expect(sqlite.createTable({ name: 'prices' }, columns, [])).to.equal(
        'CREATE TABLE IF NOT EXISTS "prices" (\n  "id" INTEGER NOT NULL,\n  "price" DECIMAL(5, 3),\n  "at" DATETIME NOT NULL,\n  "doc" JSON\n)',
      );
    });

    it('quotes hostile names on every database', () => {
      const hostile: InferredColumn[] = [{ name: 'a "b` c\'; --', kind: 'text', nullable: false, maxLength: 3 }];
      expect(postgres.createTable({ name: 't"1' }, hostile, [])).to.equal(
        'CREATE TABLE IF NOT EXISTS "t""1" (\n  "a ""b` c\'; --" text NOT NULL\n)',
      );
      expect(sqlite.createTable({ name: 't"1' }, hostile, [])).to.equal(
        'CREATE TABLE IF NOT EXISTS "t""1" (\n  "a ""b` c\'; --" TEXT NOT NULL\n)',
      );
      expect(mysql.createTable({ name: 't`1' }, hostile, [])).to.equal(
        'CREATE TABLE IF NOT EXISTS `t``1` (\n  `a "b`` c\'; --` TEXT NOT NULL\n) DEFAULT CHARACTER SET utf8mb4',
      );
    });

    it('the key is the PRIMARY KEY, its columns NOT NULL; a column outside it keeps NULL', () => {
      const key: InferredColumn[] = [
        { name: 'a', kind: 'integer', nullable: false, maxLength: 1 },
        { name: 'b', kind: 'integer', nullable: true, maxLength: 1 },
      ];
      expect(postgres.createTable({ name: 't' }, key, ['b', 'a'])).to.equal(
        'CREATE TABLE IF NOT EXISTS "t" (\n  "a" integer NOT NULL,\n  "b" integer NOT NULL,\n  PRIMARY KEY ("b", "a")\n)',
      );
      expect(postgres.createTable({ name: 't' }, key, ['a'])).to.equal(
        'CREATE TABLE IF NOT EXISTS "t" (\n  "a" integer NOT NULL,\n  "b" integer,\n  PRIMARY KEY ("a")\n)',
      );
    });

    it('MySQL/MariaDB: a text key is VARCHAR in an exact collation, with room where the 3,072 key bytes allow', () => {
      const text = (name: string, maxLength: number): InferredColumn => ({ name, kind: 'text', nullable: false, maxLength });
      const typeOf = (sql: string, name: string) => new RegExp(`\`${name}\` ([^\\n]*?)(?: NOT NULL)?,?\\n`).exec(sql)?.[1];
      const one = mysql.createTable({ name: 't' }, [text('k', 10), text('v', 10)], ['k']);
      expect(typeOf(one, 'k')).to.equal('VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin');
      expect(typeOf(one, 'v')).to.equal('TEXT');
      const exact = mysql.createTable({ name: 't' }, [text('k', 0)], ['k'], { textKeyCollation: 'utf8mb4_nopad_bin' });
      expect(typeOf(exact, 'k')).to.equal('VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin');
      expect(typeOf(mysql.createTable({ name: 't' }, [text('k', 768)], ['k']), 'k')).to.equal(
        'VARCHAR(768) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin',
      );
      // Four roomy keys would take 4,080 bytes: each gets its longest text instead.
      const four = mysql.createTable(
        { name: 't' },
        ['a', 'b', 'c', 'd'].map((name) => text(name, 10)),
        ['a', 'b', 'c', 'd'],
      );
      expect(typeOf(four, 'a')).to.match(/^VARCHAR\(10\) /);
      expect(typeOf(mysql.createTable({ name: 't' }, [text('v', 16383)], []), 'v')).to.equal('TEXT');
      expect(typeOf(mysql.createTable({ name: 't' }, [text('v', 16384)], []), 'v')).to.equal('MEDIUMTEXT');
      expect(typeOf(mysql.createTable({ name: 't' }, [text('v', 4194304)], []), 'v')).to.equal('LONGTEXT');
    });

    it('refuses what the database cannot hold as such, before any statement runs', async () => {
      const text = (name: string, maxLength: number): InferredColumn => ({ name, kind: 'text', nullable: false, maxLength });
      const thrown = async (call: () => unknown) => (await expectCode(Promise.resolve().then(call), 'INVALID_INPUT')) as InvalidInputError;
      expect((await thrown(() => mysql.createTable({ name: 't' }, [text('k', 769)], ['k']))).field).to.equal('k');
      await thrown(() => mysql.createTable({ name: 't' }, [text('a', 400), text('b', 400)], ['a', 'b']));
      await thrown(() => mysql.createTable({ name: 't' }, [{ name: 'k', kind: 'json', nullable: false, maxLength: 0 }], ['k']));
      await thrown(() => postgres.createTable({ name: 't' }, [text('é'.repeat(32), 1)], []));
      for (const name of ['😀', 'x'.repeat(65), 'trailing ', 'nul\u0000'])
        await thrown(() => mysql.createTable({ name: 't' }, [text(name, 1)], []));
      const argument = (call: () => unknown) => expectCode(Promise.resolve().then(call), 'INVALID_ARGUMENT');
      await argument(() => postgres.createTable({ name: 't' }, [text('a', 1)], ['b']));
      await argument(() => sqlite.createTable({ name: 't' }, [], []));
      await argument(() => mysql.createTable({ name: 't' }, [text('a', 1)], [], { textKeyCollation: 'utf8mb4_bin; DROP TABLE x' }));
      await argument(() =>
        postgres.createTable({ name: 't' }, [{ name: 'n', kind: 'numeric', precision: 1, scale: 2, nullable: true, maxLength: 0 }], []),
      );
      await argument(() => mysql.createTable({ name: 'x'.repeat(65) }, [text('a', 1)], []));
      expect(postgres.createTable({ name: 't' }, [text('é'.repeat(31), 1)], [])).to.include('"' + 'é'.repeat(31) + '"');
      expect(mysql.createTable({ name: 't' }, [text('é'.repeat(64), 1)], [])).to.include('`' + 'é'.repeat(64) + '`');
    });
  });

  describe(`the created table takes every value the inference saw (${DRIVER})`, () => {
    const db = useTestDatabase('column_inference');
    let tables = 0;

    /** What recordColumns reads back for an inferred kind on this database. */
    function expectedKind(kind: InferredKind): RecordColumn['kind'] {
      if (kind === 'integer' || kind === 'bigint') return 'integer';
      if (kind === 'double') return 'float';
      if (kind === 'timestamptz') return DRIVER === 'postgres' ? 'timestamptz' : 'timestamp';
      return kind;
    }

    /**
     * Infers the records' columns, creates the table, reads it back from the catalogue, checks
     * every value converts for its column and that the database stores every row.
     */
    async function roundTrip(
      ds: DataSource,
      records: Record<string, unknown>[],
      options: { jsonSource: boolean; key?: string[]; name?: string },
    ): Promise<{ columns: InferredColumn[]; read: RecordColumn[]; primaryKey: string[] }> {
      const dialect: Dialect = dialectOf(ds);
      const name = options.name ?? `inferred_${++tables}`;
      const columns = inferred(records, options.jsonSource);
      const textKeyCollation = await ds.transaction((tx) => dialect.exactTextCollation(tx.queryRunner!));
      const ddl = dialect.createTable({ name }, columns, options.key ?? [], { textKeyCollation });
      await ds.query(ddl);
      const target = await targetTable(ds.manager, name);
      expect(target.columns.map((c) => c.name)).to.deep.equal(columns.map((c) => c.name));
      columns.forEach((column, i) => {
        const read = target.columns[i];
        expect(read.kind, column.name).to.equal(expectedKind(column.kind));
        expect(read.nullable, column.name).to.equal(column.nullable);
        if (column.kind === 'numeric') expect([read.precision, read.scale], column.name).to.deep.equal([column.precision, column.scale]);
        if (column.kind === 'integer' && DRIVER !== 'sqlite') expect(read.max, column.name).to.equal(2147483647n);
        if (column.kind === 'bigint') expect(read.max, column.name).to.equal(9223372036854775807n);
      });
      const storable = { ...dialect.storable, jsonSource: options.jsonSource };
      const rows = records.map((record, index) =>
        target.columns.map((column) => {
          const converted = convertValue(record[column.name], column, storable);
          if ('reason' in converted) expect.fail(`row ${index}, ${column.name} (${column.kind}): ${converted.reason}`);
          return dialect.bindable(converted.value);
        }),
      );
      const names = target.columns.map((c) => c.name);
      await ds.query(dialect.insertRecords(target.table, names, rows.length), rows.flat());
      const [{ n }] = (await ds.query(`SELECT COUNT(*) AS n FROM ${dialect.quote(name)}`)) as { n: unknown }[];
      expect(Number(n)).to.equal(records.length);
      return { columns, read: target.columns, primaryKey: target.primaryKey };
    }

    const JSON_SAMPLE = `[
      {"id": 1, "big": 3000000000, "huge": 92233720368547758070, "price": 12.50, "ratio": 1.5e-3, "ok": true,
       "flag": "yes", "day": "2024-02-29", "at": "2024-01-02T10:30:00.123456", "atz": "2024-01-02T10:30:00+05:30",
       "doc": {"a": [1, 2, {"b": null}]}, "name": "Zoë \\"quoted\\" 😀", "code": "007", "mixed": 1, "maybe": null},
      {"id": 2, "big": -5, "huge": 1, "price": 3.125, "ratio": 2, "ok": false,
       "flag": "No", "day": "0001-01-01", "at": "2024-01-02 23:59:59", "atz": "2024-01-02T10:30Z",
       "doc": [true, 1.25], "name": "", "code": "12", "mixed": "two", "maybe": 5, "late": "x"},
      {"id": 2147483647, "big": 9223372036854775807, "huge": -3, "price": -0.5, "ratio": 1e10, "ok": true,
       "flag": "1", "day": "9999-12-31", "at": "2024-01-02T00:00", "atz": "2024-01-02T10:30:00",
       "doc": "just a string", "name": "x", "code": "0", "mixed": true, "maybe": null}
    ]`;

    it('records of a JSON file: each kind read back as inferred, every value converted and stored', async () => {
      const { columns } = await roundTrip(db.ds, await recordsOf('json', JSON_SAMPLE), { jsonSource: true, key: ['id'] });
      const kinds = Object.fromEntries(columns.map((c) => [c.name, c.kind]));
      expect(kinds).to.deep.equal({
        id: 'integer',
        big: 'bigint',
        huge: 'numeric',
        price: 'numeric',
        ratio: 'double',
        ok: 'boolean',
        flag: 'boolean',
        day: 'date',
        at: 'timestamp',
        atz: 'timestamptz',
        doc: 'json',
        name: 'text',
        code: 'integer',
        mixed: 'json',
        maybe: 'integer',
        late: 'text',
      });
      expect(columns.filter((c) => c.nullable).map((c) => c.name)).to.deep.equal(['maybe', 'late']);
    });

    it('records of a CSV file (text and NULL): the same', async () => {
      const csv = [
        'id,amount,when,day,ok,label,note,empty',
        '1,12.50,2024-01-02T10:30:00Z,2024-01-02,t,"a, b",,',
        '9223372036854775807,-3,2024-01-02 10:30:00.5+01:00,2024-12-31,F,"line\nbreak",x,',
        '-1,0.001,2024-01-02T10:30,2000-02-29,yes,😀,y,',
      ].join('\n');
      const { columns } = await roundTrip(db.ds, await recordsOf('csv', csv), { jsonSource: false, key: ['id'] });
      expect(columns.map((c) => [c.name, c.kind, c.nullable])).to.deep.equal([
        ['id', 'bigint', false],
        ['amount', 'numeric', false],
        ['when', 'timestamptz', false],
        ['day', 'date', false],
        ['ok', 'boolean', false],
        ['label', 'text', false],
        ['note', 'text', true],
        ['empty', 'text', true],
      ]);
      expect(columns[1]).to.include({ precision: 5, scale: 3 });
    });

    if (DRIVER === 'postgres') {
      it('objects and arrays are json, as the file gives them; in the key, jsonb, which an index can hold', async () => {
        const records = [
          { id: { a: [1, 2] }, doc: { b: 1, a: 2 } },
          { id: [3], doc: [{ c: null }] },
        ];
        await roundTrip(db.ds, records, { jsonSource: true, key: ['id'], name: 'json_key' });
        const types = await db.ds.query(
          "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'json_key' ORDER BY ordinal_position",
        );
        expect(types).to.deep.equal([
          { column_name: 'id', data_type: 'jsonb' },
          { column_name: 'doc', data_type: 'json' },
        ]);
      });
    }

    it('hostile table and field names are quoted: created, read back and filled by their exact names', async () => {
      const fields = ['we"ird', 'back`tick', ' with space', "it's; DROP TABLE x --", 'ÉÑ ü', 'doc "`'];
      const records = [0, 1].map((i) => ({
        [fields[0]]: String(i),
        [fields[1]]: `text ${i}`,
        [fields[2]]: i === 0 ? 'true' : 'false',
        [fields[3]]: '2024-01-02',
        [fields[4]]: new JsonNumber(`${i}.25`),
        [fields[5]]: { i },
      }));
      const name = 'tab"le `name` it\'s';
      const { read, primaryKey } = await roundTrip(db.ds, records, { jsonSource: true, key: [fields[1], fields[0]], name });
      expect(read.map((c) => [c.name, c.kind])).to.deep.equal([
        [fields[0], 'integer'],
        [fields[1], 'text'],
        [fields[2], 'boolean'],
        [fields[3], 'date'],
        [fields[4], 'numeric'],
        [fields[5], 'json'],
      ]);
      // In key order in the catalogue's index (MySQL's recordColumns numbers key columns in table order).
      expect(primaryKey).to.have.members([fields[1], fields[0]]);
      const info = await dialectOf(db.ds).tableInfo(db.ds.manager, { name });
      expect(info!.uniqueKeys).to.deep.include([fields[1], fields[0]]);
    });

    it('a composite key is the primary key; a rerun of the statement changes nothing', async () => {
      const records = [
        { a: '1', b: 'y', c: null },
        { a: '1', b: 'x', c: '2' },
      ];
      const { primaryKey } = await roundTrip(db.ds, records, { jsonSource: false, key: ['b', 'a'], name: 'composite_key' });
      expect(primaryKey).to.have.members(['a', 'b']);
      const dialect = dialectOf(db.ds);
      await db.ds.query(dialect.createTable({ name: 'composite_key' }, inferred(records, false), ['b', 'a']));
      const duplicate = await rejection(db.ds.query(dialect.insertRecords({ name: 'composite_key' }, ['a', 'b'], 1), ['1', 'x']));
      expect(String(duplicate)).to.match(/unique|duplicate|primary/i);
    });

    if (DRIVER === 'mysql') {
      it('MySQL/MariaDB: a text key is a VARCHAR that holds the longest key, compared exactly', async () => {
        const long = 'k'.repeat(700);
        const records = [{ k: long }, { k: 'a' }, { k: 'A' }, { k: 'a ' }];
        const { read } = await roundTrip(db.ds, records, { jsonSource: false, key: ['k'], name: 'text_key' });
        expect(read[0]).to.include({ kind: 'text', length: 700, primary: 1 });
      });
    }

    it('property: any mix of values converts for the column inferred from it, and the database stores it', async () => {
      const pad = (n: number, width = 2) => String(n).padStart(width, '0');
      const value = fc.oneof(
        fc.integer().map(String),
        fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
        fc.tuple(fc.integer({ min: -99999, max: 99999 }), fc.nat({ max: 9999 })).map(([a, b]) => `${a}.${pad(b, 4)}`),
        fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => n.toExponential()),
        fc.constantFrom('true', 'f', 'YES', 'no', '1', '0', 'maybe', ''),
        fc
          .date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-31T00:00:00Z'), noInvalidDate: true })
          .map((d) => d.toISOString().slice(0, 10)),
        fc
          .tuple(
            fc.date({ min: new Date('1000-01-02T00:00:00Z'), max: new Date('9998-12-31T00:00:00Z'), noInvalidDate: true }),
            fc.constantFrom('', 'Z', '+05:30', '-0800'),
          )
          .map(([d, zone]) => `${d.toISOString().slice(0, 23)}${zone}`),
        fc.string({ maxLength: 8 }).filter((s) => !s.includes('\u0000')),
        fc.constant(null),
      );
      const jsonValue = fc.oneof(
        value,
        value.map((v) => (v !== null && /^-?[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?$/.test(v) ? new JsonNumber(v) : v)),
        fc.boolean(),
        fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
      );
      await fc.assert(
        fc.asyncProperty(
          fc.boolean(),
          fc.array(fc.tuple(value, jsonValue, jsonValue), { minLength: 1, maxLength: 6 }),
          async (json, rows) => {
            const records = rows.map(([a, b, c]) => (json ? { a, b, c } : { a, b: a, c: a }));
            await roundTrip(db.ds, records, { jsonSource: json });
          },
        ),
        { numRuns: 40 },
      );
    });
  });
});
