import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DataSource } from 'typeorm';
import { applyChunk, begin, createDashboard, importFile, ImportJob, replaceImport } from '../src';
import { ImportProgress1764979200000 } from '../migrations/1764979200000-ImportProgress';
import type { ImportsData } from '../src/dashboard/imports-page';
import { cli, cliJson } from './support/cli-run';
import { DRIVER, sql, useTestDatabase } from './support/database';
import { expectCode } from './support/expect-code';
import { serve } from './support/dashboard-state';

/** The counts `checkpoint_imports` keeps for `batch`, as the entity reads them. */
async function counts(ds: DataSource, batch: string): Promise<Pick<ImportJob, 'nextIndex' | 'writtenRows' | 'skippedRows' | 'chunks'>> {
  const row = await ds.getRepository(ImportJob).findOneByOrFail({ id: batch });
  return { nextIndex: row.nextIndex, writtenRows: row.writtenRows, skippedRows: row.skippedRows, chunks: row.chunks };
}

/** Schema changes TypeORM would make to checkpoint_imports to match the ImportJob entity (schema:log). */
async function importsDiff(ds: DataSource): Promise<string[]> {
  const log = await ds.driver.createSchemaBuilder().log();
  return log.upQueries.map((query) => query.query).filter((query) => query.includes('checkpoint_imports'));
}

