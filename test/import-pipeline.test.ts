// Pipelined chunks on PostgreSQL: on the connection an import holds, chunk N+1's BEGIN, checkpoint
// advance and COPY are sent while chunk N still commits, and N+1's COMMIT only once N has
// committed. Chunk N is held up by a row lock the test holds (an uncommitted row with a key N
// writes too), so N+1 is provably on the wire (its COPY logged) before N's outcome is known; then
// the test lets N fail (its key exists) or succeed (the row rolled back, with a stop requested).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { QueryRunner } from 'typeorm';
import { begin, checkpoint, fileDigest, importFile, values } from '../src';
import { count, DRIVER, useTestDatabase } from './support/database';
import { expectCode } from './support/expect-code';
import { SqlLog } from './support/sql-log';

const SIZE = 100;
const ROWS = 1000;
// Chunk 3 (rows 300–399) waits for the test's row with key 350.
const BLOCKED_CHUNK = 3;
const HELD_KEY = 350;

describe(`import chunks pipelined on one connection (${DRIVER})`, () => {
  const log = new SqlLog();
  const database = useTestDatabase('import_pipeline', { logger: log });
  let dir: string;
  let recordsPath: string;
  let labPath: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ck-import-pipeline-'));
    recordsPath = join(dir, 'records.csv');
    writeFileSync(recordsPath, `n,label\n${Array.from({ length: ROWS }, (_, i) => `${i},row ${i}`).join('\n')}\n`);
    labPath = join(dir, 'lab.csv');
    writeFileSync(labPath, `id,value\n${Array.from({ length: ROWS }, (_, i) => `r${i},${i}`).join('\n')}\n`);
    await database.ds.query('CREATE TABLE piped (n INTEGER PRIMARY KEY, label TEXT NOT NULL)');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  beforeEach(async () => {
    await database.ds.query('DELETE FROM piped');
    log.clear();
  });

  /** How many chunks the import has sent so far (the pipeline logs one COPY per chunk). */
  const chunksSent = (table: string) => log.queries.filter(({ sql }) => sql.startsWith(`COPY "${table}"`)).length;

  /** Polls until chunk `BLOCKED_CHUNK + 1` is on its way while `BLOCKED_CHUNK` waits for the test's lock. */
  async function pipelinedBehindBlocked(table: string, running: Promise<unknown>): Promise<void> {
    let settled = false;
    void running.then(
      () => (settled = true),
      () => (settled = true),
    );
    const waiting = () =>
      count(database.ds, "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
    while (!settled && (chunksSent(table) < BLOCKED_CHUNK + 2 || (await waiting()) === 0))
      await new Promise((resolve) => setTimeout(resolve, 5));
    expect(settled, 'the import ended before its blocked chunk').to.equal(false);
    // Depth 2: the chunk after the pipelined one waits for the blocked one.
    expect(chunksSent(table)).to.equal(BLOCKED_CHUNK + 2);
  }

  /** A transaction of the test's own holding `sql`'s row uncommitted. */
  async function holding(sql: string, parameters: unknown[]): Promise<QueryRunner> {
    const runner = database.ds.createQueryRunner();
    await runner.connect();
    await runner.startTransaction();
    await runner.query(sql, parameters);
    return runner;
  }

  if (DRIVER !== 'postgres') return;

  it('records: a chunk failing while the next one is already sent leaves that one uncommitted and the checkpoint at the failed chunk', async () => {
    const runner = await holding('INSERT INTO piped (n, label) VALUES ($1, $2)', [HELD_KEY, 'held']);
    const running = importFile(database.ds, 'records-failing', recordsPath, { into: 'piped', size: SIZE });
    try {
      await pipelinedBehindBlocked('piped', running);
      await runner.commitTransaction();
    } finally {
      await runner.release();
    }
    const error = await expectCode(running, 'INVALID_INPUT');
    expect(error).to.include({ index: HELD_KEY, field: 'n' });
    expect(await checkpoint(database.ds, 'records-failing')).to.equal(BLOCKED_CHUNK * SIZE);
    // Chunks before the failed one, and the test's row; nothing of the failed chunk or the one sent behind it.
    expect(await count(database.ds, 'SELECT COUNT(*) FROM piped WHERE n < $1', [BLOCKED_CHUNK * SIZE])).to.equal(BLOCKED_CHUNK * SIZE);
    expect(await count(database.ds, 'SELECT COUNT(*) FROM piped WHERE n >= $1', [BLOCKED_CHUNK * SIZE])).to.equal(1);

    await database.ds.query('DELETE FROM piped WHERE n = $1', [HELD_KEY]);
    const resumed = await importFile(database.ds, 'records-failing', recordsPath, { into: 'piped', size: SIZE });
    expect(resumed).to.include({ rows: ROWS - BLOCKED_CHUNK * SIZE, nextIndex: ROWS, done: true });
    expect(await count(database.ds, 'SELECT COUNT(DISTINCT n) FROM piped')).to.equal(ROWS);
    expect(await count(database.ds, 'SELECT COUNT(*) FROM piped')).to.equal(ROWS);
  });

  it('lab rows: the same into the built-in table (a stored id in the failed chunk)', async () => {
    const batch = 'lab-failing';
    await begin(database.ds, batch, await fileDigest(labPath));
    const runner = await holding('INSERT INTO checkpoint_import_items (batch, id, value) VALUES ($1, $2, $3)', [batch, `r${HELD_KEY}`, -1]);
    const running = importFile(database.ds, batch, labPath, { size: SIZE });
    try {
      await pipelinedBehindBlocked('checkpoint_import_items', running);
      await runner.commitTransaction();
    } finally {
      await runner.release();
    }
    const error = await expectCode(running, 'INVALID_INPUT');
    expect(error).to.include({ index: HELD_KEY });
    expect(await checkpoint(database.ds, batch)).to.equal(BLOCKED_CHUNK * SIZE);
    expect(await count(database.ds, 'SELECT COUNT(*) FROM checkpoint_import_items WHERE batch = $1', [batch])).to.equal(
      BLOCKED_CHUNK * SIZE + 1,
    );

    await database.ds.query('DELETE FROM checkpoint_import_items WHERE batch = $1 AND id = $2', [batch, `r${HELD_KEY}`]);
    expect(await importFile(database.ds, batch, labPath, { size: SIZE })).to.include({ rows: ROWS - BLOCKED_CHUNK * SIZE, done: true });
    const stored = await values(database.ds, batch);
    expect(stored).to.have.length(ROWS);
    expect(stored.every(([id, value]) => id === `r${value}`)).to.equal(true);
  });

  it('a stop requested while a chunk is sent behind the one committing: that one commits, the one behind it does not', async () => {
    const runner = await holding('INSERT INTO piped (n, label) VALUES ($1, $2)', [HELD_KEY, 'held']);
    const stop = new AbortController();
    const running = importFile(database.ds, 'records-stopped', recordsPath, { into: 'piped', size: SIZE, signal: stop.signal });
    try {
      await pipelinedBehindBlocked('piped', running);
      stop.abort();
      // The held row goes away, so the blocked chunk commits.
      await runner.rollbackTransaction();
    } finally {
      await runner.release();
    }
    expect(await running).to.include({ nextIndex: (BLOCKED_CHUNK + 1) * SIZE, rows: (BLOCKED_CHUNK + 1) * SIZE, done: false });
    expect(await checkpoint(database.ds, 'records-stopped')).to.equal((BLOCKED_CHUNK + 1) * SIZE);
    expect(await count(database.ds, 'SELECT COUNT(*) FROM piped')).to.equal((BLOCKED_CHUNK + 1) * SIZE);
    expect(await importFile(database.ds, 'records-stopped', recordsPath, { into: 'piped', size: SIZE })).to.include({
      rows: ROWS - (BLOCKED_CHUNK + 1) * SIZE,
      done: true,
    });
    expect(await count(database.ds, 'SELECT COUNT(DISTINCT n) FROM piped')).to.equal(ROWS);
  });
});
