// Records mode's pass 2 begun during pass 1 (PostgreSQL, a plain CSV `into` a table by COPY, an
// import that opens its own transactions and accepts no invalid rows, a file of at least
// PRELOAD_MIN_BYTES): the rows pass 1 has read are copied into the target in one transaction held
// open until pass 1 has accepted the whole file, then committed with their checkpoint. These tests
// show that it happens (the first progress reports many chunks at once), that a file found invalid
// after rows were already copied leaves the table as it was, and that SIGKILL during the preload
// keeps every row exactly once. On the other databases the same files import chunk by chunk.
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { checkpoint, importFile } from '../src';
import { PRELOAD_MIN_BYTES } from '../src/import/preload';
import { count, DRIVER, q, sql, useTestDatabase } from './support/database';
import { expectCode } from './support/expect-code';
import { readsBefore } from './support/file-reads';
import { expectProgressPerChunk, killDuringPreload } from './support/preload';
import { SqlLog } from './support/sql-log';

const ROWS = 200_000;
const SIZE = 1000;

/** `id,name,amount` lines of ids from 1; `last` replaces the final line. */
function typedCsv(rows: number, last?: string): string {
  const lines = Array.from({ length: rows }, (_, i) => `${i + 1},name-${i + 1}-${'x'.repeat(8)},${(i * 7) % 1000}.25`);
  if (last !== undefined) lines[rows - 1] = last;
  return `id,name,amount\n${lines.join('\n')}\n`;
}

