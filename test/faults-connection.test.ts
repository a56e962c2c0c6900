// Faults users meet while work runs — on PostgreSQL and MySQL the connections are killed
// (pg_terminate_backend / KILL CONNECTION on this test database's victim connections, at random
// moments); on SQLite another process takes the write lock for random stretches while the workers
// use a short busy timeout.
// Every failure must be typed (or a user callback's error, passed through unchanged); after
// rerunning, every row and file is applied exactly once; nothing leaks.
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DataSource, EntityManager } from 'typeorm';
import { CheckpointManager, eachBatch, importFile, sqlSource, status, values } from '../src';
import { type Child, kill, startChild } from './support/child';
import { count, DRIVER, sql, useTestDatabase } from './support/database';
import {
  allowVictims,
  codesOf,
  expectNoLeaks,
  expectTypedOrUser,
  openFilesUnder,
  openVictim,
  pause,
  terminateVictims,
  untilVictimsGone,
} from './support/fault-checks';

const HOLDER = 'test/fixtures/faults-lock-holder.ts';
const CLAIM_WORKER = 'test/fixtures/faults-claim-worker.ts';
// SQLite workers give up on the lock quickly, so a held lock surfaces as SQLITE_BUSY failures.
const BUSY_MS = 20;
// Rows per batch: SQLite in process is fast, so smaller batches keep the job running while faults hit.
const LIMIT = DRIVER === 'sqlite' ? 5 : 10;

/** Injects faults at random moments until it has injected `max` or is stopped; resolves with how many. */
interface Faults {
  stop(): Promise<number>;
}

/** How many faults, how far apart (ms), and (PostgreSQL, MySQL) whether each kills one connection or all. */
interface FaultPlan {
  max: number;
  gap: [number, number];
  which: 'all' | 'one';
  /**
   * SQLite: the first lock is held until this settles — the first failure the work reports — so
   * the work surely meets a fault however loaded the machine is (a held stretch of fixed length
   * can end before a slowed worker's busy timeout and retries run out).
   */
  firstHeldUntil: Promise<unknown>;
}

/** A promise the first call of `settle` resolves (later calls do nothing): the work's first failure. */
function firstFailure(): { seen: Promise<void>; settle(): void } {
  let settle!: () => void;
  const seen = new Promise<void>((resolve) => (settle = resolve));
  return { seen, settle };
}

function random(min: number, max: number): number {
  return min + Math.floor(Math.random() * (max - min + 1));
}

