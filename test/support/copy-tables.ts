import { expect } from 'chai';
import type { DataSource } from 'typeorm';
import { status } from '../../src';
import { count, sql } from './database';

export const ROWS = 10_000;

/** Fills crash_src with ids 1..ROWS (with gaps of one every 7th id, so keys are not dense). */
export async function createCopyTables(ds: DataSource): Promise<number[]> {
  await ds.query('CREATE TABLE crash_src (id integer PRIMARY KEY, payload varchar(40) NOT NULL)');
  await ds.query('CREATE TABLE crash_dst (job varchar(64) NOT NULL, source_id integer NOT NULL, worker integer NOT NULL)');
  await ds.query('CREATE INDEX crash_dst_job ON crash_dst (job, source_id)');
  const ids = Array.from({ length: ROWS }, (_, i) => i + 1 + Math.floor(i / 7));
  for (let start = 0; start < ids.length; start += 500) {
    const chunk = ids.slice(start, start + 500);
    const values = chunk.map(() => '(?, ?)').join(', ');
    await ds.query(
      sql(`INSERT INTO crash_src (id, payload) VALUES ${values}`),
      chunk.flatMap((id) => [id, `row ${id}`]),
    );
  }
  return ids;
}

/** Every source row's effect is present exactly once for `job`, and the job is done with full totals. */
export async function expectCopiedOnce(ds: DataSource, job: string): Promise<void> {
  expect(await count(ds, sql('SELECT COUNT(*) FROM crash_dst WHERE job = ?'), [job])).to.equal(ROWS);
  expect(await count(ds, sql('SELECT COUNT(DISTINCT source_id) FROM crash_dst WHERE job = ?'), [job])).to.equal(ROWS);
  expect(
    await count(
      ds,
      sql('SELECT COUNT(*) FROM crash_src s WHERE NOT EXISTS (SELECT 1 FROM crash_dst d WHERE d.job = ? AND d.source_id = s.id)'),
      [job],
    ),
  ).to.equal(0);
  expect(await status(ds, job)).to.include({ done: true, items: ROWS, batches: ROWS / 100 });
}
