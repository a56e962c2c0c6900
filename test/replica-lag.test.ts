import { expect } from 'chai';
import { DataSource, type EntityManager } from 'typeorm';
import {
  checkpointEntities,
  checkpointMigrations,
  dataSourceOptionsFromUrl,
  eachBatch,
  type Page,
  replicaLag,
  type Source,
  type ThrottleInfo,
} from '../src';
import { DRIVER, useTestDatabase } from './support/database';
import { expectCode } from './support/expect-code';
import { startStreamingReplica, type StreamingReplica } from './support/replica';

const INFO = { name: 'job', batches: 0, items: 0 };

// The test's own reading of the primary, apart from the library's: the largest replay lag, NULL as 0.
const REPLAY_LAG_MS = 'SELECT COALESCE(EXTRACT(EPOCH FROM MAX(replay_lag)) * 1000, 0)::float8 AS lag FROM pg_stat_replication';

async function replayLagMs(primary: DataSource): Promise<number> {
  const [row] = (await primary.query(REPLAY_LAG_MS)) as { lag: number }[];
  return Number(row.lag);
}

const pauseFor = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Asks `throttle` until `done(wait)` holds, waiting in between what it returned (at least
 * `pollMs`); returns every wait it asked for. Bounded: fails after `withinMs`.
 */
async function askUntil(
  throttle: ReturnType<typeof replicaLag>,
  done: (wait: number) => boolean,
  withinMs: number,
  pollMs = 50,
): Promise<number[]> {
  const waits: number[] = [];
  const deadline = Date.now() + withinMs;
  for (;;) {
    const wait = await throttle(INFO);
    waits.push(wait);
    if (done(wait)) return waits;
    if (Date.now() > deadline) return expect.fail(`the throttle did not settle within ${withinMs} ms: ${waits.join(', ')}`);
    await pauseFor(Math.max(wait, pollMs));
  }
}

