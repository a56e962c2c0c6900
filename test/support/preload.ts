import { expect } from 'chai';
import type { DataSource } from 'typeorm';
import { checkpoint } from '../../src';
import { kill, startChild } from './child';
import { count } from './database';

const WORKER = 'test/fixtures/import-worker.ts';

/**
 * Runs the import worker (`test/fixtures/import-worker.ts <url> <batch> <file> <size> [into]`) on
 * PostgreSQL, its session named `batch`, and SIGKILLs it once a COPY runs while the batch has no
 * checkpoint yet (only a preload copies then); returns once the killed session is gone.
 */
export async function killDuringPreload(ds: DataSource, url: string, batch: string, args: string[]): Promise<void> {
  const ofBatch = 'FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1';
  const child = startChild(WORKER, [`${url}?application_name=${batch}`, batch, ...args]);
  let killed = false;
  while (!killed && child.process.exitCode === null) {
    if ((await count(ds, `SELECT COUNT(*) ${ofBatch} AND query LIKE 'COPY %'`, [batch])) > 0 && (await checkpoint(ds, batch)) === null) {
      await kill(child);
      killed = true;
    }
  }
  expect(killed, `${batch}: killed during the preload`).to.equal(true);
  while ((await count(ds, `SELECT COUNT(*) ${ofBatch}`, [batch])) > 0) await new Promise((resolve) => setTimeout(resolve, 10));
}

/**
 * The progress reports of an import of `rows` rows in chunks of `size`: with a preload, the first one
 * reports the whole chunks it committed at once; without, one chunk.
 */
export function expectFirstProgress(progress: { items: number; batches: number }[], preloaded: boolean, size: number, rows: number): void {
  if (preloaded) {
    expect(progress[0].items).to.be.above(size);
    expect(progress[0].items % size).to.equal(0);
    expect(progress[0].batches).to.equal(progress[0].items / size);
  } else {
    expect(progress[0]).to.deep.equal({ items: size, batches: 1 });
  }
  expect(progress[progress.length - 1].items).to.equal(rows);
}
