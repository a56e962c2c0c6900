import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DataSource, EntityManager } from 'typeorm';
import {
  begin,
  cancel,
  checkpoint,
  eachBatch,
  eachPartition,
  importAll,
  importFile,
  type Json,
  list,
  listPartitions,
  type Page,
  pause,
  reset,
  resume,
  rowsPerSecond,
  type Source,
  sourceDigest,
  sqlSource,
  status,
  step,
  values,
} from '../src';
import { connectionWaiters, count, DRIVER, LOCK_POLL_MS, rowLockWaiters, sql, useTestDatabase } from './support/database';
import { expectCode } from './support/expect-code';
import { statementCounter } from './support/round-trips';
import { SqlLog } from './support/sql-log';

/** An in-memory source over 1..n whose cursor is the last number returned; counts its calls. */
function numbers(n: number) {
  const calls = { count: 0 };
  const source: Source<number> = (cursor, limit) => {
    calls.count++;
    const from = cursor === null ? 1 : (cursor as number) + 1;
    const items: number[] = [];
    for (let i = from; i <= n && items.length < limit; i++) items.push(i);
    return { items, next: items.length > 0 ? items[items.length - 1] : cursor } as Page<number>;
  };
  return { source, calls };
}

/** Rows of ctl_psrc, the partitioned jobs' source (ids 1..PARTITION_ROWS). */
const PARTITION_ROWS = 3000;

