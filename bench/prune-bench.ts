import type { DataSource, Logger } from 'typeorm';
import { prune } from '../src';
import { createBenchDatabase } from './bench-database';
import { type BenchResult, result } from './bench-result';
import { sideBySide, timed } from './timing';

const DAY = 86_400_000;

/**
 * Times each of the library's statements as the gap between its log call and the next one's (or
 * the end of the run): an upper bound of how long each autocommitted DELETE held its transaction.
 */
class StatementGaps implements Logger {
  private last: { at: number; sql: string } | undefined;
  longestMs = 0;
  /** Only prune's statements are timed, not the fill's or the baseline's. */
  timing = false;

  logQuery(sql: string): void {
    this.close();
    if (this.timing) this.last = { at: performance.now(), sql };
  }
  /** Ends the last statement's gap (the run returned). */
  close(): void {
    if (this.last && /^\s*(WITH|DELETE)/i.test(this.last.sql)) this.longestMs = Math.max(this.longestMs, performance.now() - this.last.at);
    this.last = undefined;
  }
  logQueryError(): void {}
  logQuerySlow(): void {}
  logSchemaBuild(): void {}
  logMigration(): void {}
  log(): void {}
}

/** `files` completed 40 days ago, and 1 in 20 as many pending files (which prune must leave). */
async function fill(ds: DataSource, files: number): Promise<void> {
  await ds.query('TRUNCATE file_checkpoints');
  const old = Date.now() - 40 * DAY;
  const insert = (status: string, from: number, to: number) =>
    ds.query(
      `INSERT INTO file_checkpoints (url_hash, file_url, file_type, file_timestamp, status, completed_at, started_at, created_at)
       SELECT md5(g::text) || md5((-g)::text), 's3://bench/' || g, 'csv', $1::bigint + g, $2::varchar,
              CASE WHEN $2::varchar = 'completed' THEN $1::bigint + g END, $1::bigint + g, $1::bigint + g
         FROM generate_series($3::int, $4::int) g`,
      [old, status, from, to],
    );
  await insert('completed', 1, files);
  await insert('pending', files + 1, files + Math.ceil(files / 20));
  await ds.query('VACUUM ANALYZE file_checkpoints');
}

/** The hand-written loop a DBA would write: 1,000 rows per statement, walking the primary key. */
async function batchedDeleteByKey(ds: DataSource, before: number): Promise<number> {
  let after = '';
  let total = 0;
  for (;;) {
    const rows = (await ds.query(
      `DELETE FROM file_checkpoints WHERE url_hash IN (
         SELECT url_hash FROM file_checkpoints WHERE status = 'completed' AND completed_at < $1 AND url_hash > $2
          ORDER BY url_hash LIMIT 1000)
       RETURNING url_hash`,
      [before, after],
    )) as [{ url_hash: string }[], number];
    const deleted = rows[0];
    total += deleted.length;
    if (deleted.length < 1000) return total;
    after = deleted.reduce((max, row) => (row.url_hash > max ? row.url_hash : max), after);
  }
}

/**
 * `prune` of `files` completed file rows on PostgreSQL against the hand-written batched DELETE
 * loop (1,000 rows per statement by key), and the longest statement (= transaction) prune ran.
 */
export async function pruneBench(options: { files: number; repeats: number; log: (line: string) => void }): Promise<BenchResult[]> {
  const { files, repeats, log } = options;
  const database = await createBenchDatabase('postgres', 'prune');
  const gaps = new StatementGaps();
  try {
    const ds = await database.open({ logger: gaps });
    const olderThan = 30 * DAY;
    const deleted: number[] = [];
    const pair = await sideBySide({
      warmups: 0,
      repeats,
      prepare: () => fill(ds, files),
      candidate: () =>
        timed(async () => {
          gaps.timing = true;
          deleted.push((await prune(ds, { olderThan, kinds: ['files'] })).files);
          gaps.close();
          gaps.timing = false;
        }),
      baseline: () =>
        timed(async () => {
          deleted.push(await batchedDeleteByKey(ds, Date.now() - olderThan));
        }),
    });
    if (deleted.some((n) => n !== files)) throw new Error(`expected ${files} rows deleted each time, got ${deleted.join(', ')}`);
    log(
      `  prune ${pair.candidateSamples.map((ms) => ms.toFixed(0)).join(', ')} ms; loop ${pair.baselineSamples.map((ms) => ms.toFixed(0)).join(', ')} ms`,
    );
    const size = `${files.toLocaleString('en-US')} completed files`;
    return [
      result(`prune vs batched DELETE loop by key, ${size} [postgres]`, pair.candidate / 1000, 's', pair.baseline / 1000, pair.ratio, {
        max: 1.5,
      }),
      result(`prune longest transaction, ${size} [postgres]`, gaps.longestMs, 'ms', null, null, { max: 1000 }, 'value'),
    ];
  } finally {
    await database.drop();
  }
}
