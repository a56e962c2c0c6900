// How the chunks of an import commit: on PostgreSQL, an import that opens its own transactions
// commits every chunk but the last asynchronously (`SET LOCAL synchronous_commit = off`, or the same
// by `set_config` in the chunk's checkpoint statement), so `done` follows a
// durable commit; `durable: true` and a caller's transaction get synchronous commits only. The
// statements are read from the DataSource's logger, which the COPY pipeline reports to.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { checkpoint, importFile, runInTransaction, values } from '../src';
import { DRIVER, useTestDatabase } from './support/database';
import { expectCode } from './support/expect-code';
import { SqlLog } from './support/sql-log';

const ASYNCHRONOUS_COMMIT = 'SET LOCAL synchronous_commit = off';
const ASYNCHRONOUS_COMMIT_CALL = "set_config('synchronous_commit', 'off', true)";

/** For each chunk written by COPY (one COPY logged per chunk): whether its transaction set asynchronous commit. */
function chunkCommits(log: SqlLog): ('async' | 'sync')[] {
  const commits: ('async' | 'sync')[] = [];
  let asynchronous = false;
  for (const { sql } of log.queries) {
    if (/^(BEGIN|START TRANSACTION|SAVEPOINT)\b/i.test(sql)) asynchronous = false;
    else if (sql === ASYNCHRONOUS_COMMIT || sql.includes(ASYNCHRONOUS_COMMIT_CALL)) asynchronous = true;
    else if (sql.startsWith('COPY ')) commits.push(asynchronous ? 'async' : 'sync');
  }
  return commits;
}

const settings = (log: SqlLog) => log.queries.filter(({ sql }) => /synchronous_commit/i.test(sql)).length;

describe(`import chunk commits (${DRIVER})`, () => {
  const log = new SqlLog();
  const db = useTestDatabase('import_commit', { logger: log });
  let dir: string;
  let path: string;
  const ROWS = 3500;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ck-import-commit-'));
    path = join(dir, 'rows.csv');
    writeFileSync(path, `id,value\n${Array.from({ length: ROWS }, (_, i) => `r${i},${i}`).join('\n')}\n`);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  beforeEach(() => log.clear());

  const expectAllRows = async (batch: string) => {
    expect(await checkpoint(db.ds, batch)).to.equal(ROWS);
    expect(await values(db.ds, batch)).to.have.length(ROWS);
  };

  if (DRIVER === 'postgres') {
    it('commits every chunk but the last asynchronously, the last one durably', async () => {
      expect(await importFile(db.ds, 'async', path, { size: 1000 })).to.include({ rows: ROWS, done: true });
      expect(chunkCommits(log)).to.deep.equal(['async', 'async', 'async', 'sync']);
      await expectAllRows('async');
    });

    it('durable: true commits every chunk synchronously', async () => {
      expect(await importFile(db.ds, 'durable', path, { size: 1000, durable: true })).to.include({ rows: ROWS, done: true });
      expect(chunkCommits(log)).to.deep.equal(['sync', 'sync', 'sync', 'sync']);
      expect(settings(log)).to.equal(0);
      await expectAllRows('durable');
    });

    it('a resumed import still ends with a durable commit; a one-chunk file commits durably', async () => {
      const stop = new AbortController();
      const first = await importFile(db.ds, 'resumed', path, { size: 1000, signal: stop.signal, onProgress: () => stop.abort() });
      expect(first).to.include({ nextIndex: 1000, done: false });
      // The next chunk may have been sent behind it (pipelined) before the stop, and was not committed.
      expect(chunkCommits(log)[0]).to.equal('async');
      log.clear();
      expect(await importFile(db.ds, 'resumed', path, { size: 1000 })).to.include({ rows: ROWS - 1000, done: true });
      expect(chunkCommits(log)).to.deep.equal(['async', 'async', 'sync']);
      await expectAllRows('resumed');

      log.clear();
      expect(await importFile(db.ds, 'one-chunk', path, { size: ROWS })).to.include({ rows: ROWS, done: true });
      expect(chunkCommits(log)).to.deep.equal(['sync']);
    });

    it("inside the caller's transaction, never sets the commit mode (the commit is the caller's)", async () => {
      await runInTransaction(db.ds, async (tx) => {
        expect(await importFile(tx, 'joined', path, { size: 1000 })).to.include({ rows: ROWS, done: true });
      });
      expect(chunkCommits(log)).to.deep.equal(['sync', 'sync', 'sync', 'sync']);
      expect(settings(log)).to.equal(0);
      await expectAllRows('joined');
    });
  } else {
    it('sends no commit setting where the database has none, durable or not', async () => {
      expect(await importFile(db.ds, 'plain', path, { size: 1000 })).to.include({ rows: ROWS, done: true });
      expect(await importFile(db.ds, 'durable', path, { size: 1000, durable: true })).to.include({ rows: ROWS, done: true });
      expect(log.queries.length).to.be.greaterThan(0);
      expect(settings(log)).to.equal(0);
      await expectAllRows('plain');
      await expectAllRows('durable');
    });
  }

  it('refuses a durable option that is not a boolean (INVALID_ARGUMENT), writing nothing', async () => {
    await expectCode(importFile(db.ds, 'bad-durable', path, { durable: 'yes' as unknown as boolean }), 'INVALID_ARGUMENT');
    expect(await checkpoint(db.ds, 'bad-durable')).to.equal(null);
  });
});
