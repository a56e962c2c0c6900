import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { type DataSource, QueryFailedError } from 'typeorm';
import { errorCodes } from '../src/core/database-errors';
import { CheckpointError, CheckpointManager, type CheckpointManagerOptions, type FileCheckpoint, runInTransaction } from '../src';
import { count, createTestDatabase, DRIVER, sql, type TestDatabase } from './support/database';

/**
 * The database's own error: TypeORM's QueryFailedError, or the driver's error with its code where
 * TypeORM 0.3's better-sqlite3 runner raises it unwrapped (a statement that fails to prepare).
 */
function expectDatabaseError(cause: unknown): void {
  if (!(cause instanceof QueryFailedError)) expect(errorCodes(cause), String(cause)).to.not.be.empty;
  expect(cause).to.be.instanceOf(Error);
}

type StoreKind = 'database' | 'memory';

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function rejection(promise: Promise<unknown>, code: string): Promise<CheckpointError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, `expected ${code}`).to.be.instanceOf(CheckpointError);
  expect((error as CheckpointError).code).to.equal(code);
  return error as CheckpointError;
}

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

/** Waits, polling, until `done()` holds (the mocha timeout bounds it). */
async function until(done: () => Promise<boolean> | boolean): Promise<void> {
  while (!(await done())) await pause(10);
}

const STATS = { totalRows: 10, filteredRows: 3, persistedRows: 7, durationMs: 25 };
const TS = new Date(1_700_000_000_123);

