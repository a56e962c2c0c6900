// The import engine's fast paths: the CSV record scanner (checked against csv-parse itself), the
// bulk write of a chunk (COPY on PostgreSQL) and what happens when it meets an id stored before.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { CsvError, Parser } from 'csv-parse';
import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import { applyChunk, begin, CheckpointError, checkpoint, fileDigest, importFile, values } from '../src';
import { CopyText, skipCopyRows } from '../src/dialect';
import { csvRecords } from '../src/import/csv-records';
import { count, createTestDatabase, DRIVER, type TestDatabase } from './support/database';
import { rejection } from './support/expect-code';

type Outcome = { records: string[][]; error: string | null };

async function* pieces(bytes: Buffer, cuts: number[]): AsyncGenerator<Buffer> {
  let at = 0;
  for (const cut of cuts) {
    if (cut <= at || cut >= bytes.length) continue;
    yield bytes.subarray(at, cut);
    at = cut;
  }
  if (at < bytes.length) yield bytes.subarray(at);
}

async function collect(records: AsyncIterable<string[] | string[][]>, grouped: boolean): Promise<Outcome> {
  const outcome: Outcome = { records: [], error: null };
  try {
    for await (const item of records) {
      if (grouped) outcome.records.push(...(item as string[][]));
      else outcome.records.push(item as string[]);
    }
  } catch (error) {
    outcome.error = error instanceof CsvError ? error.code : `not a CsvError: ${String(error)}`;
  }
  return outcome;
}

/** csv-parse itself, with the options the import uses, fed the same pieces. */
function csvParse(bytes: Buffer, cuts: number[]): Promise<Outcome> {
  const parser = new Parser({ bom: true, relax_column_count: true, skip_empty_lines: true });
  Readable.from(pieces(bytes, cuts), { objectMode: false }).pipe(parser);
  return collect(parser as AsyncIterable<string[]>, false);
}

const token = fc.constantFrom('a', 'b', '7', '-', ' ', 'é', '😀', '\t', ',', ',', '\n', '\n', '\r', '\r\n', '"', '""');

