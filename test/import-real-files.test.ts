import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { DataSource } from 'typeorm';
import { checkpointEntities, dataSourceOptionsFromUrl, importFile, values as importValues } from '../src';
import { decodeRows, encodeRows } from '../src/import/resume';
import { kill, runChild, startChild } from './support/child';
import { cli, cliJson } from './support/cli-run';
import { expectCode } from './support/expect-code';
import { readsBefore } from './support/file-reads';
import { count, DRIVER, sql, useTestDatabase } from './support/database';

// SPEC "Real files, second round": NULL texts in every format, the key by default, .tsv, the
// check summary.
describe(`importFile: real files, second round (${DRIVER})`, () => {
  const database = useTestDatabase('real_files');
  let dir: string;
  let files = 0;
  const file = (name: string, content: string | Buffer) => {
    const path = join(dir, `${++files}-${name}`);
    writeFileSync(path, content);
    return path;
  };
  const rows = async (table: string) =>
    (
      (await database.ds.query(`SELECT name, population, note FROM ${table} ORDER BY name`)) as {
        name: string;
        population: number | string | null;
        note: string | null;
      }[]
    ).map((row) => `${row.name}:${row.population === null ? 'NULL' : Number(row.population)}:${row.note === null ? 'NULL' : row.note}`);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'real-files-'));
    await database.ds.query('CREATE TABLE towns (name VARCHAR(40) PRIMARY KEY, population INTEGER, note VARCHAR(40))');
    await database.ds.query('CREATE TABLE visits (id INTEGER NOT NULL, place VARCHAR(40) NOT NULL)');
    await database.ds.query(
      DRIVER === 'postgres'
        ? 'CREATE TABLE generated (id SERIAL PRIMARY KEY, name VARCHAR(40) NOT NULL)'
        : DRIVER === 'mysql'
          ? 'CREATE TABLE generated (id INTEGER AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40) NOT NULL)'
          : 'CREATE TABLE generated (id INTEGER PRIMARY KEY AUTOINCREMENT, name VARCHAR(40) NOT NULL)',
    );
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  beforeEach(async () => {
    await database.ds.query('DELETE FROM towns');
    await database.ds.query('DELETE FROM visits');
  });

  describe('nullIf', () => {
    it('a JSON string equal to a null text is NULL (numbers given as strings, "" for unknown), in JSON and NDJSON', async () => {
      const records = [
        { name: 'a', population: '120', note: 'NA' },
        { name: 'b', population: '', note: '' },
        { name: 'c', population: '7', note: 'n/a' },
      ];
      const sources = {
        json: file('towns.json', JSON.stringify(records)),
        ndjson: file('towns.ndjson', records.map((r) => JSON.stringify(r)).join('\n')),
      };
      for (const [format, path] of Object.entries(sources)) {
        await database.ds.query('DELETE FROM towns');
        // Without nullIf, "" is not an integer: the file is rejected before any write.
        await expectCode(importFile(database.ds, `plain-${format}`, path, { into: 'towns' }), 'INVALID_INPUT');
        expect(await count(database.ds, 'SELECT COUNT(*) FROM towns')).to.equal(0);
        const result = await importFile(database.ds, `nulls-${format}`, path, { into: 'towns', nullIf: ['', 'NA'] });
        expect(result, format).to.include({ rows: 3, invalid: 0, done: true });
        expect(await rows('towns'), format).to.deep.equal(['a:120:NULL', 'b:NULL:NULL', 'c:7:n/a']);
      }
    });

    it('a header name equal to a null text is a name: the null texts apply to the rows, in both CSV readers', async () => {
      const sources = [
        { path: file('null-header.csv', 'name,NA,note\na,NA,x\nb,5,NA\n'), csv: {} },
        { path: file('null-header-semicolon.csv', 'name;NA;note\na;NA;x\nb;5;NA\n'), csv: { delimiter: ';' } },
      ];
      for (const { path, csv } of sources) {
        await database.ds.query('DELETE FROM towns');
        const result = await importFile(database.ds, `null-header-${files}-${Object.keys(csv).length}`, path, {
          into: 'towns',
          csv,
          nullIf: ['NA'],
          map: (record) => ({ name: record.name, population: record.NA, note: record.note }),
        });
        expect(result, JSON.stringify(csv)).to.include({ rows: 2, invalid: 0, done: true });
        expect(await rows('towns')).to.deep.equal(['a:NULL:x', 'b:5:NULL']);
      }
      // Without map, by the fast byte reader: the header's NA names a column the table lacks, so it is the name that counts.
      await database.ds.query('DELETE FROM towns');
      const plain = file('null-header-plain.csv', 'name,population,note\nNA,1,NA\n');
      expect(await importFile(database.ds, 'null-header-plain', plain, { into: 'towns', nullIf: ['note'] })).to.include({ rows: 1 });
      expect(await rows('towns')).to.deep.equal(['NA:1:NA']);
    });

    it('a CSV field equal to a null text is NULL quoted or not; without nullIf only an empty unquoted field is', async () => {
      const path = file('towns.csv', 'name,population,note\na,1,NA\nb,2,"NA"\nc,3,""\nd,4,\n');
      await importFile(database.ds, 'csv-default', path, { into: 'towns' });
      expect(await rows('towns')).to.deep.equal(['a:1:NA', 'b:2:NA', 'c:3:', 'd:4:NULL']);
      await database.ds.query('DELETE FROM towns');
      await importFile(database.ds, 'csv-nulls', path, { into: 'towns', nullIf: ['NA'] });
      expect(await rows('towns')).to.deep.equal(['a:1:NULL', 'b:2:NULL', 'c:3:', 'd:4:']);
      // csv.null is a synonym for one text.
      await database.ds.query('DELETE FROM towns');
      await importFile(database.ds, 'csv-null-synonym', path, { into: 'towns', csv: { null: 'NA' } });
      expect(await rows('towns')).to.deep.equal(['a:1:NULL', 'b:2:NULL', 'c:3:', 'd:4:']);
    });

    it('refuses a nullIf that is not an array of strings with INVALID_ARGUMENT, before any write', async () => {
      const path = file('towns.ndjson', '{"name":"a","population":"1"}\n');
      for (const nullIf of ['', [1], [null], {}, 'NA']) {
        await expectCode(importFile(database.ds, 'bad-null', path, { into: 'towns', nullIf: nullIf as never }), 'INVALID_ARGUMENT');
      }
      expect(await count(database.ds, 'SELECT COUNT(*) FROM towns')).to.equal(0);
      expect(await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_imports WHERE id = ?'), ['bad-null'])).to.equal(0);
    });

    it('CLI: --null is repeatable and applies to JSON files', async () => {
      const path = file('cli-towns.json', JSON.stringify([{ name: 'x', population: '', note: '-' }]));
      const run = await cliJson([
        'import',
        path,
        '--batch',
        'cli-nulls',
        '--into',
        'towns',
        '--null',
        '',
        '--null',
        '-',
        '--db',
        database.url,
      ]);
      expect(run.code, run.stderr).to.equal(0);
      expect(await rows('towns')).to.deep.equal(['x:NULL:NULL']);
    });
  });

  describe('the key by default', () => {
    it("a repeat of the table's primary key within the file is an invalid row found in pass 1, before any write", async () => {
      const path = file('repeat.ndjson', ['a', 'b', 'c', 'b', 'd'].map((name) => JSON.stringify({ name, population: 1 })).join('\n'));
      const error = await expectCode(importFile(database.ds, 'repeat', path, { into: 'towns', size: 2 }), 'INVALID_INPUT');
      expect(error).to.include({ index: 3, field: 'name' });
      expect(await count(database.ds, 'SELECT COUNT(*) FROM towns')).to.equal(0);
      // With invalid: 'skip' the repeat is a reject; the first occurrence is written.
      const skipped = await importFile(database.ds, 'repeat-skip', path, { into: 'towns', size: 2, invalid: 'skip' });
      expect(skipped).to.include({ rows: 4, invalid: 1, done: true });
      expect(await count(database.ds, 'SELECT COUNT(*) FROM towns')).to.equal(4);
    });

    it('key: false turns the check off: the repeat reaches the table, which refuses it at its chunk', async () => {
      const path = file('repeat-off.ndjson', ['a', 'b', 'a'].map((name) => JSON.stringify({ name })).join('\n'));
      await expectCode(importFile(database.ds, 'repeat-off', path, { into: 'towns', size: 2, key: false }), 'INVALID_INPUT');
      // The chunk before the repeat's committed: the repeat was not found before the first write.
      expect(await count(database.ds, 'SELECT COUNT(*) FROM towns')).to.equal(2);
    });

    it('a table without a primary key has no default key; a generated key the file leaves out repeats nothing', async () => {
      const visits = file('visits.ndjson', [1, 1, 2].map((id) => JSON.stringify({ id, place: 'p' })).join('\n'));
      expect(await importFile(database.ds, 'visits', visits, { into: 'visits' })).to.include({ rows: 3, invalid: 0 });
      const names = file('generated.ndjson', ['x', 'y', 'z'].map((name) => JSON.stringify({ name })).join('\n'));
      expect(await importFile(database.ds, 'generated', names, { into: 'generated' })).to.include({ rows: 3, invalid: 0 });
    });

    it('with conflict: update, a key repeated within the file is still an invalid row (the table decides only between the file and itself)', async () => {
      const path = file('conflict.ndjson', ['a', 'a'].map((name, i) => JSON.stringify({ name, population: i })).join('\n'));
      const error = await expectCode(importFile(database.ds, 'conflict', path, { into: 'towns', conflict: 'update' }), 'INVALID_INPUT');
      expect(error).to.include({ index: 1 });
    });

    it('key: false with conflict: update: a key repeated within one chunk is written row by row, the last one wins (PostgreSQL refuses to update a row twice in one statement)', async () => {
      const records = [
        { name: 'a', population: 1 },
        { name: 'b', population: 2 },
        { name: 'a', population: 3 },
        { name: 'a', population: 4, note: 'last' },
        { name: 'c', population: 5 },
      ];
      const path = file('repeat-update.ndjson', records.map((record) => JSON.stringify(record)).join('\n'));
      const result = await importFile(database.ds, 'repeat-update', path, { into: 'towns', key: false, conflict: 'update' });
      expect(result).to.include({ rows: 5, invalid: 0, done: true });
      expect(await rows('towns')).to.deep.equal(['a:4:last', 'b:2:NULL', 'c:5:NULL']);
    });

    it('CLI: --no-key turns it off', async () => {
      const path = file('cli-repeat.csv', 'name,population\na,1\na,2\n');
      const refused = await cliJson(['import', path, '--batch', 'cli-key', '--into', 'towns', '--db', database.url]);
      expect(refused.json).to.include({ ok: false, code: 'INVALID_INPUT', index: 1 });
      const run = await cliJson([
        'import',
        path,
        '--batch',
        'cli-no-key',
        '--into',
        'towns',
        '--no-key',
        '--size',
        '1',
        '--conflict',
        'update',
        '--db',
        database.url,
      ]);
      expect(run.code, run.stderr).to.equal(0);
      expect(await rows('towns')).to.deep.equal(['a:2:NULL']);
    });
  });

  describe('.tsv', () => {
    it('.tsv and .tsv.gz are CSV with a tab delimiter; a comma is data', async () => {
      const text = 'name\tpopulation\tnote\na\t1\tx, y\nb\t2\t\n';
      for (const path of [file('towns.tsv', text), file('towns.tsv.gz', gzipSync(text))]) {
        await database.ds.query('DELETE FROM towns');
        expect(await importFile(database.ds, `tsv-${path}`, path, { into: 'towns' })).to.include({ rows: 2, done: true });
        expect(await rows('towns')).to.deep.equal(['a:1:x, y', 'b:2:NULL']);
      }
    });

    it('id/value rows from a .tsv and .tsv.gz are CSV with a tab delimiter too: a comma is data, quotes as in CSV', async () => {
      const quoted = '"q\t""7"""\t7';
      const lines = Array.from({ length: 3000 }, (_, i) => (i === 7 ? quoted : `r,${i}\t${i}`));
      const text = `id\tvalue\r\n${lines.join('\r\n')}\r\n`;
      for (const [n, path] of [file('rows.tsv', text), file('rows.tsv.gz', gzipSync(text))].entries()) {
        const batch = `tsv-rows-${n}`;
        expect(await importFile(database.ds, batch, path, { size: 100 }), path).to.include({ rows: 3000, done: true });
        const stored = await importValues(database.ds, batch);
        expect(stored).to.have.length(3000);
        expect(stored).to.deep.include.members([
          ['r,0', 0],
          ['q\t"7"', 7],
          ['r,2999', 2999],
        ]);
      }
      // A tab inside an unquoted id splits the record: a ragged row is refused before any write.
      const ragged = file('ragged.tsv', 'id\tvalue\na\t1\nb\tc\t2\n');
      await expectCode(importFile(database.ds, 'tsv-ragged', ragged), 'INVALID_INPUT');
      expect(await importValues(database.ds, 'tsv-ragged')).to.deep.equal([]);
    });
  });

  describe('check summary', () => {
    it('groups every invalid row by field and reason, with counts and the first row of each', async () => {
      const lines = ['name,population,note'];
      for (let i = 0; i < 300; i++) lines.push(`t${i},${i % 3 === 0 ? '' : i % 7 === 0 ? 'many' : i},`);
      lines.push('t5,5,');
      const path = file('summary.csv', `${lines.join('\n')}\n`);
      const result = await importFile(database.ds, 'summary', path, { into: 'towns', check: true, nullIf: ['x'] });
      const empty = Array.from({ length: 300 }, (_, i) => i).filter((i) => i % 3 === 0);
      const many = Array.from({ length: 300 }, (_, i) => i).filter((i) => i % 3 !== 0 && i % 7 === 0);
      expect(result.invalid).to.equal(empty.length + many.length + 1);
      expect(result.summary).to.deep.equal([
        { field: 'population', reason: result.summary![0].reason, rows: empty.length, firstIndex: 0 },
        { field: 'population', reason: result.summary![1].reason, rows: many.length, firstIndex: many[0] },
        { field: 'name', reason: result.summary![2].reason, rows: 1, firstIndex: 300 },
      ]);
      expect(result.summary![0].reason).to.not.equal(result.summary![1].reason);
      expect(await count(database.ds, 'SELECT COUNT(*) FROM towns')).to.equal(0);

      const run = await cliJson(['import', path, '--batch', 'summary', '--into', 'towns', '--check', '--null', 'x', '--db', database.url]);
      expect(run.json.summary).to.deep.equal(result.summary);
      const printed = await cli(['import', path, '--batch', 'summary', '--into', 'towns', '--check', '--null', 'x', '--db', database.url]);
      expect(printed.stdout.join('\n')).to.include(`population: ${result.summary![0].reason} — ${empty.length} rows, first 0`);
    });
  });

  describe('a resume that costs only what is left', () => {
    /** A JSON array or NDJSON of `items` with a BOM and CRLF line breaks (in the array, a comma before every item but the first). */
    const jsonSource = (format: 'json' | 'ndjson', items: string[]) =>
      `\uFEFF${format === 'json' ? `[\r\n${items.join(',\r\n')}\r\n]\r\n` : `${items.join('\r\n')}\r\n`}`;
    /** The byte offset in `jsonSource` right after item `next - 1`: its line break in NDJSON, its closing brace in the array. */
    const offsetAfter = (format: 'json' | 'ndjson', items: string[], next: number) =>
      3 + Buffer.byteLength(format === 'json' ? `[\r\n${items.slice(0, next).join(',\r\n')}` : `${items.slice(0, next).join('\r\n')}\r\n`);

    /** The committed checkpoint of `batch`: its next row, and the byte offset it keeps for that row. */
    async function storedOffset(batch: string): Promise<{ next: number; offset: number }> {
      const [row] = (await database.ds.query(sql('SELECT next_index, next_offset FROM checkpoint_imports WHERE id = ?'), [batch])) as {
        next_index: number | string;
        next_offset: number | string;
      }[];
      return { next: Number(row.next_index), offset: Number(row.next_offset) };
    }

    const towns = (n: number) => Array.from({ length: n }, (_, i) => JSON.stringify({ name: `t${i}`, population: i })).join('\n');

    /** A records import of `path` stopped by its signal after `chunks` committed chunks; `map` counts its calls. */
    async function stoppedAfter(batch: string, path: string, chunks: number, options: Record<string, unknown>) {
      const stop = new AbortController();
      const result = await importFile(database.ds, batch, path, {
        ...options,
        size: 10,
        signal: stop.signal,
        onProgress: (progress) => progress.batches >= chunks && stop.abort(),
      });
      expect(result).to.include({ nextIndex: chunks * 10, done: false, stopped: 'signal' });
    }

    it('skips validation when the same file resumes with the same options: map runs only for the rows left', async () => {
      const path = file('resume.ndjson', towns(100));
      let calls = 0;
      const map = (record: Record<string, unknown>) => {
        calls++;
        return record;
      };
      await stoppedAfter('resume', path, 3, { into: 'towns', map });
      // Pass 1 read every row, pass 2 those of three chunks (and the fourth, read before the stop took effect).
      expect(calls).to.be.at.least(130);
      calls = 0;
      const resumed = await importFile(database.ds, 'resume', path, { into: 'towns', map, size: 10 });
      expect(resumed).to.include({ rows: 70, done: true });
      expect(calls).to.equal(70);
      expect(await count(database.ds, 'SELECT COUNT(*) FROM towns')).to.equal(100);
    });

    it('validates again when an option that changes validation differs; repeated keys pass 1 found are kept for the resume, which skips validation and still leaves them out', async () => {
      const path = file('resume-options.ndjson', towns(100));
      let calls = 0;
      const map = (record: Record<string, unknown>) => {
        calls++;
        return record;
      };
      await stoppedAfter('resume-options', path, 3, { into: 'towns', map });
      calls = 0;
      expect(await importFile(database.ds, 'resume-options', path, { into: 'towns', map, size: 10, nullIf: ['x'] })).to.include({
        done: true,
      });
      expect(calls).to.equal(170);

      const repeats = file('resume-repeats.ndjson', `${towns(100)}\n${JSON.stringify({ name: 't1' })}`);
      await database.ds.query('DELETE FROM towns');
      await stoppedAfter('resume-repeats', repeats, 3, { into: 'towns', map, invalid: 'skip' });
      calls = 0;
      const resumed = await importFile(database.ds, 'resume-repeats', repeats, { into: 'towns', map, size: 10, invalid: 'skip' });
      expect(resumed).to.include({ done: true, invalid: 1 });
      // Pass 2 alone: the 71 rows after the checkpoint, the repeat among them left out as an invalid row.
      expect(calls).to.equal(71);
      expect(await count(database.ds, 'SELECT COUNT(*) FROM towns')).to.equal(100);
      expect(await count(database.ds, "SELECT COUNT(*) FROM towns WHERE name = 't1' AND population = 1")).to.equal(1);
      const [reject] = (await database.ds.query(sql('SELECT row_index FROM checkpoint_import_rejects WHERE batch = ?'), [
        'resume-repeats',
      ])) as {
        row_index: number | string;
      }[];
      expect(Number(reject.row_index)).to.equal(100);
    });

    it('the repeated rows kept for a resume: gaps in base 36, read back as written; a list longer than a MySQL text column is not kept', () => {
      const rows = [0, 1, 35, 36, 1_000_000, 2 ** 40];
      expect(encodeRows(rows)).to.equal('0,1,y,1,lfks,e13w8m2o');
      expect(decodeRows(encodeRows(rows))).to.deep.equal(rows);
      expect(encodeRows([])).to.equal(null);
      expect(decodeRows(null)).to.deep.equal([]);
      expect(encodeRows(Array.from({ length: 30_000 }, (_, i) => i * 1000))).to.equal(null);
    });

    /** How a CSV of `total` visits is written and read: the fast byte reader, or csv-parse (another delimiter, `map`, quotes). */
    const csvVariants: { name: string; ext: string; line: (i: number) => string; header: string; options: Record<string, unknown> }[] = [
      { name: 'read as bytes', ext: 'csv', header: 'id,place', line: (i) => `${i},place-${i}`, options: {} },
      { name: 'with ; as delimiter', ext: 'csv', header: 'id;place', line: (i) => `${i};place-${i}`, options: { csv: { delimiter: ';' } } },
      { name: 'tab-separated (.tsv)', ext: 'tsv', header: 'id\tplace', line: (i) => `${i}\tplace-${i}`, options: {} },
      {
        name: 'with map',
        ext: 'csv',
        header: 'id,place',
        line: (i) => `${i},place-${i}`,
        options: { map: (r: Record<string, unknown>) => r },
      },
      // Quoted fields, a line break in some: the byte reader hands the file over to csv-parse at the first quote.
      {
        name: 'quoted, handed over to csv-parse',
        ext: 'csv',
        header: 'id,place',
        line: (i) => (i % 7 === 3 ? `${i},"pla\r\nce, ${i}"` : `${i},"place-${i}"`),
        options: {},
      },
    ];
    for (const variant of csvVariants) {
      it(`a CSV ${variant.name} resumes at the byte offset its checkpoint keeps: the blocks before it are read once, by the digest`, async () => {
        await database.ds.query('DELETE FROM visits');
        const total = 60_000;
        const lines = Array.from({ length: total }, (_, i) => `${variant.line(i)}\r\n`);
        // A BOM, CRLF line breaks and an empty line after the header: the offset counts every byte of the file.
        const head = `\uFEFF${variant.header}\r\n\r\n`;
        const path = file(`resume-offset.${variant.ext}`, `${head}${lines.join('')}`);
        const batch = `resume-offset-${files}`;
        const stop = new AbortController();
        const first = await importFile(database.ds, batch, path, {
          into: 'visits',
          size: 1000,
          ...variant.options,
          signal: stop.signal,
          onProgress: (progress) => progress.batches >= 40 && stop.abort(),
        });
        expect(first).to.include({ done: false, stopped: 'signal' });
        const { next, offset: kept } = await storedOffset(batch);
        // The empty line belongs to the first record (it is skipped before it): the offset is after the record's line break.
        const offset = Buffer.byteLength(head) + Buffer.byteLength(lines.slice(0, next).join(''));
        expect(kept, variant.name).to.equal(offset);

        const { result: resumed, twice } = await readsBefore(offset, () =>
          importFile(database.ds, batch, path, { into: 'visits', size: 1000, ...variant.options }),
        );
        expect(resumed).to.include({ done: true, rows: total - next });
        expect(twice).to.deep.equal([]);
        expect(await count(database.ds, 'SELECT COUNT(*) FROM visits')).to.equal(total);
        expect(await count(database.ds, 'SELECT COUNT(DISTINCT id) FROM visits')).to.equal(total);
        const last = variant
          .line(total - 1)
          .split(/[,;\t]/)[1]
          .replace(/"/g, '');
        expect(await count(database.ds, sql('SELECT COUNT(*) FROM visits WHERE id = ? AND place = ?'), [total - 1, last])).to.equal(1);
      });
    }

    for (const format of ['ndjson', 'json'] as const) {
      it(`${format === 'json' ? 'a JSON array' : 'an NDJSON file'} resumes at the byte offset its checkpoint keeps, counted in bytes`, async () => {
        await database.ds.query('DELETE FROM visits');
        const total = 40_000;
        // Two-byte and three-byte characters: the offset counts bytes, not characters.
        const items = Array.from({ length: total }, (_, i) => JSON.stringify({ id: i, place: `plače-€-${i}` }));
        const path = file(`resume-offset.${format}`, jsonSource(format, items));
        const batch = `resume-offset-${format}`;
        const stop = new AbortController();
        const first = await importFile(database.ds, batch, path, {
          into: 'visits',
          size: 500,
          signal: stop.signal,
          onProgress: (progress) => progress.batches >= 60 && stop.abort(),
        });
        expect(first).to.include({ done: false, stopped: 'signal' });
        const { next, offset: kept } = await storedOffset(batch);
        const offset = offsetAfter(format, items, next);
        expect(kept).to.equal(offset);

        const { result: resumed, twice } = await readsBefore(offset, () =>
          importFile(database.ds, batch, path, { into: 'visits', size: 500 }),
        );
        expect(resumed).to.include({ done: true, rows: total - next });
        expect(twice).to.deep.equal([]);
        expect(await count(database.ds, 'SELECT COUNT(*) FROM visits')).to.equal(total);
        expect(await count(database.ds, 'SELECT COUNT(DISTINCT id) FROM visits')).to.equal(total);
        expect(
          await count(database.ds, sql('SELECT COUNT(*) FROM visits WHERE id = ? AND place = ?'), [total - 1, `plače-€-${total - 1}`]),
        ).to.equal(1);
      });
    }

    it('id/value rows from a plain CSV resume at the byte offset their checkpoint keeps', async () => {
      const total = 120_000;
      const lines = Array.from({ length: total }, (_, i) => `r${i},${i}\n`);
      const path = file('resume-rows-offset.csv', `id,value\n${lines.join('')}`);
      const stop = new AbortController();
      const first = await importFile(database.ds, 'resume-rows-offset', path, {
        size: 1000,
        signal: stop.signal,
        onProgress: (progress) => progress.batches >= 70 && stop.abort(),
      });
      expect(first).to.include({ done: false });
      const [row] = (await database.ds.query(sql('SELECT next_index, next_offset FROM checkpoint_imports WHERE id = ?'), [
        'resume-rows-offset',
      ])) as { next_index: number | string; next_offset: number | string }[];
      const next = Number(row.next_index);
      const offset = Buffer.byteLength('id,value\n') + Buffer.byteLength(lines.slice(0, next).join(''));
      expect(Number(row.next_offset)).to.equal(offset);
      const { result, twice } = await readsBefore(offset, () => importFile(database.ds, 'resume-rows-offset', path, { size: 1000 }));
      expect(result).to.include({ done: true, rows: total - next });
      expect(twice).to.deep.equal([]);
      const items = "SELECT COUNT(*) FROM checkpoint_import_items WHERE batch = 'resume-rows-offset'";
      expect(await count(database.ds, items)).to.equal(total);
      expect(
        await count(database.ds, "SELECT COUNT(DISTINCT id) FROM checkpoint_import_items WHERE batch = 'resume-rows-offset'"),
      ).to.equal(total);
      expect(await count(database.ds, sql(`${items} AND id = ? AND value = ?`), [`r${total - 1}`, total - 1])).to.equal(1);
    });

    for (const format of ['ndjson', 'json'] as const) {
      it(`id/value rows from ${format === 'json' ? 'a JSON array' : 'an NDJSON file'} resume at the byte offset their checkpoint keeps, counted in bytes`, async () => {
        const total = 90_000;
        // Runs of ids with two-, three- and four-byte characters between runs of ASCII ones: the
        // offset counts bytes, in blocks of either kind.
        const id = (i: number) => (i % 5000 < 2500 ? `r${i}` : i % 7 === 0 ? `rč€😀${i}` : `rč€${i}`);
        const items = Array.from({ length: total }, (_, i) => JSON.stringify({ id: id(i), value: i }));
        // Under the preload's size (3 MB): the first call commits chunk by chunk, and its signal stops it.
        const path = file(`resume-rows-offset.${format}`, jsonSource(format, items));
        const batch = `resume-rows-offset-${format}`;
        const stop = new AbortController();
        const first = await importFile(database.ds, batch, path, {
          size: 1000,
          signal: stop.signal,
          onProgress: (progress) => progress.batches >= 60 && stop.abort(),
        });
        expect(first).to.include({ done: false });
        const { next, offset: kept } = await storedOffset(batch);
        const offset = offsetAfter(format, items, next);
        expect(kept).to.equal(offset);

        const { result, twice } = await readsBefore(offset, () => importFile(database.ds, batch, path, { size: 1000 }));
        expect(result).to.include({ done: true, rows: total - next });
        expect(twice).to.deep.equal([]);
        const stored = 'SELECT COUNT(*) FROM checkpoint_import_items WHERE batch = ?';
        expect(await count(database.ds, sql(stored), [batch])).to.equal(total);
        expect(await count(database.ds, sql('SELECT COUNT(DISTINCT id) FROM checkpoint_import_items WHERE batch = ?'), [batch])).to.equal(
          total,
        );
        for (const i of [next - 1, next, total - 1]) {
          expect(await count(database.ds, sql(`${stored} AND id = ? AND value = ?`), [batch, id(i), i])).to.equal(1);
        }
      });
    }

    it('another file under the same batch is still FINGERPRINT_MISMATCH, found by the digest alone', async () => {
      const path = file('resume-a.ndjson', towns(100));
      await stoppedAfter('resume-other', path, 2, { into: 'towns' });
      const other = file('resume-b.ndjson', towns(101));
      await expectCode(importFile(database.ds, 'resume-other', other, { into: 'towns', size: 10 }), 'FINGERPRINT_MISMATCH');
      expect(await count(database.ds, 'SELECT COUNT(*) FROM towns')).to.equal(20);
    });

    it('id/value rows: the batch keeps the hash of the options it was validated with, and a resume goes on exactly once', async () => {
      const path = file('resume-rows.ndjson', Array.from({ length: 50 }, (_, i) => JSON.stringify({ id: `r${i}`, value: i })).join('\n'));
      const stop = new AbortController();
      const first = await importFile(database.ds, 'resume-rows', path, {
        size: 10,
        signal: stop.signal,
        onProgress: (progress) => progress.batches >= 2 && stop.abort(),
      });
      expect(first).to.include({ nextIndex: 20, done: false });
      const [row] = (await database.ds.query(sql('SELECT validated_options FROM checkpoint_imports WHERE id = ?'), ['resume-rows'])) as {
        validated_options: string | null;
      }[];
      expect(row.validated_options).to.match(/^[0-9a-f]{64}$/);
      expect(await importFile(database.ds, 'resume-rows', path, { size: 10 })).to.include({ rows: 30, done: true });
      expect(await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_import_items WHERE batch = ?'), ['resume-rows'])).to.equal(50);
    });
  });
  describe('SIGKILL between a chunk commit and the next chunk', () => {
    it('a killed import resumes without validating again, from its checkpoint, every row once in a table without a unique key', async () => {
      const total = 5000;
      const path = file(
        'killed.ndjson',
        `${Array.from({ length: total }, (_, i) => JSON.stringify({ id: i, place: `p${i}` })).join('\n')}\n`,
      );
      for (let trial = 1; trial <= 3; trial++) {
        await database.ds.query('DELETE FROM visits');
        const batch = `killed-${trial}`;
        const child = startChild('test/fixtures/records-import-worker.ts', [database.url, batch, path, 'visits', '100', String(5 * trial)]);
        const first = await child.waitForLine((line) => line.startsWith('first '));
        // The first run validated the file: map ran for all of it before the first chunk.
        expect(Number(first.split(' ')[1])).to.be.at.least(total);
        await child.waitForLine((line) => line.startsWith('between '));
        await kill(child);
        // Held between two chunks: the rows are those of the checkpoint (a chunk in flight when the wait began committed first).
        const held = await count(database.ds, sql('SELECT next_index FROM checkpoint_imports WHERE id = ?'), [batch]);
        expect(held).to.be.at.least(5 * trial * 100);
        expect(await count(database.ds, 'SELECT COUNT(*) FROM visits')).to.equal(held);

        const rerun = await runChild('test/fixtures/records-import-worker.ts', [database.url, batch, path, 'visits', '100', '0']);
        const again = rerun.lines.find((line) => line.startsWith('first '))!;
        // The resume did not validate: map ran only for the rows pass 2 read from the checkpoint on.
        expect(Number(again.split(' ')[1])).to.be.below(total - held);
        const done = JSON.parse(rerun.lines.find((line) => line.startsWith('done '))!.slice(5)) as Record<string, unknown>;
        expect(done).to.include({ done: true, rows: total - held, nextIndex: total });
        expect(await count(database.ds, 'SELECT COUNT(*) FROM visits')).to.equal(total);
        expect(await count(database.ds, 'SELECT COUNT(DISTINCT id) FROM visits')).to.equal(total);
      }
    });
  });
  describe('create', () => {
    const records = [
      { id: 1, name: 'Ab', population: '100', founded: '1900-01-02', at: '2020-01-01T10:00:00Z', doc: { a: 1 } },
      { id: 2, name: 'Cd', population: '', founded: '1901-03-04', at: '2020-01-02T10:00:00.5Z', doc: [1] },
      { id: 3, name: 'E, f', population: '2.5', founded: '1902-05-06', at: '2020-01-03 10:00:00+02:00', doc: null },
    ];
    const exists = async (table: string) => (await findTable(table)) !== null;
    const findTable = (table: string) =>
      database.ds.manager.transaction((tx) => import('../src/import/records/target-table').then((m) => m.findTargetTable(tx, table)));

    it('creates the table from what pass 1 inferred, before the first chunk, and returns its statement; a rerun uses it', async () => {
      const path = file('create.ndjson', records.map((r) => JSON.stringify(r)).join('\n'));
      const result = await importFile(database.ds, 'create', path, {
        into: 'created_towns',
        create: true,
        key: 'id',
        nullIf: [''],
        size: 2,
      });
      expect(result).to.include({ rows: 3, done: true });
      expect(result.created?.ddl).to.match(/CREATE TABLE/);
      const target = (await findTable('created_towns'))!;
      expect(target.primaryKey).to.deep.equal(['id']);
      const kinds = Object.fromEntries(target.columns.map((column) => [column.name, [column.kind, column.nullable]]));
      expect(kinds).to.deep.include({
        id: ['integer', false],
        name: ['text', false],
        population: ['numeric', true],
        founded: ['date', false],
      });
      expect(kinds.at[0]).to.be.oneOf(['timestamptz', 'timestamp']);
      expect(kinds.doc).to.deep.equal(['json', true]);
      expect(await count(database.ds, 'SELECT COUNT(*) FROM created_towns')).to.equal(3);
      // The table exists now: create changes nothing, and the rows go in as into any table.
      const again = await importFile(database.ds, 'create-again', path, {
        into: 'created_towns',
        create: true,
        key: 'id',
        nullIf: [''],
        conflict: 'skip',
      });
      expect(again).to.include({ rows: 3, done: true });
      expect(again.created).to.equal(undefined);
    });

    it('with check, returns the statement and creates nothing; a key the file does not have is INVALID_ARGUMENT', async () => {
      const path = file('create-check.csv', 'code,qty\na,1\nb,2\n');
      const checked = await importFile(database.ds, 'create-check', path, {
        into: 'checked_table',
        create: true,
        key: 'code',
        check: true,
      });
      expect(checked.created?.ddl).to.match(/CREATE TABLE/);
      expect(await exists('checked_table')).to.equal(false);
      await expectCode(
        importFile(database.ds, 'create-bad-key', path, { into: 'checked_table', create: true, key: 'nope' }),
        'INVALID_ARGUMENT',
      );
      expect(await exists('checked_table')).to.equal(false);
      expect(await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_imports WHERE id = ?'), ['create-bad-key'])).to.equal(0);
      await expectCode(importFile(database.ds, 'create-no-into', path, { records: true, check: true, create: true }), 'INVALID_ARGUMENT');
    });

    it('the key is the primary key: a row whose key field is NULL is invalid in pass 1 (nothing created), or skipped as a reject', async () => {
      const path = file('create-null-key.csv', 'code,qty\na,1\n,2\nc,3\n');
      const refused = await expectCode(
        importFile(database.ds, 'create-null-key', path, { into: 'null_key_table', create: true, key: 'code' }),
        'INVALID_INPUT',
      );
      expect(refused).to.include({ index: 1, field: 'code' });
      expect(await exists('null_key_table')).to.equal(false);
      const checked = await importFile(database.ds, 'create-null-key', path, {
        into: 'null_key_table',
        create: true,
        key: 'code',
        check: true,
      });
      expect(checked.summary).to.deep.equal([{ field: 'code', reason: 'NULL in a NOT NULL column', rows: 1, firstIndex: 1 }]);
      expect(checked.created?.ddl).to.match(/PRIMARY KEY/);
      const skipped = await importFile(database.ds, 'create-null-key', path, {
        into: 'null_key_table',
        create: true,
        key: 'code',
        invalid: 'skip',
      });
      expect(skipped).to.include({ rows: 2, invalid: 1, done: true });
      const target = (await findTable('null_key_table'))!;
      expect(target.primaryKey).to.deep.equal(['code']);
      expect(target.columns.find((column) => column.name === 'code')?.nullable).to.equal(false);
      expect(await count(database.ds, 'SELECT COUNT(*) FROM checkpoint_import_rejects WHERE row_index = 1')).to.equal(1);
    });

    it('a view of that name is no table: the CREATE TABLE is tried and refused (DATABASE_ERROR), and nothing of the file is written', async () => {
      const path = file('create-view.csv', 'name,population\nAb,1\nCd,2\n');
      await database.ds.query('CREATE VIEW towns_view AS SELECT name, population FROM towns');
      await expectCode(importFile(database.ds, 'create-view', path, { into: 'towns_view', create: true, key: 'name' }), 'DATABASE_ERROR');
      expect(await count(database.ds, 'SELECT COUNT(*) FROM towns')).to.equal(0);
      expect(await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_imports WHERE id = ?'), ['create-view'])).to.equal(0);
    });

    if (DRIVER === 'postgres') {
      it('a table the user cannot write: the database refuses the first chunk (DATABASE_ERROR), and nothing of the file is written', async () => {
        const path = file('create-readonly.csv', 'name,population\nAb,1\nCd,2\n');
        const role = `ck_reader_${process.pid}`;
        await database.ds.query(`CREATE ROLE ${role} LOGIN`);
        const options = dataSourceOptionsFromUrl(database.url.replace('//postgres@', `//${role}@`));
        const reader = new DataSource({ ...options, entities: checkpointEntities });
        try {
          await database.ds.query(`GRANT ALL ON ALL TABLES IN SCHEMA public TO ${role}`);
          await database.ds.query(`GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO ${role}`);
          await database.ds.query(`REVOKE INSERT, UPDATE, DELETE ON towns FROM ${role}`);
          await reader.initialize();
          await expectCode(importFile(reader, 'create-readonly', path, { into: 'towns', create: true }), 'DATABASE_ERROR');
          expect(await count(database.ds, 'SELECT COUNT(*) FROM towns')).to.equal(0);
          expect(
            await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_imports WHERE id = ? AND next_index > 0'), ['create-readonly']),
          ).to.equal(0);
        } finally {
          if (reader.isInitialized) await reader.destroy();
          await database.ds.query(`DROP OWNED BY ${role}`);
          await database.ds.query(`DROP ROLE ${role}`);
        }
      });
    }

    it('without create, a missing table is INVALID_ARGUMENT as before', async () => {
      const path = file('no-create.csv', 'code,qty\na,1\n');
      await expectCode(importFile(database.ds, 'no-create', path, { into: 'never_created' }), 'INVALID_ARGUMENT');
    });

    it('SIGKILL after the table was created and before the first chunk: the rerun uses the table, every row once', async () => {
      const total = 300;
      const path = file(
        'create-killed.ndjson',
        Array.from({ length: total }, (_, i) => JSON.stringify({ id: i, place: `p${i}` })).join('\n'),
      );
      const child = startChild('test/fixtures/records-import-worker.ts', [
        database.url,
        'create-killed',
        path,
        'killed_created',
        '50',
        '-1',
        'create',
      ]);
      await child.waitForLine((line) => line.startsWith('between '));
      await kill(child);
      expect(await exists('killed_created')).to.equal(true);
      expect(await count(database.ds, 'SELECT COUNT(*) FROM killed_created')).to.equal(0);
      const rerun = await runChild('test/fixtures/records-import-worker.ts', [
        database.url,
        'create-killed',
        path,
        'killed_created',
        '50',
        '0',
        'create',
      ]);
      const done = JSON.parse(rerun.lines.find((line) => line.startsWith('done '))!.slice(5)) as Record<string, unknown>;
      expect(done).to.include({ done: true, rows: total });
      expect(done.created).to.equal(undefined);
      expect(await count(database.ds, 'SELECT COUNT(DISTINCT id) FROM killed_created')).to.equal(total);
      expect(await count(database.ds, 'SELECT COUNT(*) FROM killed_created')).to.equal(total);
    });
  });
});
