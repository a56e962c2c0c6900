// Pass 2 begun during pass 1 (PostgreSQL, the built-in table, an import that opens its own
// transactions, a file of at least PRELOAD_MIN_BYTES): the rows pass 1 has read are copied in one
// transaction held open until pass 1 has accepted the whole file, then committed with their
// checkpoint. These tests show that it happens (the first progress reports many chunks at once),
// that a file found invalid or of another digest after rows were already copied leaves nothing
// behind, and that a stop, a resume and SIGKILL during the preload keep every row exactly once.
// On the other databases the same files import chunk by chunk.
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

const ROWS = 300_000;
const SIZE = 1000;

/** `id,value` lines of ids `<prefix>-<n>`; `last` replaces the final line. */
function labCsv(rows: number, prefix: string, last?: string): string {
  const lines = Array.from({ length: rows }, (_, i) => `${prefix}-${i},${i}`);
  if (last !== undefined) lines[rows - 1] = last;
  return `id,value\n${lines.join('\n')}\n`;
}

describe(`import: pass 2 begun during pass 1 (${DRIVER})`, () => {
  const log = new SqlLog();
  const database = useTestDatabase('import_preload', { logger: log });
  let dir: string;
  let path: string;
  const preloads = DRIVER === 'postgres';

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ck-import-preload-'));
    path = join(dir, 'rows.csv');
    writeFileSync(path, labCsv(ROWS, 'row'));
    expect(statSync(path).size).to.be.at.least(PRELOAD_MIN_BYTES);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  beforeEach(() => log.clear());

  const items = (batch: string) =>
    count(database.ds, sql(`SELECT COUNT(*) FROM ${q('checkpoint_import_items')} WHERE ${q('batch')} = ?`), [batch]);
  /** Each row once: the count, the distinct ids and the sum of the values (0 + 1 + … + ROWS − 1). */
  const expectEveryRowOnce = async (batch: string) => {
    const [row] = (await database.ds.query(
      sql(
        `SELECT COUNT(*) AS n, COUNT(DISTINCT ${q('id')}) AS ids, SUM(${q('value')}) AS total FROM ${q('checkpoint_import_items')} WHERE ${q('batch')} = ?`,
      ),
      [batch],
    )) as { n: string; ids: string; total: string }[];
    expect([Number(row.n), Number(row.ids), Number(row.total)]).to.deep.equal([ROWS, ROWS, (ROWS * (ROWS - 1)) / 2]);
    expect(await checkpoint(database.ds, batch)).to.equal(ROWS);
  };
  const copiesSent = () => log.queries.filter(({ sql: text }) => text.startsWith('COPY "checkpoint_import_items"')).length;
  const importRow = (batch: string) =>
    database.ds.query(sql(`SELECT * FROM ${q('checkpoint_imports')} WHERE ${q('id')} = ?`), [batch]) as Promise<Record<string, unknown>[]>;

  it('imports every row exactly once; on PostgreSQL chunks load during pass 1 (fewer COPY statements than chunks), each reported', async () => {
    const progress: { items: number; batches: number }[] = [];
    const result = await importFile(database.ds, 'whole', path, {
      onProgress: (p) => progress.push({ items: p.items, batches: p.batches }),
    });
    expect(result).to.include({ rows: ROWS, nextIndex: ROWS, done: true });
    await expectEveryRowOnce('whole');
    const [stored] = await importRow('whole');
    // Every chunk is counted, the preloaded ones too.
    expect(Number(stored.chunks)).to.equal(ROWS / SIZE);
    expectProgressPerChunk(progress, preloads, SIZE, ROWS, copiesSent());
  });

  for (const format of ['ndjson', 'json'] as const) {
    it(`reads ${format === 'json' ? 'a JSON array' : 'NDJSON'} beside pass 1 as it reads CSV`, async () => {
      const source = join(dir, `rows.${format}`);
      const items = Array.from({ length: ROWS }, (_, i) => JSON.stringify({ id: `row-${i}`, value: i }));
      writeFileSync(source, format === 'json' ? `[\n${items.join(',\n')}\n]\n` : `${items.join('\n')}\n`);
      const progress: { items: number; batches: number }[] = [];
      expect(await importFile(database.ds, format, source, { onProgress: (p) => progress.push(p) })).to.include({ rows: ROWS, done: true });
      await expectEveryRowOnce(format);
      expectProgressPerChunk(progress, preloads, SIZE, ROWS, copiesSent());
    });
  }

  it('reads a .tsv beside pass 1 as it reads CSV', async () => {
    const tsv = join(dir, 'rows.tsv');
    writeFileSync(tsv, labCsv(ROWS, 'row').replace(/,/g, '\t'));
    const progress: { items: number; batches: number }[] = [];
    expect(await importFile(database.ds, 'tsv', tsv, { onProgress: (p) => progress.push(p) })).to.include({ rows: ROWS, done: true });
    await expectEveryRowOnce('tsv');
    expectProgressPerChunk(progress, preloads, SIZE, ROWS, copiesSent());
  });

  if (preloads) {
    it('an invalid last row: INVALID_INPUT at that row, and nothing of the rows already copied stays', async () => {
      const invalid = join(dir, 'invalid-last.csv');
      writeFileSync(invalid, labCsv(ROWS, 'bad', 'bad-last,1.5'));
      const error = await expectCode(importFile(database.ds, 'invalid-last', invalid), 'INVALID_INPUT');
      expect((error as { index?: number }).index).to.equal(ROWS - 1);
      expect(copiesSent(), 'rows were copied during pass 1').to.be.above(0);
      expect(await items('invalid-last')).to.equal(0);
      expect(await importRow('invalid-last')).to.deep.equal([]);
    });

    it('a duplicate id found at the end of pass 1: INVALID_INPUT, nothing stays', async () => {
      const duplicate = join(dir, 'duplicate-last.csv');
      writeFileSync(duplicate, labCsv(ROWS, 'dup', 'dup-7,7'));
      const error = await expectCode(importFile(database.ds, 'duplicate-last', duplicate), 'INVALID_INPUT');
      expect((error as { index?: number }).index).to.equal(ROWS - 1);
      expect(copiesSent()).to.be.above(0);
      expect(await items('duplicate-last')).to.equal(0);
      expect(await importRow('duplicate-last')).to.deep.equal([]);
    });

    it('stopped after the preloaded chunks, resumed from their checkpoint and its byte offset without validating again, every row once; another file under the batch changes nothing', async () => {
      const stop = new AbortController();
      const first = await importFile(database.ds, 'resumed', path, { signal: stop.signal, onProgress: () => stop.abort() });
      expect(first.done).to.equal(false);
      expect(first.nextIndex).to.be.above(SIZE);
      expect(first.nextIndex % SIZE).to.equal(0);
      expect(first.rows).to.equal(first.nextIndex);
      expect(await items('resumed')).to.equal(first.nextIndex);
      // The preload's checkpoint keeps the byte offset of its next row, as every chunk's does.
      // (the header and the first nextIndex lines are the file's first bytes).
      const offset = Buffer.byteLength(labCsv(first.nextIndex, 'row'));
      const [stored] = await importRow('resumed');
      expect(Number(stored.next_offset)).to.equal(offset);

      // Another file: its rows are copied beside its pass 1, then refused with the digest, rolled back.
      const other = join(dir, 'other.csv');
      writeFileSync(other, labCsv(ROWS, 'row', `row-${ROWS - 1},0`));
      log.clear();
      await expectCode(importFile(database.ds, 'resumed', other), 'FINGERPRINT_MISMATCH');
      expect(copiesSent()).to.be.above(0);
      expect(await items('resumed')).to.equal(first.nextIndex);
      expect(await checkpoint(database.ds, 'resumed')).to.equal(first.nextIndex);

      const progress: number[] = [];
      // The resume reads the file once for its digest, and its rows from that offset on.
      const { result: second, twice } = await readsBefore(offset, () =>
        importFile(database.ds, 'resumed', path, { onProgress: (p) => progress.push(p.items) }),
      );
      expect(twice).to.deep.equal([]);
      expect(second).to.include({ rows: ROWS - first.nextIndex, nextIndex: ROWS, done: true });
      // The batch was validated with these options: pass 1 is the digest alone, so nothing preloads beside it; chunk by chunk.
      expect(progress[0]).to.equal(SIZE);
      await expectEveryRowOnce('resumed');
    });

    describe('SIGKILL while the preload transaction is open', () => {
      const BIG_ROWS = 1_500_000;
      let big: string;
      before(() => {
        big = join(dir, 'big.csv');
        writeFileSync(big, labCsv(BIG_ROWS, 'big'));
      });
      it('leaves nothing committed; the rerun imports every row once', async function () {
        this.timeout(180_000);
        for (let trial = 0; trial < 3; trial++) {
          const batch = `killed-${trial}`;
          await killDuringPreload(database.ds, database.url, batch, [big, String(SIZE)]);
          expect(await checkpoint(database.ds, batch)).to.equal(null);
          expect(await items(batch)).to.equal(0);

          const result = await importFile(database.ds, batch, big);
          expect(result).to.include({ rows: BIG_ROWS, done: true });
          expect(await items(batch)).to.equal(BIG_ROWS);
          expect(await count(database.ds, 'SELECT COUNT(DISTINCT id) FROM checkpoint_import_items WHERE batch = $1', [batch])).to.equal(
            BIG_ROWS,
          );
        }
      });
    });
  }
});
