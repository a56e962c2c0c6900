import { expect } from 'chai';
import fc from 'fast-check';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'typeorm';
import { CheckpointError, importFile } from '../src';
import { csvCopyGroups } from '../src/import/records/csv-copy-rows';
import { RecordRows } from '../src/import/records/record-rows';
import { targetTable } from '../src/import/records/target-table';
import { DRIVER, q, sql, useTestDatabase } from './support/database';

// A CSV `into` a table without `map` is read and checked as bytes (and on PostgreSQL written as
// COPY text from them); with `map` it takes the generic path (csv-parse, `convertValue`). An
// identity `map` is the oracle: both must give the same rows, rejects, counts and errors.

const COLUMNS = ['n', 'i', 's', 'num', 'amount', 'flag', 'day', 'at', 'atz', 'uid', 'name', 'note'] as const;

const TABLE: Record<typeof DRIVER, (name: string) => string> = {
  postgres: (
    name,
  ) => `CREATE TABLE ${name} (n INTEGER PRIMARY KEY, i INTEGER, s SMALLINT, num NUMERIC(6,2), amount NUMERIC, flag BOOLEAN, day DATE,
    at TIMESTAMP(6), atz TIMESTAMPTZ, uid UUID, name VARCHAR(5), note TEXT NOT NULL)`,
  mysql: (
    name,
  ) => `CREATE TABLE ${name} (n INT PRIMARY KEY, i INT, s SMALLINT, num DECIMAL(6,2), amount DECIMAL(30,10), flag BOOLEAN, day DATE,
    at DATETIME(6), atz DATETIME(6), uid UUID, name VARCHAR(5), note TEXT NOT NULL) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`,
  sqlite: (
    name,
  ) => `CREATE TABLE ${name} (n INTEGER PRIMARY KEY, i INTEGER, s SMALLINT, num DECIMAL(6,2), amount NUMERIC, flag BOOLEAN, day DATE,
    at DATETIME, atz DATETIME, uid UUID, name VARCHAR(5), note TEXT NOT NULL)`,
};

const near = (valid: fc.Arbitrary<string>, ...odd: string[]) => fc.oneof({ weight: 3, arbitrary: valid }, fc.constantFrom(...odd));
const integer = near(
  fc.integer({ min: -3e9, max: 3e9 }).map(String),
  '0',
  '-0',
  '007',
  '-',
  '',
  '1.5',
  '1e3',
  ' 1',
  '+1',
  '2147483648',
  '999999999999999999',
);
const small = near(fc.integer({ min: -40000, max: 40000 }).map(String), '32767', '-32768', '32768', '00', '');
const numeric = near(
  fc.stringMatching(/^-?[0-9]{1,5}(\.[0-9]{1,3})?$/),
  '0.00',
  '-0.0',
  '-0',
  '1e2',
  '00.5',
  '.5',
  '5.',
  '1234.50',
  '12345.1',
  '',
);
const flag = near(fc.constantFrom('true', 'false', 't', 'f', '1', '0', 'yes', 'no'), 'TRUE', 'No', 'YeS', 'tru', '2', '', 'K');
const day = near(fc.stringMatching(/^[0-9]{4}-[01][0-9]-[0-3][0-9]$/), '2024-02-29', '2023-02-29', '0000-01-01', '2024-1-01', '');
const at = near(
  fc.stringMatching(/^20[0-9]{2}-0[1-9]-[0-2][1-9][T ][0-2][0-9]:[0-5][0-9]:[0-6][0-9](\.[0-9]{1,7})?[Zz]?$/),
  '2024-01-01 00:00',
  '2024-01-01T10:00:00+02:00',
  '2024-01-01 10:00:00.1234560',
  '2024-01-01 24:00:00',
  '2024-01-01t10:00:00',
  '',
);
const uid = near(
  fc.uuid(),
  '00000000-0000-0000-0000-00000000000G',
  'ABCDEF01-2345-6789-ABCD-EF0123456789',
  '0000000000000000000000000000000000000',
  '',
);
const text = fc
  .array(fc.oneof(fc.constantFrom('"', ',', '\n', '\r', '\t', '\\', '\u0000', 'é', '😀', ' ', 'N'), fc.string({ maxLength: 3 })), {
    maxLength: 5,
  })
  .map((parts) => parts.join(''));

interface Line {
  fields: string[];
  /** Bytes that are not UTF-8 in the last field. */
  broken: boolean;
  ragged: boolean;
}

const line: fc.Arbitrary<Line> = fc.record({
  fields: fc.tuple(integer, small, numeric, numeric, flag, day, at, at, uid, text, text),
  broken: fc.integer({ min: 0, max: 19 }).map((n) => n === 0),
  ragged: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
});

