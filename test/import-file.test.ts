import { createHash, randomInt } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { DataSource } from 'typeorm';
import {
  CheckpointError,
  checkpoint,
  fileDigest,
  importFile,
  type ImportFileOptions,
  type Progress,
  replaceImport,
  runInTransaction,
  values,
} from '../src';
import { DuplicateIds } from '../src/import/duplicate-ids';
import { kill, startChild } from './support/child';
import { count, createTestDatabase, DRIVER, q, sql, type TestDatabase } from './support/database';
import { createImportedScoresTable, ImportedScore } from './fixtures/imported-score';

const WORKER = 'test/fixtures/import-worker.ts';

type Row = { id: string; value: number };

async function rejection(promise: Promise<unknown>): Promise<CheckpointError & { index?: number }> {
  try {
    await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(CheckpointError);
    return error as CheckpointError & { index?: number };
  }
  return expect.fail('expected the call to reject');
}

function makeRows(n: number, prefix = 'row'): Row[] {
  return Array.from({ length: n }, (_, i) => ({ id: `${prefix}-${i}`, value: i * 7 - 1000 }));
}

const BOM = '\ufeff';

/** Replaces the item/line/record of row `at` by raw text; `@BAD@` in it becomes an invalid UTF-8 byte. */
interface RawRow {
  at: number;
  text: string;
}

/** Each format written in a way that exercises its rules (BOM, CRLF, blank lines, quoting, extra columns). */
const writers = {
  json: (rows: Row[], raw?: RawRow) =>
    `${BOM}[\n${rows
      .map((r, i) => (raw?.at === i ? `  ${raw.text}` : `  {"value": ${r.value}, "id": ${JSON.stringify(r.id)}, "note": [1.5, {"id": 1}]}`))
      .join(',\n')}\n]\n`,
  ndjson: (rows: Row[], raw?: RawRow) =>
    `${BOM}${rows
      .map((r, i) => `${raw?.at === i ? raw.text : JSON.stringify(r)}${i % 3 === 0 ? '\r\n' : '\n'}${i % 5 === 0 ? '\n  \n' : ''}`)
      .join('')}`,
  csv: (rows: Row[], raw?: RawRow) =>
    `${BOM}note,id,value\r\n${rows
      .map(
        (r, i) =>
          `${raw?.at === i ? raw.text : `${i % 2 ? '"a, ""quoted""\nnote"' : 'plain'},${i % 4 ? r.id : `"${r.id}"`},${r.value}`}\r\n`,
      )
      .join('')}`,
};
type Format = keyof typeof writers;
const FORMATS: Format[] = ['json', 'ndjson', 'csv'];

