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
 * The progress reports of an import of `rows` rows in chunks of `size`: one per chunk, in order,
 * the chunks loaded beside pass 1 (committed together) included. `copies`: the COPY statements the
 * import logged into its table; with a preload fewer than its chunks (one per group of them).
 */
export function expectProgressPerChunk(
  progress: { items: number; batches: number }[],
  preloaded: boolean,
  size: number,
  rows: number,
  copies: number,
): void {
  const chunks = Math.ceil(rows / size);
  expect(progress.map((p) => p.batches)).to.deep.equal(Array.from({ length: chunks }, (_, i) => i + 1));
  expect(progress.map((p) => p.items)).to.deep.equal(Array.from({ length: chunks }, (_, i) => Math.min((i + 1) * size, rows)));
  if (preloaded) expect(copies, 'COPY statements: whole groups of chunks during pass 1').to.be.below(chunks);
}