/** A CSV field: quoted only when it must be (a quote then hands the rest of the file to csv-parse). */
function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

function csvFile(lines: Line[], breakText: string): Buffer {
  const parts: Buffer[] = [Buffer.from(`${COLUMNS.join(',')}${breakText}`)];
  lines.forEach((row, n) => {
    const fields = [String(n), ...row.fields.map(csvField)];
    if (row.ragged) fields.pop();
    parts.push(Buffer.from(fields.join(',')));
    if (row.broken) parts.push(Buffer.from([0xff]));
    parts.push(Buffer.from(breakText));
  });
  return Buffer.concat(parts);
}

interface Outcome {
  result?: Record<string, unknown>;
  error?: { code: string; index: unknown; field: unknown };
  rows: unknown[];
  rejects: unknown[];
}

describe(`importFile records mode, a CSV read as bytes (${DRIVER})`, () => {
  const database = useTestDatabase('records_bytes');
  let dir: string;
  let runs = 0;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'records-bytes-'));
    for (const name of ['by_bytes', 'by_map']) await database.ds.query(TABLE[DRIVER](name));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const run = async (table: string, batch: string, path: string, options: Record<string, unknown>): Promise<Outcome> => {
    await database.ds.query(`DELETE FROM ${table}`);
    const outcome: Outcome = { rows: [], rejects: [] };
    try {
      const { batch: _batch, ...result } = await importFile(database.ds, batch, path, { into: table, ...options });
      outcome.result = result;
    } catch (error) {
      if (!(error instanceof CheckpointError)) throw error;
      const { code, index, field } = error as CheckpointError & { index?: unknown; field?: unknown };
      outcome.error = { code, index, field };
    }
    outcome.rows = (await database.ds.query(`SELECT ${COLUMNS.map(q).join(', ')} FROM ${table} ORDER BY n`)) as unknown[];
    outcome.rejects = (await database.ds.query(
      sql('SELECT row_index, reason, raw FROM checkpoint_import_rejects WHERE batch = ? ORDER BY row_index'),
      [batch],
    )) as unknown[];
    return outcome;
  };

  it('gives the rows, rejects, counts and errors of the generic path, whatever the CSV holds', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(line, { minLength: 0, maxLength: 25 }),
        fc.constantFrom('\n', '\r\n'),
        fc.integer({ min: 1, max: 7 }),
        fc.boolean(),
        fc.constantFrom(undefined, 'i', ['name', 'flag']),
        async (lines, breakText, size, skip, key) => {
          const path = join(dir, `${++runs}.csv`);
          writeFileSync(path, csvFile(lines, breakText));
          const options = { size, ...(skip ? { invalid: 'skip' } : {}), ...(key ? { key } : {}) };
          const bytes = await run('by_bytes', `bytes-${runs}`, path, options);
          const generic = await run('by_map', `map-${runs}`, path, { ...options, map: (record: Record<string, unknown>) => record });
          // Invalid UTF-8 rejects the file; which row the generic reader names (or whether it meets an
          // invalid row first) depends on how far its stream had parsed: the code is compared.
          if (lines.some((row) => row.broken)) {
            expect([bytes.error?.code, generic.error?.code]).to.deep.equal(['INVALID_INPUT', 'INVALID_INPUT']);
            bytes.error = generic.error;
          }
          expect(bytes).to.deep.equal(generic);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('reads a file of valid rows as bytes to the end, and the same rows as the generic path', async () => {
    const rows = Array.from({ length: 3000 }, (_, n) =>
      [
        n,
        n * 7 - 9000,
        n % 300,
        `${n % 9999}.${n % 100}`,
        `-${n}.${n % 10}0`,
        n % 2 === 0 ? 'T' : 'no',
        '2024-02-29',
        `2024-03-01T10:11:12.${n}`,
        '2024-03-01 10:11:12Z',
        '0f0e0d0c-0b0a-0908-0706-050403020100',
        'ab\\c',
        `tab\there ${n}`,
      ].join(','),
    );
    const path = join(dir, 'valid.csv');
    writeFileSync(path, `${COLUMNS.join(',')}\n${rows.join('\n')}\n`);
    const bytes = await run('by_bytes', 'valid-bytes', path, { size: 1000 });
    const generic = await run('by_map', 'valid-map', path, { size: 1000, map: (record: Record<string, unknown>) => record });
    expect(bytes.result).to.include({ rows: 3000, done: true });
    expect(bytes).to.deep.equal(generic);
  });

  // On PostgreSQL, rows go in COPY's binary format when every column they fill has one (integers,
  // numeric, boolean, date, timestamps, uuid, text): the generic path (COPY text) is the oracle,
  // over values at the edges of each binary encoding (the epoch 2000-01-01, negative day counts,
  // numeric digit groups, int8 beyond 2^53).
  const WIDE: Record<typeof DRIVER, (name: string, extra: string) => string> = {
    postgres: (name, extra) => `CREATE TABLE ${name} (n INTEGER PRIMARY KEY, big BIGINT, tiny SMALLINT, amount NUMERIC, money NUMERIC(12,4),
      at TIMESTAMP(6), atz TIMESTAMPTZ(3), day DATE, code CHAR(4), label VARCHAR(8), uid UUID, flag BOOLEAN${extra})`,
    mysql: (name, extra) => `CREATE TABLE ${name} (n INT PRIMARY KEY, big BIGINT, tiny SMALLINT, amount DECIMAL(40,20), money DECIMAL(12,4),
      at DATETIME(6), atz DATETIME(3), day DATE, code CHAR(4), label VARCHAR(8), uid UUID, flag BOOLEAN${extra}) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`,
    sqlite: (name, extra) => `CREATE TABLE ${name} (n INTEGER PRIMARY KEY, big BIGINT, tiny SMALLINT, amount NUMERIC, money DECIMAL(12,4),
      at DATETIME, atz DATETIME, day DATE, code CHAR(4), label VARCHAR(8), uid UUID, flag BOOLEAN${extra})`,
  };
  const WIDE_COLUMNS = ['n', 'big', 'tiny', 'amount', 'money', 'at', 'atz', 'day', 'code', 'label', 'uid', 'flag'];
  const edges = {
    big: [
      '0',
      '-1',
      '4294967295',
      '4294967296',
      '-4294967297',
      '9007199254740993',
      '-9223372036854775808',
      '9223372036854775807',
      '123456789012345',
    ],
    tiny: ['0', '-32768', '32767', '-1', '255', '256'],
    amount: [
      '0',
      '-0',
      '0.0001',
      '-0.00001',
      '10000',
      '100000000',
      '12345678.87654321',
      '1e-7',
      '-2.5E3',
      '1.50',
      '0.10000',
      '99999999999999999999.9999',
    ],
    money: ['0.5', '-0.0001', '12345678.1', '1', '100.0000', '-99999999.9999', '0.01'],
    at: [
      '2000-01-01 00:00:00',
      '1999-12-31 23:59:59.999999',
      '0001-01-01 00:00:00',
      '9999-12-31 23:59:59.999999',
      '2024-02-29T12:00:00.5',
      '1970-01-01T00:00:00Z',
      '2024-03-01 01:30:00+02:00',
      '1900-03-01 00:00:00.000001',
    ],
    atz: ['2000-01-01 00:00:00', '1999-12-31 23:59:59.999', '2024-06-30T23:59:59.5Z', '2024-03-01 01:30:00-05:30', '1969-07-20 20:17:40'],
    day: ['2000-01-01', '1999-12-31', '0001-01-01', '9999-12-31', '2024-02-29', '1600-02-29', '1970-01-01'],
    code: ['', 'ab', 'abcd', 'é'],
    label: ['', 'x', 'tab\there', 'back\\sl', 'ünï😀', ' sp '],
    uid: ['00000000-0000-0000-0000-000000000000', 'FFFFFFFF-ffff-ABCD-ef01-23456789abcd', ''],
    flag: ['t', 'FALSE', 'yes', '0', ''],
  };
  const wideFile = (rows: number) => {
    const lines = Array.from({ length: rows }, (_, n) => [
      String(n),
      ...WIDE_COLUMNS.slice(1).map(
        (name, c) => edges[name as keyof typeof edges][(n * (c + 1)) % edges[name as keyof typeof edges].length],
      ),
    ]);
    return `${WIDE_COLUMNS.join(',')}\n${lines.map((fields) => fields.join(',')).join('\n')}\n`;
  };
  const copiesLogged = async (table: string, path: string, size: number) => {
    const copies: string[] = [];
    const logger: Logger = {
      logQuery: (query) => void (query.startsWith('COPY') && copies.push(query)),
      logQueryError() {},
      logQuerySlow() {},
      logSchemaBuild() {},
      logMigration() {},
      log() {},
    };
    const logged = await database.open({ logger });
    await logged.query(`DELETE FROM ${table}`);
    const result = await importFile(logged, `${table}-${++runs}`, path, { into: table, size });
    return { copies, result };
  };
  const wideRows = async (table: string) =>
    (await database.ds.query(`SELECT ${WIDE_COLUMNS.map(q).join(', ')} FROM ${table} ORDER BY n`)) as Record<string, unknown>[];

  it('writes rows whose columns all have a binary form as binary COPY, with the rows of the generic path', async () => {
    await database.ds.query(WIDE[DRIVER]('wide_bytes', ''));
    await database.ds.query(WIDE[DRIVER]('wide_map', ''));
    const path = join(dir, 'wide.csv');
    writeFileSync(path, wideFile(300));
    const { copies, result } = await copiesLogged('wide_bytes', path, 64);
    expect(result).to.include({ rows: 300, done: true });
    await importFile(database.ds, 'wide-map', path, { into: 'wide_map', size: 64, map: (record) => record });
    const bytes = await wideRows('wide_bytes');
    expect(bytes).to.have.length(300);
    expect(bytes).to.deep.equal(await wideRows('wide_map'));
    // 5 chunks, each one COPY (its rows in statements of 250 rows at most, logged once).
    if (DRIVER === 'postgres') expect(copies.map((sql) => /\(FORMAT binary\)$/.test(sql))).to.deep.equal([true, true, true, true, true]);
  });

  it('writes COPY text when a column the records fill has no binary form (json)', async () => {
    await database.ds.query(WIDE[DRIVER]('wide_json', `, doc ${DRIVER === 'postgres' ? 'JSONB' : 'JSON'}`));
    const path = join(dir, 'wide-json.csv');
    const [header, ...lines] = wideFile(3).trimEnd().split('\n');
    writeFileSync(path, `${[`${header},doc`, ...lines.map((line, n) => `${line},${['{}', '[1]', '2'][n]}`)].join('\n')}\n`);
    const { copies, result } = await copiesLogged('wide_json', path, 64);
    expect(result).to.include({ rows: 3, done: true });
    if (DRIVER === 'postgres')
      expect(copies)
        .to.have.length(1)
        .and.satisfy((sqls: string[]) => !/FORMAT binary/.test(sqls[0]));
  });

  it('names the row whose key the table holds already in a chunk written as binary COPY', async () => {
    const path = join(dir, 'wide-existing.csv');
    writeFileSync(path, wideFile(12));
    await database.ds.query('DELETE FROM wide_bytes');
    await database.ds.query('INSERT INTO wide_bytes (n) VALUES (6)');
    const error = await importFile(database.ds, 'wide-existing', path, { into: 'wide_bytes', size: 4 }).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(error).to.be.instanceOf(CheckpointError);
    expect(error).to.include({ code: 'INVALID_INPUT', index: 6, field: 'n' });
    expect((await database.ds.query('SELECT n FROM wide_bytes ORDER BY n')).map((row: { n: number }) => row.n)).to.deep.equal([
      0, 1, 2, 3, 6,
    ]);
  });

  if (DRIVER === 'postgres') {
    it('prepares its COPY again on a connection that dropped its statements (DEALLOCATE ALL)', async () => {
      const single = await database.open({ extra: { max: 1 } });
      const path = join(dir, 'wide-deallocated.csv');
      writeFileSync(path, wideFile(40));
      await single.query('DELETE FROM wide_bytes');
      expect(await importFile(single, 'deallocated-1', path, { into: 'wide_bytes', size: 10 })).to.include({ rows: 40, done: true });
      await single.query('DEALLOCATE ALL');
      await single.query('DELETE FROM wide_bytes');
      expect(await importFile(single, 'deallocated-2', path, { into: 'wide_bytes', size: 10 })).to.include({ rows: 40, done: true });
      expect(await wideRows('wide_bytes')).to.have.length(40);
    });
  }

  it('reads unquoted records as bytes and hands the rest over to csv-parse from the first quote', async () => {
    const target = await targetTable(database.ds.manager, 'by_bytes');
    const storable = { floatSpecials: DRIVER === 'postgres', textHoldsNul: DRIVER !== 'postgres' };
    async function* blocks(): AsyncGenerator<Buffer> {
      yield Buffer.from(`${COLUMNS.join(',')}\n0,1,,,,,,,,,,a\n1,2,,,,,,,,,,b\n`);
      yield Buffer.from('2,3,,,,,,,,,,"c"\n3,4,,,,,,,,,,d\n');
    }
    const groups: { copies: boolean; rows: string[] }[] = [];
    for await (const group of csvCopyGroups(blocks(), {}, null, new RecordRows(target, storable, undefined, null), target, storable)) {
      groups.push({ copies: group.copies, rows: Array.from({ length: group.length }, (_, r) => group.raw(r)) });
    }
    expect(groups).to.deep.equal([
      { copies: true, rows: ['0,1,,,,,,,,,,a', '1,2,,,,,,,,,,b'] },
      { copies: false, rows: ['2,3,,,,,,,,,,"c"', '3,4,,,,,,,,,,d'] },
    ]);
  });
});
