import { expect } from 'chai';
import type { EventEmitter } from 'node:events';
import { DataSource, type Logger } from 'typeorm';
import { CheckpointError, CheckpointManager, currentManager, dataSourceOptionsFromUrl, type FileCheckpoint, type Progress } from '../src';
import { count, createTestDatabase, DRIVER, sql, type TestDatabase } from './support/database';

const STATS = { totalRows: 1, filteredRows: 0, persistedRows: 1 };

function files(prefix: string, n: number) {
  return Array.from({ length: n }, (_, i) => ({
    fileUrl: `s3://bucket/${prefix}/${String(i).padStart(4, '0')}.csv`,
    fileType: prefix,
    fileTimestamp: new Date(1_700_000_000_000 + i),
  }));
}

/** Resolves when `predicate` holds, checking after each turn of the event loop's timers. */
/**
 * Counts every statement or pipeline sent on a pooled connection of `dataSource` (PostgreSQL),
 * the connections open already included; `sent.n` is the count, which a test may reset.
 */
function roundTrips(dataSource: DataSource): { n: number } {
  const sent = { n: 0 };
  type Client = { query: (...args: unknown[]) => unknown };
  const pool = (dataSource.driver as unknown as { master: EventEmitter & { _clients: Client[] } }).master;
  const count = (client: Client) => {
    const query = client.query;
    client.query = function (this: unknown, ...args: unknown[]) {
      sent.n += 1;
      return query.apply(this, args);
    };
  };
  for (const client of pool._clients) count(client);
  pool.on('connect', count);
  return sent;
}

async function until(predicate: () => Promise<boolean>): Promise<void> {
  while (!(await predicate())) await new Promise((resolve) => setTimeout(resolve, 20));
}