describe(`importFile: the streaming engine (${DRIVER})`, function () {
  let database: TestDatabase;
  let ds: DataSource;
  let dir: string;
  let fileCount = 0;

  before(async () => {
    database = await createTestDatabase('import_file');
    ds = await database.open({ entities: [ImportedScore] });
    await createImportedScoresTable(ds);
    dir = mkdtempSync(join(tmpdir(), 'import-file-'));
  });

  after(async () => {
    await database?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function file(format: Format | string, content: string | Buffer, extension = format): string {
    const path = join(dir, `source-${++fileCount}.${extension}`);
    writeFileSync(path, content);
    return path;
  }

  function sourceOf(format: Format, rows: Row[]): string {
    return file(format, writers[format](rows));
  }

  async function snapshot(): Promise<string> {
    const imports = await ds.query(`SELECT * FROM ${q('checkpoint_imports')} ORDER BY ${q('id')}`);
    const items = await ds.query(`SELECT * FROM ${q('checkpoint_import_items')} ORDER BY ${q('batch')}, ${q('id')}`);
    const scores = await ds.query(`SELECT * FROM ${q('imported_scores')} ORDER BY ${q('id')}`);
    return JSON.stringify({ imports, items, scores });
  }

  function itemCount(batch: string): Promise<number> {
    return count(ds, sql(`SELECT COUNT(*) FROM ${q('checkpoint_import_items')} WHERE ${q('batch')} = ?`), [batch]);
  }

  /** Rows as `values()` returns them: [id, value] pairs by id (the ids here are ASCII). */
  function sorted(rows: Row[]): [string, number][] {
    return rows.map((r): [string, number] => [r.id, r.value]).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }

  describe('reading the three formats', () => {
    for (const format of FORMATS) {
      it(`imports ${format}: every row once, bound to the file's SHA-256, resumable to a no-op`, async () => {
        const rows = makeRows(2500, format);
        const path = sourceOf(format, rows);
        const batch = `read-${format}`;
        const progress: Progress[] = [];
        const result = await importFile(ds, batch, path, { size: 400, onProgress: (p) => progress.push(p) });
        const digest = createHash('sha256').update(readFileSync(path)).digest('hex');
        expect(result).to.deep.equal({ batch, digest, nextIndex: 2500, rows: 2500, done: true });
        expect(await fileDigest(path)).to.equal(digest);
        expect(await values(ds, batch)).to.deep.equal(sorted(rows));
        expect(await itemCount(batch)).to.equal(2500);
        const totalRows = await count(ds, sql(`SELECT ${q('total_rows')} FROM ${q('checkpoint_imports')} WHERE ${q('id')} = ?`), [batch]);
        expect(totalRows).to.equal(2500);

        expect(progress.map((p) => p.items)).to.deep.equal([400, 800, 1200, 1600, 2000, 2400, 2500]);
        expect(progress.map((p) => p.batches)).to.deep.equal([1, 2, 3, 4, 5, 6, 7]);
        const size = readFileSync(path).length;
        for (const p of progress) {
          expect(p).to.include({ name: batch, total: 2500, totalBytes: size });
          expect(p.bytes).to.be.within(1, size);
          expect(p.elapsedMs).to.be.a('number').and.at.least(0);
          expect(p.rate).to.be.a('number').and.at.least(0);
        }
        expect(progress[progress.length - 1].bytes).to.equal(size);

        expect(await importFile(ds, batch, path, { size: 400 })).to.deep.equal({ batch, digest, nextIndex: 2500, rows: 0, done: true });
      });
    }

    it('takes the format from the extension (.json, .ndjson, .jsonl, .csv) unless given', async () => {
      const rows = makeRows(3, 'ext');
      const jsonl = file('jsonl', writers.ndjson(rows));
      expect((await importFile(ds, 'ext-jsonl', jsonl)).rows).to.equal(3);
      const txt = file('txt', writers.csv(rows));
      expect((await rejection(importFile(ds, 'ext-txt', txt))).code).to.equal('INVALID_ARGUMENT');
      expect((await importFile(ds, 'ext-txt', txt, { format: 'csv' })).rows).to.equal(3);
      // An explicit format wins over the extension.
      const misnamed = file('json', writers.ndjson(rows));
      expect((await importFile(ds, 'ext-misnamed', misnamed, { format: 'ndjson' })).rows).to.equal(3);
      expect(await values(ds, 'ext-misnamed')).to.deep.equal(sorted(rows));
    });

    it('imports an empty source as done with no rows', async () => {
      for (const [format, content] of [
        ['json', ' [ ] '],
        ['ndjson', '\n\n'],
        ['csv', 'id,value\n'],
      ] as const) {
        const result = await importFile(ds, `empty-${format}`, file(format, content));
        expect(result).to.include({ nextIndex: 0, rows: 0, done: true });
        expect(await checkpoint(ds, `empty-${format}`)).to.equal(0);
      }
    });

    it('reads CSV by RFC 4180: quoted commas, quotes and newlines; other columns ignored', async () => {
      const path = file('csv', 'value,"id",extra\n-12,"a,b",x\n9007199254740991,"say ""hi""",\n007,"line\nbreak",z\n-0,plain,"q"\n');
      await importFile(ds, 'csv-quoting', path);
      expect(await values(ds, 'csv-quoting')).to.deep.equal([
        ['a,b', -12],
        ['line\nbreak', 7],
        ['plain', 0],
        ['say "hi"', 9007199254740991],
      ]);
    });

    it('validates its arguments (INVALID_ARGUMENT)', async () => {
      const path = sourceOf('json', makeRows(2));
      for (const size of [0, -1, 1.5, true, '2']) {
        expect((await rejection(importFile(ds, 'args', path, { size: size as number }))).code, String(size)).to.equal('INVALID_ARGUMENT');
      }
      expect((await rejection(importFile(ds, 'args', path, { format: 'xml' as 'json' }))).code).to.equal('INVALID_ARGUMENT');
      expect((await rejection(importFile(ds, 'args', join(dir, 'missing.json')))).code).to.equal('INVALID_ARGUMENT');
      // A directory opens, and its first read fails (EISDIR): the path's fault too.
      mkdirSync(join(dir, 'folder.json'), { recursive: true });
      expect((await rejection(importFile(ds, 'args', join(dir, 'folder.json')))).code).to.equal('INVALID_ARGUMENT');
      expect((await rejection(importFile(ds, 'args', path, { size: 2n as never }))).code).to.equal('INVALID_ARGUMENT');
      expect((await rejection(importFile(ds, '', path))).code).to.equal('INVALID_ARGUMENT');
      expect((await rejection(importFile(ds, 'args', path, { handler: 'no' as never }))).code).to.equal('INVALID_ARGUMENT');
      expect(await checkpoint(ds, 'args')).to.equal(null);
    });
  });

  describe('an invalid file is rejected before any row is written', () => {
    const rows = makeRows(3000, 'bad');
    const cases: { name: string; format: Format; at: number; text: (row: Row) => string }[] = [];
    for (const at of [0, 1500, 2999]) {
      const where = at === 0 ? 'first' : at === 2999 ? 'last' : 'middle';
      cases.push(
        { name: `json, ${where} row: value 1.0`, format: 'json', at, text: (r) => `{"id": "${r.id}", "value": 1.0}` },
        { name: `json, ${where} row: boolean value`, format: 'json', at, text: (r) => `{"id": "${r.id}", "value": true}` },
        { name: `json, ${where} row: non-string id`, format: 'json', at, text: () => '{"id": 12, "value": 1}' },
        { name: `ndjson, ${where} row: empty id`, format: 'ndjson', at, text: () => '{"id":"","value":1}' },
        { name: `ndjson, ${where} row: not an object`, format: 'ndjson', at, text: (r) => `["${r.id}",1]` },
        { name: `ndjson, ${where} row: invalid UTF-8`, format: 'ndjson', at, text: (r) => `{"id":"${r.id}@BAD@","value":1}` },
        { name: `ndjson, ${where} row: text after the object`, format: 'ndjson', at, text: (r) => `{"id":"${r.id}","value":1} x` },
        { name: `ndjson, ${where} row: two objects`, format: 'ndjson', at, text: (r) => `{"id":"${r.id}","value":1} {"id":"z","value":2}` },
        { name: `csv, ${where} row: value 1e3`, format: 'csv', at, text: (r) => `plain,${r.id},1e3` },
        { name: `csv, ${where} row: value beyond 2^53−1`, format: 'csv', at, text: (r) => `plain,${r.id},9007199254740992` },
        { name: `csv, ${where} row: empty id`, format: 'csv', at, text: () => 'plain,,1' },
      );
    }
    cases.push(
      { name: 'json, last row: duplicate of the first id', format: 'json', at: 2999, text: () => `{"id": "${rows[0].id}", "value": 1}` },
      { name: 'ndjson, middle row: duplicate id', format: 'ndjson', at: 1500, text: () => `{"id":"${rows[1499].id}","value":1}` },
      { name: 'csv, last row: duplicate id', format: 'csv', at: 2999, text: () => `plain,${rows[10].id},1` },
      { name: 'json, last row: invalid UTF-8', format: 'json', at: 2999, text: (r) => `{"id": "${r.id}@BAD@", "value": 1}` },
      { name: 'csv, last row: invalid UTF-8', format: 'csv', at: 2999, text: (r) => `plain,${r.id}@BAD@,1` },
      { name: 'csv, middle row: invalid UTF-8 as its first byte', format: 'csv', at: 1500, text: (r) => `@BAD@plain,${r.id},1` },
      { name: 'csv, first row: invalid UTF-8 in a quoted field', format: 'csv', at: 0, text: (r) => `"pl@BAD@ain",${r.id},1` },
      { name: 'json, last row: invalid JSON', format: 'json', at: 2999, text: (r) => `{"id": "${r.id}", "value": 1` },
      { name: 'csv, last row: unclosed quote', format: 'csv', at: 2999, text: (r) => `"plain,${r.id},1` },
      { name: 'csv, middle row: no value column', format: 'csv', at: 1500, text: (r) => `plain,${r.id}` },
    );
    const content = (format: Format, at: number, text: string) =>
      Buffer.concat(
        writers[format](rows, { at, text })
          .split('@BAD@')
          .flatMap((part, i) => (i === 0 ? [Buffer.from(part)] : [Buffer.from([0xff]), Buffer.from(part)])),
      );

    for (const { name, format, at, text } of cases) {
      it(`${name} → INVALID_INPUT, index ${at}, nothing written`, async () => {
        const path = file(format, content(format, at, text(rows[at])));
        const before = await snapshot();
        const error = await rejection(importFile(ds, `bad-${fileCount}`, path, { size: 10 }));
        expect(error.code).to.equal('INVALID_INPUT');
        expect(error.index).to.equal(at);
        expect(await snapshot()).to.equal(before);
      });
    }

    it('rejects a top level or header that breaks the format, without an index', async () => {
      const before = await snapshot();
      for (const [format, content] of [
        ['json', '{"id":"a","value":1}'],
        ['json', ''],
        ['csv', 'ID,value\na,1\n'],
        ['csv', 'id,val\na,1\n'],
        ['csv', 'id,value,id\na,1,b\n'],
        ['csv', ''],
        ['csv', Buffer.from([...Buffer.from('id,val'), 0xff, ...Buffer.from('ue\na,1\n')])],
        ['json', Buffer.from([0xff, 0xfe, ...Buffer.from('[{"id":"a","value":1}]', 'utf16le')])],
      ] as const) {
        const error = await rejection(importFile(ds, `bad-top-${fileCount}`, file(format, content)));
        expect(error.code, String(content)).to.equal('INVALID_INPUT');
        expect(error.index, String(content)).to.equal(undefined);
      }
      expect(await snapshot()).to.equal(before);
    });

    it('finds a duplicate id far from its first occurrence once ids no longer fit the exact set', async function () {
      this.timeout(60_000);
      // 130k rows: past the 4 MiB exact-id budget, so the hashed runs and the second look decide.
      const n = 130_000;
      const lines: string[] = [];
      for (let i = 0; i < n; i++) lines.push(`{"id":"dup-${i}","value":${i}}`);
      lines[n - 2] = '{"id":"dup-3","value":0}';
      lines[n - 1] = '{"id":"dup-120000","value":0}';
      const path = file('ndjson', lines.join('\n'));
      const before = await snapshot();
      const error = await rejection(importFile(ds, 'dup-far', path));
      expect(error.code).to.equal('INVALID_INPUT');
      expect(error.index).to.equal(n - 2);
      expect(await snapshot()).to.equal(before);
    });
  });

  describe('duplicate detection in bounded memory (DuplicateIds)', () => {
    async function firstDuplicate(ids: string[], options: ConstructorParameters<typeof DuplicateIds>[0]) {
      const duplicates = new DuplicateIds(options);
      const lookedUp: number[][] = [];
      try {
        for (let i = 0; i < ids.length; i++) await duplicates.add(ids[i], i);
        return {
          found: await duplicates.firstDuplicate(async (indexes) => {
            lookedUp.push(indexes);
            return new Map(indexes.map((i) => [i, ids[i]]));
          }),
          lookedUp,
        };
      } finally {
        await duplicates.close();
      }
    }

    it('spills sorted runs and merges them to find the earliest later occurrence', async () => {
      const ids = Array.from({ length: 5000 }, (_, i) => `id-${i}`);
      ids[4000] = 'id-17';
      ids[3000] = 'id-2500';
      const { found } = await firstDuplicate(ids, { exactBytes: 1000, runEntries: 256 });
      expect(found).to.deep.equal({ index: 3000, id: 'id-2500' });
      expect((await firstDuplicate(ids.slice(0, 3000), { exactBytes: 1000, runEntries: 256 })).found).to.equal(undefined);
    });

    it('never rejects on a hash collision: equal hashes are checked against the ids themselves', async () => {
      // A hash that collides constantly: every id is a candidate, only real duplicates count.
      const collide = (id: string, out: Uint32Array) => {
        out[0] = id.length % 3;
        out[1] = 7;
      };
      const ids = Array.from({ length: 2000 }, (_, i) => `c${i}`);
      const none = await firstDuplicate(ids, { exactBytes: 100, runEntries: 128, hash: collide });
      expect(none.found).to.equal(undefined);
      expect(none.lookedUp.flat().length).to.be.greaterThan(100);
      ids[1999] = 'c5';
      ids[1500] = 'c1400';
      const found = await firstDuplicate(ids, { exactBytes: 100, runEntries: 128, hash: collide, maxCandidates: 300 });
      expect(found.found).to.deep.equal({ index: 1500, id: 'c1400' });
    });

    it('reports a duplicate at once while ids are kept exactly', async () => {
      const duplicates = new DuplicateIds();
      try {
        await duplicates.add('a', 0);
        let error: unknown;
        try {
          await duplicates.add('a', 1);
        } catch (e) {
          error = e;
        }
        expect(error).to.be.instanceOf(CheckpointError);
        expect(error).to.include({ code: 'INVALID_INPUT', index: 1 });
      } finally {
        await duplicates.close();
      }
    });
  });

  describe('the digest guard', () => {
    it('refuses a file edited between runs (FINGERPRINT_MISMATCH, nothing changes); replaceImport restarts it on purpose', async () => {
      const rows = makeRows(500, 'edit');
      const path = sourceOf('ndjson', rows);
      const stop = new AbortController();
      const first = await importFile(ds, 'edited', path, { size: 100, signal: stop.signal, onProgress: () => stop.abort() });
      expect(first).to.include({ nextIndex: 100, rows: 100, done: false });

      writeFileSync(path, readFileSync(path, 'utf8').replace('"value":-1000', '"value":-999'));
      const before = await snapshot();
      const error = await rejection(importFile(ds, 'edited', path, { size: 100 }));
      expect(error.code).to.equal('FINGERPRINT_MISMATCH');
      expect(await snapshot()).to.equal(before);

      // Whitespace alone is another file too.
      writeFileSync(path, `${readFileSync(path, 'utf8')}\n`);
      expect((await rejection(importFile(ds, 'edited', path, { size: 100 }))).code).to.equal('FINGERPRINT_MISMATCH');

      await replaceImport(ds, 'edited', await fileDigest(path));
      expect(await checkpoint(ds, 'edited')).to.equal(0);
      expect(await itemCount('edited')).to.equal(0);
      const replaced = await importFile(ds, 'edited', path, { size: 100 });
      expect(replaced).to.include({ nextIndex: 500, rows: 500, done: true });
      const expected = rows.map((r) => (r.value === -1000 ? { ...r, value: -999 } : r));
      expect(await values(ds, 'edited')).to.deep.equal(sorted(expected));
    });

    it('refuses a file changed during the import before committing anything read from the change', async () => {
      // ~180 KB: several 64 KiB blocks, so the last rows are read long after the first commit.
      const rows = makeRows(6000, 'live');
      const path = sourceOf('ndjson', rows);
      const original = readFileSync(path);
      const last = rows[rows.length - 1];
      let edited = false;
      const error = await rejection(
        importFile(ds, 'live', path, {
          size: 100,
          onProgress: () => {
            if (edited) return;
            edited = true;
            writeFileSync(
              path,
              original.toString('utf8').replace(`"id":"${last.id}","value":${last.value}`, `"id":"${last.id}","value":${last.value + 1}`),
            );
          },
        }),
      );
      expect(error.code).to.equal('FINGERPRINT_MISMATCH');
      const committed = (await checkpoint(ds, 'live')) as number;
      expect(committed).to.be.at.least(100).and.below(6000);
      expect(await itemCount('live')).to.equal(committed);

      // Back to the validated bytes, the import resumes and completes with every row once.
      writeFileSync(path, original);
      expect(await importFile(ds, 'live', path, { size: 100 })).to.include({ nextIndex: 6000, rows: 6000 - committed, done: true });
      expect(await values(ds, 'live')).to.deep.equal(sorted(rows));
    });
  });

  describe('handler, signal and transactions', () => {
    it('with handler, writes the rows to the application’s own table in the chunk’s transaction', async () => {
      const rows = makeRows(250, 'app');
      const path = sourceOf('csv', rows);
      const failure = new Error('handler fails on the third chunk');
      const starts: number[] = [];
      const handler: ImportFileOptions['handler'] = async (chunk, tx, start) => {
        starts.push(start);
        await tx.getRepository(ImportedScore).insert(chunk.map((row) => ({ id: row.id, score: row.value, chunkStart: start })));
        if (start === 200) throw failure;
      };
      let caught: unknown;
      try {
        await importFile(ds, 'handled', path, { size: 100, handler });
      } catch (error) {
        caught = error;
      }
      expect(caught).to.equal(failure);
      expect(await checkpoint(ds, 'handled')).to.equal(200);
      expect(await count(ds, `SELECT COUNT(*) FROM ${q('imported_scores')}`)).to.equal(200);

      starts.length = 0;
      const result = await importFile(ds, 'handled', path, { size: 100, handler: (chunk, tx, start) => handler(chunk, tx, start + 1) });
      expect(result).to.include({ nextIndex: 250, rows: 50, done: true });
      expect(starts).to.deep.equal([201]);
      const stored = await ds.getRepository(ImportedScore).find({ order: { id: 'ASC' } });
      expect(stored.map((s) => [s.id, s.score]).sort()).to.deep.equal(rows.map((r) => [r.id, r.value]).sort());
      expect(stored.filter((s) => s.chunkStart === 201)).to.have.length(50);
      expect(await itemCount('handled')).to.equal(0);
    });

    it('stops after the current chunk when signalled, and does nothing when already aborted', async () => {
      const rows = makeRows(300, 'sig');
      const path = sourceOf('json', rows);
      const aborted = new AbortController();
      aborted.abort();
      expect(await importFile(ds, 'signalled', path, { signal: aborted.signal })).to.include({ rows: 0, done: false });
      expect(await checkpoint(ds, 'signalled')).to.equal(null);

      const stop = new AbortController();
      let chunks = 0;
      const result = await importFile(ds, 'signalled', path, {
        size: 50,
        signal: stop.signal,
        onProgress: () => {
          if (++chunks === 2) stop.abort();
        },
      });
      expect(result).to.include({ nextIndex: 100, rows: 100, done: false });
      expect(await itemCount('signalled')).to.equal(100);
      expect(await importFile(ds, 'signalled', path, { size: 50 })).to.include({ nextIndex: 300, rows: 200, done: true });
      expect(await values(ds, 'signalled')).to.deep.equal(sorted(rows));
    });

    it('two runners of the same import never apply a chunk twice: together they write every row once', async () => {
      const rows = makeRows(1200, 'twice');
      const path = sourceOf('ndjson', rows);
      const [a, b] = await Promise.all([importFile(ds, 'twice', path, { size: 50 }), importFile(ds, 'twice', path, { size: 50 })]);
      expect(a.done && b.done).to.equal(true);
      expect(a.rows + b.rows).to.equal(1200);
      expect(await itemCount('twice')).to.equal(1200);
      expect(await values(ds, 'twice')).to.deep.equal(sorted(rows));
    });

    it('joins the caller’s transaction: the caller’s rollback undoes the import', async () => {
      const path = sourceOf('ndjson', makeRows(30, 'joined'));
      const failure = new Error('caller rolls back');
      let caught: unknown;
      try {
        await runInTransaction(ds, async (tx) => {
          expect(await importFile(tx, 'joined-file', path, { size: 7 })).to.include({ rows: 30, done: true });
          throw failure;
        });
      } catch (error) {
        caught = error;
      }
      expect(caught).to.equal(failure);
      expect(await checkpoint(ds, 'joined-file')).to.equal(null);
      expect(await itemCount('joined-file')).to.equal(0);
    });
  });

  describe('SIGKILL during a streaming import', () => {
    const TRIALS = 20;
    const PARALLEL = 4;

    // On PostgreSQL a chunk goes to the server as one pipeline, COMMIT included: the server may
    // still commit what the killed child had sent until its session notices the closed socket.
    // The child's sessions carry the batch as application_name; the checks wait for them to end.
    const sessionUrl = (batch: string) => (DRIVER === 'postgres' ? `${database.url}?application_name=${batch}` : database.url);
    const sessionsEnded = async (batch: string) => {
      if (DRIVER !== 'postgres') return;
      while (
        (await count(ds, 'SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1', [batch])) > 0
      ) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };

    it(`${TRIALS} trials across the formats: killed after a random number of chunks, the rerun ends with every row exactly once`, async function () {
      this.timeout(240_000);
      const rows = makeRows(3000, 'kill');
      const paths = Object.fromEntries(FORMATS.map((format) => [format, sourceOf(format, rows)])) as Record<Format, string>;
      const expected = sorted(rows);
      const partial: number[] = [];

      const trial = async (n: number) => {
        const format = FORMATS[n % FORMATS.length];
        const batch = `killed-${n}`;
        const child = startChild(WORKER, [sessionUrl(batch), batch, paths[format], '40']);
        const after = randomInt(1, 60);
        await child.waitForLine((line) => line.startsWith('chunk ') && Number(line.slice(6)) >= after * 40);
        await kill(child);
        await sessionsEnded(batch);
        const committed = (await checkpoint(ds, batch)) as number;
        expect(committed % 40 === 0 || committed === 3000, `${batch}: ${committed}`).to.equal(true);
        expect(await itemCount(batch)).to.equal(committed);
        partial.push(committed);

        const result = await importFile(ds, batch, paths[format], { size: 40 });
        expect(result).to.include({ nextIndex: 3000, rows: 3000 - committed, done: true });
        expect(await values(ds, batch), batch).to.deep.equal(expected);
      };
      for (let n = 0; n < TRIALS; n += PARALLEL) {
        await Promise.all(Array.from({ length: Math.min(PARALLEL, TRIALS - n) }, (_, k) => trial(n + k)));
      }
      expect(partial).to.have.length(TRIALS);
      // The kills landed mid-import, not only after the end.
      expect(partial.filter((c) => c < 3000).length).to.be.at.least(TRIALS / 2);
    });
  });
});