/** PostgreSQL, MySQL: kills victim connections of the database at random moments. */
function killConnections(admin: DataSource, plan: FaultPlan): Faults {
  let stopped = false;
  let injected = 0;
  const loop = (async () => {
    while (!stopped && injected < plan.max) {
      await pause(random(...plan.gap));
      injected += await terminateVictims(admin, plan.which);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return injected;
    },
  };
}

/**
 * SQLite: another process takes the write lock for random stretches (20–150 ms) again and again.
 * The first stretch starts before this resolves and lasts until `plan.firstHeldUntil` settles, so
 * the work under test meets at least one failure.
 */
async function holdWriteLock(holder: Child, plan: FaultPlan): Promise<Faults> {
  let stopped = false;
  let injected = 0;
  let lockCount = Number(holder.lines.filter((line) => line.startsWith('locked ')).length);
  const lock = async () => {
    const n = ++lockCount;
    holder.send('lock');
    await holder.waitForLine((line) => line === `locked ${n}`);
    return n;
  };
  const release = async (n: number) => {
    holder.send('release');
    await holder.waitForLine((line) => line === `released ${n}`);
    injected++;
  };
  const first = await lock();
  const loop = (async () => {
    await plan.firstHeldUntil;
    await release(first);
    while (!stopped && injected < plan.max) {
      await pause(random(...plan.gap));
      const n = await lock();
      await pause(random(20, 150));
      await release(n);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return injected;
    },
  };
}

/**
 * The code(s) a fault may surface as, and what the driver error underneath must say. Returns the
 * outcome with the driver code under it ("DATABASE_ERROR/57P01"; "/none" for an error without
 * one, such as pg's "Connection terminated unexpectedly"), to show which kinds the faults hit.
 */
function expectFaultError(error: unknown, userErrors: Set<unknown>, codes: string[]): string {
  const kind = expectTypedOrUser(error, userErrors, codes);
  if (kind === 'user') return kind;
  expect((error as Error).cause, 'a typed database error without the driver error as cause').to.not.equal(undefined);
  // On SQLite the only fault is the lock: the cause is SQLITE_BUSY, after the bounded retries.
  if (DRIVER === 'sqlite')
    expect(
      codesOf(error).some((c) => c.startsWith('SQLITE_BUSY')),
      String(error),
    ).to.equal(true);
  return `${kind}/${codesOf(error).filter((c) => c !== kind)[0] ?? 'none'}`;
}

const faultKind = DRIVER === 'sqlite' ? 'write lock held by another process' : 'connections killed';
describe(`faults: ${faultKind} while work runs`, function () {
  let holder: Child | undefined;
  let dir: string;

  // Registered before the database's hooks: mocha runs `after` hooks in order, so the holder exits first.
  after(async () => {
    if (holder) {
      holder.send('exit');
      await kill(holder);
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const db = useTestDatabase('faults_connection');
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ck-faults-'));
    await db.ds.query('CREATE TABLE fault_src (id integer PRIMARY KEY, payload varchar(40) NOT NULL)');
    await db.ds.query('CREATE TABLE fault_dst (job varchar(64) NOT NULL, source_id integer NOT NULL)');
    await db.ds.query('CREATE TABLE fault_rows (batch varchar(64) NOT NULL, id varchar(64) NOT NULL, value bigint NOT NULL)');
    await db.ds.query(
      'CREATE TABLE fault_effects (file_url varchar(768) NOT NULL, worker varchar(255) NOT NULL, claim_token bigint NOT NULL)',
    );
    const ids = Array.from({ length: 3000 }, (_, i) => i + 1 + Math.floor(i / 5));
    for (let start = 0; start < ids.length; start += 500) {
      const chunk = ids.slice(start, start + 500);
      await db.ds.query(
        sql(`INSERT INTO fault_src (id, payload) VALUES ${chunk.map(() => '(?, ?)').join(', ')}`),
        chunk.flatMap((id) => [id, `row ${id}`]),
      );
    }
    if (DRIVER === 'sqlite') {
      holder = startChild(HOLDER, [db.url.replace(/^sqlite:/, '')]);
      await holder.waitForLine((line) => line === 'ready');
    }
    await allowVictims(db.ds);
  });

  async function startFaults(plan: FaultPlan): Promise<Faults> {
    return DRIVER === 'sqlite' ? holdWriteLock(holder!, plan) : killConnections(db.ds, plan);
  }

  it('eachBatch (in process): each failed run is typed, reruns resume, every row is applied exactly once', async () => {
    const victim = await openVictim(db.url, { busyTimeoutMs: BUSY_MS });
    const job = 'copy-under-faults';
    const userErrors = new Set<unknown>();
    const outcomes: string[] = [];
    try {
      const source = await sqlSource(victim, 'fault_src', 'id');
      const handler = async (items: Record<string, unknown>[], tx: EntityManager) => {
        try {
          await tx.query(
            sql(`INSERT INTO fault_dst (job, source_id) VALUES ${items.map(() => '(?, ?)').join(', ')}`),
            items.flatMap((item) => [job, item.id]),
          );
        } catch (error) {
          userErrors.add(error);
          throw error;
        }
      };
      const failure = firstFailure();
      const faults = await startFaults({ max: 25, gap: [5, 40], which: 'all', firstHeldUntil: failure.seen });
      let done = false;
      while (!done) {
        try {
          done = (await eachBatch(victim, job, source, LIMIT, handler)).done;
        } catch (error) {
          outcomes.push(expectFaultError(error, userErrors, ['DATABASE_ERROR']));
          failure.settle();
          await pause(1); // as a worker would before trying again
        }
      }
      const injected = await faults.stop();
      console.log(`      ${DRIVER}: ${injected} faults injected, failed runs: ${JSON.stringify(tally(outcomes))}`);
      expect(injected).to.be.greaterThan(0);
      expect(outcomes.length, 'no fault ever hit a run').to.be.greaterThan(0);

      expect(await count(db.ds, sql('SELECT COUNT(*) FROM fault_dst WHERE job = ?'), [job])).to.equal(3000);
      expect(await count(db.ds, sql('SELECT COUNT(DISTINCT source_id) FROM fault_dst WHERE job = ?'), [job])).to.equal(3000);
      expect(await status(db.ds, job)).to.include({ done: true, items: 3000, batches: 3000 / LIMIT });
      await expectNoLeaks(victim, db.ds);
    } finally {
      await victim.destroy();
    }
  });

  it('importFile (in process, own handler and built-in table): typed failures, every row exactly once, no file left open', async () => {
    const victim = await openVictim(db.url, { busyTimeoutMs: BUSY_MS });
    const rows = Array.from({ length: 4000 }, (_, i) => ({ id: `r${i}`, value: i * 7 - 3000 }));
    const path = join(dir, 'rows.ndjson');
    writeFileSync(path, rows.map((row) => JSON.stringify(row)).join('\n'));
    const userErrors = new Set<unknown>();
    const outcomes: string[] = [];
    try {
      const handler = async (chunk: { id: string; value: number }[], tx: EntityManager) => {
        try {
          await tx.query(
            sql(`INSERT INTO fault_rows (batch, id, value) VALUES ${chunk.map(() => '(?, ?, ?)').join(', ')}`),
            chunk.flatMap((row) => ['own', row.id, row.value]),
          );
        } catch (error) {
          userErrors.add(error);
          throw error;
        }
      };
      const failure = firstFailure();
      const faults = await startFaults({ max: 25, gap: [5, 40], which: 'all', firstHeldUntil: failure.seen });
      for (const [batch, options] of [
        ['own', { handler }],
        ['built-in', {}],
      ] as const) {
        let done = false;
        while (!done) {
          try {
            done = (await importFile(victim, batch, path, { size: 10, ...options })).done;
          } catch (error) {
            outcomes.push(expectFaultError(error, userErrors, ['DATABASE_ERROR']));
            failure.settle();
            await pause(1);
          }
        }
      }
      const injected = await faults.stop();
      console.log(`      ${DRIVER}: ${injected} faults injected, failed runs: ${JSON.stringify(tally(outcomes))}`);
      expect(outcomes.length, 'no fault ever hit an import').to.be.greaterThan(0);

      expect(await count(db.ds, "SELECT COUNT(*) FROM fault_rows WHERE batch = 'own'")).to.equal(rows.length);
      expect(await count(db.ds, "SELECT COUNT(DISTINCT id) FROM fault_rows WHERE batch = 'own'")).to.equal(rows.length);
      expect(await count(db.ds, "SELECT SUM(value) FROM fault_rows WHERE batch = 'own'")).to.equal(
        rows.reduce((sum, row) => sum + row.value, 0),
      );
      const stored = await values(db.ds, 'built-in');
      expect(stored).to.have.length(rows.length);
      expect(new Map(stored)).to.deep.equal(new Map(rows.map((row) => [row.id, row.value])));
      for (const batch of ['own', 'built-in']) {
        expect(await importFile(db.ds, batch, path, { size: 10 })).to.include({ done: true, rows: 0, nextIndex: rows.length });
      }
      expect(openFilesUnder(dir) ?? 0, 'an import left its file open').to.equal(0);
      await expectNoLeaks(victim, db.ds);
    } finally {
      await victim.destroy();
    }
  });

  const WORKERS = DRIVER === 'sqlite' ? 4 : 8;
  const FILES = DRIVER === 'sqlite' ? 120 : 400;
  it(`${WORKERS} claim workers (child processes, claimNext + processFile): typed failures, every file completed once with one effect`, async () => {
    const parent = new CheckpointManager(db.ds, { maxRetries: 1000 });
    await parent.register(
      Array.from({ length: FILES }, (_, i) => ({
        fileUrl: `s3://faults/${String(i).padStart(4, '0')}.csv`,
        fileType: 'queue',
        fileTimestamp: new Date(i),
      })),
    );
    const workers: Child[] = [];
    let faults: Faults | undefined;
    try {
      for (let w = 0; w < WORKERS; w++) workers.push(startChild(CLAIM_WORKER, [db.url, `w${w}`, String(FILES), '1000', String(BUSY_MS)]));
      await Promise.all(workers.map((worker) => worker.waitForLine((line) => line === 'waiting')));
      // Faults first, then the go: on SQLite the first lock is held until a worker has failed on it,
      // so the work cannot finish before any fault reaches it, however loaded the machine is.
      const firstError = Promise.race(workers.map((worker) => worker.waitForLine((line) => line.startsWith('error ')))).catch(
        () => undefined,
      );
      faults = await startFaults({ max: 40, gap: [10, 60], which: 'one', firstHeldUntil: firstError });
      for (const worker of workers) worker.send('go');
      // Faults stop once every worker has finished its work (not during its own shutdown).
      await Promise.all(workers.map((worker) => worker.waitForLine((line) => line.startsWith('result '))));
      const injected = await faults.stop();
      faults = undefined;
      const exits = await Promise.all(workers.map((worker) => worker.exited));
      exits.forEach((exit, w) =>
        expect(
          exit.code,
          `worker ${w}: ${workers[w].lines.filter((l) => l.startsWith('untyped')).join('\n')}\n${workers[w].stderr()}`,
        ).to.equal(0),
      );
      const errors = workers.flatMap((worker) => worker.lines.filter((line) => line.startsWith('error ')).map((line) => line.slice(6)));
      console.log(`      ${DRIVER}: ${injected} faults injected, worker failures: ${JSON.stringify(tally(errors))}`);
      expect(errors.length, 'no fault ever hit a worker').to.be.greaterThan(0);

      const summary = await parent.summary();
      expect(summary).to.include({ completed: FILES, pending: 0, processing: 0, failed: 0, deadLetters: 0, recordsPersisted: 2 * FILES });
      expect(await count(db.ds, 'SELECT COUNT(*) FROM fault_effects')).to.equal(2 * FILES);
      expect(await count(db.ds, 'SELECT COUNT(DISTINCT file_url) FROM fault_effects')).to.equal(2 * FILES);
      // Each effect committed with the completion, under the claim that completed the file.
      expect(
        await count(
          db.ds,
          "SELECT COUNT(*) FROM fault_effects e JOIN file_checkpoints f ON f.file_url = e.file_url AND f.claim_token = e.claim_token AND f.status = 'completed'",
        ),
      ).to.equal(FILES);
      await untilVictimsGone(db.ds);
      await expectNoLeaks(db.ds, db.ds);
    } finally {
      if (faults) await faults.stop();
      await Promise.all(workers.map(kill));
    }
  });
});

function tally(outcomes: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const outcome of outcomes) counts[outcome] = (counts[outcome] ?? 0) + 1;
  return counts;
}