describe(`manager.work() (${DRIVER})`, function () {
  let database: TestDatabase;
  let ds: DataSource;
  let insert: string;

  before(async () => {
    database = await createTestDatabase('claims_work');
    ds = await database.open();
    await ds.query('CREATE TABLE work_effects (file_url varchar(255) NOT NULL, claim_token bigint NOT NULL)');
    insert = sql('INSERT INTO work_effects (file_url, claim_token) VALUES (?, ?)');
  });
  after(() => database.drop());

  it('drains the queue: each file handled once, its write committed with its completion', async () => {
    const manager = new CheckpointManager(ds);
    await manager.register(files('drain', 25));
    const progress: Progress[] = [];
    const worker = manager.work(
      async (file, tx) => {
        await tx!.query(insert, [file.fileUrl, file.claimToken]);
        return STATS;
      },
      { concurrency: 3, batchSize: 4, fileType: 'drain', drain: true, onProgress: (p) => progress.push(p) },
    );
    const summary = await worker.done;
    expect(summary).to.include({ processed: 25, failed: 0, claimLost: 0 });
    expect(worker.running).to.equal(0);
    expect(await count(ds, "SELECT COUNT(DISTINCT file_url) FROM work_effects WHERE file_url LIKE '%/drain/%'")).to.equal(25);
    expect(await count(ds, "SELECT COUNT(*) FROM work_effects WHERE file_url LIKE '%/drain/%'")).to.equal(25);
    expect(await count(ds, "SELECT COUNT(*) FROM file_checkpoints WHERE file_type = 'drain' AND status = 'completed'")).to.equal(25);
    expect(progress.at(-1)!.items).to.equal(25);
    expect(await worker.stop()).to.deep.equal(summary);
  });

  it('a failing handler fails its file (onError hears it) and the loop goes on; dead letters after maxRetries', async () => {
    const manager = new CheckpointManager(ds, { maxRetries: 1 });
    await manager.register(files('failing', 6));
    const errors: [unknown, string | undefined][] = [];
    const worker = manager.work(
      async (file, tx) => {
        await tx!.query(insert, [file.fileUrl, file.claimToken]);
        if (file.fileUrl.endsWith('0002.csv')) throw new Error('bad file');
        return STATS;
      },
      { fileType: 'failing', drain: true, onError: (error, file) => errors.push([error, file?.fileUrl]) },
    );
    const summary = await worker.done;
    expect(summary).to.include({ processed: 5, failed: 2, claimLost: 0 });
    expect(errors.map(([, url]) => url)).to.deep.equal([files('failing', 6)[2].fileUrl, files('failing', 6)[2].fileUrl]);
    expect((errors[0][0] as Error).message).to.equal('bad file');
    expect((await manager.deadLetters()).map((f) => f.fileUrl)).to.include(files('failing', 6)[2].fileUrl);
    // The failing file's writes rolled back with each attempt.
    expect(await count(ds, "SELECT COUNT(*) FROM work_effects WHERE file_url LIKE '%/failing/0002.csv'")).to.equal(0);
  });

  it('a handler running 3× longer than leaseMs keeps its claim (heartbeats) and completes', async () => {
    const leaseMs = 300;
    const manager = new CheckpointManager(ds, { leaseMs });
    const rival = new CheckpointManager(ds, { leaseMs });
    await manager.register(files('long', 1));
    let rivalClaims = 0;
    let started: () => void = () => undefined;
    const handlerStarted = new Promise<void>((resolve) => (started = resolve));
    let finish: () => void = () => undefined;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const worker = manager.work(
      async (file, tx) => {
        started();
        await finished;
        await tx!.query(insert, [file.fileUrl, file.claimToken]);
        return STATS;
      },
      { fileType: 'long', drain: true },
    );
    await handlerStarted;
    // While the handler runs past three leases, another worker keeps trying to take the file over.
    // (SQLite: the handler's transaction holds the database's write lock, so nobody can claim at all.)
    const end = Date.now() + 3 * leaseMs;
    while (Date.now() < end) {
      if (DRIVER !== 'sqlite') rivalClaims += (await rival.claimNext(1, { fileType: 'long' })).length;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    finish();
    expect(await worker.done).to.include({ processed: 1, failed: 0, claimLost: 0 });
    expect(rivalClaims).to.equal(0);
    const row = await manager.get(files('long', 1)[0].fileUrl);
    expect(row).to.include({ status: 'completed', claimToken: 1, retryCount: 0 });
  });

  // SQLite: the running file's transaction holds the write lock, so no heartbeat runs meanwhile.
  if (DRIVER !== 'sqlite') {
    it('one heartbeat statement renews every held file; a waiting file whose claim was taken over is dropped unstarted', async () => {
      const leaseMs = 300;
      const manager = new CheckpointManager(ds, { leaseMs });
      await manager.register(files('beat', 3));
      const started: string[] = [];
      let release: () => void = () => undefined;
      const released = new Promise<void>((resolve) => (release = resolve));
      const worker = manager.work(
        async (file, tx) => {
          started.push(file.fileUrl);
          if (started.length === 1) await released;
          await tx!.query(insert, [file.fileUrl, file.claimToken]);
          return STATS;
        },
        { fileType: 'beat', batchSize: 3, drain: true },
      );
      await until(async () => started.length === 1);
      const [taken, kept] = files('beat', 3)
        .filter((file) => file.fileUrl !== started[0])
        .map((file) => file.fileUrl);
      // A takeover moves the token on and holds a lease of its own, as another worker's claim after an expired lease would.
      await ds.query(sql('UPDATE file_checkpoints SET claim_token = claim_token + 1, lease_expires_at = ? WHERE file_url = ?'), [
        Date.now() + 3_600_000,
        taken,
      ]);
      const lease = async () => Number((await manager.get(kept))!.leaseExpiresAt!.getTime());
      const before = await lease();
      // A heartbeat after the takeover: the kept file's lease moves on in the same statement that finds the taken one gone.
      await until(async () => (await lease()) > before);
      release();
      expect(await worker.done).to.include({ processed: 2, failed: 0, claimLost: 0 });
      expect(started).to.deep.equal([started[0], kept]);
      expect(await manager.get(taken)).to.include({ status: 'processing', claimToken: 2 });
      expect(await manager.get(kept)).to.include({ status: 'completed' });
    });
  }

  it('stop() during a run finishes the file in flight and gives the unstarted ones back without an attempt', async () => {
    const manager = new CheckpointManager(ds);
    const queued = files('stop', 8);
    await manager.register(queued);
    let stopped: Promise<unknown> | undefined;
    const started: string[] = [];
    const worker = manager.work(
      async (file, tx) => {
        started.push(file.fileUrl);
        stopped ??= worker.stop();
        expect(worker.running).to.equal(1);
        await tx!.query(insert, [file.fileUrl, file.claimToken]);
        return STATS;
      },
      { fileType: 'stop', batchSize: 8 },
    );
    const summary = await worker.done;
    expect(await stopped).to.deep.equal(summary);
    expect(summary).to.include({ processed: 1, failed: 0, claimLost: 0 });
    // Files registered together are claimed in no particular order (the claim order index's tie-break is the URL's hash).
    expect(started).to.have.length(1);
    expect((await manager.get(started[0]))!.status).to.equal('completed');
    const unstarted = queued.filter((file) => file.fileUrl !== started[0]);
    expect(unstarted).to.have.length(7);
    for (const file of unstarted) {
      const row = (await manager.get(file.fileUrl))!;
      // Pending again, no attempt counted, and the claim's token (1) fenced off.
      expect(row).to.include({ status: 'pending', retryCount: 0, claimToken: 2 });
      expect(row.leaseExpiresAt).to.equal(null);
    }
    // The next claim of a given-back file is its first attempt.
    const [next] = await manager.claimNext(1, { fileType: 'stop' });
    expect(unstarted.map((file) => file.fileUrl)).to.include(next.fileUrl);
    expect(next).to.include({ retryCount: 0, claimToken: 3 });
  });

  it('asks its throttle before each claim and waits what it says; stop() ends the wait', async () => {
    const manager = new CheckpointManager(ds);
    await manager.register(files('throttled', 3));
    const asked: { name: string; batches: number; items: number }[] = [];
    let worker: ReturnType<CheckpointManager['work']> | undefined;
    let stopping: Promise<unknown> | undefined;
    worker = manager.work(async () => STATS, {
      fileType: 'throttled',
      batchSize: 1,
      throttle: (info) => {
        asked.push({ ...info });
        // The third claim waits for longer than the test may run: only stop() ends that wait.
        if (info.batches === 2) {
          stopping = worker!.stop();
          return 3_600_000;
        }
        return info.batches === 1 ? 50 : 0;
      },
    });
    await worker.done;
    await stopping;
    expect(await worker.done).to.include({ processed: 2, failed: 0 });
    expect(asked.map(({ name, batches }) => ({ name, batches }))).to.deep.equal([
      { name: 'throttled', batches: 0 },
      { name: 'throttled', batches: 1 },
      { name: 'throttled', batches: 2 },
    ]);
    // `items`: the files processed when it was asked (the loop claims ahead while a file runs).
    expect(asked.every(({ items, batches }, i) => items <= batches && (i === 0 || items >= asked[i - 1].items))).to.equal(true);
    // The third claim never happened: its file is still pending.
    expect(await count(ds, "SELECT COUNT(*) FROM file_checkpoints WHERE file_type = 'throttled' AND status = 'pending'")).to.equal(1);
  });

  it('a throttle that returns no wait stops the worker, and onError hears INVALID_ARGUMENT', async () => {
    const manager = new CheckpointManager(ds);
    await manager.register(files('bad-throttle', 2));
    const errors: unknown[] = [];
    const worker = manager.work(async () => STATS, {
      fileType: 'bad-throttle',
      throttle: () => Number.NaN,
      onError: (error) => errors.push(error),
    });
    expect(await worker.done).to.include({ processed: 0 });
    expect(errors.map((error) => (error as { code?: string }).code)).to.deep.equal(['INVALID_ARGUMENT']);
  });

  it('an aborted signal stops the worker like stop()', async () => {
    const manager = new CheckpointManager(ds);
    await manager.register(files('signal', 3));
    const controller = new AbortController();
    const worker = manager.work(
      async () => {
        controller.abort();
        return STATS;
      },
      { fileType: 'signal', batchSize: 3, signal: controller.signal },
    );
    expect(await worker.done).to.include({ processed: 1 });
    expect(await count(ds, "SELECT COUNT(*) FROM file_checkpoints WHERE file_type = 'signal' AND status = 'pending'")).to.equal(2);
  });

  it('commitEvery: a chunk commits once; a failing file rolls its chunk back and only it fails', async () => {
    const manager = new CheckpointManager(ds, { maxRetries: 0 });
    const chunk = files('chunk', 5);
    await manager.register(chunk);
    const calls: string[] = [];
    const progress: Progress[] = [];
    const running: number[] = [];
    const worker = manager.work(
      async (file: FileCheckpoint, tx) => {
        calls.push(file.fileUrl);
        running.push(worker.running);
        await tx!.query(insert, [file.fileUrl, file.claimToken]);
        if (file.fileUrl === chunk[2].fileUrl) throw new Error('bad file');
        return STATS;
      },
      { fileType: 'chunk', batchSize: 5, commitEvery: 5, drain: true, onProgress: (p) => progress.push(p) },
    );
    expect(await worker.done).to.include({ processed: 4, failed: 1, claimLost: 0 });
    // The chunk ran up to the failing file, then every file ran again in its own transaction, in claim order.
    const failing = calls.indexOf(chunk[2].fileUrl);
    const claimOrder = calls.slice(failing + 1);
    expect([...claimOrder].sort()).to.deep.equal(chunk.map((f) => f.fileUrl));
    expect(calls).to.deep.equal([...claimOrder.slice(0, failing + 1), ...claimOrder]);
    expect(progress.map((p) => p.batches)).to.deep.equal([1, 2, 3, 4]);
    // A chunk's handlers run one after another: `running` counts the one in flight, not the chunk.
    expect(running).to.deep.equal(calls.map(() => 1));
    for (const [i, file] of chunk.entries()) {
      const expected = i === 2 ? 0 : 1;
      expect(await count(ds, sql('SELECT COUNT(*) FROM work_effects WHERE file_url = ?'), [file.fileUrl])).to.equal(expected);
    }
    expect((await manager.deadLetters()).map((f) => f.fileUrl)).to.include(chunk[2].fileUrl);

    const clean = files('clean-chunk', 6);
    await manager.register(clean);
    const cleanProgress: Progress[] = [];
    const second = manager.work(
      async (file, tx) => {
        await tx!.query(insert, [file.fileUrl, file.claimToken]);
        return { ...STATS, durationMs: 7 };
      },
      { fileType: 'clean-chunk', batchSize: 6, commitEvery: 3, drain: true, onProgress: (p) => cleanProgress.push(p) },
    );
    expect(await second.done).to.include({ processed: 6, failed: 0 });
    // Two transactions of three files each.
    expect(cleanProgress.map((p) => [p.batches, p.items])).to.deep.equal([
      [1, 3],
      [2, 6],
    ]);
    for (const file of clean)
      expect(await manager.get(file.fileUrl)).to.include({ status: 'completed', processingTimeMs: 7, recordsTotal: 1 });
  });

  // SQLite: the chunk's transaction holds the write lock, so no other party can take a file over meanwhile.
  if (DRIVER !== 'sqlite') {
    it('commitEvery: a chunk whose claim was lost commits nothing of it; the others commit one by one', async () => {
      const manager = new CheckpointManager(ds, { leaseMs: 60_000 });
      const chunk = files('lost-chunk', 3);
      await manager.register(chunk);
      const worker = manager.work(
        async (file, tx) => {
          // Another party takes the second file away while the chunk runs (requeue after a failure is
          // not possible on a processing row, so fence it the way a takeover does: a new claim).
          if (file.fileUrl === chunk[2].fileUrl) {
            await ds.query(sql("UPDATE file_checkpoints SET claim_token = claim_token + 1 WHERE file_url = ? AND status = 'processing'"), [
              chunk[1].fileUrl,
            ]);
          }
          await tx!.query(insert, [file.fileUrl, file.claimToken]);
          return STATS;
        },
        { fileType: 'lost-chunk', batchSize: 3, commitEvery: 3, drain: true },
      );
      // Drain stops once nothing is claimable: the taken-over file is held under its new lease.
      expect(await worker.done).to.include({ processed: 2, failed: 0, claimLost: 1 });
      expect(await count(ds, sql('SELECT COUNT(*) FROM work_effects WHERE file_url = ?'), [chunk[1].fileUrl])).to.equal(0);
      expect(await count(ds, sql('SELECT COUNT(*) FROM work_effects WHERE file_url = ?'), [chunk[0].fileUrl])).to.equal(1);
    });
  }

  it('refuses bad options with INVALID_ARGUMENT', () => {
    const manager = new CheckpointManager(ds);
    for (const options of [{ concurrency: 0 }, { batchSize: -1 }, { commitEvery: 1.5 }, { pollMs: -1 }, { drain: 'yes' }]) {
      expect(() => manager.work(() => STATS, options as never))
        .to.throw()
        .with.property('code', 'INVALID_ARGUMENT');
    }
    expect(() => manager.work('handler' as never))
      .to.throw()
      .with.property('code', 'INVALID_ARGUMENT');
  });

  if (DRIVER === 'postgres') {
    it("a claim's unflushed commit stays the claim's: neither the pooled connection nor a caller's transaction keeps synchronous_commit off", async () => {
      const single = await database.open({ extra: { max: 1 } });
      try {
        const manager = new CheckpointManager(single);
        await manager.register(files('unflushed', 2));
        const setting = async (db: { query(sql: string): Promise<{ synchronous_commit: string }[]> }) =>
          (await db.query('SHOW synchronous_commit'))[0].synchronous_commit;
        expect(await manager.claimNext(1, { fileType: 'unflushed' })).to.have.length(1);
        expect(await setting(single)).to.equal('on');
        await single.transaction(async (tx) => {
          expect(await new CheckpointManager(tx).claimNext(1, { fileType: 'unflushed' })).to.have.length(1);
          expect(await setting(tx)).to.equal('on');
        });
      } finally {
        await single.destroy();
      }
    });

    it('fenced completions find their rows by the key, even where the statistics make a scan of the processing rows look cheap', async () => {
      const logged: { query: string; parameters: unknown[] }[] = [];
      const logger: Logger = {
        logQuery: (query, parameters) => void logged.push({ query, parameters: (parameters ?? []) as unknown[] }),
        logQueryError() {},
        logQuerySlow() {},
        logSchemaBuild() {},
        logMigration() {},
        log() {},
      };
      const observed = await database.open({ logger });
      try {
        const manager = new CheckpointManager(observed);
        // A queue whose statistics say that (almost) no row is processing: PostgreSQL's planner then
        // prices a walk of the status index's processing entries below a primary key lookup.
        await manager.register(files('key-waiting', 2000));
        await manager.register([...files('key-lookup', 6), ...files('key-chunk', 6)]);
        await observed.query('ANALYZE file_checkpoints');
        const handler = async () => STATS;
        expect(await manager.work(handler, { fileType: 'key-lookup', batchSize: 6, drain: true }).done).to.include({ processed: 6 });
        expect(await manager.work(handler, { fileType: 'key-chunk', commitEvery: 3, drain: true }).done).to.include({ processed: 6 });
        const completions = logged.filter(({ query }) => query.startsWith('WITH changed AS'));
        // One file's completion, and a chunk's (its stats as CASE WHEN "url_hash" = … over the chunk).
        const chunked = (query: string) => query.includes('CASE WHEN "url_hash" = ');
        expect(completions.some(({ query }) => !chunked(query))).to.equal(true);
        expect(completions.some(({ query }) => chunked(query))).to.equal(true);
        for (const { query, parameters } of completions) {
          const plan = ((await observed.query(`EXPLAIN ${query}`, parameters)) as { 'QUERY PLAN': string }[])
            .map((row) => row['QUERY PLAN'])
            .join('\n');
          expect(plan).to.not.include('IDX_file_checkpoints_open_status');
          expect(plan).to.match(/Index Cond: \(+url_hash\)::text = /);
        }
      } finally {
        await observed.destroy();
      }
    });

    // The observer has a connection of its own: the worker's pooled ones would overwrite the
    // statement text pg_stat_activity shows for them.
    let observer: DataSource;
    before(async () => {
      observer = new DataSource(dataSourceOptionsFromUrl(database.url));
      await observer.initialize();
    });
    after(() => observer.destroy());

    /** The backend listening for wake-ups, once it listens. */
    async function listener(): Promise<{ pid: number; since: Date } | undefined> {
      const rows: { pid: number; state_change: Date }[] = await observer.query(
        "SELECT pid, state_change FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND state = 'idle'",
      );
      return rows[0] && { pid: rows[0].pid, since: rows[0].state_change };
    }
    /** True once a claim statement finished after `since` (the worker then sleeps until woken). */
    async function claimedSince(since: Date): Promise<boolean> {
      const rows: { n: string }[] = await observer.query(
        "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'WITH picked AS%' AND state = 'idle' AND state_change > $1",
        [since],
      );
      return Number(rows[0].n) > 0;
    }

    it('NOTIFY wakes an idle worker (pollMs far beyond the test timeout), also after its listening connection is killed', async () => {
      const manager = new CheckpointManager(ds);
      let handlerStarted: (url: string) => void = () => undefined;
      const errors: unknown[] = [];
      const worker = manager.work(
        (file) => {
          handlerStarted(file.fileUrl);
          return STATS;
        },
        { fileType: 'wake', pollMs: 600_000, onError: (error) => errors.push(error) },
      );
      try {
        let listening: { pid: number; since: Date } | undefined;
        await until(async () => (listening = await listener()) !== undefined);
        await until(() => claimedSince(new Date(0)));
        const first = new Promise<string>((resolve) => (handlerStarted = resolve));
        await manager.register(files('wake', 1));
        expect(await first).to.equal(files('wake', 1)[0].fileUrl);

        await observer.query('SELECT pg_terminate_backend($1)', [listening!.pid]);
        let again: { pid: number; since: Date } | undefined;
        await until(async () => (again = await listener()) !== undefined && again.pid !== listening!.pid);
        // The worker claims once more after listening again (notifications may have been lost meanwhile).
        await until(() => claimedSince(again!.since));
        const second = new Promise<string>((resolve) => (handlerStarted = resolve));
        await manager.register(files('wake', 2).slice(1));
        expect(await second).to.equal(files('wake', 2)[1].fileUrl);
        expect(errors.length).to.be.greaterThan(0);
        // Heard as any failure of the store's own statements is: STORE_UNAVAILABLE, the driver's error as its cause.
        for (const error of errors) expect(error).to.be.instanceOf(CheckpointError).and.to.include({ code: 'STORE_UNAVAILABLE' });
      } finally {
        await worker.stop();
      }
      expect(await listener()).to.equal(undefined);
    });
  }

  // A worker slot's transactions, one file after another: on PostgreSQL one kept runner whose COMMIT
  // travels with the fenced completion and the next file's BEGIN; elsewhere TypeORM's transactions.
  // Either way each file is its own transaction, a lost claim keeps none of the handler's writes, and
  // nothing is left open on a connection afterwards.
  describe("a slot's transactions one after another", () => {
    const effects = (fileUrl: string) => count(ds, sql('SELECT COUNT(*) FROM work_effects WHERE file_url = ?'), [fileUrl]);

    it("a completion refused with CLAIM_LOST rolls the handler's writes back; the next file runs in a clean transaction of its own", async () => {
      const manager = new CheckpointManager(ds, { leaseMs: 60_000 });
      const queue = files('lost-one', 3);
      await manager.register(queue);
      const seen: { active: boolean; current: boolean }[] = [];
      const worker = manager.work(
        async (file, tx) => {
          await tx!.query(insert, [file.fileUrl, file.claimToken]);
          if (file.fileUrl === queue[1].fileUrl) {
            // Another party fences this claim off while the handler runs (as a takeover would).
            await ds.query(sql("UPDATE file_checkpoints SET claim_token = claim_token + 1 WHERE file_url = ? AND status = 'processing'"), [
              file.fileUrl,
            ]);
          }
          // TypeORM sees a transaction, the async context binds it, and a nested transaction is a savepoint of it.
          await tx!.transaction((inner) => inner.query(insert, [`${file.fileUrl}#nested`, file.claimToken]));
          seen.push({ active: tx!.queryRunner!.isTransactionActive, current: currentManager(ds) === tx });
          return STATS;
        },
        { fileType: 'lost-one', batchSize: 3, drain: true },
      );
      expect(await worker.done).to.include({ processed: 2, failed: 0, claimLost: 1 });
      expect(seen).to.deep.equal([0, 1, 2].map(() => ({ active: true, current: true })));
      for (const [i, file] of queue.entries()) {
        expect(await effects(file.fileUrl)).to.equal(i === 1 ? 0 : 1);
        expect(await effects(`${file.fileUrl}#nested`)).to.equal(i === 1 ? 0 : 1);
      }
      expect(await manager.get(queue[1].fileUrl)).to.include({ status: 'processing' });
      expect(await manager.get(queue[2].fileUrl)).to.include({ status: 'completed' });
    });

    it('each file commits on its own: a failing file between two others keeps theirs and loses only its own', async () => {
      const manager = new CheckpointManager(ds, { maxRetries: 0 });
      const queue = files('one-each', 5);
      await manager.register(queue);
      const worker = manager.work(
        async (file, tx) => {
          await tx!.query(insert, [file.fileUrl, file.claimToken]);
          if (file.fileUrl === queue[2].fileUrl) throw new Error('bad file');
          return STATS;
        },
        { fileType: 'one-each', batchSize: 5, drain: true },
      );
      expect(await worker.done).to.include({ processed: 4, failed: 1, claimLost: 0 });
      for (const [i, file] of queue.entries()) expect(await effects(file.fileUrl)).to.equal(i === 2 ? 0 : 1);
      expect(await manager.get(queue[2].fileUrl)).to.include({ status: 'failed', errorMessage: 'bad file' });
    });

    if (DRIVER === 'postgres') {
      it('each file is a transaction of its own, and no connection is left inside one once the worker stops', async () => {
        const manager = new CheckpointManager(ds);
        const queue = files('own-xact', 6);
        await manager.register(queue);
        const xacts: string[] = [];
        const worker = manager.work(
          async (file, tx) => {
            await tx!.query(insert, [file.fileUrl, file.claimToken]);
            xacts.push(((await tx!.query('SELECT txid_current()::text AS xact')) as { xact: string }[])[0].xact);
            return STATS;
          },
          { fileType: 'own-xact', batchSize: 4, concurrency: 2, drain: true },
        );
        expect(await worker.done).to.include({ processed: 6 });
        expect(new Set(xacts).size).to.equal(6);
        const open = await count(
          ds,
          "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
        );
        expect(open).to.equal(0);
      });

      it("work()'s commits do not wait for their WAL flush, and the setting ends with each: a pool of one connection stays synchronous", async () => {
        const sent: string[] = [];
        const logger: Logger = {
          logQuery: (query) => void sent.push(query),
          logQueryError() {},
          logQuerySlow() {},
          logSchemaBuild() {},
          logMigration() {},
          log() {},
        };
        // One connection: the slot gives it back before each claim, or the claim would wait forever.
        const single = await database.open({ extra: { max: 1 }, logger });
        try {
          const manager = new CheckpointManager(single);
          const queue = files('unflushed-work', 6);
          await manager.register(queue);
          const worker = manager.work(
            async (file, tx) => {
              await tx!.query(insert, [file.fileUrl, file.claimToken]);
              return STATS;
            },
            { fileType: 'unflushed-work', batchSize: 4, drain: true },
          );
          expect(await worker.done).to.include({ processed: 6 });
          // Each file's commit turns it off: in its fenced completion (the statement's own set_config), or by a SET LOCAL of its own.
          const unflushed = (query: string) =>
            query === 'SET LOCAL synchronous_commit = off' ||
            (query.startsWith('WITH changed AS') && query.includes("set_config('synchronous_commit', 'off', true)"));
          expect(sent.filter(unflushed)).to.have.length(6);
          expect(((await single.query('SHOW synchronous_commit')) as { synchronous_commit: string }[])[0].synchronous_commit).to.equal(
            'on',
          );
          for (const file of queue) expect(await effects(file.fileUrl)).to.equal(1);
        } finally {
          await single.destroy();
        }
      });

      it("files that follow one another cost two round trips each: the handler's statement, and completion + COMMIT + next BEGIN", async () => {
        const counted = await database.open();
        try {
          // Every statement or pipeline sent on a pooled connection of this DataSource (the listening
          // connection is a client of its own).
          const sent = roundTrips(counted);
          const manager = new CheckpointManager(counted);
          const queue = files('round-trips', 40);
          await manager.register(queue);
          sent.n = 0;
          const worker = manager.work(
            async (file, tx) => {
              await tx!.query(insert, [file.fileUrl, file.claimToken]);
              return STATS;
            },
            { fileType: 'round-trips', batchSize: 10, drain: true },
          );
          expect(await worker.done).to.include({ processed: 40 });
          // 2 a file, plus the first claim and its BEGIN, the last (empty) claim and a ROLLBACK: every
          // other batch is claimed with a commit. TypeORM's own transactions would take 4 a file (BEGIN,
          // the handler's insert, the completion, COMMIT).
          expect(sent.n).to.be.at.most(2 * 40 + 4);
          for (const file of queue) expect(await effects(file.fileUrl)).to.equal(1);
        } finally {
          await counted.destroy();
        }
      });

      it('a claim sent with a commit is planned once per connection (a generic plan), not at every run', async () => {
        const manager = new CheckpointManager(ds);
        const queue = files('generic-claim', 30);
        await manager.register(queue);
        const plans: { generic: number; custom: number }[] = [];
        const worker = manager.work(
          async (file, tx) => {
            await tx!.query(insert, [file.fileUrl, file.claimToken]);
            // The handler's connection is the one the claims after each commit ran on.
            const rows = (await tx!.query(
              "SELECT generic_plans AS generic, custom_plans AS custom FROM pg_prepared_statements WHERE name LIKE 'typeorm\\_checkpoint\\_pipeline\\_%' AND statement LIKE 'WITH picked AS%'",
            )) as { generic: string; custom: string }[];
            for (const row of rows) plans.push({ generic: Number(row.generic), custom: Number(row.custom) });
            return STATS;
          },
          { fileType: 'generic-claim', batchSize: 5, commitEvery: 5, drain: true },
        );
        expect(await worker.done).to.include({ processed: 30, failed: 0 });
        expect(Math.max(...plans.map((plan) => plan.generic))).to.be.at.least(4);
        expect(plans.every((plan) => plan.custom === 0)).to.equal(true);
      });

      it('the next batch is claimed in the round trip of the commit before it: a chunk of ten files costs eleven round trips', async () => {
        const counted = await database.open();
        try {
          const sent = roundTrips(counted);
          const manager = new CheckpointManager(counted);
          const queue = files('claim-with-commit', 40);
          await manager.register(queue);
          sent.n = 0;
          const tokens = new Map<string, number>();
          const worker = manager.work(
            async (file, tx) => {
              await tx!.query(insert, [file.fileUrl, file.claimToken]);
              tokens.set(file.fileUrl, file.claimToken);
              return STATS;
            },
            { fileType: 'claim-with-commit', commitEvery: 10, drain: true },
          );
          expect(await worker.done).to.include({ processed: 40, failed: 0, claimLost: 0 });
          // Per chunk the handlers' ten inserts and one pipeline (completions, COMMIT, the next batch's
          // claim, the next BEGIN); besides: the first claim and its BEGIN, the last (empty) claim and a
          // ROLLBACK of the transaction begun after it. A claim of its own per batch would make it 49.
          expect(sent.n).to.be.at.most(4 * 11 + 4);
          for (const file of queue) {
            expect(await effects(file.fileUrl)).to.equal(1);
            // Claimed in a pipeline: the handler saw the claim's token, the one the completion presented.
            expect(await manager.get(file.fileUrl)).to.include({ status: 'completed', claimToken: tokens.get(file.fileUrl) });
          }
        } finally {
          await counted.destroy();
        }
      });
    }
  });
});

describe('manager.work() on the in-memory store', () => {
  it('has the same semantics: drain, stop() gives unstarted files back, register wakes an idle worker', async () => {
    const manager = new CheckpointManager(null);
    await manager.register(files('memory-drain', 5));
    const drained = manager.work(() => STATS, { fileType: 'memory-drain', concurrency: 2, drain: true });
    expect(await drained.done).to.include({ processed: 5, failed: 0 });

    const queued = files('memory-stop', 4);
    await manager.register(queued);
    const worker = manager.work(
      () => {
        void worker.stop();
        return STATS;
      },
      { fileType: 'memory-stop', batchSize: 4 },
    );
    expect(await worker.done).to.include({ processed: 1 });
    for (const file of queued.slice(1))
      expect(await manager.get(file.fileUrl)).to.include({ status: 'pending', retryCount: 0, claimToken: 2 });

    let started: (url: string) => void = () => undefined;
    const idle = manager.work(
      (file) => {
        started(file.fileUrl);
        return STATS;
      },
      { fileType: 'memory-wake', pollMs: 600_000 },
    );
    const first = new Promise<string>((resolve) => (started = resolve));
    await manager.register(files('memory-wake', 1));
    expect(await first).to.equal(files('memory-wake', 1)[0].fileUrl);
    expect(await idle.stop()).to.include({ processed: 1 });

    const chunked = files('memory-chunk', 4);
    await manager.register(chunked);
    const chunk = manager.work(
      (file) => {
        if (file.fileUrl === chunked[1].fileUrl) throw new Error('bad file');
        return STATS;
      },
      { fileType: 'memory-chunk', batchSize: 4, commitEvery: 4, drain: true },
    );
    const summary = await chunk.done;
    expect(summary.processed).to.equal(3);
    expect(summary.failed).to.be.greaterThan(0);
  });
});
