import { expect } from 'chai';
import fc from 'fast-check';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { importFile } from '../src';
import { DRIVER, q, useTestDatabase } from './support/database';

interface Hostile {
  t: string | null;
  big: string;
  b: boolean | null;
  doc: unknown;
  /** A timestamp with microseconds, `YYYY-MM-DDTHH:MM:SS.ffffff`. */
  at: string | null;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// Text that breaks naive CSV and JSON writers: quotes, delimiters, line breaks, BOMs, any plane.
const nasty = fc.constantFrom('"', ',', ';', '\n', '\r', '\r\n', '\t', '\\', '\uFEFF', 'é', '😀', ' ', "'", '\u2028');
const text = fc
  .array(fc.oneof(nasty, fc.string({ unit: 'binary', maxLength: 4 })), { maxLength: 8 })
  .map((parts) => parts.join(''))
  .filter((s) => !s.includes('\u0000') && !LONE_SURROGATE.test(s));
// As JSON text says it (no -0), without U+0000, which jsonb cannot hold.
const json = fc
  .jsonValue({ maxDepth: 2 })
  .map((value) => JSON.parse(JSON.stringify(value)) as unknown)
  .filter((value) => !JSON.stringify(value).includes('\\u0000'));
const pad = (n: number, width: number) => String(n).padStart(width, '0');
const timestamp = fc
  .tuple(
    fc.integer({ min: 1970, max: 2099 }),
    fc.integer({ min: 1, max: 12 }),
    fc.integer({ min: 1, max: 28 }),
    fc.integer({ min: 0, max: 86399 }),
    fc.integer({ min: 0, max: 999999 }),
  )
  .map(
    ([y, m, d, s, us]) =>
      `${y}-${pad(m, 2)}-${pad(d, 2)}T${pad(Math.floor(s / 3600), 2)}:${pad(Math.floor(s / 60) % 60, 2)}:${pad(s % 60, 2)}.${pad(us, 6)}`,
  );
const hostile: fc.Arbitrary<Hostile> = fc.record({
  t: fc.option(text, { nil: null }),
  big: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String),
  b: fc.option(fc.boolean(), { nil: null }),
  doc: json,
  at: fc.option(timestamp, { nil: null }),
});

/** A stored timestamp's text as the source wrote it: `T`, all six fraction digits (PostgreSQL drops trailing zeros). */
function sourceTimestamp(stored: string | null): string | null {
  if (stored === null) return null;
  const [seconds, fraction = ''] = stored.replace(' ', 'T').split('.');
  return `${seconds}.${fraction.padEnd(6, '0')}`;
}

/** A CSV field: text always quoted (so '' stays '' and an empty unquoted field is NULL). */
function csvField(value: string | null): string {
  return value === null ? '' : `"${value.replace(/"/g, '""')}"`;
}

function toCsv(rows: Hostile[]): string {
  const lines = rows.map((row, n) =>
    [String(n), csvField(row.t), row.big, row.b === null ? '' : String(row.b), csvField(JSON.stringify(row.doc)), row.at ?? ''].join(','),
  );
  return `\uFEFFn,t,big,b,doc,at\r\n${lines.join('\r\n')}\r\n`;
}

function toNdjson(rows: Hostile[]): string {
  return rows.map((row, n) => JSON.stringify({ n, t: row.t, big: row.big, b: row.b, doc: row.doc, at: row.at })).join('\n');
}

const CREATE: Record<typeof DRIVER, string> = {
  postgres: 'CREATE TABLE hostile (n INTEGER PRIMARY KEY, t TEXT, big BIGINT NOT NULL, b BOOLEAN, doc JSONB, at TIMESTAMP(6))',
  mysql:
    'CREATE TABLE hostile (n INT PRIMARY KEY, t TEXT, big BIGINT NOT NULL, b BOOLEAN, doc JSON, at DATETIME(6)) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin',
  sqlite: 'CREATE TABLE hostile (n INTEGER PRIMARY KEY, t TEXT, big BIGINT NOT NULL, b BOOLEAN, doc JSON, at DATETIME)',
};

describe(`importFile records mode, hostile input (${DRIVER})`, () => {
  const database = useTestDatabase('records_hostile');
  let dir: string;
  let runs = 0;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'hostile-'));
    await database.ds.query(CREATE[DRIVER]);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const stored = async (): Promise<Hostile[]> => {
    // As text: the drivers would parse JSON (or not) and read an int8 as a double.
    const asText = (column: string) =>
      DRIVER === 'postgres' ? `${column}::text` : DRIVER === 'mysql' ? `CAST(${column} AS CHAR)` : `CAST(${column} AS TEXT)`;
    // SQLite: a json column has NUMERIC affinity, so a bare-number document is stored as a REAL,
    // which older SQLite (node-sqlite3's) casts to text with 15 digits only: read it as the double.
    const realDoc = DRIVER === 'sqlite' ? `, typeof(doc) AS ${q('docType')}, doc AS ${q('docValue')}` : '';
    const rows = (await database.ds.query(
      `SELECT n, t, ${asText('big')} AS ${q('big')}, b, ${asText('doc')} AS ${q('doc')}, ${asText('at')} AS ${q('at')}${realDoc} FROM hostile ORDER BY n`,
    )) as Record<string, unknown>[];
    return rows.map((row) => ({
      t: row.t as string | null,
      big: String(row.big),
      b: row.b === null ? null : row.b === true || Number(row.b) === 1,
      // jsonb reorders keys: compared as values.
      doc: row.docType === 'real' ? row.docValue : (JSON.parse(row.doc as string) as unknown),
      at: sourceTimestamp(row.at as string | null),
    }));
  };

  for (const format of ['csv', 'ndjson'] as const) {
    it(`random records round-trip exactly through ${format} into a table`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(hostile, { minLength: 1, maxLength: 30 }), fc.integer({ min: 1, max: 7 }), async (rows, size) => {
          await database.ds.query('DELETE FROM hostile');
          const path = join(dir, `${++runs}.${format}`);
          writeFileSync(path, format === 'csv' ? toCsv(rows) : toNdjson(rows));
          const result = await importFile(database.ds, `hostile-${runs}`, path, { into: 'hostile', size });
          expect(result).to.include({ rows: rows.length, invalid: 0, done: true });
          const back = await stored();
          expect(back.map((row) => [row.t, row.big, row.b, row.at])).to.deep.equal(rows.map((row) => [row.t, row.big, row.b, row.at]));
          expect(back.map((row) => row.doc)).to.deep.equal(rows.map((row) => row.doc));
        }),
        { numRuns: 25 },
      );
    });
  }
});