describe('control: pause, resume, cancel, throttle, time slices', () => {
  const db = useTestDatabase('control');
  let dir: string;

  before(async () => {
    // No unique key: a row written twice would stay twice.
    await db.ds.query('CREATE TABLE ctl_dst (job varchar(64) NOT NULL, n integer NOT NULL)');
    await db.ds.query('CREATE TABLE ctl_records (k varchar(20) NOT NULL, v integer NOT NULL)');
    await db.ds.query('CREATE TABLE ctl_psrc (id integer PRIMARY KEY)');
    for (let start = 1; start <= PARTITION_ROWS; start += 500) {
      const ids = Array.from({ length: Math.min(500, PARTITION_ROWS - start + 1) }, (_, i) => start + i);
      await db.ds.query(sql(`INSERT INTO ctl_psrc (id) VALUES ${ids.map(() => '(?)').join(', ')}`), ids);
    }
    dir = mkdtempSync(join(tmpdir(), 'ck-control-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const write = (job: string) => async (items: number[], tx: EntityManager) => {
    await tx.query(
      sql(`INSERT INTO ctl_dst (job, n) VALUES ${items.map(() => '(?, ?)').join(', ')}`),
      items.flatMap((n) => [job, n]),
    );
  };
  /** Every number 1..n written exactly once for `job`. */
  const expectOnce = async (job: string, n: number) => {
    expect(await count(db.ds, sql('SELECT COUNT(*) FROM ctl_dst WHERE job = ?'), [job])).to.equal(n);
    expect(await count(db.ds, sql('SELECT COUNT(DISTINCT n) FROM ctl_dst WHERE job = ?'), [job])).to.equal(n);
  };
  const csv = (name: string, rows: number) => {
    const path = join(dir, `${name}.csv`);
    writeFileSync(path, `id,value\n${Array.from({ length: rows }, (_, i) => `k${i},${i}`).join('\n')}\n`);
    return path;
  };

  describe('pause, resume and cancel', () => {
    it('return false for an unknown name, a step, and a transition that changes nothing', async () => {
      expect(await pause(db.ds, 'nobody')).to.equal(false);
      expect(await resume(db.ds, 'nobody')).to.equal(false);
      expect(await cancel(db.ds, 'nobody')).to.equal(false);
      await step(db.ds, 'a-step', () => 1);
      expect(await pause(db.ds, 'a-step')).to.equal(false);
      expect(await cancel(db.ds, 'a-step')).to.equal(false);

      const { source } = numbers(30);
      await eachBatch(db.ds, 'states', source, 10, write('states'), { maxRuntimeMs: 1e-9 });
      expect(await status(db.ds, 'states')).to.include({ state: 'active', throttledMs: 0 });
      expect(await resume(db.ds, 'states')).to.equal(false);
      expect(await pause(db.ds, 'states')).to.equal(true);
      expect(await pause(db.ds, 'states')).to.equal(false);
      expect(await status(db.ds, 'states')).to.include({ state: 'paused', done: false });
      expect((await list(db.ds, { state: 'paused' })).map((s) => s.name)).to.deep.equal(['states']);
      expect(await resume(db.ds, 'states')).to.equal(true);
      expect(await resume(db.ds, 'states')).to.equal(false);
      expect((await list(db.ds, { state: 'paused' })).map((s) => s.name)).to.deep.equal([]);
      expect(await cancel(db.ds, 'states')).to.equal(true);
      expect(await cancel(db.ds, 'states')).to.equal(false);
      expect(await pause(db.ds, 'states')).to.equal(false);
      expect(await resume(db.ds, 'states')).to.equal(false);
      expect(await status(db.ds, 'states')).to.include({ state: 'cancelled' });
      expect((await list(db.ds, { state: 'cancelled' })).map((s) => s.name)).to.deep.equal(['states']);
    });

    it('leave a finished job alone: done is its state', async () => {
      const { source } = numbers(5);
      await eachBatch(db.ds, 'finished', source, 10, write('finished'));
      expect(await pause(db.ds, 'finished')).to.equal(false);
      expect(await cancel(db.ds, 'finished')).to.equal(false);
      expect(await status(db.ds, 'finished')).to.include({ state: 'done' });
      expect((await list(db.ds, { state: 'done', prefix: 'finished' })).map((s) => s.name)).to.deep.equal(['finished']);
      expect((await list(db.ds, { state: 'active', prefix: 'finished' })).map((s) => s.name)).to.deep.equal([]);
    });

    it('reject a bad list state and a bad name with INVALID_ARGUMENT', async () => {
      await expectCode(list(db.ds, { state: 'sleeping' as never }), 'INVALID_ARGUMENT');
      await expectCode(pause(db.ds, ''), 'INVALID_ARGUMENT');
      await expectCode(cancel(db.ds, 42 as unknown as string), 'INVALID_ARGUMENT');
    });
  });

  describe('eachBatch', () => {
    it('stops after the batch in flight when paused between batches, returns at once while paused, and resumes exactly once', async () => {
      const { source, calls } = numbers(2000);
      let pausing: Promise<boolean> | undefined;
      let committed = 0;
      let atPause = -1;
      const first = await eachBatch(db.ds, 'paused-run', source, 10, write('paused-run'), {
        onProgress: (progress) => {
          committed = progress.batches;
          if (progress.batches === 3) pausing = pause(db.ds, 'paused-run').then((paused) => ((atPause = committed), paused));
        },
      });
      expect(await pausing).to.equal(true);
      expect(first.stopped).to.equal('paused');
      expect(first.done).to.equal(false);
      // Once the pause has committed, at most the batch in flight follows it.
      expect(first.batches - atPause).to.be.within(0, 1);

      const before = calls.count;
      // A source with an estimate of its own (the job has none stored yet): not asked either.
      let totals = 0;
      const estimated: Source<number> = Object.assign((cursor: Json, limit: number, tx: EntityManager) => source(cursor, limit, tx), {
        total: async () => {
          totals++;
          return 2000;
        },
      });
      const again = await eachBatch(db.ds, 'paused-run', estimated, 10, write('paused-run'));
      expect(again).to.deep.equal({ batches: 0, items: 0, done: false, cursor: first.cursor, stopped: 'paused' });
      expect(calls.count).to.equal(before);
      expect(totals).to.equal(0);

      expect(await resume(db.ds, 'paused-run')).to.equal(true);
      const rest = await eachBatch(db.ds, 'paused-run', source, 10, write('paused-run'));
      expect(rest).to.include({ done: true, items: 2000 - first.items });
      expect(rest.stopped).to.equal(undefined);
      await expectOnce('paused-run', 2000);
    });

    it("reads through another DataSource from inside a batch's transaction, which holds the database's lock", async () => {
      const other = await db.open();
      const { source } = numbers(30);
      const seen: Json[] = [];
      const result = await eachBatch(db.ds, 'nested-read', source, 10, async (items: number[], tx: EntityManager) => {
        seen.push((await status(other, 'nested-read'))?.cursor ?? null);
        await write('nested-read')(items, tx);
      });
      expect(result).to.include({ done: true, items: 30 });
      // The other connection sees what is committed: the batch before, not the one in flight.
      expect(seen).to.deep.equal([null, 10, 20]);
      await other.destroy();
    });

    it('stops on a cancel, and a reset forgets the cancelled job', async () => {
      // Room for the cancel to reach the loop: it waits for a connection and the job row's lock.
      const { source, calls } = numbers(2000);
      let cancelling: Promise<boolean> | undefined;
      let committed = 0;
      let atCancel = -1;
      const first = await eachBatch(db.ds, 'cancelled-run', source, 10, write('cancelled-run'), {
        onProgress: (progress) => {
          committed = progress.batches;
          if (progress.batches === 2) cancelling = cancel(db.ds, 'cancelled-run').then((cancelled) => ((atCancel = committed), cancelled));
        },
      });
      expect(await cancelling).to.equal(true);
      expect(first).to.include({ stopped: 'cancelled', done: false });
      expect(first.batches - atCancel).to.be.within(0, 1);
      const before = calls.count;
      expect(await eachBatch(db.ds, 'cancelled-run', source, 10, write('cancelled-run'), { whilePaused: 'wait' })).to.include({
        batches: 0,
        stopped: 'cancelled',
      });
      expect(calls.count).to.equal(before);
      expect(await reset(db.ds, 'cancelled-run')).to.equal(true);
      await db.ds.query(sql('DELETE FROM ctl_dst WHERE job = ?'), ['cancelled-run']);
      expect(await eachBatch(db.ds, 'cancelled-run', source, 10, write('cancelled-run'))).to.include({ done: true, items: 2000 });
      await expectOnce('cancelled-run', 2000);
    });

    it('runs in time slices with maxRuntimeMs, losing nothing', async () => {
      const { source } = numbers(95);
      const slices: (string | undefined)[] = [];
      for (let call = 0; call < 50; call++) {
        const result = await eachBatch(db.ds, 'sliced', source, 10, write('sliced'), { maxRuntimeMs: 1e-9 });
        slices.push(result.stopped);
        if (result.done) break;
        // Each call commits one batch, then its time is up.
        expect(result.batches).to.equal(1);
      }
      // Ten batches, then a call that finds the source's end.
      expect(slices.slice(0, -1)).to.deep.equal(Array(10).fill('time'));
      expect(slices[slices.length - 1]).to.equal(undefined);
      await expectOnce('sliced', 95);
    });

    it('waits as its throttle says, before every batch, and keeps the time on the job', async () => {
      const { source } = numbers(30);
      const asked: { name: string; batches: number; items: number }[] = [];
      const result = await eachBatch(db.ds, 'throttled', source, 10, write('throttled'), {
        throttle: (info) => {
          asked.push({ ...info });
          return 20;
        },
      });
      expect(result).to.include({ done: true, items: 30 });
      // Before each of the 3 batches and before the empty page that ends the job.
      expect(asked.map((info) => info.batches)).to.deep.equal([0, 1, 2, 3]);
      expect(asked[3]).to.deep.equal({ name: 'throttled', batches: 3, items: 30 });
      expect((await status(db.ds, 'throttled'))!.throttledMs).to.be.at.least(4 * 20);
      await expectOnce('throttled', 30);
    });

    it('ends a throttle wait early on a pause', async () => {
      const { source } = numbers(100);
      const result = await eachBatch(db.ds, 'throttle-paused', source, 10, write('throttle-paused'), {
        // An hour before the third batch: only the pause (read at least once a second) ends it.
        throttle: ({ batches }) => (batches === 2 ? 3_600_000 : 0),
        onProgress: (progress) => {
          if (progress.batches === 2) void pause(db.ds, 'throttle-paused');
        },
      });
      expect(result).to.include({ batches: 2, stopped: 'paused' });
      expect((await status(db.ds, 'throttle-paused'))!.throttledMs).to.be.above(0);
      await resume(db.ds, 'throttle-paused');
      expect(await eachBatch(db.ds, 'throttle-paused', source, 10, write('throttle-paused'))).to.include({ done: true });
      await expectOnce('throttle-paused', 100);
    });

    it('paces items with rowsPerSecond', async () => {
      const { source } = numbers(40);
      const started = Date.now();
      await eachBatch(db.ds, 'paced', source, 10, write('paced'), { throttle: rowsPerSecond(400) });
      // 40 items at 400 per second: the last batch waits until 30 are due (75 ms).
      expect(Date.now() - started).to.be.at.least(75);
      expect(() => rowsPerSecond(0))
        .to.throw()
        .with.property('code', 'INVALID_ARGUMENT');
      await expectOnce('paced', 40);
    });

    it('waits while paused with whilePaused: wait, until resumed', async () => {
      const listening = () =>
        count(
          db.ds,
          `SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle' AND query = 'LISTEN "checkpoint_control"'`,
        );
      if (DRIVER === 'postgres') expect(await listening(), 'a listener left by an earlier test').to.equal(0);
      const log = new SqlLog();
      const watched = DRIVER === 'sqlite' ? db.ds : await db.open({ logger: log });
      const { source } = numbers(30);
      await eachBatch(db.ds, 'waiting', source, 10, write('waiting'), { maxRuntimeMs: 1e-9 });
      await pause(db.ds, 'waiting');
      const reads = () => log.queries.filter((query) => /SELECT .state. FROM/.test(query.sql)).length;
      let resumedAt = 0;
      let firstBatchAt = 0;
      const writeWaiting = write('waiting');
      const handler = (items: number[], tx: EntityManager) => {
        firstBatchAt ||= Date.now();
        return writeWaiting(items, tx);
      };
      const waiting = eachBatch(DRIVER === 'sqlite' ? db.ds : watched, 'waiting', source, 10, handler, {
        whilePaused: 'wait',
        onProgress: () => expect(resumedAt, 'a batch ran before the resume').to.be.above(0),
      });
      if (DRIVER !== 'sqlite') {
        // The waiting call reads its state once a second: once it has, it is waiting.
        while (reads() === 0) await new Promise((resolve) => setImmediate(resolve));
      }
      if (DRIVER === 'postgres') {
        // And it listens: its LISTEN connection is a new session, which a loaded server may take over a second to start.
        while ((await listening()) === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      }
      resumedAt = Date.now();
      expect(await resume(db.ds, 'waiting')).to.equal(true);
      // Timed from the resume's commit (its NOTIFY goes then) to the first batch's start: neither the
      // resume's own transaction nor the batches' time on a loaded server counts.
      const resumeCommitted = Date.now();
      const result = await waiting;
      expect(result).to.include({ done: true, items: 20 });
      expect(result.stopped).to.equal(undefined);
      // PostgreSQL's NOTIFY wakes it at once, not at its next check a second later.
      if (DRIVER === 'postgres') expect(firstBatchAt - resumeCommitted).to.be.below(900);
      await expectOnce('waiting', 30);
    });

    it('rejects bad control options with INVALID_ARGUMENT before any batch', async () => {
      const { source, calls } = numbers(30);
      for (const maxRuntimeMs of [0, -5, Number.NaN, '10']) {
        await expectCode(eachBatch(db.ds, 'bad', source, 10, write('bad'), { maxRuntimeMs: maxRuntimeMs as number }), 'INVALID_ARGUMENT');
      }
      await expectCode(eachBatch(db.ds, 'bad', source, 10, write('bad'), { whilePaused: 'later' as never }), 'INVALID_ARGUMENT');
      await expectCode(eachBatch(db.ds, 'bad', source, 10, write('bad'), { throttle: 5 as never }), 'INVALID_ARGUMENT');
      expect(calls.count).to.equal(0);
      expect(await status(db.ds, 'bad')).to.equal(null);
    });

    for (const returned of [-1, Number.NaN, Number.POSITIVE_INFINITY, '10', undefined]) {
      it(`stops with INVALID_ARGUMENT before the next batch when the throttle returns ${String(returned)}`, async () => {
        const job = `bad-throttle-${String(returned)}`;
        const { source } = numbers(50);
        await expectCode(
          eachBatch(db.ds, job, source, 10, write(job), { throttle: ({ batches }) => (batches === 2 ? (returned as number) : 0) }),
          'INVALID_ARGUMENT',
        );
        expect(await status(db.ds, job)).to.include({ batches: 2, done: false });
        expect(await count(db.ds, sql('SELECT COUNT(*) FROM ctl_dst WHERE job = ?'), [job])).to.equal(20);
      });
    }

    it('learns the state without an extra statement per batch', async () => {
      // Statements (SQLite: logged) or round trips (PostgreSQL, MySQL) per batch of a steady run,
      // as measured before the control plane: learning the state must not add one.
      const expected = { sqlite: 6, postgres: 2, mysql: 3 }[DRIVER];
      const { dataSource: counted, sent } = await statementCounter(db, DRIVER);
      const one = async (items: number[], tx: EntityManager) => {
        await tx.query(sql('INSERT INTO ctl_dst (job, n) VALUES (?, ?)'), ['counted', items[0]]);
      };
      const run = async (name: string, batches: number) => {
        const before = sent();
        await eachBatch(counted, name, numbers(batches * 10).source, 10, one);
        return sent() - before;
      };
      await run('counted-warm', 3);
      const ten = await run('counted-10', 10);
      const thirty = await run('counted-30', 30);
      expect((thirty - ten) / 20).to.equal(expected);
      await counted.destroy();
    });
  });

  describe('importAll', () => {
    const raw = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ id: `r${i}`, value: i })));

    it('applies no chunk to a paused or cancelled batch: it returns the checkpoint as it stands, and goes on once resumed', async () => {
      const source = raw(10);
      await begin(db.ds, 'ia-paused', sourceDigest(source));
      expect(await pause(db.ds, 'ia-paused')).to.equal(true);
      expect(await importAll(db.ds, 'ia-paused', source, { size: 2 })).to.equal(0);
      expect(await values(db.ds, 'ia-paused')).to.deep.equal([]);
      expect(await resume(db.ds, 'ia-paused')).to.equal(true);
      expect(await importAll(db.ds, 'ia-paused', source, { size: 2 })).to.equal(10);
      expect(await values(db.ds, 'ia-paused')).to.have.length(10);
    });

    // From another DataSource, from outside the import's async context (as a dashboard's or an HTTP handler's cancel), once
    // the second chunk is in flight. SQLite: queued on the lock of the database file that the library's transactions in
    // this process share. PostgreSQL: queued on the import's row lock, which the second chunk holds until it commits. There,
    // the test orders what the server would otherwise race: a third session holds an uncommitted insert of the second
    // chunk's second key, so that chunk stays in flight until the cancel is seen waiting; and the import runs on a pool of
    // one connection, reserved by the test as the chunk gives it back until the cancel has committed, so the third chunk
    // locks the row after the cancel (once the second chunk commits, the cancel's update and the third chunk's lock would
    // race for the new row version). MySQL's runs are not tried here.
    if (DRIVER !== 'mysql') {
      it('stops after the chunk in flight when the batch is cancelled while it runs', async () => {
        const other = await db.open();
        const importer = DRIVER === 'postgres' ? await db.open({ extra: { max: 1 } }) : db.ds;
        const source = raw(10);
        const holder = DRIVER === 'postgres' ? other.createQueryRunner() : undefined;
        if (holder) {
          await holder.startTransaction();
          await holder.query(sql('INSERT INTO checkpoint_import_items (batch, id, value) VALUES (?, ?, ?)'), ['ia-cancel', 'r3', 0]);
        }
        let reached!: () => void;
        const atSecondChunk = new Promise<void>((resolve) => (reached = resolve));
        const cancelled = atSecondChunk.then(() => cancel(other, 'ia-cancel'));
        // After the first row of the second chunk: that chunk commits, no other.
        const importing = importAll(importer, 'ia-cancel', source, {
          size: 2,
          fault: (index) => {
            if (index === 2) reached();
          },
        });
        if (holder) {
          await atSecondChunk;
          // Two sessions wait: the import for the held key, the cancel for the import's row.
          while ((await rowLockWaiters(db.ds)) < 2) await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
          const reservation = importer.createQueryRunner();
          const reserved = reservation.connect();
          while (connectionWaiters(importer) < 1) await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
          await holder.rollbackTransaction();
          await holder.release();
          await reserved;
          expect(await cancelled).to.equal(true);
          await reservation.release();
        }
        const next = await importing;
        // The cancel waits for the second chunk's lock, then goes before the third chunk's.
        expect(await cancelled).to.equal(true);
        expect(next).to.equal(4);
        expect(await checkpoint(db.ds, 'ia-cancel')).to.equal(4);
        expect(await values(db.ds, 'ia-cancel')).to.have.length(4);
        expect(await importAll(db.ds, 'ia-cancel', source, { size: 2 })).to.equal(4);
        await other.destroy();
        if (importer !== db.ds) await importer.destroy();
      });
    }

    it('refuses options that are not an object, and a size that is a bigint, with INVALID_ARGUMENT', async () => {
      await expectCode(importAll(db.ds, 'ia-bad', '[]', null as never), 'INVALID_ARGUMENT');
      await expectCode(importAll(db.ds, 'ia-bad', '[]', { size: 2n as never }), 'INVALID_ARGUMENT');
      expect(await checkpoint(db.ds, 'ia-bad')).to.equal(null);
    });

    it('refuses an id the built-in table cannot store (too long, U+0000) before the first write: no batch, no row', async () => {
      for (const id of ['x'.repeat(600), 'nul\u0000']) {
        const source = JSON.stringify([
          { id: 'a', value: 1 },
          { id: 'b', value: 2 },
          { id, value: 3 },
        ]);
        const error = await expectCode(importAll(db.ds, 'ia-unstorable', source, { size: 1 }), 'INVALID_INPUT');
        expect(error).to.include({ index: 2 });
        expect(await checkpoint(db.ds, 'ia-unstorable')).to.equal(null);
      }
    });
  });

  describe('importFile', () => {
    it('stops a running import at a pause, returns at once while paused, and resumes exactly once', async () => {
      const path = csv('paused', 2500);
      let pausing: Promise<boolean> | undefined;
      let committed = 0;
      let atPause = -1;
      const first = await importFile(db.ds, 'imp-paused', path, {
        size: 20,
        onProgress: (progress) => {
          committed = progress.items;
          if (progress.batches === 2) pausing = pause(db.ds, 'imp-paused').then((paused) => ((atPause = committed), paused));
        },
      });
      expect(await pausing).to.equal(true);
      expect(first).to.include({ stopped: 'paused', done: false });
      // Once the pause has committed, chunks already sent may commit (two at most on a pipelined connection).
      expect(first.nextIndex - atPause).to.be.within(0, 40);

      let read = false;
      const again = await importFile(db.ds, 'imp-paused', path, { size: 20, handler: () => void (read = true) });
      expect(again).to.include({ rows: 0, batches: 0, items: 0, done: false, stopped: 'paused', nextIndex: first.nextIndex });
      expect(read).to.equal(false);
      expect(await resume(db.ds, 'imp-paused')).to.equal(true);
      const rest = await importFile(db.ds, 'imp-paused', path, { size: 20 });
      expect(rest).to.include({ done: true, nextIndex: 2500 });
      expect(rest.stopped).to.equal(undefined);
      const stored = await values(db.ds, 'imp-paused');
      expect(Object.keys(stored)).to.have.length(2500);
      // A finished batch: a call with its signal already aborted has nothing to stop, so no `stopped`.
      const aborted = AbortSignal.abort();
      const finished = await importFile(db.ds, 'imp-paused', path, { size: 20, signal: aborted });
      expect(finished).to.include({ done: true, nextIndex: 2500, rows: 0 });
      expect(finished).to.not.have.property('stopped');
      const records = await importFile(db.ds, 'imp-paused-records', path, {
        into: 'ctl_records',
        map: (r) => ({ k: r.id, v: Number(r.value) }),
      });
      expect(records.done).to.equal(true);
      expect(await importFile(db.ds, 'imp-paused-records', path, { into: 'ctl_records', signal: aborted })).to.not.have.property('stopped');
      await db.ds.query('DELETE FROM ctl_records');
    });

    it('stops a records import into a table without a unique key at a cancel; the rows stay once', async () => {
      const path = csv('records-cancel', 5000);
      let cancelling: Promise<boolean> | undefined;
      const map = (record: Record<string, unknown>) => ({ k: record.id, v: Number(record.value) });
      const first = await importFile(db.ds, 'rec-cancel', path, {
        into: 'ctl_records',
        map,
        size: 10,
        onProgress: (progress) => {
          if (progress.batches === 3) cancelling = cancel(db.ds, 'rec-cancel');
        },
      });
      expect(await cancelling).to.equal(true);
      expect(first).to.include({ stopped: 'cancelled', done: false });
      const committed = first.nextIndex;
      expect(await count(db.ds, 'SELECT COUNT(*) FROM ctl_records')).to.equal(committed);
      expect(await count(db.ds, 'SELECT COUNT(DISTINCT k) FROM ctl_records')).to.equal(committed);
      expect(await importFile(db.ds, 'rec-cancel', path, { into: 'ctl_records', map, size: 10 })).to.include({
        rows: 0,
        batches: 0,
        items: 0,
        stopped: 'cancelled',
      });
    });

    it('runs in time slices and with a throttle, losing nothing', async () => {
      const path = csv('sliced', 95);
      // A throttle's wait that outlasts maxRuntimeMs ends the call, before any chunk.
      expect(await importFile(db.ds, 'imp-sliced', path, { size: 10, maxRuntimeMs: 1, throttle: () => 50 })).to.include({
        rows: 0,
        stopped: 'time',
      });
      let calls = 0;
      const throttled: number[] = [];
      for (;;) {
        calls++;
        const result = await importFile(db.ds, 'imp-sliced', path, {
          size: 10,
          maxRuntimeMs: 1e-9,
          // Asked before the first chunk only: then the time is up.
          throttle: ({ batches }) => {
            throttled.push(batches);
            return 0;
          },
        });
        if (result.done) break;
        expect(result.stopped).to.equal('time');
        expect(calls).to.be.below(20);
      }
      // One chunk a call, pipelined or not ("returns after the batch in flight"): 95 rows in chunks of 10.
      expect(calls).to.equal(10);
      // Before the first chunk of each call only.
      expect(throttled.length).to.equal(calls);
      expect(throttled.every((batches) => batches === 0)).to.equal(true);
      expect(Object.keys(await values(db.ds, 'imp-sliced'))).to.have.length(95);
    });

    it('rejects bad control options and a bad throttle value with INVALID_ARGUMENT', async () => {
      const path = csv('bad', 50);
      await expectCode(importFile(db.ds, 'imp-bad', path, { maxRuntimeMs: 0 }), 'INVALID_ARGUMENT');
      await expectCode(importFile(db.ds, 'imp-bad', path, { whilePaused: 'no' as never }), 'INVALID_ARGUMENT');
      await expectCode(importFile(db.ds, 'imp-bad', path, { size: 10, throttle: () => -1 }), 'INVALID_ARGUMENT');
    });
  });

  describe('eachPartition', () => {
    const copyRows = (job: string) => async (items: Record<string, unknown>[], tx: EntityManager) => {
      await tx.query(
        sql(`INSERT INTO ctl_dst (job, n) VALUES ${items.map(() => '(?, ?)').join(', ')}`),
        items.flatMap((item) => [job, Number(item.id)]),
      );
    };

    /** Every row of ctl_psrc copied exactly once for `job`. */
    const expectRowsOnce = async (job: string) => expectOnce(job, PARTITION_ROWS);

    it('stops every range after the batch in flight when paused, releases them, returns at once while paused, and resumes exactly once', async () => {
      const source = await sqlSource(db.ds, 'ctl_psrc', 'id');
      let pausing: Promise<boolean> | undefined;
      let atPause = -1;
      const committed = async () => (await listPartitions(db.ds, 'p-paused')).reduce((sum, range) => sum + range.batches, 0);
      const first = await eachPartition(db.ds, 'p-paused', source, 20, copyRows('p-paused'), {
        partitions: 4,
        concurrency: 2,
        onProgress: (progress) => {
          if (progress.batches === 3) pausing = pause(db.ds, 'p-paused').then(async (paused) => ((atPause = await committed()), paused));
        },
      });
      expect(await pausing).to.equal(true);
      expect(first).to.include({ stopped: 'paused', done: false, partitions: 4 });
      // Once the pause has committed (as the database counts), at most the batch in flight of each of the two ranges follows it
      // (on PostgreSQL's pipelined lane, a batch begun with the COMMIT of the one before after the pause rolls back).
      expect(first.batches - atPause).to.be.within(0, 2);
      // Released, no attempt counted: nothing is left running.
      for (const range of await listPartitions(db.ds, 'p-paused')) {
        expect(range.status).to.not.equal('running');
        if (range.status === 'pending') expect(range.attempts).to.equal(0);
      }

      let paged = false;
      const watched = Object.assign(((cursor, limit, tx) => source(cursor, limit, tx)) as typeof source, source, {
        partitioning: {
          ...source.partitioning,
          page: (...args: Parameters<typeof source.partitioning.page>) => ((paged = true), source.partitioning.page(...args)),
        },
      });
      const again = await eachPartition(db.ds, 'p-paused', watched, 20, copyRows('p-paused'));
      expect(again).to.deep.equal({ batches: 0, items: 0, partitions: 4, done: false, stopped: 'paused' });
      expect(paged).to.equal(false);

      expect(await resume(db.ds, 'p-paused')).to.equal(true);
      const rest = await eachPartition(db.ds, 'p-paused', source, 20, copyRows('p-paused'), { concurrency: 2 });
      expect(rest).to.include({ done: true, items: PARTITION_ROWS - first.items });
      expect(rest.stopped).to.equal(undefined);
      await expectRowsOnce('p-paused');
    });

    // MySQL/MariaDB have no transaction start time to compare with: a batch begun after the pause commits there (docs/operating.md).
    const begunAfterPause = DRIVER === 'mysql' ? 1 : 0;

    it('never commits a batch begun after the pause (SQLite: its lock reads the state; PostgreSQL: the fenced commit compares times)', async () => {
      const source = await sqlSource(db.ds, 'ctl_psrc', 'id');
      const committed = async () => (await listPartitions(db.ds, 'p-begun')).reduce((sum, range) => sum + range.batches, 0);
      let atPause = -1;
      // The throttle runs outside any transaction before each batch: the pause commits there, then the next batch begins.
      const first = await eachPartition(db.ds, 'p-begun', source, 20, copyRows('p-begun'), {
        partitions: 2,
        throttle: async (info) => {
          if (info.batches === 3 && atPause < 0) {
            expect(await pause(db.ds, 'p-begun')).to.equal(true);
            atPause = await committed();
          }
          return 0;
        },
      });
      expect(atPause).to.equal(3);
      expect(first).to.include({ stopped: 'paused', done: false, batches: 3 + begunAfterPause, items: 20 * (3 + begunAfterPause) });
      expect(await committed()).to.equal(3 + begunAfterPause);
      expect(await count(db.ds, sql('SELECT COUNT(*) FROM ctl_dst WHERE job = ?'), ['p-begun'])).to.equal(20 * (3 + begunAfterPause));
      for (const range of await listPartitions(db.ds, 'p-begun')) {
        expect(range.status).to.not.equal('running');
        if (range.status === 'pending') expect(range.attempts).to.equal(0);
      }
      expect(await resume(db.ds, 'p-begun')).to.equal(true);
      const rest = await eachPartition(db.ds, 'p-begun', source, 20, copyRows('p-begun'));
      expect(rest).to.include({ done: true, items: PARTITION_ROWS - first.items });
      await expectRowsOnce('p-begun');
    });

    if (DRIVER !== 'mysql') {
      it("a range's last batch begun after the pause is refused too: stopped, no error, and the rerun after resume finishes the job", async () => {
        const source = await sqlSource(db.ds, 'ctl_psrc', 'id');
        // Two full pages, then the empty page that finishes the range: the pause lands before that one.
        const first = await eachPartition(db.ds, 'p-begun-last', source, PARTITION_ROWS / 2, copyRows('p-begun-last'), {
          partitions: 1,
          throttle: async (info) => {
            if (info.batches === 2) expect(await pause(db.ds, 'p-begun-last')).to.equal(true);
            return 0;
          },
        });
        expect(first).to.include({ stopped: 'paused', done: false, batches: 2, items: PARTITION_ROWS });
        expect((await listPartitions(db.ds, 'p-begun-last')).map((range) => range.status)).to.deep.equal(['pending']);
        expect(await resume(db.ds, 'p-begun-last')).to.equal(true);
        const rest = await eachPartition(db.ds, 'p-begun-last', source, PARTITION_ROWS / 2, copyRows('p-begun-last'));
        expect(rest).to.include({ done: true, items: 0 });
        await expectRowsOnce('p-begun-last');
      });
    }

    it('stops on a cancel; calls on the cancelled job return at once, even with whilePaused: wait or wait: true', async () => {
      const source = await sqlSource(db.ds, 'ctl_psrc', 'id');
      let cancelling: Promise<boolean> | undefined;
      let atCancel = -1;
      const committed = async () => (await listPartitions(db.ds, 'p-cancelled')).reduce((sum, range) => sum + range.batches, 0);
      const first = await eachPartition(db.ds, 'p-cancelled', source, 20, copyRows('p-cancelled'), {
        partitions: 3,
        onProgress: (progress) => {
          if (progress.batches === 2)
            cancelling = cancel(db.ds, 'p-cancelled').then(async (done) => ((atCancel = await committed()), done));
        },
      });
      expect(await cancelling).to.equal(true);
      expect(first).to.include({ stopped: 'cancelled', done: false });
      // Once the cancel has committed (as the database counts), at most the batch in flight follows it.
      expect(first.batches - atCancel).to.be.within(0, 1);
      for (const options of [{ whilePaused: 'wait' as const }, { wait: true }]) {
        expect(await eachPartition(db.ds, 'p-cancelled', source, 20, copyRows('p-cancelled'), options)).to.deep.equal({
          batches: 0,
          items: 0,
          partitions: 3,
          done: false,
          stopped: 'cancelled',
        });
      }
      expect(await count(db.ds, sql('SELECT COUNT(*) FROM ctl_dst WHERE job = ?'), ['p-cancelled'])).to.equal(first.items);
      expect(await reset(db.ds, 'p-cancelled')).to.equal(true);
      await db.ds.query(sql('DELETE FROM ctl_dst WHERE job = ?'), ['p-cancelled']);
      expect(await eachPartition(db.ds, 'p-cancelled', source, 20, copyRows('p-cancelled'))).to.include({ done: true });
      await expectRowsOnce('p-cancelled');
    });

    it('with wait: true, keeps waiting while paused and goes on once resumed', async () => {
      const source = await sqlSource(db.ds, 'ctl_psrc', 'id');
      let paused = false;
      let whilePaused = 0;
      let resuming: Promise<boolean> | undefined;
      const result = await eachPartition(db.ds, 'p-waiting', source, 50, copyRows('p-waiting'), {
        partitions: 2,
        wait: true,
        onProgress: (progress) => {
          if (paused) whilePaused++;
          if (progress.batches === 2) {
            void pause(db.ds, 'p-waiting').then(() => {
              paused = true;
              resuming = new Promise((resolve) => setTimeout(resolve, 300)).then(() => ((paused = false), resume(db.ds, 'p-waiting')));
            });
          }
        },
      });
      // Only the batches in flight when the pause committed: the range's state is read by its fenced
      // cursor update at the batch's end, so a batch whose update ran just before the pause and the
      // one already begun after it (PostgreSQL pipelines the next BEGIN with the COMMIT) may both commit.
      expect(whilePaused).to.be.at.most(2);
      expect(await resuming).to.equal(true);
      expect(result).to.include({ done: true, items: PARTITION_ROWS });
      expect(result.stopped).to.equal(undefined);
      await expectRowsOnce('p-waiting');
    });

    it('runs in time slices with maxRuntimeMs, losing nothing, and asks its throttle before each batch', async () => {
      const source = await sqlSource(db.ds, 'ctl_psrc', 'id');
      let calls = 0;
      const asked: number[] = [];
      for (;;) {
        calls++;
        const result = await eachPartition(db.ds, 'p-sliced', source, 100, copyRows('p-sliced'), {
          partitions: 3,
          maxRuntimeMs: 1e-9,
          throttle: ({ batches }) => (asked.push(batches), 0),
        });
        if (result.done) {
          expect(result.stopped).to.equal(undefined);
          break;
        }
        expect(result).to.include({ stopped: 'time', batches: 1 });
        expect(calls).to.be.below(60);
        // The range in flight was released, not left running.
        expect((await listPartitions(db.ds, 'p-sliced')).filter((range) => range.status === 'running')).to.deep.equal([]);
      }
      expect(calls).to.be.at.least(PARTITION_ROWS / 100);
      expect(asked.every((batches) => batches === 0)).to.equal(true);
      await expectRowsOnce('p-sliced');
      const throttled = await eachPartition(db.ds, 'p-throttled', source, 500, copyRows('p-throttled'), {
        partitions: 2,
        throttle: () => 5,
      });
      expect(throttled).to.include({ done: true, items: PARTITION_ROWS });
      expect((await status(db.ds, 'p-throttled'))!.throttledMs).to.be.at.least(5 * throttled.batches);
      await expectRowsOnce('p-throttled');
    });

    it('rejects bad control options with INVALID_ARGUMENT before planning', async () => {
      const source = await sqlSource(db.ds, 'ctl_psrc', 'id');
      await expectCode(eachPartition(db.ds, 'p-bad', source, 10, copyRows('p-bad'), { maxRuntimeMs: 0 }), 'INVALID_ARGUMENT');
      await expectCode(eachPartition(db.ds, 'p-bad', source, 10, copyRows('p-bad'), { whilePaused: 'no' as never }), 'INVALID_ARGUMENT');
      await expectCode(eachPartition(db.ds, 'p-bad', source, 10, copyRows('p-bad'), { throttle: 5 as never }), 'INVALID_ARGUMENT');
      expect(await status(db.ds, 'p-bad')).to.equal(null);
    });

    it('learns the state without an extra statement per batch', async () => {
      // Statements (SQLite: logged) or round trips (PostgreSQL, MySQL) per batch of a steady run of
      // one range, as measured before eachPartition read the state: reading it must not add one.
      const expected = { sqlite: 6, postgres: 3, mysql: 4 }[DRIVER];
      const { dataSource: counted, sent } = await statementCounter(db, DRIVER);
      const one = async (items: Record<string, unknown>[], tx: EntityManager) => {
        await tx.query(sql('INSERT INTO ctl_dst (job, n) VALUES (?, ?)'), ['p-counted', Number(items[0].id)]);
      };
      const run = async (name: string, batches: number) => {
        const source = await sqlSource(counted, 'ctl_psrc', 'id', { where: `id <= ${batches * 10}` });
        const before = sent();
        await eachPartition(counted, name, source, 10, one, { partitions: 1 });
        return sent() - before;
      };
      await run('p-counted-warm', 3);
      const ten = await run('p-counted-10', 10);
      const thirty = await run('p-counted-30', 30);
      expect((thirty - ten) / 20).to.equal(expected);
      await counted.destroy();
    });
  });
});
