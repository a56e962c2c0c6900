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
  postgres: (name) => `CREATE TABLE ${name} (n INTEGER PRIMARY KEY, i INTEGER, s SMALLINT, num NUMERIC(6,2), amount NUMERIC, flag BOOLEAN, day DATE,
    at TIMESTAMP(6), atz TIMESTAMPTZ, uid UUID, name VARCHAR(5), note TEXT NOT NULL)`,
  mysql: (name) => `CREATE TABLE ${name} (n INT PRIMARY KEY, i INT, s SMALLINT, num DECIMAL(6,2), amount DECIMAL(30,10), flag BOOLEAN, day DATE,
    at DATETIME(6), atz DATETIME(6), uid UUID, name VARCHAR(5), note TEXT NOT NULL) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`,
  sqlite: (name) => `CREATE TABLE ${name} (n INTEGER PRIMARY KEY, i INTEGER, s SMALLINT, num DECIMAL(6,2), amount NUMERIC, flag BOOLEAN, day DATE,
    at DATETIME, atz DATETIME, uid UUID, name VARCHAR(5), note TEXT NOT NULL)`,
};

const near = (valid: fc.Arbitrary<string>, ...odd: string[]) => fc.oneof({ weight: 3, arbitrary: valid }, fc.constantFrom(...odd));
const integer = near(fc.integer({ min: -3e9, max: 3e9 }).map(String), '0', '-0', '007', '-', '', '1.5', '1e3', ' 1', '+1', '2147483648', '999999999999999999');
const small = near(fc.integer({ min: -40000, max: 40000 }).map(String), '32767', '-32768', '32768', '00', '');
const numeric = near(fc.stringMatching(/^-?[0-9]{1,5}(\.[0-9]{1,3})?$/), '0.00', '-0.0', '-0', '1e2', '00.5', '.5', '5.', '1234.50', '12345.1', '');
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
const uid = near(fc.uuid(), '00000000-0000-0000-0000-00000000000G', 'ABCDEF01-2345-6789-ABCD-EF0123456789', '0000000000000000000000000000000000000', '');
const text = fc
  .array(fc.oneof(fc.constantFrom('"', ',', '\n', '\r', '\t', '\\', '\u0000', 'é', '😀', ' ', 'N'), fc.string({ maxLength: 3 })), { maxLength: 5 })
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
    outcome.rejects = (await database.ds.query(sql('SELECT row_index, reason, raw FROM checkpoint_import_rejects WHERE batch = ? ORDER BY row_index'), [
      batch,
    ])) as unknown[];
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
      [n, n * 7 - 9000, n % 300, `${n % 9999}.${n % 100}`, `-${n}.${n % 10}0`, n % 2 === 0 ? 'T' : 'no', '2024-02-29', `2024-03-01T10:11:12.${n}`, '2024-03-01 10:11:12Z', '0f0e0d0c-0b0a-0908-0706-050403020100', 'ab\\c', `tab\there ${n}`].join(','),
    );
    const path = join(dir, 'valid.csv');
    writeFileSync(path, `${COLUMNS.join(',')}\n${rows.join('\n')}\n`);
    const bytes = await run('by_bytes', 'valid-bytes', path, { size: 1000 });
    const generic = await run('by_map', 'valid-map', path, { size: 1000, map: (record: Record<string, unknown>) => record });
    expect(bytes.result).to.include({ rows: 3000, done: true });
    expect(bytes).to.deep.equal(generic);
  });

  // On PostgreSQL a chunk whose rows all give COPY's CSV parser exactly the converted values is
  // sent as the file's own records (`FORMAT csv`); any other chunk as COPY text. Chunks of 4 here:
  // even chunks hold verbatim rows only, each odd one a row in a form PostgreSQL would read
  // otherwise (or that is not COPY's CSV), so each COPY's format is known.
  const verbatimRow = (n: number) =>
    [
      n,
      [-2147483648, 2147483647, 0, -n][n % 4],
      n % 300,
      ['1234.50', '-3.5', '7', '12.30'][n % 4],
      ['-12.25', '0', '3.5', ''][n % 4],
      ['T', 'no', 'Yes', 'f', '1', '0', 'true', 'FALSE'][n % 8],
      n % 5 === 0 ? '' : '2024-02-29',
      ['2024-03-01T10:11:12.123456', '2024-03-01 10:11:12', '', '2024-12-31 23:59:59.5'][n % 4],
      ['2024-03-01 10:11:12Z', '2024-03-01T00:00:00.000001Z', '', '2024-03-01 10:11:12.7z'][n % 4],
      n % 2 === 0 ? '0F0E0D0C-0B0A-0908-0706-050403020100' : '',
      ['', 'ab\\c', 'é😀', 'NULL'][n % 4],
      ['tab\there', 'back\\slash', ' spaced ', `x\\.${n}`][n % 4],
    ].map(String);
  // Valid, but not verbatim: field → value.
  const otherwise: [number, string][] = [
    [4, '1.50'], // an unconstrained numeric keeps a fraction's trailing zeros
    [7, '2024-03-01 10:11:12Z'], // a timestamp's zone PostgreSQL would drop
    [8, '2024-03-01 10:11:12'], // a timestamptz without zone: the session's, not UTC
    [7, '2024-03-01t10:11:12'],
    [1, '007'],
    [11, 'line\rbreak'], // a CR that is data, not the record delimiter
  ];
  const verbatimFile = (breakText: string, bom: string, nullText = '') => {
    const lines = Array.from({ length: 48 }, (_, n) => {
      // With a null text, an empty field is an empty string: NULL is written as that text.
      const fields = verbatimRow(n).map((field, f) => (field === '' && f < 10 ? nullText : field));
      const chunk = Math.floor(n / 4);
      if (chunk % 2 === 1 && n % 4 === 2) {
        const [field, value] = otherwise[((chunk - 1) / 2) % otherwise.length];
        fields[field] = value;
      }
      return fields.join(',');
    });
    return `${bom}${COLUMNS.join(',')}${breakText}${lines.join(breakText)}${breakText}`;
  };

  for (const [label, breakText, bom, csv] of [
    ['LF', '\n', '', undefined],
    ['CRLF, a BOM and a null text', '\r\n', '\ufeff', { null: 'NULL' }],
  ] as const) {
    it(`sends chunks of verbatim rows as their CSV records, with the rows of the generic path (${label})`, async () => {
      const path = join(dir, `verbatim-${label.length}.csv`);
      writeFileSync(path, verbatimFile(breakText, bom, csv?.null));
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
      const options = { size: 4, ...(csv ? { csv } : {}) };
      await logged.query('DELETE FROM by_bytes');
      const result = await importFile(logged, `verbatim-${label}`, path, { into: 'by_bytes', ...options });
      expect(result).to.include({ rows: 48, done: true });
      const bytes = (await database.ds.query(`SELECT ${COLUMNS.map(q).join(', ')} FROM by_bytes ORDER BY n`)) as unknown[];
      const generic = await run('by_map', `verbatim-map-${label}`, path, { ...options, map: (record: Record<string, unknown>) => record });
      expect(generic.result).to.include({ rows: 48, done: true });
      expect(bytes).to.deep.equal(generic.rows);
      if (DRIVER === 'postgres') {
        // 12 chunks: the 6 even ones as the file's records, the 6 odd ones as COPY text.
        expect(copies.filter((sql) => /FORMAT csv/.test(sql))).to.have.length(6);
        expect(copies.filter((sql) => !/FORMAT csv/.test(sql))).to.have.length(6);
        if (csv) expect(copies.find((sql) => /FORMAT csv/.test(sql))).to.contain("NULL 'NULL'");
      }
    });
  }

  it('names the row whose key the table holds already in a chunk of verbatim rows', async () => {
    const path = join(dir, 'verbatim-existing.csv');
    writeFileSync(path, `${COLUMNS.join(',')}\n${Array.from({ length: 12 }, (_, n) => verbatimRow(n).join(',')).join('\n')}\n`);
    await database.ds.query('DELETE FROM by_bytes');
    await database.ds.query(`INSERT INTO by_bytes (n, note) VALUES (6, 'there first')`);
    const error = await importFile(database.ds, 'verbatim-existing', path, { into: 'by_bytes', size: 4 }).then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(error).to.be.instanceOf(CheckpointError);
    expect(error).to.include({ code: 'INVALID_INPUT', index: 6, field: 'n' });
    expect(await database.ds.query('SELECT n FROM by_bytes ORDER BY n')).to.deep.equal([0, 1, 2, 3, 6].map((n) => ({ n })));
  });

  it('reads unquoted records as bytes and hands the rest over to csv-parse from the first quote', async () => {
    const target = await targetTable(database.ds.manager, 'by_bytes');
    const storable = { floatSpecials: DRIVER === 'postgres', textHoldsNul: DRIVER !== 'postgres' };
    async function* blocks(): AsyncGenerator<Buffer> {
      yield Buffer.from(`${COLUMNS.join(',')}\n0,1,,,,,,,,,,a\n1,2,,,,,,,,,,b\n`);
      yield Buffer.from('2,3,,,,,,,,,,"c"\n3,4,,,,,,,,,,d\n');
    }
    const groups: { copies: boolean; rows: string[] }[] = [];
    for await (const group of csvCopyGroups(blocks(), {}, new RecordRows(target, storable, undefined, null), target, storable)) {
      groups.push({ copies: group.copies, rows: Array.from({ length: group.length }, (_, r) => group.raw(r)) });
    }
    expect(groups).to.deep.equal([
      { copies: true, rows: ['0,1,,,,,,,,,,a', '1,2,,,,,,,,,,b'] },
      { copies: false, rows: ['2,3,,,,,,,,,,"c"', '3,4,,,,,,,,,,d'] },
    ]);
  });
});
