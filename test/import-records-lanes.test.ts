import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkpoint, importFile, type InvalidInputError } from '../src';
import { expectCode } from './support/expect-code';
import { count, DRIVER, useTestDatabase } from './support/database';

// On PostgreSQL an import `into` a table with conflict 'error' holds two connections when the pool
// has them to spare: each chunk's rows are copied beside the commit of the chunk before, and chunks
// still commit in order. These cases are where a chunk depends on the one before it; they must end
// exactly as they do with one connection (and do, on every database).
describe(`importFile into a table, chunks beside each other (${DRIVER})`, () => {
  const database = useTestDatabase('records_lanes');
  let dir: string;
  let files = 0;
  const file = (name: string, content: string) => {
    const path = join(dir, `${++files}-${name}`);
    writeFileSync(path, content);
    return path;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'records-lanes-'));
    // `writer` records which connection wrote each row (PostgreSQL's backend id; a constant elsewhere).
    const writer = DRIVER === 'postgres' ? 'INTEGER DEFAULT pg_backend_pid()' : 'INTEGER DEFAULT 0';
    await database.ds.query(`CREATE TABLE nodes (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES nodes (id), label VARCHAR(20), writer ${writer})`);
    if (DRIVER === 'sqlite') await database.ds.query('PRAGMA foreign_keys = ON');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  beforeEach(async () => {
    await database.ds.query('UPDATE nodes SET parent = NULL');
    await database.ds.query('DELETE FROM nodes');
  });

  it('rows referencing the chunk before (a foreign key to its rows) all commit, in order, written by two connections on PostgreSQL', async () => {
    // Row i's parent is row i − 1: the first row of every chunk references the last row of the chunk before.
    const lines = Array.from({ length: 2000 }, (_, i) => `${i},${i === 0 ? '' : i - 1},n${i}`);
    const path = file('chain.csv', `id,parent,label\n${lines.join('\n')}\n`);
    const result = await importFile(database.ds, 'chain', path, { into: 'nodes', size: 50 });
    expect(result).to.include({ rows: 2000, nextIndex: 2000, done: true });
    expect(await count(database.ds, 'SELECT COUNT(*) FROM nodes')).to.equal(2000);
    expect(await count(database.ds, 'SELECT COUNT(*) FROM nodes n JOIN nodes p ON p.id = n.parent WHERE n.id = p.id + 1')).to.equal(1999);
    const writers = await count(database.ds, 'SELECT COUNT(DISTINCT writer) FROM nodes');
    expect(writers).to.equal(DRIVER === 'postgres' ? 2 : 1);
  });

  it('a key in two neighbouring chunks fails as with one connection: INVALID_INPUT at the later row, the chunks before it kept', async () => {
    // Row 99 (the end of chunk 1) and row 100 (the start of chunk 2) hold the same id: chunk 2 may
    // write it first, and chunk 1 must not wait for it for ever.
    const lines = Array.from({ length: 300 }, (_, i) => `${i === 100 ? 99 : i},,n${i}`);
    const path = file('repeated.csv', `id,parent,label\n${lines.join('\n')}\n`);
    const error = (await expectCode(importFile(database.ds, 'repeated', path, { into: 'nodes', size: 50 }), 'INVALID_INPUT')) as InvalidInputError;
    expect(error.index).to.equal(100);
    expect(await checkpoint(database.ds, 'repeated')).to.equal(100);
    expect(await count(database.ds, 'SELECT COUNT(*) FROM nodes')).to.equal(100);
  });

  if (DRIVER === 'postgres') {
    it('a chunk that must wait for a key the chunk after it wrote first runs again alone: no wait for ever, the same INVALID_INPUT', async () => {
      // Chunk 0 ends with id 1000, chunk 1 starts with it. A transaction of the test's own holds id
      // 10, so chunk 0 stops there while chunk 1 writes 1000 and waits for chunk 0 to commit; the
      // test then lets chunk 0 go on, to wait for chunk 1's 1000.
      const lines = Array.from({ length: 100 }, (_, i) => `${i === 49 || i === 50 ? 1000 : i},,n${i}`);
      const path = file('crossed.csv', `id,parent,label\n${lines.join('\n')}\n`);
      // Both connections of the import open already (a new one could take longer than chunk 0 may wait).
      const warm = file('warm.csv', `id,parent,label\n${Array.from({ length: 100 }, (_, i) => `${5000 + i},,w`).join('\n')}\n`);
      await importFile(database.ds, 'warm', warm, { into: 'nodes', size: 50 });
      await database.ds.query('DELETE FROM nodes');
      const blocker = database.ds.createQueryRunner();
      await blocker.startTransaction();
      try {
        await blocker.query("INSERT INTO nodes (id, label) VALUES (10, 'held')");
        const [{ pid }] = (await blocker.query('SELECT pg_backend_pid() AS pid')) as { pid: number }[];
        const importing = importFile(database.ds, 'crossed', path, { into: 'nodes', size: 50 });
        const settled = importing.then(
          () => undefined,
          () => undefined,
        );
        // Until chunk 0 waits for id 10 and chunk 1 has written its rows: its COPY ended, the
        // connection waits for the rest of its transaction (the checkpoint advance and COMMIT).
        for (;;) {
          const states = (await database.ds.query(
            'SELECT wait_event_type AS wait, state, query FROM pg_stat_activity WHERE datname = current_database() AND pid NOT IN ($1, pg_backend_pid())',
            [pid],
          )) as { wait: string | null; state: string; query: string }[];
          const waiting = states.some((s) => s.wait === 'Lock');
          if (waiting && states.some((s) => s.state === 'active' && s.wait === 'Client' && s.query.startsWith('COPY'))) break;
          expect(await Promise.race([settled.then(() => 'ended'), Promise.resolve('running')])).to.equal('running');
        }
        await blocker.rollbackTransaction();
        const error = (await expectCode(importing, 'INVALID_INPUT')) as InvalidInputError;
        expect(error.index).to.equal(50);
        expect(await checkpoint(database.ds, 'crossed')).to.equal(50);
        expect(await count(database.ds, 'SELECT COUNT(*) FROM nodes')).to.equal(50);
      } finally {
        if (blocker.isTransactionActive) await blocker.rollbackTransaction();
        await blocker.release();
      }
    });
  }

  it('a pool of one connection imports on that one alone', async () => {
    const single = await database.open({ extra: { max: 1 } });
    try {
      const lines = Array.from({ length: 500 }, (_, i) => `${i},,n${i}`);
      const path = file('single.csv', `id,parent,label\n${lines.join('\n')}\n`);
      const result = await importFile(single, 'single', path, { into: 'nodes', size: 50 });
      expect(result).to.include({ rows: 500, done: true });
      expect(await count(single, 'SELECT COUNT(*) FROM nodes')).to.equal(500);
      expect(await count(single, 'SELECT COUNT(DISTINCT writer) FROM nodes')).to.equal(1);
    } finally {
      await single.destroy();
    }
  });
});