describe('importFile fast paths', () => {
  describe('CSV records', () => {
    it('are the records csv-parse gives, whatever the bytes and however they are cut', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(token, { maxLength: 40 }),
          fc.boolean(),
          fc.boolean(),
          fc.array(fc.nat(200), { maxLength: 5 }),
          async (tokens, quoteFree, bom, cuts) => {
            const text = (quoteFree ? tokens.filter((t) => !t.includes('"')) : tokens).join('');
            const bytes = Buffer.concat([Buffer.from(bom ? [0xef, 0xbb, 0xbf] : []), Buffer.from(text)]);
            const sortedCuts = [...cuts].sort((a, b) => a - b);
            const ours = await collect(csvRecords(pieces(bytes, sortedCuts)), true);
            const theirs = await csvParse(bytes, sortedCuts);
            expect(ours.error, JSON.stringify(text)).to.equal(theirs.error);
            if (ours.error === null) {
              expect(ours.records, JSON.stringify(text)).to.deep.equal(theirs.records);
            } else {
              // csv-parse's stream drops the records of the piece that failed; every one it does give is ours too.
              expect(ours.records.slice(0, theirs.records.length), JSON.stringify(text)).to.deep.equal(theirs.records);
            }
          },
        ),
        { numRuns: 3000 },
      );
    });

    it('reads a record longer than a block, and one far longer than a megabyte', async () => {
      const long = 'x'.repeat(3 << 20);
      const bytes = Buffer.from(`id,value\n${long},1\r\nb,2\n`);
      const cuts = Array.from({ length: 80 }, (_, i) => i * 65536);
      const ours = await collect(csvRecords(pieces(bytes, cuts)), true);
      expect(ours.error).to.equal(null);
      expect(ours.records.map((r) => r.map((f) => f.length))).to.deep.equal([
        [2, 5],
        [long.length, 2],
        [1, 1],
      ]);
      expect(ours.records[1][1]).to.equal('1\r');
    });
  });

  describe('COPY text', () => {
    /** The rows of COPY text, fields unescaped. */
    function decode(bytes: Buffer): string[][] {
      const unescape = (field: string) => field.replace(/\\(.)/g, (_, c: string) => ({ t: '\t', n: '\n', r: '\r' })[c] ?? c);
      return bytes
        .toString()
        .split('\n')
        .slice(0, -1)
        .map((line) => line.split('\t').map(unescape));
    }

    it('escapes text, and a chunk overtaken by another runner keeps only the rows after the checkpoint', () => {
      const text = new CopyText();
      const ids = ['a\tb', 'c\\d', 'e\nf', 'g\rh', 'ü😀', 'plain'];
      ids.forEach((id, i) => {
        text.text('batch');
        text.tab();
        text.utf8(Buffer.from(id));
        text.tab();
        text.integer(i - 2);
        text.endRow();
      });
      const rows = text.take();
      expect(rows.rows).to.equal(ids.length);
      expect(decode(rows.bytes)).to.deep.equal(ids.map((id, i) => ['batch', id, String(i - 2)]));
      const rest = skipCopyRows(rows, 4);
      expect(rest.rows).to.equal(2);
      expect(decode(rest.bytes)).to.deep.equal([
        ['batch', 'ü😀', '2'],
        ['batch', 'plain', '3'],
      ]);
      expect(Array.from(rest.ends.subarray(0, rest.rows))).to.deep.equal([Buffer.byteLength('batch\tü😀\t2\n'), rest.bytes.length]);
    });
  });

  describe('chunks written in bulk', () => {
    let database: TestDatabase;
    let ds: DataSource;
    let dir: string;

    before(async () => {
      database = await createTestDatabase('import_bulk');
      ds = await database.open();
      dir = mkdtempSync(join(tmpdir(), 'ck-import-bulk-'));
    });
    after(async () => {
      if (dir) rmSync(dir, { recursive: true, force: true });
      if (database) await database.drop();
    });

    it('stores ids holding tabs, line breaks, backslashes and \\N exactly', async () => {
      const ids = ['tab\there', 'line\nbreak', 'carriage\rreturn', 'back\\slash', '\\N', '\\\\t', 'quote"d', ' spaced ', 'ü€😀'];
      const quoted = (id: string) => `"${id.replace(/"/g, '""')}"`;
      const path = join(dir, 'special.csv');
      writeFileSync(path, `id,value\n${ids.map((id, i) => `${quoted(id)},${i - 4}`).join('\n')}\n`);
      expect(await importFile(ds, 'special', path, { size: 4 })).to.include({ nextIndex: ids.length, done: true });
      const expected = ids.map((id, i): [string, number] => [id, i - 4]);
      expect(new Map(await values(ds, 'special'))).to.deep.equal(new Map(expected));
    });

    it('stores quote-free ids holding backslashes, tabs, carriage returns and \\N exactly, and values as integers', async () => {
      // No quote in the file: every record is read in place and written to COPY text from its bytes.
      const ids = ['back\\slash', 'tab\there', 'carriage\rreturn', '\\N', '\\.', 'ü€😀', ' spaced '];
      const numbers = ['-0', '007', '-9007199254740991', '9007199254740991', '12', '-3', '0'];
      const path = join(dir, 'special-plain.csv');
      writeFileSync(path, `id,value\n${ids.map((id, i) => `${id},${numbers[i]}`).join('\n')}\n`);
      expect(await importFile(ds, 'special-plain', path, { size: 3 })).to.include({ nextIndex: ids.length, done: true });
      const expected = ids.map((id, i): [string, number] => [id, Number(numbers[i]) + 0]);
      expect(new Map(await values(ds, 'special-plain'))).to.deep.equal(new Map(expected));
    });

    if (DRIVER === 'postgres') {
      it('writes lab chunks on PostgreSQL as binary COPY, storing the ids and values COPY text stored', async () => {
        const copies: string[] = [];
        const logged = await database.open({
          logger: {
            logQuery: (query: string) => void (query.startsWith('COPY') && copies.push(query)),
            logQueryError() {},
            logQuerySlow() {},
            logSchemaBuild() {},
            logMigration() {},
            log() {},
          },
        });
        const ids = ['back\\slash', 'tab\there', '\\N', '\\.', 'ü€😀', ' spaced ', 'é'.repeat(512), 'x'];
        const numbers = ['-0', '007', '-9007199254740991', '9007199254740991', '12', '-3', '0', '-4294967297'];
        const path = join(dir, 'binary-plain.csv');
        writeFileSync(path, `id,value\n${ids.map((id, i) => `${id},${numbers[i]}`).join('\n')}\n`);
        expect(await importFile(logged, 'binary-plain', path, { size: 3 })).to.include({ nextIndex: ids.length, done: true });
        expect(copies).to.have.length(3);
        expect(
          copies.every((sql) => /\(FORMAT binary\)$/.test(sql)),
          copies.join('\n'),
        ).to.equal(true);
        const expected = ids.map((id, i): [string, number] => [id, Number(numbers[i]) + 0]);
        expect(new Map(await values(ds, 'binary-plain'))).to.deep.equal(new Map(expected));
      });
    }

    it('checks quote-free rows in place as the slow path would: INVALID_INPUT at the row, nothing written', async () => {
      const rows = Array.from({ length: 3000 }, (_, i) => `r${i},${i}`);
      const cases: [string, string][] = [
        ['float value', 'bad,1e3'],
        ['sign only', 'bad,-'],
        ['empty value', 'bad,'],
        ['value beyond 2^53−1', 'bad,9007199254740992'],
        ['no value column', 'bad'],
        ['empty id', ',1'],
        ['id with U+0000', 'b\u0000d,1'],
        ['id of 513 characters', `${'é'.repeat(513)},1`],
        ['duplicate of the first id', 'r0,1'],
      ];
      const before = await count(ds, 'SELECT COUNT(*) FROM checkpoint_import_items');
      for (const [name, text] of cases) {
        const lines = [...rows];
        lines[2222] = text;
        const path = join(dir, 'invalid-plain.csv');
        writeFileSync(path, `id,value\n${lines.join('\n')}\n`);
        const error = await rejection(importFile(ds, `invalid-plain-${name}`, path));
        expect(error, name).to.be.instanceOf(CheckpointError);
        expect((error as CheckpointError).code, name).to.equal('INVALID_INPUT');
        expect((error as { index?: number }).index, name).to.equal(2222);
      }
      expect(await count(ds, 'SELECT COUNT(*) FROM checkpoint_import_items')).to.equal(before);
      // 512 characters of two bytes each: over 512 bytes, within the limit.
      const path = join(dir, 'long-plain.csv');
      writeFileSync(path, `id,value\n${'é'.repeat(512)},1\nshort,2\n`);
      expect(await importFile(ds, 'long-plain', path)).to.include({ nextIndex: 2, done: true });
    });

    it('finds a duplicate non-ASCII id of a quote-free file across the exact set and the hashed runs', async function () {
      this.timeout(60_000);
      // 130k rows: past the exact-id budget; row 3 is hashed from its string, its repeat from its bytes.
      const n = 130_000;
      const lines = Array.from({ length: n }, (_, i) => `ü-${i}-😀,${i}`);
      lines[n - 1] = `ü-3-😀,0`;
      const path = join(dir, 'dup-plain.csv');
      writeFileSync(path, `id,value\n${lines.join('\n')}\n`);
      const error = await rejection(importFile(ds, 'dup-plain', path));
      expect((error as CheckpointError).code).to.equal('INVALID_INPUT');
      expect((error as { index?: number }).index).to.equal(n - 1);
      expect(await checkpoint(ds, 'dup-plain')).to.equal(null);
    });

    if (DRIVER === 'postgres') {
      it('prepares its statements again on a connection that dropped them (DEALLOCATE ALL)', async () => {
        const single = await database.open({ extra: { max: 1 } }); // every import on one connection
        try {
          const source = (name: string) => {
            const path = join(dir, `${name}.csv`);
            writeFileSync(path, `id,value\n${Array.from({ length: 25 }, (_, i) => `${name}-${i},${i}`).join('\n')}\n`);
            return path;
          };
          expect(await importFile(single, 'deallocated-1', source('deallocated-1'), { size: 10 })).to.include({ rows: 25, done: true });
          await single.query('DEALLOCATE ALL');
          expect(await importFile(single, 'deallocated-2', source('deallocated-2'), { size: 10 })).to.include({ rows: 25, done: true });
          expect(await count(single, "SELECT COUNT(*) FROM checkpoint_import_items WHERE batch LIKE 'deallocated-%'")).to.equal(50);
        } finally {
          await single.destroy();
        }
      });
    }

    it('refuses a chunk whose id is already stored (applyChunk) with INVALID_INPUT at that row, keeping nothing of it', async () => {
      const path = join(dir, 'clash.csv');
      writeFileSync(path, `id,value\n${Array.from({ length: 2500 }, (_, i) => `r${i},${i}`).join('\n')}\n`);
      await begin(ds, 'clash', await fileDigest(path));
      await applyChunk(ds, 'clash', 0, [{ id: 'r1700', value: -1 }]);
      let error: unknown;
      try {
        await importFile(ds, 'clash', path, { size: 1000 });
      } catch (caught) {
        error = caught;
      }
      expect(error).to.be.instanceOf(CheckpointError);
      expect((error as CheckpointError).code).to.equal('INVALID_INPUT');
      expect((error as { index?: number }).index).to.equal(1700);
      // The first chunk (rows 1–1000) committed; the one holding row 1700 left nothing behind.
      expect(await checkpoint(ds, 'clash')).to.equal(1001);
      expect(await count(ds, "SELECT COUNT(*) FROM checkpoint_import_items WHERE batch = 'clash'")).to.equal(1001);
    });
  });
});
