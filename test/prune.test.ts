import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Test, type TestingModule } from '@nestjs/testing';
import { TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
import { expect } from 'chai';
import type { DataSource } from 'typeorm';
import {
  CheckpointJob,
  CheckpointManager,
  CheckpointPartition,
  checkpointMigrations,
  dataSourceOptionsFromUrl,
  eachBatch,
  FileCheckpoint,
  ImportItem,
  ImportJob,
  ImportReject,
  prune,
  type PruneResult,
  runInTransaction,
  status,
  step,
} from '../src';
import { releaseLease, takeLease } from '../src/control/lease';
import { CheckpointModule, CheckpointService } from '../src/nestjs';
import { Leases1765670400000 } from '../migrations/1765670400000-Leases';
import { cliJson } from './support/cli-run';
import { count, DRIVER, q, sql, useTestDatabase } from './support/database';
import { expectCode } from './support/expect-code';
import { SqlLog } from './support/sql-log';

const DAY = 86_400_000;
const THIRTY_DAYS = 30 * DAY;

function urlHash(url: string): string {
  return createHash('sha256').update(url, 'utf8').digest('hex');
}

/** Rows of every checkpoint table and the application's table, in a stable order: what must not change. */
async function snapshot(ds: DataSource): Promise<Record<string, string[]>> {
  const tables: [string, string][] = [
    ['checkpoint_jobs', 'name'],
    ['checkpoint_partitions', 'job_name, partition_index'],
    ['checkpoint_imports', 'id'],
    ['checkpoint_import_rejects', 'batch, row_index'],
    ['checkpoint_import_items', 'batch, id'],
    ['file_checkpoints', 'url_hash'],
    ['prune_app_rows', 'id'],
  ];
  const result: Record<string, string[]> = {};
  for (const [table, order] of tables) {
    const rows = (await ds.query(`SELECT * FROM ${q(table)} ORDER BY ${order}`)) as Record<string, unknown>[];
    result[table] = rows.map((row) => JSON.stringify(Object.values(row).map((value) => (value === null ? null : String(value)))));
  }
  return result;
}

async function names(ds: DataSource, table: string, column: string): Promise<string[]> {
  const rows = (await ds.query(`SELECT ${q(column)} AS k FROM ${q(table)} ORDER BY ${q(column)}`)) as { k: string }[];
  return rows.map((row) => row.k);
}

describe(`prune (${DRIVER})`, function () {
  const database = useTestDatabase('prune');
  let ds: DataSource;
  const now = Date.now();
  const OLD = now - 40 * DAY;
  const NEW = now - DAY;

  before(async () => {
    ds = database.ds;
    await ds.query(`CREATE TABLE ${q('prune_app_rows')} (${q('id')} integer PRIMARY KEY, ${q('label')} varchar(64))`);
  });

  async function clear(): Promise<void> {
    for (const table of [
      'checkpoint_partitions',
      'checkpoint_jobs',
      'checkpoint_import_rejects',
      'checkpoint_import_items',
      'checkpoint_imports',
      'file_checkpoints',
      'prune_app_rows',
    ]) {
      await ds.query(`DELETE FROM ${q(table)}`);
    }
  }

  function job(name: string, kind: string, done: boolean, state: string, updatedAt: number): Partial<CheckpointJob> {
    return { name, kind, done, state, startedAt: updatedAt - 1000, updatedAt, finishedAt: done ? updatedAt : null, batches: 1, items: 1 };
  }

  function ranges(jobName: string, n: number, status = 'completed'): Partial<CheckpointPartition>[] {
    return Array.from({ length: n }, (_, i) => ({ jobName, partitionIndex: i, status, updatedAt: OLD }));
  }

  function file(url: string, status: string, times: { created: number; started?: number; completed?: number }): Partial<FileCheckpoint> {
    return {
      urlHash: urlHash(url),
      fileUrl: url,
      fileType: 'csv',
      fileTimestamp: new Date(times.created),
      status: status as FileCheckpoint['status'],
      createdAt: new Date(times.created),
      startedAt: times.started === undefined ? null : new Date(times.started),
      completedAt: times.completed === undefined ? null : new Date(times.completed),
    };
  }

  async function insertMany<T extends object>(entity: new () => T, rows: Partial<T>[]): Promise<void> {
    for (let i = 0; i < rows.length; i += 200) await ds.getRepository(entity).insert(rows.slice(i, i + 200) as never);
  }

  /** Finished, cancelled, active, paused, recent and old rows of every kind, plus the application's own rows. */
  async function seed(): Promise<void> {
    await clear();
    await insertMany(CheckpointJob, [
      job('batch-done-old', 'batch', true, 'active', OLD),
      job('batch-cancelled-old', 'batch', false, 'cancelled', OLD),
      job('part-done-old', 'partitioned', true, 'active', OLD),
      job('part-cancelled-old', 'partitioned', false, 'cancelled', OLD),
      job('batch-active-old', 'batch', false, 'active', OLD),
      job('batch-paused-old', 'batch', false, 'paused', OLD),
      job('part-paused-old', 'partitioned', false, 'paused', OLD),
      job('batch-done-new', 'batch', true, 'active', NEW),
      job('step-old', 'step', true, 'active', OLD),
      job('step-new', 'step', true, 'active', NEW),
    ]);
    await insertMany(CheckpointPartition, [
      ...ranges('part-done-old', 3),
      ...ranges('part-cancelled-old', 2, 'processing'),
      ...ranges('part-paused-old', 2, 'pending'),
    ]);
    const batch = (id: string, nextIndex: number, totalRows: number | null, state: string, updatedAt: number): Partial<ImportJob> => ({
      id,
      digest: 'd'.repeat(64),
      nextIndex,
      totalRows,
      state,
      updatedAt,
      startedAt: updatedAt,
    });
    await insertMany(ImportJob, [
      batch('imp-done-old', 10, 10, 'active', OLD),
      batch('imp-cancelled-old', 5, null, 'cancelled', OLD),
      batch('imp-active-old', 5, 10, 'active', OLD),
      batch('imp-paused-old', 5, 10, 'paused', OLD),
      batch('imp-done-new', 10, 10, 'active', NEW),
    ]);
    const reject = (batchId: string, rowIndex: number): Partial<ImportReject> => ({ batch: batchId, rowIndex, reason: 'bad', raw: 'x' });
    await insertMany(ImportReject, [
      reject('imp-done-old', 1),
      reject('imp-done-old', 2),
      reject('imp-done-old', 7),
      reject('imp-cancelled-old', 3),
      reject('imp-active-old', 4),
      reject('imp-paused-old', 4),
    ]);
    await insertMany(ImportItem, [
      { batch: 'imp-done-old', id: 'a', value: 1 },
      { batch: 'imp-cancelled-old', id: 'b', value: 2 },
    ]);
    await insertMany(FileCheckpoint, [
      file('s3://b/completed-old-1', 'completed', { created: OLD, started: OLD, completed: OLD }),
      file('s3://b/completed-old-2', 'completed', { created: OLD, started: OLD, completed: OLD + 1 }),
      file('s3://b/completed-old-3', 'completed', { created: OLD, started: OLD, completed: OLD + 2 }),
      file('s3://b/completed-new', 'completed', { created: OLD, started: NEW, completed: NEW }),
      file('s3://b/cancelled-old', 'cancelled', { created: OLD, started: OLD }),
      file('s3://b/cancelled-new', 'cancelled', { created: OLD, started: NEW }),
      file('s3://b/pending-old', 'pending', { created: OLD }),
      file('s3://b/failed-old', 'failed', { created: OLD, started: OLD }),
      file('s3://b/processing-old', 'processing', { created: OLD, started: OLD }),
    ]);
    await ds.query(sql(`INSERT INTO ${q('prune_app_rows')} (${q('id')}, ${q('label')}) VALUES (?, ?), (?, ?)`), [1, 'kept', 2, 'kept too']);
  }

  const EXPECTED_DEFAULT = { jobs: 4, ranges: 5, imports: 2, rejects: 4, files: 4, steps: 0 };

  function counts(result: PruneResult): Record<string, number> {
    const { jobs, ranges: r, imports, rejects, files, steps } = result;
    return { jobs, ranges: r, imports, rejects, files, steps };
  }

  it('deletes finished and cancelled jobs with their ranges, finished imports with their rejects, completed and cancelled files older than the cut-off', async () => {
    await seed();
    const itemsBefore = (await snapshot(ds)).checkpoint_import_items;
    const result = await prune(ds, { olderThan: THIRTY_DAYS });
    expect(counts(result)).to.deep.equal(EXPECTED_DEFAULT);
    expect(result.dryRun).to.equal(false);
    expect(result.before).to.be.within(now - THIRTY_DAYS - 1, Date.now() - THIRTY_DAYS);

    expect(await names(ds, 'checkpoint_jobs', 'name')).to.deep.equal([
      'batch-active-old',
      'batch-done-new',
      'batch-paused-old',
      'part-paused-old',
      'step-new',
      'step-old',
    ]);
    expect(await count(ds, `SELECT COUNT(*) FROM ${q('checkpoint_partitions')}`)).to.equal(2);
    expect(
      await count(ds, sql(`SELECT COUNT(*) FROM ${q('checkpoint_partitions')} WHERE ${q('job_name')} = ?`), ['part-paused-old']),
    ).to.equal(2);
    expect(await names(ds, 'checkpoint_imports', 'id')).to.deep.equal(['imp-active-old', 'imp-done-new', 'imp-paused-old']);
    expect(await names(ds, 'checkpoint_import_rejects', 'batch')).to.deep.equal(['imp-active-old', 'imp-paused-old']);
    expect(await names(ds, 'file_checkpoints', 'file_url')).to.deep.equal([
      's3://b/cancelled-new',
      's3://b/completed-new',
      's3://b/failed-old',
      's3://b/pending-old',
      's3://b/processing-old',
    ]);
    const after = await snapshot(ds);
    expect(after.checkpoint_import_items, 'checkpoint_import_items').to.deep.equal(itemsBefore);
    expect(after.prune_app_rows).to.have.length(2);

    // Nothing older is left: a second run deletes nothing.
    expect(counts(await prune(ds, { olderThan: THIRTY_DAYS }))).to.deep.equal({
      jobs: 0,
      ranges: 0,
      imports: 0,
      rejects: 0,
      files: 0,
      steps: 0,
    });
  });

  it('dryRun deletes nothing and reports the counts a real run then deletes', async () => {
    await seed();
    const before = await snapshot(ds);
    const dry = await prune(ds, { olderThan: THIRTY_DAYS, dryRun: true });
    expect(dry.dryRun).to.equal(true);
    expect(counts(dry)).to.deep.equal(EXPECTED_DEFAULT);
    expect(await snapshot(ds)).to.deep.equal(before);
    const dryWithSteps = await prune(ds, { olderThan: THIRTY_DAYS, kinds: ['jobs', 'imports', 'files', 'steps'], dryRun: true });
    expect(dryWithSteps.steps).to.equal(1);
    expect(await snapshot(ds)).to.deep.equal(before);
    expect(counts(await prune(ds, { olderThan: THIRTY_DAYS }))).to.deep.equal(counts(dry));
  });

  it('deletes steps only when named, and only the kinds named', async () => {
    await seed();
    const before = await snapshot(ds);
    const steps = await prune(ds, { olderThan: THIRTY_DAYS, kinds: ['steps'] });
    expect(counts(steps)).to.deep.equal({ jobs: 0, ranges: 0, imports: 0, rejects: 0, files: 0, steps: 1 });
    expect(await status(ds, 'step-old')).to.equal(null);
    expect(await status(ds, 'step-new')).to.not.equal(null);
    const after = await snapshot(ds);
    expect(after.checkpoint_jobs).to.have.length(before.checkpoint_jobs.length - 1);
    expect({ ...after, checkpoint_jobs: [] }).to.deep.equal({ ...before, checkpoint_jobs: [] });

    const files = await prune(ds, { olderThan: THIRTY_DAYS, kinds: ['files'] });
    expect(counts(files)).to.deep.equal({ jobs: 0, ranges: 0, imports: 0, rejects: 0, files: 4, steps: 0 });
    expect(await snapshot(ds)).to.deep.include({ checkpoint_jobs: after.checkpoint_jobs, checkpoint_imports: after.checkpoint_imports });
  });

  it('prunes what the library itself recorded: a finished batch job, a step, a completed file', async () => {
    await clear();
    await eachBatch(
      ds,
      'real-batch',
      (cursor) => ({ items: cursor === null ? [1, 2] : [], next: cursor === null ? 1 : null }),
      10,
      () => {},
    );
    await step(ds, 'real-step', () => 42);
    const manager = new CheckpointManager(ds);
    await manager.register([{ fileUrl: 's3://real/a.csv', fileType: 'csv', fileTimestamp: new Date() }]);
    expect(await manager.claimFile('s3://real/a.csv', 'csv', new Date())).to.equal(true);
    await manager.completeFile('s3://real/a.csv', { totalRows: 1, filteredRows: 0, persistedRows: 1, durationMs: 5 });
    expect((await status(ds, 'real-batch'))?.done).to.equal(true);
    await sleep(30);

    // Not older than an hour: nothing goes.
    expect(counts(await prune(ds, { olderThan: 3_600_000, kinds: ['jobs', 'files', 'steps'] }))).to.deep.equal({
      jobs: 0,
      ranges: 0,
      imports: 0,
      rejects: 0,
      files: 0,
      steps: 0,
    });
    const result = await prune(ds, { olderThan: 10, kinds: ['jobs', 'files', 'steps'] });
    expect(counts(result)).to.deep.equal({ jobs: 1, ranges: 0, imports: 0, rejects: 0, files: 1, steps: 1 });
    expect(await status(ds, 'real-batch')).to.equal(null);
    expect(await manager.get('s3://real/a.csv')).to.equal(null);
  });

  it('deletes at most 1,000 rows per statement, each statement a transaction of its own', async () => {
    await clear();
    const files = Array.from({ length: 2500 }, (_, i) =>
      file(`s3://bulk/${String(i).padStart(5, '0')}`, 'completed', { created: OLD, started: OLD, completed: OLD + (i % 7) }),
    );
    await insertMany(FileCheckpoint, files);
    await insertMany(CheckpointJob, [job('many-ranges', 'partitioned', true, 'active', OLD)]);
    await insertMany(CheckpointPartition, ranges('many-ranges', 1500));
    const log = new SqlLog();
    const logged = await database.open({ logger: log });
    const result = await prune(logged, { olderThan: THIRTY_DAYS });
    expect(counts(result)).to.deep.equal({ jobs: 1, ranges: 1500, imports: 0, rejects: 0, files: 2500, steps: 0 });
    expect(await count(ds, `SELECT COUNT(*) FROM ${q('file_checkpoints')}`)).to.equal(0);
    expect(await count(ds, `SELECT COUNT(*) FROM ${q('checkpoint_partitions')}`)).to.equal(0);

    const fileDeletes = log.queries.filter(
      (query) => new RegExp(`DELETE FROM ${escape(q('file_checkpoints'))}`).test(query.sql) && query.sql.includes("'completed'"),
    );
    const rangeDeletes = log.queries.filter((query) => new RegExp(`DELETE FROM ${escape(q('checkpoint_partitions'))}`).test(query.sql));
    // 2,500 completed files at most 1,000 a statement: three statements (1,000, 1,000, 500), each bounded by its text.
    expect(fileDeletes).to.have.length(3);
    expect(rangeDeletes).to.have.length(2);
    for (const query of [...fileDeletes, ...rangeDeletes]) expect(query.sql).to.match(/LIMIT 1000\b/);
    // No statement of the run opened a transaction around several deletes.
    expect(log.queries.filter((query) => /^(BEGIN|START TRANSACTION)/i.test(query.sql.trim()))).to.deep.equal([]);
  });

  it('refuses bad input with INVALID_ARGUMENT and changes nothing', async () => {
    await seed();
    const before = await snapshot(ds);
    const bad: unknown[] = [
      { olderThan: 0 },
      { olderThan: -1 },
      { olderThan: Number.NaN },
      { olderThan: Number.POSITIVE_INFINITY },
      { olderThan: '30d' },
      {},
      null,
      { olderThan: THIRTY_DAYS, kinds: 'files' },
      { olderThan: THIRTY_DAYS, kinds: ['files', 'bogus'] },
      { olderThan: THIRTY_DAYS, dryRun: 'yes' },
    ];
    for (const options of bad) await expectCode(prune(ds, options as never), 'INVALID_ARGUMENT');
    await expectCode(
      runInTransaction(ds, (tx) => prune(tx, { olderThan: THIRTY_DAYS })),
      'INVALID_ARGUMENT',
    );
    expect(await snapshot(ds)).to.deep.equal(before);
  });

  describe('CLI prune', () => {
    it('--dry-run counts, --kinds limits, --older-than takes 30d-style durations', async () => {
      await seed();
      const before = await snapshot(ds);
      const dry = await cliJson(['prune', '--db', database.url, '--older-than', '30d', '--dry-run']);
      expect(dry.code).to.equal(0);
      expect(dry.json).to.include({ ok: true, command: 'prune', dryRun: true, olderThanMs: THIRTY_DAYS, ...EXPECTED_DEFAULT });
      expect(await snapshot(ds)).to.deep.equal(before);

      const files = await cliJson(['prune', '--db', database.url, '--older-than', `${30 * 24}h`, '--kinds', 'files,steps']);
      expect(files.code).to.equal(0);
      expect(files.json).to.include({ ok: true, dryRun: false, jobs: 0, imports: 0, files: 4, steps: 1 });
      expect(await count(ds, `SELECT COUNT(*) FROM ${q('file_checkpoints')}`)).to.equal(5);

      const all = await cliJson(['prune', '--db', database.url, '--older-than', '43200m']);
      expect(all.json).to.include({ ok: true, jobs: 4, ranges: 5, imports: 2, rejects: 4, files: 0 });
    });

    it('an invalid or non-positive duration, or an unknown kind, is a usage error: INVALID_ARGUMENT, exit 2, nothing deleted', async () => {
      await seed();
      const before = await snapshot(ds);
      for (const args of [
        ['--older-than', '0d'],
        ['--older-than', '30'],
        ['--older-than', '30d', '--kinds', 'files,bogus'],
      ]) {
        const run = await cliJson(['prune', '--db', database.url, ...args]);
        expect(run.code, args.join(' ')).to.equal(2);
        expect(run.json, args.join(' ')).to.include({ ok: false, code: 'INVALID_ARGUMENT' });
      }
      expect(await snapshot(ds)).to.deep.equal(before);
    });
  });

  describe('lease', () => {
    it('one holder at a time: another takes it only once it expired or was given up', async () => {
      // Taken and given up: the lease exists, expired, whatever the clock reads.
      await takeLease(ds, 'test-lease', 'nobody', 60_000);
      await releaseLease(ds, 'test-lease', 'nobody');
      expect(await takeLease(ds, 'test-lease', 'a', 60_000)).to.equal(true);
      expect(await takeLease(ds, 'test-lease', 'b', 60_000)).to.equal(false);
      expect(await takeLease(ds, 'test-lease', 'a', 60_000), 'renewed by its holder').to.equal(true);
      await releaseLease(ds, 'test-lease', 'b');
      expect(await takeLease(ds, 'test-lease', 'b', 60_000), 'only its holder gives it up').to.equal(false);
      await releaseLease(ds, 'test-lease', 'a');
      expect(await takeLease(ds, 'test-lease', 'b', 50)).to.equal(true);
      await sleep(80);
      expect(await takeLease(ds, 'test-lease', 'a', 60_000), 'expired').to.equal(true);
    });

    it('racing instances: exactly one takes an expired lease', async () => {
      await takeLease(ds, 'race-lease', 'nobody', 60_000);
      await releaseLease(ds, 'race-lease', 'nobody');
      const others = await Promise.all(Array.from({ length: 4 }, () => database.open()));
      const taken = await Promise.all(others.map((other, i) => takeLease(other, 'race-lease', `holder-${i}`, 60_000)));
      expect(taken.filter(Boolean)).to.have.length(1);
      await Promise.all(others.map((other) => other.destroy()));
    });

    it('the Leases migration is a no-op when run twice', async () => {
      const runner = ds.createQueryRunner();
      try {
        await new Leases1765670400000().up(runner);
      } finally {
        await runner.release();
      }
      expect(await count(ds, `SELECT COUNT(*) FROM ${q('checkpoint_leases')}`)).to.be.at.least(1);
    });
  });

  describe('NestJS retention', () => {
    const apps: TestingModule[] = [];
    afterEach(async () => {
      for (const app of apps.splice(0)) await app.close();
    });

    function typeOrmOptions(): TypeOrmModuleOptions {
      return {
        ...dataSourceOptionsFromUrl(database.url),
        migrations: checkpointMigrations,
        migrationsRun: true,
        retryAttempts: 0,
        autoLoadEntities: true,
      } as TypeOrmModuleOptions;
    }

    /** Compiles an application with retention, counts its service's prunes, then starts it. */
    async function boot(everyMs: number): Promise<{ app: TestingModule; prunes: PruneResult[] }> {
      const app = await Test.createTestingModule({
        imports: [TypeOrmModule.forRoot(typeOrmOptions()), CheckpointModule.forRoot({ retention: { olderThanMs: THIRTY_DAYS, everyMs } })],
      }).compile();
      apps.push(app);
      const service = app.get(CheckpointService);
      const prunes: PruneResult[] = [];
      const original = service.prune.bind(service);
      service.prune = async (options) => {
        const result = await original(options);
        prunes.push(result);
        return result;
      };
      await app.init();
      return { app, prunes };
    }

    it('two application instances on one database: only the lease holder prunes, once per period', async () => {
      await seed();
      await ds.query(sql(`DELETE FROM ${q('checkpoint_leases')} WHERE ${q('name')} = ?`), ['retention']);
      const everyMs = 250;
      const first = await boot(everyMs);
      const second = await boot(everyMs);
      await sleep(everyMs * 5);
      const pruners = [first.prunes, second.prunes].filter((prunes) => prunes.length > 0);
      expect(pruners, `prunes: ${first.prunes.length} and ${second.prunes.length}`).to.have.length(1);
      const [holder] = pruners;
      expect(holder.length).to.be.within(3, 7);
      expect(counts(holder[0])).to.deep.equal(EXPECTED_DEFAULT);
      expect(await count(ds, `SELECT COUNT(*) FROM ${q('file_checkpoints')}`)).to.equal(5);

      // The holder stops and gives the lease up: the other instance takes over.
      const [stopping, staying] = holder === first.prunes ? [first, second] : [second, first];
      apps.splice(apps.indexOf(stopping.app), 1);
      await stopping.app.close();
      const before = staying.prunes.length;
      await sleep(everyMs * 3);
      expect(staying.prunes.length).to.be.greaterThan(before);
    });

    it('refuses invalid retention options with INVALID_ARGUMENT', () => {
      for (const retention of [{ olderThanMs: 0, everyMs: 1000 }, { olderThanMs: 1000, everyMs: -1 }, { olderThanMs: 1000 }, 'daily']) {
        expect(() => CheckpointModule.forRoot({ retention: retention as never }))
          .to.throw()
          .with.property('code', 'INVALID_ARGUMENT');
      }
    });
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