describe(`records import: pass 2 begun during pass 1 (${DRIVER})`, () => {
  const log = new SqlLog();
  const database = useTestDatabase('records_preload', { logger: log });
  let dir: string;
  let path: string;
  const preloads = DRIVER === 'postgres';
  let tables = 0;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ck-records-preload-'));
    path = join(dir, 'rows.csv');
    writeFileSync(path, typedCsv(ROWS));
    expect(statSync(path).size).to.be.at.least(PRELOAD_MIN_BYTES);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  beforeEach(() => log.clear());

  /** A new target table: a primary key, a text and a numeric column. */
  const newTable = async () => {
    const name = `preload_target_${++tables}`;
    await database.ds.query(`CREATE TABLE ${q(name)} (id integer PRIMARY KEY, name varchar(40) NOT NULL, amount numeric(10,2) NOT NULL)`);
    return name;
  };
  /** Each row once: the count, the distinct ids and their sum (1 + … + ROWS). */
  const expectEveryRowOnce = async (table: string, batch: string) => {
    const [row] = (await database.ds.query(`SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids, SUM(id) AS total FROM ${q(table)}`)) as {
      n: string;
      ids: string;
      total: string;
    }[];
    expect([Number(row.n), Number(row.ids), Number(row.total)]).to.deep.equal([ROWS, ROWS, (ROWS * (ROWS + 1)) / 2]);
    expect(await count(database.ds, `SELECT COUNT(*) FROM ${q(table)} WHERE name = 'name-7-xxxxxxxx' AND amount = 42.25`)).to.equal(1);
    expect(await checkpoint(database.ds, batch)).to.equal(ROWS);
  };
  const copiesInto = (table: string) => log.queries.filter(({ sql: text }) => text.startsWith(`COPY ${q(table)}`)).length;
  const importRow = (batch: string) =>
    database.ds.query(sql(`SELECT * FROM ${q('checkpoint_imports')} WHERE ${q('id')} = ?`), [batch]) as Promise<Record<string, unknown>[]>;

  it('imports every row exactly once; on PostgreSQL chunks load during pass 1 (fewer COPY statements than chunks), each reported', async () => {
    const table = await newTable();
    const progress: { items: number; batches: number }[] = [];
    const result = await importFile(database.ds, 'whole', path, {
      into: table,
      onProgress: (p) => progress.push({ items: p.items, batches: p.batches }),
    });
    expect(result).to.include({ rows: ROWS, nextIndex: ROWS, done: true, invalid: 0 });
    await expectEveryRowOnce(table, 'whole');
    const [stored] = await importRow('whole');
    expect(Number(stored.chunks)).to.equal(ROWS / SIZE);
    expect(Number(stored.written_rows)).to.equal(ROWS);
    expectProgressPerChunk(progress, preloads, SIZE, ROWS, copiesInto(table));
  });

  it("with invalid: 'skip' there is no preload: rows go chunk by chunk", async () => {
    const table = await newTable();
    const progress: number[] = [];
    const result = await importFile(database.ds, 'lenient', path, {
      into: table,
      invalid: 'skip',
      onProgress: (p) => progress.push(p.items),
    });
    expect(result).to.include({ rows: ROWS, done: true });
    expect(progress[0]).to.equal(SIZE);
    await expectEveryRowOnce(table, 'lenient');
  });

  if (preloads) {
    it('an invalid last row: INVALID_INPUT at that row, and nothing of the rows already copied stays', async () => {
      const table = await newTable();
      const invalid = join(dir, 'invalid-last.csv');
      writeFileSync(invalid, typedCsv(ROWS, `${ROWS},name-last,not-a-number`));
      const error = await expectCode(importFile(database.ds, 'invalid-last', invalid, { into: table }), 'INVALID_INPUT');
      expect((error as { index?: number }).index).to.equal(ROWS - 1);
      expect(copiesInto(table), 'rows were copied during pass 1').to.be.above(0);
      expect(await count(database.ds, `SELECT COUNT(*) FROM ${q(table)}`)).to.equal(0);
      expect(await importRow('invalid-last')).to.deep.equal([]);
    });

    it('a key repeated at the end, found when pass 1 ends: INVALID_INPUT, nothing stays', async () => {
      const table = await newTable();
      const repeated = join(dir, 'repeated-last.csv');
      writeFileSync(repeated, typedCsv(ROWS, '7,name-again,1.00'));
      const error = await expectCode(importFile(database.ds, 'repeated-last', repeated, { into: table }), 'INVALID_INPUT');
      expect((error as { index?: number }).index).to.equal(ROWS - 1);
      expect(copiesInto(table)).to.be.above(0);
      expect(await count(database.ds, `SELECT COUNT(*) FROM ${q(table)}`)).to.equal(0);
      expect(await importRow('repeated-last')).to.deep.equal([]);
    });

    it("stopped after the preloaded chunks: their checkpoint keeps the next row's byte offset, and the resume reads on from it, every row once", async () => {
      const table = await newTable();
      const stop = new AbortController();
      const first = await importFile(database.ds, 'resumed', path, { into: table, signal: stop.signal, onProgress: () => stop.abort() });
      expect(first).to.include({ done: false, stopped: 'signal' });
      expect(first.nextIndex).to.be.above(SIZE);
      expect(first.nextIndex % SIZE).to.equal(0);
      // The header and the first nextIndex lines are the file's first bytes.
      const offset = Buffer.byteLength(typedCsv(first.nextIndex));
      const [stored] = await importRow('resumed');
      expect(Number(stored.next_offset)).to.equal(offset);

      const { result, twice } = await readsBefore(offset, () => importFile(database.ds, 'resumed', path, { into: table }));
      expect(result).to.include({ rows: ROWS - first.nextIndex, done: true });
      expect(twice).to.deep.equal([]);
      await expectEveryRowOnce(table, 'resumed');
    });

    describe('SIGKILL while the preload transaction is open', () => {
      const BIG_ROWS = 1_000_000;
      let big: string;
      before(() => {
        big = join(dir, 'big.csv');
        writeFileSync(big, typedCsv(BIG_ROWS));
      });
      it('leaves nothing committed; the rerun imports every row once', async function () {
        this.timeout(180_000);
        for (let trial = 0; trial < 2; trial++) {
          const batch = `killed-${trial}`;
          const table = await newTable();
          await killDuringPreload(database.ds, database.url, batch, [big, String(SIZE), table]);
          expect(await checkpoint(database.ds, batch)).to.equal(null);
          expect(await count(database.ds, `SELECT COUNT(*) FROM ${q(table)}`)).to.equal(0);

          const result = await importFile(database.ds, batch, big, { into: table });
          expect(result).to.include({ rows: BIG_ROWS, done: true });
          expect(await count(database.ds, `SELECT COUNT(*) FROM ${q(table)}`)).to.equal(BIG_ROWS);
          expect(await count(database.ds, `SELECT COUNT(DISTINCT id) FROM ${q(table)}`)).to.equal(BIG_ROWS);
        }
      });
    });
  }
});