describe(`CheckpointManager (${DRIVER})`, function () {
  let database: TestDatabase;
  let ds: DataSource;

  before(async () => {
    database = await createTestDatabase('claims');
    ds = await database.open();
    await ds.query('CREATE TABLE claim_test_effects (file_url varchar(768) NOT NULL)');
  });
  after(() => database.drop());

  for (const kind of ['database', 'memory'] as StoreKind[]) {
    describe(`${kind} store`, function () {
      const run = randomUUID();
      const url = (name: string) => `https://files.example/${run}/${name}`;
      const manager = (options?: CheckpointManagerOptions) => new CheckpointManager(kind === 'database' ? ds : null, options);
      // The handler's writes: a table row on the database store; with the in-memory store (no tx) a list.
      const memoryEffects: string[] = [];
      async function write(tx: unknown, fileUrl: string): Promise<void> {
        if (kind === 'memory') {
          expect(tx).to.equal(undefined);
          memoryEffects.push(fileUrl);
        } else {
          await (tx as DataSource['manager']).query(sql('INSERT INTO claim_test_effects (file_url) VALUES (?)'), [fileUrl]);
        }
      }
      /**
       * Waits until the file's lease has expired by the caller's clock (the clock leases use):
       * polling the table row directly (no store call, so nothing reacts to the expiry early), or
       * in memory the clock against the lease the row showed.
       */
      async function untilLeaseExpired(fileUrl: string): Promise<void> {
        if (kind === 'database') {
          await until(async () => {
            const rows = (await ds.query(sql('SELECT lease_expires_at FROM file_checkpoints WHERE file_url = ?'), [fileUrl])) as {
              lease_expires_at: string | number | null;
            }[];
            if (rows[0]?.lease_expires_at == null) throw new Error(`${fileUrl} has no lease`);
            return Number(rows[0].lease_expires_at) < Date.now();
          });
        } else {
          const expiry = (await manager().get(fileUrl))!.leaseExpiresAt!.getTime();
          await until(() => expiry < Date.now());
        }
      }
      async function effects(fileUrl: string): Promise<number> {
        if (kind === 'memory') return memoryEffects.filter((u) => u === fileUrl).length;
        return count(ds, sql('SELECT COUNT(*) FROM claim_test_effects WHERE file_url = ?'), [fileUrl]);
      }

      it('claims a file once: the row carries the seed fields plus token, lease and retry limit', async () => {
        const a = manager({ workerId: 'worker-a', leaseMs: 60_000, maxRetries: 2 });
        const b = manager({ workerId: 'worker-b' });
        const fileUrl = url('one.csv');
        expect(await a.get(fileUrl)).to.equal(null);
        expect(await a.claimFile(fileUrl, 'events', TS)).to.equal(true);
        expect(await b.claimFile(fileUrl, 'events', TS)).to.equal(false);
        expect(await a.claimFile(fileUrl, 'events', TS)).to.equal(false);
        const row = (await b.get(fileUrl))!;
        expect(row).to.include({
          fileUrl,
          fileType: 'events',
          status: 'processing',
          recordsTotal: 0,
          recordsFiltered: 0,
          recordsPersisted: 0,
          processingTimeMs: 0,
          errorMessage: null,
          retryCount: 0,
          maxRetries: 2,
          processedBy: 'worker-a',
          claimToken: 1,
          completedAt: null,
        });
        expect(row.fileTimestamp.getTime()).to.equal(TS.getTime());
        expect(row.leaseExpiresAt!.getTime() - row.startedAt!.getTime()).to.equal(60_000);
        expect(row.createdAt).to.be.instanceOf(Date);
        expect(await a.isProcessed(fileUrl)).to.equal(false);

        await a.completeFile(fileUrl, STATS);
        expect(await b.isProcessed(fileUrl)).to.equal(true);
        expect(await b.get(fileUrl)).to.include({
          status: 'completed',
          recordsTotal: 10,
          recordsFiltered: 3,
          recordsPersisted: 7,
          processingTimeMs: 25,
          leaseExpiresAt: null,
        });
        expect((await b.get(fileUrl))!.completedAt).to.be.instanceOf(Date);
        // A completed file is never claimed again, by anyone.
        expect(await b.claimFile(fileUrl, 'events', TS)).to.equal(false);
        expect(await a.claimFile(fileUrl, 'events', TS)).to.equal(false);
        expect(await manager().claimNext(100, { fileType: 'events' })).to.deep.equal([]);
      });

      it('gives a claim to exactly one of many concurrent claimers', async () => {
        const managers = Array.from({ length: 12 }, (_, i) => manager({ workerId: `racer-${i}` }));
        for (let round = 0; round < 5; round++) {
          const fileUrl = url(`race-${round}`);
          const results = await Promise.all(managers.map((m) => m.claimFile(fileUrl, 'race', TS)));
          expect(results.filter(Boolean)).to.have.length(1);
          expect((await managers[0].get(fileUrl))!.claimToken).to.equal(1);
        }
      });

      it('getWorkerId returns the given id, or a generated one unique per manager', () => {
        expect(manager({ workerId: 'w-7' }).getWorkerId()).to.equal('w-7');
        const generated = [manager().getWorkerId(), manager().getWorkerId()];
        expect(generated[0]).to.be.a('string').and.not.equal(generated[1]);
      });

      it('retries a failing file exactly 1 + maxRetries times, then keeps it as a dead letter until requeue', async () => {
        const fileUrl = url('always-fails.csv');
        const worker = manager({ maxRetries: 2 });
        let attempts = 0;
        const failure = new Error('parse error');
        for (let i = 0; i < 6; i++) {
          const outcome = await worker
            .processFile(fileUrl, 'events', TS, () => {
              attempts += 1;
              throw failure;
            })
            .then(
              (result) => result,
              (error: unknown) => error,
            );
          if (i < 3) expect(outcome).to.equal(failure);
          else expect(outcome).to.deep.equal({ claimed: false, stats: null });
        }
        expect(attempts).to.equal(3);
        const dead = (await worker.get(fileUrl))!;
        expect(dead).to.include({ status: 'failed', retryCount: 2, maxRetries: 2, errorMessage: 'parse error', claimToken: 3 });
        // The limit is the row's: a manager allowing more retries still sees a dead letter.
        expect(await manager({ maxRetries: 10 }).claimFile(fileUrl, 'events', TS)).to.equal(false);
        expect((await worker.deadLetters()).map((r) => r.fileUrl)).to.include(fileUrl);
        expect(await worker.isProcessed(fileUrl)).to.equal(false);

        expect(await worker.requeue(fileUrl)).to.equal(true);
        expect(await worker.get(fileUrl)).to.include({ status: 'pending', retryCount: 0, errorMessage: null, maxRetries: 2 });
        expect((await worker.deadLetters()).map((r) => r.fileUrl)).not.to.include(fileUrl);
        expect(await worker.claimFile(fileUrl, 'events', TS)).to.equal(true);
        expect(await worker.get(fileUrl)).to.include({ retryCount: 0, claimToken: 4 });
        await worker.completeFile(fileUrl, STATS);
        expect(await worker.requeue(fileUrl)).to.equal(false);
        expect(await worker.requeue(url('never-seen'))).to.equal(false);
      });

      it('counts re-claims with claimFile/failFile too; maxRetries 0 allows exactly one attempt', async () => {
        const fileUrl = url('retry-by-hand.csv');
        const worker = manager({ maxRetries: 3 });
        const counts: number[] = [];
        while (await worker.claimFile(fileUrl, 'events', TS)) {
          counts.push((await worker.get(fileUrl))!.retryCount);
          await worker.failFile(fileUrl, `attempt ${counts.length}`);
        }
        expect(counts).to.deep.equal([0, 1, 2, 3]);
        expect(await worker.get(fileUrl)).to.include({ status: 'failed', errorMessage: 'attempt 4' });

        const once = url('no-retries.csv');
        const strict = manager({ maxRetries: 0 });
        expect(await strict.claimFile(once, 'events', TS)).to.equal(true);
        await strict.failFile(once, 'boom');
        expect(await strict.claimFile(once, 'events', TS)).to.equal(false);
        expect((await strict.deadLetters()).map((r) => r.fileUrl)).to.include(once);

        // A failed file that still has retries left can be requeued too (fresh budget).
        const retryable = url('retryable.csv');
        expect(await worker.claimFile(retryable, 'events', TS)).to.equal(true);
        await worker.failFile(retryable, 'transient');
        expect(await worker.requeue(retryable)).to.equal(true);
        expect(await worker.get(retryable)).to.include({ status: 'pending', retryCount: 0 });
        // Processing and pending files are not requeued.
        expect(await worker.requeue(retryable)).to.equal(false);
        expect(await worker.claimFile(retryable, 'events', TS)).to.equal(true);
        expect(await worker.requeue(retryable)).to.equal(false);
      });

      it('keeps a claim alive with heartbeats; once they stop, another worker takes the file over (an attempt)', async () => {
        const fileUrl = url('heartbeat.csv');
        const holder = manager({ workerId: 'holder', leaseMs: 1000 });
        const other = manager({ workerId: 'other' });
        expect(await holder.claimFile(fileUrl, 'events', TS)).to.equal(true);
        const firstExpiry = (await holder.get(fileUrl))!.leaseExpiresAt!.getTime();
        // Well past the first lease: the heartbeats keep it, every takeover attempt fails.
        while (Date.now() < firstExpiry + 1500) {
          await holder.heartbeat(fileUrl);
          expect(await other.claimFile(fileUrl, 'events', TS)).to.equal(false);
          expect(await other.claimNext(10, { fileType: 'events' })).to.deep.equal([]);
          await pause(20);
        }
        expect((await other.get(fileUrl))!.leaseExpiresAt!.getTime()).to.be.greaterThan(firstExpiry);

        await untilLeaseExpired(fileUrl);
        expect(await other.claimFile(fileUrl, 'events', TS)).to.equal(true);
        expect(await other.get(fileUrl)).to.include({ status: 'processing', retryCount: 1, claimToken: 2, processedBy: 'other' });
        await rejection(holder.heartbeat(fileUrl), 'CLAIM_LOST');
        await other.completeFile(fileUrl, STATS);
      });

      it('claimNext takes over lease-expired files and counts the attempt', async () => {
        const fileType = `expiring-${run}`;
        const fileUrl = url('expiring-next.csv');
        const first = manager({ leaseMs: 100 });
        expect(await first.register([{ fileUrl, fileType, fileTimestamp: TS }])).to.equal(1);
        expect((await first.claimNext(5, { fileType })).map((r) => r.fileUrl)).to.deep.equal([fileUrl]);
        const second = manager({ workerId: 'second' });
        expect(await second.claimNext(5, { fileType })).to.deep.equal([]);
        await untilLeaseExpired(fileUrl);
        const [row] = await second.claimNext(5, { fileType });
        expect(row).to.include({ fileUrl, status: 'processing', retryCount: 1, claimToken: 2, processedBy: 'second' });
        await second.completeFile(fileUrl, STATS);
        await rejection(first.completeFile(fileUrl, STATS), 'CLAIM_LOST');
      });

      it('a lease that expires on the last allowed attempt makes a dead letter, never a row stuck in processing', async () => {
        const holder = manager({ leaseMs: 100, maxRetries: 0 });
        const fileUrl = url('last-lease.csv');
        expect(await holder.claimFile(fileUrl, 'events', TS)).to.equal(true);
        await untilLeaseExpired(fileUrl);
        expect(await manager().claimFile(fileUrl, 'events', TS)).to.equal(false);
        if (kind === 'database') {
          // The refused claim left the row a dead letter itself: no reader has run since.
          const [row] = await ds.query(sql('SELECT status, error_message FROM file_checkpoints WHERE file_url = ?'), [fileUrl]);
          expect(row).to.deep.equal({ status: 'failed', error_message: 'lease expired' });
        }
        expect(await manager().get(fileUrl)).to.include({
          status: 'failed',
          errorMessage: 'lease expired',
          leaseExpiresAt: null,
          retryCount: 0,
        });
        expect((await manager().deadLetters()).map((r) => r.fileUrl)).to.include(fileUrl);
        await rejection(holder.completeFile(fileUrl, STATS), 'CLAIM_LOST');

        // Reading alone shows it too (no claim attempt needed), and the last retry counts the same way.
        const second = url('last-lease-retry.csv');
        const retrying = manager({ leaseMs: 100, maxRetries: 1 });
        expect(await retrying.claimFile(second, 'events', TS)).to.equal(true);
        await retrying.failFile(second, 'first attempt failed');
        expect(await retrying.claimFile(second, 'events', TS)).to.equal(true);
        await untilLeaseExpired(second);
        expect(await retrying.get(second)).to.include({ status: 'failed', errorMessage: 'lease expired', retryCount: 1 });
        expect(await retrying.requeue(second)).to.equal(true);
        expect(await retrying.claimFile(second, 'events', TS)).to.equal(true);
      });

      it('the holder whose lease expired on its last allowed attempt has lost it, though no one has read the row since', async () => {
        const holder = manager({ leaseMs: 100, maxRetries: 0 });
        const late: [string, (fileUrl: string) => Promise<unknown>][] = [
          ['complete', (fileUrl) => holder.completeFile(fileUrl, STATS)],
          ['fail', (fileUrl) => holder.failFile(fileUrl, 'late')],
          ['heartbeat', (fileUrl) => holder.heartbeat(fileUrl)],
        ];
        for (const [name, act] of late) {
          const fileUrl = url(`late-${name}.csv`);
          expect(await holder.claimFile(fileUrl, 'events', TS)).to.equal(true);
          await untilLeaseExpired(fileUrl);
          await rejection(act(fileUrl), 'CLAIM_LOST');
          expect(await manager().get(fileUrl), name).to.include({ status: 'failed', errorMessage: 'lease expired', retryCount: 0 });
        }
      });

      it('fences a stalled worker: CLAIM_LOST from completeFile, failFile and heartbeat, and the row is unchanged', async () => {
        const fileUrl = url('fenced.csv');
        const stalled = manager({ workerId: 'stalled', leaseMs: 100 });
        const rescuer = manager({ workerId: 'rescuer' });
        expect(await stalled.claimFile(fileUrl, 'events', TS)).to.equal(true);
        await untilLeaseExpired(fileUrl);
        expect(await rescuer.claimFile(fileUrl, 'events', TS)).to.equal(true);
        const before = await rescuer.get(fileUrl);
        expect(before).to.include({ claimToken: 2, processedBy: 'rescuer' });

        await rejection(stalled.completeFile(fileUrl, STATS), 'CLAIM_LOST');
        expect(await rescuer.get(fileUrl)).to.deep.equal(before);
        await rejection(stalled.failFile(fileUrl, 'late failure'), 'CLAIM_LOST');
        expect(await rescuer.get(fileUrl)).to.deep.equal(before);
        await rejection(stalled.heartbeat(fileUrl), 'CLAIM_LOST');
        expect(await rescuer.get(fileUrl)).to.deep.equal(before);

        // processFile with the stale claim: it claims as any caller would (the rescuer holds the file), and fn does not run.
        let ran = false;
        const stale = await stalled.processFile(fileUrl, 'events', TS, async (tx) => {
          ran = true;
          await write(tx, fileUrl);
          return STATS;
        });
        expect(stale).to.deep.equal({ claimed: false, stats: null });
        expect(ran).to.equal(false);
        if (kind === 'database') expect(await effects(fileUrl)).to.equal(0);
        expect(await rescuer.get(fileUrl)).to.deep.equal(before);

        await rescuer.completeFile(fileUrl, STATS);
        // Completing twice, or a file this manager never claimed, is CLAIM_LOST as well.
        await rejection(rescuer.completeFile(fileUrl, STATS), 'CLAIM_LOST');
        await rejection(manager().failFile(url('unclaimed.csv'), 'x'), 'CLAIM_LOST');
        await rejection(manager().heartbeat(url('unclaimed.csv')), 'CLAIM_LOST');
      });

      it('processFile of a file this instance claimed before runs it under that claim; two at once run it once', async () => {
        const worker = manager({ workerId: 'twice' });
        const claimed = url('claimed-first.csv');
        expect(await worker.claimFile(claimed, 'events', TS)).to.equal(true);
        expect(await worker.processFile(claimed, 'events', TS, () => STATS)).to.include({ claimed: true });
        expect(await worker.get(claimed)).to.include({ status: 'completed', claimToken: 1 });

        // Two at once under one claim this instance holds: one runs the file, the other did not claim it.
        const both = url('both-at-once.csv');
        expect(await worker.claimFile(both, 'events', TS)).to.equal(true);
        let runs = 0;
        let release!: () => void;
        const gate = new Promise<void>((resolve) => (release = resolve));
        const slow = async () => {
          runs++;
          await gate;
          return STATS;
        };
        const first = worker.processFile(both, 'events', TS, slow);
        const second = worker.processFile(both, 'events', TS, slow);
        expect(await second).to.deep.equal({ claimed: false, stats: null });
        release();
        expect(await first).to.include({ claimed: true });
        expect(runs).to.equal(1);
      });

      it('processFile commits the handler writes with the completion; a throwing handler leaves no writes and a failed file', async () => {
        const worker = manager({ workerId: 'processor' });
        const done = url('process-ok.csv');
        const result = await worker.processFile(done, 'events', TS, async (tx) => {
          await write(tx, done);
          return { totalRows: 4, filteredRows: 1, persistedRows: 3 };
        });
        expect(result.claimed).to.equal(true);
        expect(result.stats).to.include({ totalRows: 4, filteredRows: 1, persistedRows: 3 });
        expect(result.stats!.durationMs).to.be.a('number').and.at.least(0);
        expect(await effects(done)).to.equal(1);
        expect(await worker.get(done)).to.include({ status: 'completed', recordsTotal: 4, recordsPersisted: 3 });

        let called = false;
        expect(
          await worker.processFile(done, 'events', TS, () => {
            called = true;
            return STATS;
          }),
        ).to.deep.equal({ claimed: false, stats: null });
        expect(called).to.equal(false);

        const broken = url('process-throws.csv');
        const failure = new RangeError('bad row 17');
        const raised = await worker
          .processFile(broken, 'events', TS, async (tx) => {
            await write(tx, broken);
            throw failure;
          })
          .then(
            () => undefined,
            (error: unknown) => error,
          );
        expect(raised).to.equal(failure);
        if (kind === 'database') expect(await effects(broken)).to.equal(0);
        expect(await worker.get(broken)).to.include({ status: 'failed', errorMessage: 'bad row 17', recordsTotal: 0 });

        // Stats the handler returns are validated like completeFile's.
        const invalid = url('process-invalid-stats.csv');
        await rejection(
          worker.processFile(invalid, 'events', TS, async (tx) => {
            await write(tx, invalid);
            return { totalRows: -1, filteredRows: 0, persistedRows: 0, durationMs: 0 };
          }),
          'INVALID_ARGUMENT',
        );
        if (kind === 'database') expect(await effects(invalid)).to.equal(0);
        expect(await worker.get(invalid)).to.include({ status: 'failed' });
      });

      it('register is idempotent; claimNext hands out pending files oldest first, filtered by type', async () => {
        const fileType = `queue-${run}`;
        const files = Array.from({ length: 7 }, (_, i) => ({
          fileUrl: url(`queue/${i}.csv`),
          fileType,
          fileTimestamp: new Date(TS.getTime() + i),
        }));
        const worker = manager({ workerId: 'drainer', maxRetries: 1 });
        expect(await worker.register(files.slice(0, 4))).to.equal(4);
        expect(await worker.register(files)).to.equal(3);
        expect(await worker.register(files)).to.equal(0);
        expect(await worker.register([])).to.equal(0);
        expect(await worker.get(files[0].fileUrl)).to.include({
          status: 'pending',
          claimToken: 0,
          retryCount: 0,
          maxRetries: 1,
          processedBy: null,
        });

        const other = `other-${run}`;
        await worker.register([{ fileUrl: url('other.csv'), fileType: other, fileTimestamp: TS }]);
        const batch = await worker.claimNext(5, { fileType });
        expect(batch).to.have.length(5);
        expect(new Set(batch.map((r) => r.fileUrl)).size).to.equal(5);
        for (const row of batch) expect(row).to.include({ fileType, status: 'processing', claimToken: 1, processedBy: 'drainer' });
        expect(batch[0].leaseExpiresAt).to.be.instanceOf(Date);

        const rest = await manager().claimNext(5, { fileType });
        expect(rest).to.have.length(2);
        const claimed = new Set([...batch, ...rest].map((r) => r.fileUrl));
        expect(claimed.size).to.equal(7);
        for (const file of files) expect(claimed.has(file.fileUrl)).to.equal(true);
        expect(await worker.claimNext(5, { fileType })).to.deep.equal([]);

        // The claims belong to this manager: it completes, fails and processes them without re-claiming.
        await worker.completeFile(batch[0].fileUrl, STATS);
        await worker.failFile(batch[1].fileUrl, 'retry me');
        const processed = await worker.processFile(batch[2].fileUrl, fileType, TS, async (tx) => {
          await write(tx, batch[2].fileUrl);
          return STATS;
        });
        expect(processed.claimed).to.equal(true);
        expect(await worker.get(batch[2].fileUrl)).to.include({ status: 'completed', claimToken: 1 });

        // Failed files with retries left come back through claimNext, counted as a retry.
        const [retried] = await worker.claimNext(5, { fileType });
        expect(retried).to.include({ fileUrl: batch[1].fileUrl, retryCount: 1, claimToken: 2 });
        const otherRows = await worker.claimNext(5, { fileType: other });
        expect(otherRows.map((r) => r.fileUrl)).to.deep.equal([url('other.csv')]);
      });

      it('summary counts files by status (dead letters within failed) and sums the statistics', async () => {
        // An isolated store for exact totals: its own database, or the memory store's delta.
        const local = kind === 'database' ? await createTestDatabase('claims_summary') : undefined;
        try {
          const target = local ? await local.open() : null;
          const make = (options?: CheckpointManagerOptions) => new CheckpointManager(target, options);
          const base = await make().summary();
          const worker = make({ maxRetries: 0 });
          const u = (name: string) => url(`summary/${name}`);
          await worker.register(['p1', 'p2', 'c1', 'c2', 'f1', 'x1'].map((n) => ({ fileUrl: u(n), fileType: 's', fileTimestamp: TS })));
          for (const n of ['c1', 'c2', 'f1', 'x1']) expect(await worker.claimFile(u(n), 's', TS)).to.equal(true);
          await worker.completeFile(u('c1'), { totalRows: 5, filteredRows: 1, persistedRows: 4, durationMs: 10 });
          await worker.completeFile(u('c2'), { totalRows: 7, filteredRows: 2, persistedRows: 5, durationMs: 20 });
          await worker.failFile(u('f1'), 'dead');
          const retrying = make({ maxRetries: 2 });
          expect(await retrying.claimFile(u('r1'), 's', TS)).to.equal(true);
          await retrying.failFile(u('r1'), 'will retry');
          const summary = await make().summary();
          expect(summary).to.deep.equal({
            pending: base.pending + 2,
            processing: base.processing + 1,
            completed: base.completed + 2,
            failed: base.failed + 2,
            cancelled: base.cancelled,
            deadLetters: base.deadLetters + 1,
            recordsTotal: base.recordsTotal + 12,
            recordsFiltered: base.recordsFiltered + 3,
            recordsPersisted: base.recordsPersisted + 9,
            processingTimeMs: base.processingTimeMs + 30,
            pausedTypes: [],
          });
        } finally {
          await local?.drop();
        }
      });
    });
  }

  describe('arguments', function () {
    const m = () => new CheckpointManager(ds);
    it('rejects bad arguments with INVALID_ARGUMENT before touching the store', async () => {
      const bad: [string, () => Promise<unknown>][] = [
        ['non-string url', () => m().claimFile(42 as unknown as string, 't', TS)],
        ['empty url', () => m().claimFile('', 't', TS)],
        ['url over 4,096 characters', () => m().claimFile('u'.repeat(4097), 't', TS)],
        ['non-string type', () => m().claimFile('u', null as unknown as string, TS)],
        ['invalid Date', () => m().claimFile('u', 't', new Date(Number.NaN))],
        ['string timestamp', () => m().claimFile('u', 't', '2024-01-01' as unknown as Date)],
        ['negative stats', () => m().completeFile('u', { ...STATS, persistedRows: -1 })],
        ['fractional stats', () => m().completeFile('u', { ...STATS, totalRows: 1.5 })],
        ['missing stats', () => m().completeFile('u', { totalRows: 1 } as unknown as typeof STATS)],
        ['non-string error message', () => m().failFile('u', undefined as unknown as string)],
        ['limit 0', () => m().claimNext(0)],
        ['fractional limit', () => m().claimNext(2.5)],
        ['string limit', () => m().claimNext('3' as unknown as number)],
        ['non-string fileType filter', () => m().claimNext(1, { fileType: 7 as unknown as string })],
        ['files not an array', () => m().register('x' as unknown as [])],
        [
          'file without url',
          () =>
            m().register([{ fileType: 't', fileTimestamp: TS } as unknown as { fileUrl: string; fileType: string; fileTimestamp: Date }]),
        ],
        ['processFile without fn', () => m().processFile('u', 't', TS, undefined as unknown as () => typeof STATS)],
        ['non-string url for get', () => m().get(undefined as unknown as string)],
      ];
      for (const [what, call] of bad) {
        const error = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, what).to.be.instanceOf(CheckpointError);
        expect((error as CheckpointError).code, what).to.equal('INVALID_ARGUMENT');
      }
      expect(await count(ds, sql("SELECT COUNT(*) FROM file_checkpoints WHERE file_url = 'u'"))).to.equal(0);
    });

    it('rejects bad constructor arguments with INVALID_ARGUMENT', () => {
      const cases: [string, () => unknown][] = [
        ['undefined store', () => new CheckpointManager(undefined as unknown as null)],
        ['a plain object as store', () => new CheckpointManager({} as unknown as null)],
        ['negative maxRetries', () => new CheckpointManager(ds, { maxRetries: -1 })],
        ['zero leaseMs', () => new CheckpointManager(ds, { leaseMs: 0 })],
        ['empty workerId', () => new CheckpointManager(ds, { workerId: '' })],
      ];
      for (const [what, make] of cases) {
        const error = thrown(make);
        expect(error, what).to.be.instanceOf(CheckpointError);
        expect((error as CheckpointError).code, what).to.equal('INVALID_ARGUMENT');
      }
    });
  });

  describe('store selection and database failures', function () {
    it('null and a getter returning null share one in-memory store; nothing reaches the database', async () => {
      const fileUrl = `memory-only/${randomUUID()}`;
      const a = new CheckpointManager(null, { workerId: 'mem-a' });
      const b = new CheckpointManager(() => null, { workerId: 'mem-b' });
      expect(await a.claimFile(fileUrl, 't', TS)).to.equal(true);
      expect(await b.claimFile(fileUrl, 't', TS)).to.equal(false);
      expect(await b.get(fileUrl)).to.include({ processedBy: 'mem-a', status: 'processing' });
      expect(await new CheckpointManager(ds).get(fileUrl)).to.equal(null);

      // The getter is asked on every call: once it returns a DataSource, claims go to the table.
      let current: DataSource | null = null;
      const switching = new CheckpointManager(() => current);
      expect(await switching.get(fileUrl)).to.include({ status: 'processing' });
      current = ds;
      expect(await switching.get(fileUrl)).to.equal(null);
      expect(await switching.claimFile(fileUrl, 't', TS)).to.equal(true);
      expect(await count(ds, sql('SELECT COUNT(*) FROM file_checkpoints WHERE file_url = ?'), [fileUrl])).to.equal(1);
      // A claim made in the table is no claim in memory, though both rows have token 1.
      current = null;
      await rejection(switching.completeFile(fileUrl, STATS), 'CLAIM_LOST');
      expect(await a.get(fileUrl)).to.include({ status: 'processing', processedBy: 'mem-a', claimToken: 1 });
      current = ds;
      await switching.completeFile(fileUrl, STATS);
      expect(await new CheckpointManager(ds).isProcessed(fileUrl)).to.equal(true);
      await a.completeFile(fileUrl, STATS);
    });

    it('a missing table is STORE_UNAVAILABLE with the database error as cause, never an in-memory claim', async () => {
      const broken = await createTestDatabase('claims_broken');
      try {
        const brokenDs = await broken.open();
        await brokenDs.query('DROP TABLE file_checkpoints');
        const manager = new CheckpointManager(brokenDs);
        const fileUrl = `broken/${randomUUID()}`;
        const error = await rejection(manager.claimFile(fileUrl, 't', TS), 'STORE_UNAVAILABLE');
        expectDatabaseError(error.cause);
        const calls: (() => Promise<unknown>)[] = [
          () => manager.claimNext(1),
          () => manager.register([{ fileUrl, fileType: 't', fileTimestamp: TS }]),
          () => manager.get(fileUrl),
          () => manager.isProcessed(fileUrl),
          () => manager.summary(),
          () => manager.deadLetters(),
          () => manager.requeue(fileUrl),
          () => manager.processFile(fileUrl, 't', TS, () => STATS),
        ];
        for (const call of calls) expectDatabaseError((await rejection(call(), 'STORE_UNAVAILABLE')).cause);
        // Nothing went to the in-memory store: it has never heard of the file.
        expect(await new CheckpointManager(null).get(fileUrl)).to.equal(null);
      } finally {
        await broken.drop();
      }
    });

    if (DRIVER === 'postgres') {
      it('recovers when the connection dropped its prepared statements (DEALLOCATE ALL)', async () => {
        const single = await database.open({ extra: { max: 1 } }); // every statement on one connection
        try {
          const manager = new CheckpointManager(single);
          const fileUrl = (name: string) => `deallocated/${randomUUID()}/${name}`;
          const [a, b, c] = [fileUrl('a'), fileUrl('b'), fileUrl('c')];
          expect(await manager.claimFile(a, 't', TS)).to.equal(true);
          await single.query('DEALLOCATE ALL');
          // A statement on its own is prepared again and rerun at once.
          expect(await manager.claimFile(b, 't', TS)).to.equal(true);
          await manager.completeFile(b, STATS);
          // Inside processFile's transaction the failed completion rolls back; the retry prepares it again.
          await single.query('DEALLOCATE ALL');
          await rejection(
            manager.processFile(a, 't', TS, () => STATS),
            'STORE_UNAVAILABLE',
          );
          expect(await manager.get(a)).to.include({ status: 'failed' });
          expect((await manager.processFile(a, 't', TS, () => STATS)).claimed).to.equal(true);
          expect(await manager.claimFile(c, 't', TS)).to.equal(true);
          expect((await manager.summary()).completed).to.be.at.least(2);
          expect(await manager.get(a)).to.include({ status: 'completed', retryCount: 1 });
        } finally {
          await single.destroy();
        }
      });
    }

    it('a destroyed DataSource (or a getter returning one) is STORE_UNAVAILABLE with a cause', async () => {
      const closed = await database.open();
      await closed.destroy();
      const fileUrl = `closed/${randomUUID()}`;
      for (const manager of [new CheckpointManager(closed), new CheckpointManager(() => closed)]) {
        const error = await rejection(manager.claimFile(fileUrl, 't', TS), 'STORE_UNAVAILABLE');
        expect(error.cause).to.be.instanceOf(Error);
      }
      expect(await new CheckpointManager(null).get(fileUrl)).to.equal(null);
      expect(await new CheckpointManager(ds).get(fileUrl)).to.equal(null);
    });

    it('processFile on a transaction manager joins it: rolled back with the caller', async () => {
      const fileUrl = `joined/${randomUUID()}`;
      const rollback = new Error('caller rolls back');
      const outcome = await runInTransaction(ds, async (tx) => {
        const result = await new CheckpointManager(tx).processFile(fileUrl, 't', TS, async (inner) => {
          await inner!.query(sql('INSERT INTO claim_test_effects (file_url) VALUES (?)'), [fileUrl]);
          return STATS;
        });
        expect(result.claimed).to.equal(true);
        expect(await new CheckpointManager(tx).isProcessed(fileUrl)).to.equal(true);
        throw rollback;
      }).catch((error: unknown) => error);
      expect(outcome).to.equal(rollback);
      expect(await new CheckpointManager(ds).get(fileUrl)).to.equal(null);
      expect(await count(ds, sql('SELECT COUNT(*) FROM claim_test_effects WHERE file_url = ?'), [fileUrl])).to.equal(0);
    });
  });
});
