import { expect } from 'chai';
import { DataSource, type DataSourceOptions, type EntityManager } from 'typeorm';
import { checkpointEntities, dataSourceOptionsFromUrl, eachBatch, list, type Page, reset, type Source, status } from '../src';
import { connectionWaiters, count, DRIVER, sql, useTestDatabase } from './support/database';
import { expectCode, rejection } from './support/expect-code';
import { countRoundTrips } from './support/round-trips';
import { pause } from './support/victim';

/** An in-memory source over 1..n whose cursor is the last number returned; records every call. */
function numbers(n: number, options: { lastPageNull?: boolean } = {}) {
  const calls: unknown[] = [];
  const source: Source<number> = (cursor, limit) => {
    calls.push(cursor);
    const from = cursor === null ? 1 : (cursor as number) + 1;
    const items: number[] = [];
    for (let i = from; i <= n && items.length < limit; i++) items.push(i);
    const last = items.length > 0 ? items[items.length - 1] : cursor;
    const next = options.lastPageNull && last === n ? null : last;
    return { items, next } as Page<number>;
  };
  return { source, calls };
}

describe('eachBatch', () => {
  const db = useTestDatabase('each_batch');

  before(async () => {
    await db.ds.query('CREATE TABLE written (job varchar(64) NOT NULL, n integer NOT NULL)');
  });

  const write = (job: string) => async (items: number[], tx: EntityManager) => {
    for (const n of items) await tx.query(sql('INSERT INTO written (job, n) VALUES (?, ?)'), [job, n]);
  };
  const written = async (job: string) =>
    ((await db.ds.query(sql('SELECT n FROM written WHERE job = ? ORDER BY n'), [job])) as { n: number }[]).map((r) => Number(r.n));

  it('calls the source with a null cursor first, then each stored next', async () => {
    const { source, calls } = numbers(7);
    const result = await eachBatch(db.ds, 'cursor-order', source, 3, write('cursor-order'));
    expect(calls).to.deep.equal([null, 3, 6, 7]);
    expect(result).to.deep.equal({ batches: 3, items: 7, done: true, cursor: 7 });
    expect(await written('cursor-order')).to.deep.equal([1, 2, 3, 4, 5, 6, 7]);
  });

  it('ends on next: null without another source call, and stores that null', async () => {
    const { source, calls } = numbers(6, { lastPageNull: true });
    const result = await eachBatch(db.ds, 'last-page', source, 3, write('last-page'));
    expect(calls).to.deep.equal([null, 3]);
    expect(result).to.deep.equal({ batches: 2, items: 6, done: true, cursor: null });
    const stored = await status(db.ds, 'last-page');
    expect(stored).to.include({ done: true, batches: 2, items: 6, cursor: null, kind: 'batch' });
  });

  it('does not call the handler for an empty page and does not count it', async () => {
    let handlerCalls = 0;
    const result = await eachBatch(
      db.ds,
      'empty',
      () => ({ items: [], next: 5 }),
      10,
      () => {
        handlerCalls++;
      },
    );
    expect(handlerCalls).to.equal(0);
    expect(result).to.deep.equal({ batches: 0, items: 0, done: true, cursor: null });
    expect(await status(db.ds, 'empty')).to.include({ done: true, batches: 0, items: 0 });
  });

  it('rolls back a throwing batch, re-raises the same error object, and resumes at that batch', async () => {
    const { source, calls } = numbers(10);
    const boom = new Error('handler failed');
    let fail = true;
    const handler = async (items: number[], tx: EntityManager) => {
      await write('resume')(items, tx);
      if (items.includes(7) && fail) throw boom;
    };
    expect(await rejection(eachBatch(db.ds, 'resume', source, 3, handler))).to.equal(boom);
    expect(await written('resume')).to.deep.equal([1, 2, 3, 4, 5, 6]);
    expect(await status(db.ds, 'resume')).to.include({ done: false, cursor: 6, batches: 2, items: 6 });

    fail = false;
    calls.length = 0;
    const result = await eachBatch(db.ds, 'resume', source, 3, handler);
    expect(calls[0]).to.equal(6);
    expect(result).to.deep.equal({ batches: 2, items: 4, done: true, cursor: 10 });
    expect(await written('resume')).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(await status(db.ds, 'resume')).to.include({ done: true, batches: 4, items: 10, cursor: 10 });
  });

  it('returns at once for a done job without calling the source', async () => {
    const { source } = numbers(4);
    await eachBatch(db.ds, 'done-once', source, 2, write('done-once'));
    let called = false;
    const again = await eachBatch(
      db.ds,
      'done-once',
      () => {
        called = true;
        return { items: [1], next: null };
      },
      2,
      write('done-once'),
    );
    expect(called).to.equal(false);
    expect(again).to.deep.equal({ batches: 0, items: 0, done: true, cursor: 4 });
    expect(await status(db.ds, 'done-once')).to.include({ batches: 2, items: 4 });
  });

  it('lists a job whose first batch failed as not done with zero batches', async () => {
    const boom = new Error('first batch');
    const first = eachBatch(db.ds, 'first-fails', numbers(3).source, 2, () => {
      throw boom;
    });
    expect(await rejection(first)).to.equal(boom);
    const [job] = await list(db.ds, { prefix: 'first-fails' });
    expect(job).to.include({ name: 'first-fails', kind: 'batch', done: false, batches: 0, items: 0, cursor: null });
    expect(job.finishedAt).to.equal(null);
  });

  it('refuses a cursor that does not survive a JSON round trip and rolls that batch back', async () => {
    for (const [i, next] of [new Date(), undefined, 1n, Number.NaN, { a: new Map() }, [1, , 3]].entries()) {
      const name = `bad-cursor-${i}`;
      let handled = false;
      await expectCode(
        eachBatch(
          db.ds,
          name,
          () => ({ items: [1], next: next as never }),
          5,
          async (items, tx) => {
            handled = true;
            await write(name)(items, tx);
          },
        ),
        'NON_SERIALIZABLE',
      );
      expect(await written(name)).to.deep.equal([]);
      expect(await status(db.ds, name)).to.include({ batches: 0, done: false, cursor: null });
      expect(handled).to.equal(false);
    }
  });

  it('refuses a bad limit with INVALID_ARGUMENT before touching the database', async () => {
    for (const [i, limit] of [0, -1, 1.5, Number.NaN, Infinity, 2 ** 53, '10', null, true].entries()) {
      await expectCode(
        eachBatch(db.ds, `bad-limit-${i}`, numbers(3).source, limit as number, () => undefined),
        'INVALID_ARGUMENT',
      );
      expect(await status(db.ds, `bad-limit-${i}`)).to.equal(null);
    }
    await expectCode(
      eachBatch(db.ds, '', numbers(3).source, 1, () => undefined),
      'INVALID_ARGUMENT',
    );
  });

  it('counts this call only, while status has the totals and ms timestamps', async () => {
    const before = Date.now();
    const { source } = numbers(9);
    let stop = false;
    const handler = async (items: number[], tx: EntityManager) => {
      await write('totals')(items, tx);
      if (items.includes(4) && !stop) {
        stop = true;
        throw new Error('stop');
      }
    };
    await eachBatch(db.ds, 'totals', source, 3, handler).catch(() => undefined);
    const mid = await status(db.ds, 'totals');
    expect(mid).to.include({ batches: 1, items: 3, done: false });
    expect(mid!.finishedAt).to.equal(null);
    const result = await eachBatch(db.ds, 'totals', source, 3, handler);
    expect(result).to.include({ batches: 2, items: 6, done: true });
    const total = await status(db.ds, 'totals');
    expect(total).to.include({ batches: 3, items: 9, done: true });
    for (const time of [total!.startedAt, total!.updatedAt, total!.finishedAt]) {
      expect(time).to.be.a('number');
      expect(time).to.be.within(before - 1000, Date.now() + 1000);
    }
  });

  it('emits progress after each committed batch and stops cleanly on abort', async () => {
    const controller = new AbortController();
    const seen: number[] = [];
    const result = await eachBatch(db.ds, 'abortable', numbers(20).source, 2, write('abortable'), {
      signal: controller.signal,
      onProgress(progress) {
        seen.push(progress.batches);
        expect(progress.name).to.equal('abortable');
        expect(progress.items).to.equal(progress.batches * 2);
        if (progress.batches === 3) controller.abort();
      },
    });
    expect(seen).to.deep.equal([1, 2, 3]);
    expect(result).to.deep.equal({ batches: 3, items: 6, done: false, cursor: 6, stopped: 'signal' });
    expect(await written('abortable')).to.deep.equal([1, 2, 3, 4, 5, 6]);

    let called = false;
    const aborted = await eachBatch(
      db.ds,
      'abortable',
      () => {
        called = true;
        return { items: [], next: null };
      },
      2,
      () => undefined,
      { signal: AbortSignal.abort() },
    );
    expect(called).to.equal(false);
    expect(aborted).to.deep.equal({ batches: 0, items: 0, done: false, cursor: 6, stopped: 'signal' });
  });

  it('guards a job with its fingerprint, adopting the first one given', async () => {
    const { source } = numbers(10);
    let fail = true;
    const handler = (items: number[]) => {
      if (fail && items.includes(3)) throw new Error('stop');
    };
    await eachBatch(db.ds, 'fp', source, 2, handler).catch(() => undefined);
    await eachBatch(db.ds, 'fp', source, 2, handler, { fingerprint: 'file-a' }).catch(() => undefined);
    await expectCode(eachBatch(db.ds, 'fp', source, 2, handler, { fingerprint: 'file-b' }), 'FINGERPRINT_MISMATCH');
    fail = false;
    const result = await eachBatch(db.ds, 'fp', source, 2, handler, { fingerprint: 'file-a' });
    expect(result.done).to.equal(true);
  });

  it('reset forgets a job so it starts over, and list filters by kind, done and a literal prefix', async () => {
    const { source, calls } = numbers(2);
    await eachBatch(db.ds, 'p%_x/1', source, 5, () => undefined);
    await eachBatch(
      db.ds,
      'pq_x/2',
      () => ({ items: [1], next: 1 }),
      5,
      () => {
        throw new Error('x');
      },
    ).catch(() => undefined);
    expect((await list(db.ds, { prefix: 'p%_' })).map((s) => s.name)).to.deep.equal(['p%_x/1']);
    expect((await list(db.ds, { prefix: 'p', done: false })).map((s) => s.name)).to.include('pq_x/2');
    expect((await list(db.ds, { prefix: 'p', done: true })).map((s) => s.name)).to.not.include('pq_x/2');
    expect((await list(db.ds, { kind: 'step' })).map((s) => s.name)).to.not.include('p%_x/1');
    expect(await reset(db.ds, 'p%_x/1')).to.equal(true);
    expect(await reset(db.ds, 'p%_x/1')).to.equal(false);
    expect(await status(db.ds, 'p%_x/1')).to.equal(null);
    calls.length = 0;
    await eachBatch(db.ds, 'p%_x/1', source, 5, () => undefined);
    expect(calls[0]).to.equal(null);
    await expectCode(list(db.ds, { kind: 'nope' as 'step' }), 'INVALID_ARGUMENT');
  });

  // Ordered through a DataSource with one connection (SQLite: one anyway, which the library's own
  // transactions queue for in call order; servers: a pool of one): the reset asks for it while
  // batch 2 holds it, so it runs once batch 2 commits, and batch 3 waits its turn behind it.
  it('reset between two batches of a running job: the run stops with INVALID_ARGUMENT, no batch applied twice, the job forgotten', async () => {
    const job = 'reset-while-running';
    const { source, calls } = numbers(10);
    const single = new DataSource({ ...dataSourceOptionsFromUrl(db.url), entities: checkpointEntities, poolSize: 1 } as DataSourceOptions);
    await single.initialize();
    try {
      let inBatch2!: () => void;
      const batch2 = new Promise<void>((resolve) => (inBatch2 = resolve));
      let resetQueued!: () => void;
      const queued = new Promise<void>((resolve) => (resetQueued = resolve));
      const run = eachBatch(single, job, source, 2, async (items: number[], tx: EntityManager) => {
        await write(job)(items, tx);
        if (items.includes(4)) {
          inBatch2();
          await queued;
        }
      });
      await batch2;
      // Called here, outside the handler: from inside it the reset would join batch 2's transaction.
      const resetting = reset(single, job);
      while (connectionWaiters(single) < 1 && DRIVER !== 'sqlite') await pause(1);
      resetQueued();

      await expectCode(run, 'INVALID_ARGUMENT');
      expect(await resetting).to.equal(true);
      expect(calls, 'the source was asked for batch 3').to.deep.equal([null, 2]);
      expect(await written(job)).to.deep.equal([1, 2, 3, 4]);
      expect(await status(db.ds, job), 'the stopped run recreated the job').to.equal(null);

      // Forgotten, not undone: once the caller removes the job's writes, a rerun starts over.
      await db.ds.query(sql('DELETE FROM written WHERE job = ?'), [job]);
      calls.length = 0;
      expect(await eachBatch(single, job, source, 2, write(job))).to.deep.equal({ batches: 5, items: 10, done: true, cursor: 10 });
      expect(calls[0]).to.equal(null);
      expect(await written(job)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    } finally {
      await single.destroy();
    }
  });

  if (DRIVER === 'postgres') {
    it("costs two round trips a batch on PostgreSQL: the handler's statement, and the cursor update + COMMIT + next BEGIN + its lock", async () => {
      const job = 'round-trips';
      const counted = await db.open();
      try {
        const counter = countRoundTrips(counted);
        const { source } = numbers(200, { lastPageNull: true });
        const insertBatch = async (items: number[], tx: EntityManager) => {
          await tx.query(`INSERT INTO written (job, n) SELECT $1, unnest($2::int[])`, [job, items]);
        };
        expect(await eachBatch(counted, job, source, 10, insertBatch)).to.deep.equal({ batches: 20, items: 200, done: true, cursor: null });
        // TypeORM's transactions would take five a batch (BEGIN, the lock, the insert, the update,
        // COMMIT): 104 here. Besides the batches (47 here): the job row's creation (4), the first
        // BEGIN and lock, the last batch's own update.
        expect(counter.sent).to.be.at.most(2 * 20 + 7);
        expect(await written(job)).to.deep.equal(Array.from({ length: 200 }, (_, i) => i + 1));
        expect(await status(counted, job)).to.include({ done: true, batches: 20, items: 200 });
      } finally {
        await counted.destroy();
      }
    });

    it('two runners of one job take turns on PostgreSQL: a lock sent with a COMMIT that finds the job row moved on is rolled back and the row re-read', async () => {
      // Whether the waiting runner gets the row before the committing one's next lock is the
      // scheduler's choice (a busy machine may let one runner win every time): rounds until both
      // ran batches in one; every round must write each row once.
      let bothRan = false;
      for (let round = 1; round <= 8 && !bothRan; round++) {
        const job = `two-runners-${round}`;
        const { source } = numbers(200, { lastPageNull: true });
        let first = true;
        const handler = async (items: number[], tx: EntityManager) => {
          if (first) {
            // Whichever runner is first holds the job row until the other waits for its lock.
            first = false;
            const waiting = "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'";
            while ((await count(db.ds, waiting)) < 1) await pause(1);
          }
          await write(job)(items, tx);
        };
        const [a, b] = await Promise.all([eachBatch(db.ds, job, source, 5, handler), eachBatch(db.ds, job, source, 5, handler)]);
        expect(a.batches + b.batches).to.equal(40);
        expect(await written(job)).to.deep.equal(Array.from({ length: 200 }, (_, i) => i + 1));
        expect(await status(db.ds, job)).to.include({ done: true, batches: 40, items: 200 });
        bothRan = a.batches > 0 && b.batches > 0;
      }
      expect(bothRan, 'both runners ran batches in one round').to.equal(true);
    });
  }

  if (DRIVER === 'mysql') {
    it('costs three round trips a batch on MySQL/MariaDB, as a hand-written loop (START, insert, COMMIT): the guarded cursor update that locks the job row, the insert, COMMIT AND CHAIN', async () => {
      const job = 'round-trips';
      const counted = await db.open();
      try {
        const counter = countRoundTrips(counted);
        const { source } = numbers(200, { lastPageNull: true });
        const insertBatch = async (items: number[], tx: EntityManager) => {
          await tx.query(
            `INSERT INTO written (job, n) VALUES ${items.map(() => '(?, ?)').join(', ')}`,
            items.flatMap((n) => [job, n]),
          );
        };
        expect(await eachBatch(counted, job, source, 10, insertBatch)).to.deep.equal({ batches: 20, items: 200, done: true, cursor: null });
        // TypeORM's transactions took six a batch (SET TRANSACTION, START TRANSACTION, the lock, the
        // insert, the update, COMMIT): 125 here. Besides the batches: the job row's creation (5), the
        // first batch's SET TRANSACTION, START TRANSACTION and lock.
        expect(counter.sent).to.be.at.most(3 * 20 + 8);
        expect(await written(job)).to.deep.equal(Array.from({ length: 200 }, (_, i) => i + 1));
        expect(await status(counted, job)).to.include({ done: true, batches: 20, items: 200 });
      } finally {
        await counted.destroy();
      }
    });

    it("two runners of one job on MariaDB: a batch begun without the job row's lock finds the row moved before its handler runs, and runs again under the lock", async () => {
      // Runner A reads batch 2's page in the transaction its batch-1 COMMIT AND CHAIN began, without
      // the job row's lock; runner B starts then and runs batch 2 under the lock; A's guarded cursor
      // update waits for B's commit and finds the row moved on, before A's handler has run.
      const job = 'race-guard';
      await db.ds.query(
        'CREATE TABLE written_by (job varchar(64) NOT NULL, n integer NOT NULL, runner varchar(8) NOT NULL, PRIMARY KEY (job, n))',
      );
      const lockWaits = () => count(db.ds, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'");
      const insert = (runner: string, firsts: number[]) => async (items: number[], tx: EntityManager) => {
        firsts.push(items[0]);
        await tx.query(
          `INSERT INTO written_by (job, n, runner) VALUES ${items.map(() => '(?, ?, ?)').join(', ')}`,
          items.flatMap((n) => [job, n, runner]),
        );
      };
      const { source: numbersSource } = numbers(60, { lastPageNull: true });
      const recorded =
        (cursors: unknown[], before?: () => Promise<void>): Source<number> =>
        async (cursor, limit, tx) => {
          cursors.push(cursor);
          await before?.();
          return numbersSource(cursor, limit, tx);
        };
      const [aCursors, bCursors, aFirsts, bFirsts]: [unknown[], unknown[], number[], number[]] = [[], [], [], []];
      let aInBatch2!: () => void;
      const aReadsBatch2 = new Promise<void>((resolve) => (aInBatch2 = resolve));
      const aSource = recorded(aCursors, async () => {
        if (aCursors.length !== 2) return;
        aInBatch2();
        // Until B's handler runs batch 2, B holding the job row (or, were A holding the job row
        // here, until B waits for it). Waiting only for B's page read raced A's guarded update.
        while (bFirsts.length === 0 && (await lockWaits()) < 1) await pause(1);
      });
      const a = eachBatch(db.ds, job, aSource, 5, insert('a', aFirsts));
      await aReadsBatch2;
      // Started here, outside A's transaction's async context (inside it, B would join it).
      const b = eachBatch(db.ds, job, recorded(bCursors), 5, insert('b', bFirsts));
      const [ra, rb] = await Promise.all([a, b]);
      expect(aCursors.slice(0, 2), "A read batch 2's page").to.deep.equal([null, 5]);
      expect(bFirsts[0], 'B ran batch 2').to.equal(6);
      expect(aFirsts, "A's handler never saw batch 2").to.not.include(6);
      expect(ra.batches + rb.batches).to.equal(12);
      const rows = (await db.ds.query('SELECT n FROM written_by WHERE job = ? ORDER BY n', [job])) as { n: number }[];
      expect(rows.map((r) => Number(r.n))).to.deep.equal(Array.from({ length: 60 }, (_, i) => i + 1));
      expect(await status(db.ds, job)).to.include({ done: true, batches: 12, items: 60 });
    });
  }

  it('keeps the database unchanged when the source returns a malformed page', async () => {
    await expectCode(
      eachBatch(
        db.ds,
        'malformed',
        () => ({ rows: [] }) as never,
        5,
        () => undefined,
      ),
      'INVALID_ARGUMENT',
    );
    expect(await status(db.ds, 'malformed')).to.include({ batches: 0, done: false });
    expect(await count(db.ds, sql("SELECT COUNT(*) FROM written WHERE job = 'malformed'"))).to.equal(0);
  });
});