describe(`import progress counts (${DRIVER})`, function () {
  const database = useTestDatabase('import_progress');
  let dir: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'import-progress-'));
    await database.ds.query('CREATE TABLE progress_stock (code VARCHAR(20) PRIMARY KEY, qty INTEGER NOT NULL)');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function file(name: string, lines: string[]): string {
    const path = join(dir, name);
    writeFileSync(path, `${lines.join('\n')}\n`);
    return path;
  }

  /** 40 rows: every 5th skipped by `map` (which runs first), every 7th of the others invalid (qty "x"). */
  function stock(name: string): { path: string; written: number; skipped: number; invalid: number } {
    const lines = ['code,qty'];
    let written = 0;
    let skipped = 0;
    let invalid = 0;
    for (let i = 0; i < 40; i++) {
      if (i % 5 === 0) skipped++;
      else if (i % 7 === 3) invalid++;
      else written++;
      lines.push(`${name}${i},${i % 7 === 3 ? 'x' : i}`);
    }
    return { path: file(`${name}.csv`, lines), written, skipped, invalid };
  }

  const skipFifth = (record: Record<string, unknown>) => (Number(String(record.code).replace(/^\D+/, '')) % 5 === 0 ? null : record);

  it('counts rows written, rows skipped and chunks with each committed chunk, over an interrupted run and its resume', async () => {
    const source = stock('s');
    const controller = new AbortController();
    const options = { into: 'progress_stock', invalid: 'skip' as const, size: 4, map: skipFifth };
    const first = await importFile(database.ds, 'stock', source.path, {
      ...options,
      signal: controller.signal,
      onProgress: () => controller.abort(),
    });
    expect(first.done).to.equal(false);
    const stopped = await counts(database.ds, 'stock');
    expect(stopped.chunks).to.be.within(1, 9);
    expect(stopped.writtenRows).to.equal(first.rows);
    expect(stopped.skippedRows).to.equal(first.skipped);

    const rest = await importFile(database.ds, 'stock', source.path, options);
    expect(rest.done).to.equal(true);
    expect(await counts(database.ds, 'stock')).to.deep.equal({
      nextIndex: 40,
      writtenRows: source.written,
      skippedRows: source.skipped,
      chunks: 10,
    });

    const status = await cliJson(['status', 'stock', '--db', database.url]);
    expect(status.json.import).to.include({
      rows: source.written,
      skipped: source.skipped,
      invalid: source.invalid,
      chunks: 10,
      done: true,
    });
    expect(status.json.import.startedAt).to.be.a('number');
    const listed = await cliJson(['list', '--db', database.url]);
    expect(listed.json.imports.find((batch: { batch: string }) => batch.batch === 'stock')).to.include({
      rows: source.written,
      skipped: source.skipped,
      invalid: source.invalid,
    });
    const overall = await cliJson(['status', '--db', database.url]);
    expect(overall.json.imports.skipped).to.be.at.least(source.skipped);
  });

  it('a chunk that rolls back counts nothing', async () => {
    const source = stock('r');
    await database.ds.query(sql('INSERT INTO progress_stock (code, qty) VALUES (?, ?)'), ['r9', 0]);
    const options = { into: 'progress_stock', invalid: 'skip' as const, size: 4, map: skipFifth, durable: true };
    await expectCode(importFile(database.ds, 'rolled-back', source.path, options), 'INVALID_INPUT');
    // Rows 0–7 committed in two chunks (r3 invalid, r0 and r5 skipped); the chunk of r8–r11 rolled back.
    expect(await counts(database.ds, 'rolled-back')).to.deep.equal({ nextIndex: 8, writtenRows: 5, skippedRows: 2, chunks: 2 });
    expect(await database.ds.query(sql('SELECT COUNT(*) AS n FROM checkpoint_import_rejects WHERE batch = ?'), ['rolled-back'])).to.satisfy(
      (rows: { n: number | string }[]) => Number(rows[0].n) === 1,
    );
  });

  it('lab-shape imports count too: importFile into the built-in table, begin and applyChunk; replaceImport starts the counts again', async () => {
    const path = file(
      'lab.ndjson',
      Array.from({ length: 7 }, (_, i) => JSON.stringify({ id: `l${i}`, value: i })),
    );
    await importFile(database.ds, 'lab', path, { size: 3 });
    expect(await counts(database.ds, 'lab')).to.deep.equal({ nextIndex: 7, writtenRows: 7, skippedRows: 0, chunks: 3 });

    await begin(database.ds, 'applied', 'd'.repeat(64));
    await applyChunk(database.ds, 'applied', 0, [
      { id: 'a', value: 1 },
      { id: 'b', value: 2 },
    ]);
    await applyChunk(database.ds, 'applied', 2, [{ id: 'c', value: 3 }]);
    expect(await counts(database.ds, 'applied')).to.deep.equal({ nextIndex: 3, writtenRows: 3, skippedRows: 0, chunks: 2 });

    await replaceImport(database.ds, 'applied', 'e'.repeat(64));
    expect(await counts(database.ds, 'applied')).to.deep.equal({ nextIndex: 0, writtenRows: 0, skippedRows: 0, chunks: 0 });
  });

  it('the migration keeps an older batch, whose counts were never kept: they stay unknown ("—") while it goes on; safe to run twice', async () => {
    const migration = new ImportProgress1764979200000();
    const runner = database.ds.createQueryRunner();
    try {
      await migration.down(runner);
      await migration.down(runner);
      expect((await runner.getTable('checkpoint_imports'))!.findColumnByName('written_rows')).to.equal(undefined);
      // A batch as the library wrote it before this migration: 2 of 3 rows done.
      await database.ds.query(
        sql('INSERT INTO checkpoint_imports (id, digest, next_index, total_rows, updated_at) VALUES (?, ?, ?, ?, ?)'),
        ['older', 'f'.repeat(64), 2, 3, 1000],
      );
      await migration.up(runner);
      await migration.up(runner);
      expect(await importsDiff(database.ds)).to.deep.equal([]);
    } finally {
      await runner.release();
    }
    expect(await counts(database.ds, 'older')).to.deep.equal({ nextIndex: 2, writtenRows: null, skippedRows: null, chunks: null });
    await applyChunk(database.ds, 'older', 2, [{ id: 'z', value: 1 }]);
    expect(await counts(database.ds, 'older')).to.deep.equal({ nextIndex: 3, writtenRows: null, skippedRows: null, chunks: null });

    const status = await cliJson(['status', 'older', '--db', database.url]);
    expect(status.json.import).to.include({ rows: null, skipped: null, chunks: null, startedAt: null, invalid: 0, done: true });
    expect(status.stdout).to.have.length(1);
    const text = await cli(['status', 'older', '--db', database.url]);
    expect(text.stdout.join('\n')).to.include('— written, — skipped, 0 invalid');

    const handler = createDashboard(database.ds);
    const server = await serve((req, res) => void handler(req, res));
    try {
      const data = (await (await fetch(`${server.url}/api/imports?q=older`)).json()) as ImportsData;
      expect(
        data.items.map(({ rows, total, written, skipped, chunks, rate }) => ({ rows, total, written, skipped, chunks, rate })),
      ).to.deep.equal([{ rows: 3, total: 3, written: null, skipped: null, chunks: null, rate: null }]);
    } finally {
      await server.close();
    }
  });
});
