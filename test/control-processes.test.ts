import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { begin, cancel, type EachBatchResult, fileDigest, pause, reset, resume, status } from '../src';
import { type Child, kill, runChild, startChild } from './support/child';
import { cliJson, finished, startCli } from './support/cli-run';
import { createCopyTables, expectCopiedOnce, ROWS } from './support/copy-tables';
import { knocking } from '../src/dialect/sqlite-knock';
import { count, DRIVER, LOCK_POLL_MS, sql, useTestDatabase } from './support/database';

const WORKER = 'test/fixtures/control-worker.ts';

/** The worker's result line, once it has exited. */
async function resultOf(child: Child): Promise<EachBatchResult> {
  const line = await child.waitForLine((text) => text.startsWith('result '));
  const { code } = await child.exited;
  expect(code, child.stderr()).to.equal(0);
  return JSON.parse(line.slice('result '.length)) as EachBatchResult;
}

const batchesOf = async (ds: Parameters<typeof status>[0], job: string) => (await status(ds, job))?.batches ?? 0;

describe('control across processes: pause, resume, cancel from another process', function () {
  const db = useTestDatabase('control_processes');
  let dir: string;
  before(async () => {
    await createCopyTables(db.ds);
    dir = mkdtempSync(join(tmpdir(), 'ck-control-cli-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('a pause stops a running eachBatch within one batch; calls return at once until resumed; every row once', async () => {
    const job = 'proc-pause';
    const child = startChild(WORKER, [db.url, job]);
    await child.waitForLine((line) => line === 'batch 3');
    expect(await pause(db.ds, job)).to.equal(true);
    const atPause = await batchesOf(db.ds, job);
    const first = await resultOf(child);
    expect(first.stopped).to.equal('paused');
    expect(first.done).to.equal(false);
    expect((await batchesOf(db.ds, job)) - atPause).to.be.within(0, 1);
    expect(await batchesOf(db.ds, job)).to.be.below(ROWS / 100);

    const again = await resultOf(startChild(WORKER, [db.url, job]));
    expect(again).to.include({ batches: 0, items: 0, done: false, stopped: 'paused' });

    expect(await resume(db.ds, job)).to.equal(true);
    const rest = await resultOf(startChild(WORKER, [db.url, job]));
    expect(rest).to.include({ done: true });
    expect(rest.stopped).to.equal(undefined);
    await expectCopiedOnce(db.ds, job);
  });

  it('a cancel stops a running eachBatch within one batch, for good until reset', async () => {
    const job = 'proc-cancel';
    const child = startChild(WORKER, [db.url, job]);
    await child.waitForLine((line) => line === 'batch 2');
    expect(await cancel(db.ds, job)).to.equal(true);
    const atCancel = await batchesOf(db.ds, job);
    expect(await resultOf(child)).to.include({ stopped: 'cancelled', done: false });
    expect((await batchesOf(db.ds, job)) - atCancel).to.be.within(0, 1);
    expect(await resultOf(startChild(WORKER, [db.url, job], { CK_WHILE_PAUSED: 'wait' }))).to.include({
      batches: 0,
      stopped: 'cancelled',
    });
    expect(await status(db.ds, job)).to.include({ state: 'cancelled' });
    expect(await reset(db.ds, job)).to.equal(true);
    await db.ds.query(sql('DELETE FROM crash_dst WHERE job = ?'), [job]);
    expect(await resultOf(startChild(WORKER, [db.url, job]))).to.include({ done: true });
    await expectCopiedOnce(db.ds, job);
  });

  it('with whilePaused: wait, a paused process waits and goes on when another process resumes it', async () => {
    const job = 'proc-wait';
    const child = startChild(WORKER, [db.url, job], { CK_WHILE_PAUSED: 'wait' });
    await child.waitForLine((line) => line === 'batch 3');
    expect(await pause(db.ds, job)).to.equal(true);
    const atPause = await batchesOf(db.ds, job);
    // Still running, and no batch beyond the one in flight commits while it is paused.
    expect(child.process.exitCode).to.equal(null);
    expect(await resume(db.ds, job)).to.equal(true);
    const result = await resultOf(child);
    expect(result.done).to.equal(true);
    expect(result.stopped).to.equal(undefined);
    expect(atPause).to.be.below(ROWS / 100);
    await expectCopiedOnce(db.ds, job);
  });

  if (DRIVER === 'sqlite') {
    it("an operator's write knocks: a running loop leaves SQLite's write lock free between two batches until it is done", async () => {
      const job = 'proc-knock';
      const go = join(dir, 'knock-go');
      // Each batch holds the lock 20 ms after its insert: a loop that began again at once would hold it nearly always.
      const child = startChild(WORKER, [db.url, job], { CK_GO: go, CK_HOLD_MS: '20' });
      await child.waitForLine((line) => line === 'ready');
      // The knock is there before the loop begins: after its first commit, the loop finds it and waits.
      await knocking(db.ds, async () => {
        writeFileSync(go, '');
        await child.waitForLine((line) => line === 'batch 1');
        // No busy wait at all: the lock must be free now, and stay free while the knock lasts — sampled
        // 20 times over 100 ms (a loop that began again at once would hold it through most samples), from
        // a process of its own: a second SQLite library in this one would break the driver's locks on close.
        await runChild('test/fixtures/lock-sampler.ts', [String(db.ds.options.database), '20', '5']);
      });
      expect(await resultOf(child)).to.include({ done: true });
      expect(await count(db.ds, sql('SELECT COUNT(*) FROM crash_dst WHERE job = ?'), ['operator'])).to.equal(1);
      await expectCopiedOnce(db.ds, job);
    });
  }

  describe('eachPartition in three processes', () => {
    /** Rows each worker process committed for `job`, by pid. */
    const rowsByWorker = async (job: string) => {
      const rows = (await db.ds.query(sql('SELECT worker, COUNT(*) AS n FROM crash_dst WHERE job = ? GROUP BY worker'), [job])) as {
        worker: number | string;
        n: number | string;
      }[];
      return new Map(rows.map((row) => [Number(row.worker), Number(row.n)]));
    };
    /**
     * Starts three workers on `job` and waits until one of them has committed `batches` batches. Not
     * until each has: SQLite's lock is not fair, so one process may run dozens of batches before
     * another commits its second, and finish the job (or take every range) before the operator acts.
     */
    const startThree = async (job: string, batches: number) => {
      // All three start their work together, once each has loaded.
      const go = join(dir, `${job}.go`);
      const children = [0, 1, 2].map(() => startChild(WORKER, [db.url, job], { CK_PARTITIONS: '8', CK_GO: go }));
      for (const child of children) await child.waitForLine((line) => line === 'ready');
      writeFileSync(go, '');
      // A child that exits first ends the wait too (its result is checked after); no waiter is left to reject unhandled.
      await Promise.race(children.map((child) => child.waitForLine((line) => line === `batch ${batches}`).catch(() => undefined)));
      return children;
    };
    /** Every source row copied exactly once for `job` (crash_dst has no unique key), the job done. */
    const copiedOnce = async (job: string) => {
      expect(await count(db.ds, sql('SELECT COUNT(*) FROM crash_dst WHERE job = ?'), [job])).to.equal(ROWS);
      expect(await count(db.ds, sql('SELECT COUNT(DISTINCT source_id) FROM crash_dst WHERE job = ?'), [job])).to.equal(ROWS);
      expect(await status(db.ds, job)).to.include({ done: true, items: ROWS });
    };
    /** After the operator's change committed: each process commits at most the batch in flight (100 rows), and stops with `why`. */
    const expectStoppedWithinOneBatch = async (job: string, children: Child[], why: string) => {
      const at = await rowsByWorker(job);
      for (const child of children) expect(await resultOf(child)).to.include({ stopped: why, done: false });
      const after = await rowsByWorker(job);
      for (const child of children) {
        const pid = child.process.pid!;
        expect((after.get(pid) ?? 0) - (at.get(pid) ?? 0), `process ${pid}`).to.be.within(0, 100);
      }
      // Every range released: none is left running.
      const running = await count(db.ds, sql("SELECT COUNT(*) FROM checkpoint_partitions WHERE job_name = ? AND status = 'processing'"), [
        job,
      ]);
      expect(running).to.equal(0);
    };

    it('a pause from another process stops three running eachPartition processes, each within one batch; every row once after resume', async () => {
      const job = 'part-pause';
      const children = await startThree(job, 2);
      expect(await pause(db.ds, job)).to.equal(true);
      await expectStoppedWithinOneBatch(job, children, 'paused');
      expect(await resultOf(startChild(WORKER, [db.url, job], { CK_PARTITIONS: '8' }))).to.include({
        batches: 0,
        items: 0,
        done: false,
        stopped: 'paused',
      });
      expect(await resume(db.ds, job)).to.equal(true);
      const rest = await Promise.all([0, 1, 2].map(() => resultOf(startChild(WORKER, [db.url, job], { CK_PARTITIONS: '8' }))));
      expect(rest.some((result) => result.done)).to.equal(true);
      for (const result of rest) expect(result.stopped).to.equal(undefined);
      await copiedOnce(job);
    });

    it('a cancel from another process stops three running eachPartition processes, each within one batch', async () => {
      const job = 'part-cancel';
      const children = await startThree(job, 2);
      expect(await cancel(db.ds, job)).to.equal(true);
      await expectStoppedWithinOneBatch(job, children, 'cancelled');
      expect(await resultOf(startChild(WORKER, [db.url, job], { CK_PARTITIONS: '8', CK_WHILE_PAUSED: 'wait' }))).to.include({
        batches: 0,
        stopped: 'cancelled',
      });
      expect(await status(db.ds, job)).to.include({ state: 'cancelled' });
    });
  });

  for (let trial = 0; trial < 3; trial++) {
    it(`SIGKILL trial ${trial + 1}: a process killed while paused resumes exactly once`, async () => {
      const job = `kill-paused-${trial}`;
      const child = startChild(WORKER, [db.url, job], { CK_WHILE_PAUSED: 'wait' });
      await child.waitForLine((line) => line === `batch ${2 + trial * 3}`);
      expect(await pause(db.ds, job)).to.equal(true);
      await kill(child);
      expect(await resume(db.ds, job)).to.equal(true);
      expect(await resultOf(startChild(WORKER, [db.url, job]))).to.include({ done: true });
      await expectCopiedOnce(db.ds, job);
    });

    it(`SIGKILL trial ${trial + 1}: a process killed while throttled resumes exactly once`, async () => {
      const job = `kill-throttled-${trial}`;
      const at = 3 + trial * 4;
      const child = startChild(WORKER, [db.url, job], { CK_THROTTLE_AT: String(at) });
      await child.waitForLine((line) => line === `throttle ${at}`);
      await kill(child);
      // The wait holds no transaction: the batches before it are committed, the job row is free.
      expect(await batchesOf(db.ds, job)).to.equal(at);
      expect(await resultOf(startChild(WORKER, [db.url, job]))).to.include({ done: true });
      await expectCopiedOnce(db.ds, job);
    });
  }

  it('a pause stops a running CLI import (exit 1, PAUSED), which resumes exactly once into a table without a unique key', async () => {
    await db.ds.query('CREATE TABLE cli_target (id varchar(20) NOT NULL, value integer NOT NULL)');
    const rows = 20_000;
    const path = join(dir, 'big.csv');
    writeFileSync(path, `id,value\n${Array.from({ length: rows }, (_, i) => `k${i},${i}`).join('\n')}\n`);
    const args = ['import', path, '--batch', 'cli-paused', '--into', 'cli_target', '--size', '100', '--db', db.url, '--json'];
    const child = startCli(args);
    const nextIndex = async () =>
      count(db.ds, sql('SELECT COALESCE(MAX(next_index), 0) FROM checkpoint_imports WHERE id = ?'), ['cli-paused']);
    // Polls the committed checkpoint until the import is under way.
    while ((await nextIndex()) === 0) {
      expect(child.process.exitCode, child.stderr()).to.equal(null);
      await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
    }
    expect(await pause(db.ds, 'cli-paused')).to.equal(true);
    const atPause = await nextIndex();
    const run = await finished(child);
    expect(run.code, run.stderr).to.equal(1);
    const json = JSON.parse(run.stdout[0]) as Record<string, any>;
    expect(json).to.include({ ok: false, code: 'PAUSED' });
    // Chunks already sent when the pause committed (two at most where chunks are pipelined).
    expect(json.nextIndex - atPause).to.be.within(0, 200);
    expect(json.nextIndex).to.be.below(rows);

    const again = await cliJson(args.slice(0, -1));
    expect(again.code).to.equal(1);
    expect(again.json).to.include({ ok: false, code: 'PAUSED', rows: 0, nextIndex: json.nextIndex });

    const resumed = await cliJson(['resume', 'cli-paused', '--db', db.url]);
    expect(resumed.json).to.include({ ok: true, changed: true });
    const rest = await cliJson(args.slice(0, -1));
    expect(rest.code, rest.stderr).to.equal(0);
    expect(rest.json).to.include({ ok: true, done: true, nextIndex: rows });
    expect(await count(db.ds, 'SELECT COUNT(*) FROM cli_target')).to.equal(rows);
    expect(await count(db.ds, 'SELECT COUNT(DISTINCT id) FROM cli_target')).to.equal(rows);

    const cancelled = await cliJson(['cancel', 'cli-paused', '--db', db.url]);
    expect(cancelled.code).to.equal(0);
    expect(cancelled.json).to.include({ ok: true, changed: false });
    const unknown = await cliJson(['pause', 'nobody', '--db', db.url]);
    expect(unknown.code).to.equal(0);
    expect(unknown.json).to.include({ ok: true, changed: false });
  });

  it('the CLI import of a cancelled batch exits 1 with CANCELLED, and reads nothing', async () => {
    const path = join(dir, 'small.csv');
    writeFileSync(path, `id,value\n${Array.from({ length: 300 }, (_, i) => `s${i},${i}`).join('\n')}\n`);
    await begin(db.ds, 'cli-cancelled', await fileDigest(path));
    expect((await cliJson(['cancel', 'cli-cancelled', '--db', db.url])).json).to.include({ ok: true, changed: true });
    const run = await cliJson(['import', path, '--batch', 'cli-cancelled', '--db', db.url]);
    expect(run.code).to.equal(1);
    expect(run.json).to.include({ ok: false, code: 'CANCELLED', rows: 0, nextIndex: 0 });
    const listed = await cliJson(['status', 'cli-cancelled', '--db', db.url]);
    expect(listed.json.import).to.include({ state: 'cancelled' });
  });
});