describe('replicaLag', () => {
  const db = useTestDatabase('replica_lag');

  it('rejects a non-positive or non-finite maxLagMs or checkEveryMs with INVALID_ARGUMENT', async () => {
    const bad: unknown[] = [
      undefined,
      null,
      {},
      { maxLagMs: 0 },
      { maxLagMs: -1 },
      { maxLagMs: NaN },
      { maxLagMs: Infinity },
      { maxLagMs: '500' },
      { maxLagMs: 500, checkEveryMs: 0 },
      { maxLagMs: 500, checkEveryMs: -200 },
      { maxLagMs: 500, checkEveryMs: Infinity },
      { maxLagMs: 500, checkEveryMs: NaN },
    ];
    for (const options of bad) {
      await expectCode(
        Promise.resolve().then(() => replicaLag(db.ds, options as never)),
        'INVALID_ARGUMENT',
      );
    }
    expect(replicaLag(db.ds, { maxLagMs: 500 })).to.be.a('function');
  });

  // SQLite has no replicas; the machine's PostgreSQL has no standby and its MySQL/MariaDB is no replica.
  it(`never waits without replicas (${DRIVER})`, async () => {
    const throttle = replicaLag(db.ds, { maxLagMs: 1 });
    expect(await throttle(INFO)).to.equal(0);
    const inTransaction = await db.ds.transaction((tx) => Promise.resolve(replicaLag(tx, { maxLagMs: 1 })(INFO)));
    expect(inTransaction).to.equal(0);
  });

  if (DRIVER !== 'postgres') return;

  describe('on a real streaming replica that applies WAL 2 s late (PostgreSQL)', () => {
    let replica: StreamingReplica | undefined;
    let primary: DataSource;

    before(async function () {
      this.timeout(90_000);
      // No skip: on PostgreSQL a replica that cannot be built fails the suite.
      replica = await startStreamingReplica();
      primary = new DataSource({
        ...dataSourceOptionsFromUrl(replica.primaryUrl),
        entities: checkpointEntities,
        migrations: checkpointMigrations,
      });
      await primary.initialize();
      await primary.runMigrations();
      await primary.query('CREATE TABLE throttled_rows (n integer NOT NULL)');
    });

    after(async () => {
      if (primary?.isInitialized) await primary.destroy();
      await replica?.destroy();
    });

    /** Until the standby reported it replayed everything (NULL lag): how every test starts. */
    const caughtUp = () => askUntil(replicaLag(primary, { maxLagMs: 1, checkEveryMs: 500 }), (wait) => wait === 0, 60_000);

    it('reads about 2 s of lag once a write is replayed, 0 once the standby is caught up; its waits double up to checkEveryMs', async function () {
      this.timeout(180_000);
      await caughtUp();
      const throttle = replicaLag(primary, { maxLagMs: 500, checkEveryMs: 1000 });
      expect(await throttle(INFO)).to.equal(0);
      await primary.query('INSERT INTO throttled_rows (n) VALUES (0)');
      // The write's lag shows once the standby replays it, 2 s after it committed.
      await askUntil(throttle, (wait) => wait > 0, 30_000);
      // Above maxLagMs, as the throttle saw; the standby's reports interpolate it (1.3–2 s seen here).
      const lag = await replayLagMs(primary);
      expect(lag).to.be.within(500, 6000);
      // The lag reads 2 s until an idle standby reports being caught up (wal_receiver_status_interval, 10 s).
      const waits = await askUntil(throttle, (wait) => wait === 0, 60_000);
      expect(await replayLagMs(primary)).to.be.at.most(500);
      const asked = waits.slice(0, -1);
      expect(asked).to.not.be.empty;
      expect(asked, 'the throttle let the job go on while the lag read 2 s').to.not.include(0);
      // The first wait came from the call that saw the lag (100 ms); these are the ones after it.
      expect(asked).to.deep.equal(asked.map((_, i) => Math.min(1000, 200 * 2 ** i)));
    });

    it("refuses, with INVALID_ARGUMENT, to read 'no lag' through a role that cannot see the standbys' lag", async () => {
      await primary.query('CREATE ROLE lag_reader LOGIN');
      const reader = new DataSource(dataSourceOptionsFromUrl(replica!.primaryUrl.replace('postgres@', 'lag_reader@')));
      await reader.initialize();
      try {
        await expectCode(Promise.resolve(replicaLag(reader, { maxLagMs: 500 })(INFO)), 'INVALID_ARGUMENT');
        await primary.query('GRANT pg_read_all_stats TO lag_reader');
        await replicaLag(reader, { maxLagMs: 60_000 })(INFO);
      } finally {
        await reader.destroy();
      }
    });

    it('holds an eachBatch job back while the replay lag is above maxLagMs, and the job still writes every row once', async function () {
      this.timeout(180_000);
      await caughtUp();
      const ROWS = 12;
      const source: Source<number> = (cursor, limit) => {
        const from = cursor === null ? 1 : (cursor as number) + 1;
        const items = Array.from({ length: Math.min(limit, ROWS - from + 1) }, (_, i) => from + i);
        return { items, next: items.length > 0 && items[items.length - 1] < ROWS ? items[items.length - 1] : null } as Page<number>;
      };
      const lagAtStart: number[] = [];
      const waits: number[] = [];
      const lagThrottle = replicaLag(primary, { maxLagMs: 500, checkEveryMs: 200 });
      const result = await eachBatch(
        primary,
        'replica-throttled',
        source,
        1,
        async (items: number[], tx: EntityManager) => {
          // A reading of its own (another connection), before this batch writes anything.
          lagAtStart.push(await replayLagMs(primary));
          await tx.query('INSERT INTO throttled_rows (n) SELECT unnest($1::int[])', [items.map((n) => n + 1000)]);
          // A batch's work takes time: left unthrottled, the lag passes 500 ms within 4 or 5 batches.
          await tx.query('SELECT pg_sleep(0.1)');
        },
        {
          // Recording each answer, and asked again after each wait as replicaLag's own throttle is.
          throttle: Object.assign(
            async (info: ThrottleInfo) => {
              const wait = await lagThrottle(info);
              waits.push(wait);
              return wait;
            },
            { untilZero: lagThrottle.untilZero },
          ),
          // Bounded: a throttle that never lets the job go on fails here, not at mocha's timeout.
          maxRuntimeMs: 90_000,
        },
      );
      expect(result).to.include({ batches: ROWS, items: ROWS, done: true });
      const rows = ((await primary.query('SELECT n FROM throttled_rows WHERE n > 1000 ORDER BY n')) as { n: number }[]).map(
        (r) => r.n - 1000,
      );
      expect(rows).to.deep.equal(Array.from({ length: ROWS }, (_, i) => i + 1));
      // It did wait: the job's own writes put the standby more than 500 ms behind.
      expect(
        waits.filter((wait) => wait > 0),
        `waits ${waits.join(', ')}`,
      ).to.not.be.empty;
      // While WAL waits to be replayed, replay_lag rises with the age of the oldest unreplayed
      // write (about 130 ms a batch here). The throttle's check and the handler's reading are a few
      // statements apart (the BEGIN and the job row's lock between them): the lag can cross
      // 500 ms in that gap, and the batch just let through then starts above it. The next check sees
      // it and waits, asking again until the standby reports being caught up (nothing is written
      // while the job waits), so the batch after it starts near 0. So a batch may start above
      // maxLagMs only right after one that started within it, and never as the first.
      lagAtStart.forEach((lag, i) => {
        if (lag <= 500) return;
        const previous = i === 0 ? Infinity : lagAtStart[i - 1];
        expect(
          previous,
          `batch ${i + 1} started at ${lag} ms of lag, right after one at ${previous} ms: ${lagAtStart.join(', ')}`,
        ).to.be.at.most(500);
      });
    });
  });
});
