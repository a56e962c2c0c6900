import { expect } from 'chai';
import { CheckpointManager, type FileCheckpoint, type WorkerSummary } from '../src';
import { type Child, kill, startChild } from './support/child';
import { cli, cliJson } from './support/cli-run';
import { count, DRIVER, sql, useTestDatabase } from './support/database';
import { SqlLog } from './support/sql-log';

// Spawns child processes: test/fixtures/claims-control-worker.ts.
const WORKER = 'test/fixtures/claims-control-worker.ts';
const STATS = { totalRows: 1, filteredRows: 0, persistedRows: 1, durationMs: 1 };

function files(type: string, n: number) {
  return Array.from({ length: n }, (_, i) => ({
    fileUrl: `s3://bucket/${type}/${String(i).padStart(3, '0')}.csv`,
    fileType: type,
    fileTimestamp: new Date(1_700_000_000_000 + i),
  }));
}

function resultOf(child: Child): WorkerSummary {
  const line = child.lines.find((l) => l.startsWith('result '));
  if (line === undefined) throw new Error(`no result from the worker; stderr:\n${child.stderr()}`);
  return JSON.parse(line.slice('result '.length)) as WorkerSummary;
}

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

describe(`file claims control: pause, resume, cancel (${DRIVER})`, function () {
  const log = new SqlLog();
  const database = useTestDatabase('claims_control', { logger: log });
  const children: Child[] = [];

  before(async () => {
    await database.ds.query('CREATE TABLE control_effects (file_url varchar(255) NOT NULL, worker varchar(255) NOT NULL)');
  });
  afterEach(async () => {
    for (const child of children.splice(0)) await kill(child);
  });

  const effects = (type: string) => count(database.ds, sql('SELECT COUNT(*) FROM control_effects WHERE file_url LIKE ?'), [`%/${type}/%`]);
  const statuses = async (type: string) =>
    (
      (await database.ds.query(sql('SELECT status FROM file_checkpoints WHERE file_type = ? ORDER BY file_url'), [type])) as {
        status: string;
      }[]
    ).map((row) => row.status);

  it('claimNext claims no file of a paused type, nor of any type while every type is paused; resume; summary lists them', async () => {
    const manager = new CheckpointManager(database.ds);
    await manager.register([...files('p-held', 3), ...files('p-open', 3)]);
    expect(await manager.pause({ fileType: 'p-held' })).to.equal(true);
    expect(await manager.pause({ fileType: 'p-held' })).to.equal(false);
    expect((await manager.summary()).pausedTypes).to.deep.equal(['p-held']);

    expect(await manager.claimNext(10, { fileType: 'p-held' })).to.deep.equal([]);
    const open = await manager.claimNext(10);
    expect(open.map((file) => file.fileType)).to.deep.equal(['p-open', 'p-open', 'p-open']);
    for (const file of open) await manager.completeFile(file.fileUrl, STATS);

    // Every type: also a type never paused on its own.
    await manager.register(files('p-other', 2));
    expect(await manager.pause()).to.equal(true);
    expect((await manager.summary()).pausedTypes).to.deep.equal(['*', 'p-held']);
    expect(await manager.claimNext(10)).to.deep.equal([]);
    expect(await manager.resume({ fileType: 'p-held' })).to.equal(true);
    expect(await manager.claimNext(10, { fileType: 'p-held' })).to.deep.equal([], "'*' still pauses it");

    expect(await manager.resume()).to.equal(true);
    expect(await manager.resume()).to.equal(false);
    expect((await manager.summary()).pausedTypes).to.deep.equal([]);
    const resumed = await manager.claimNext(10);
    expect(resumed.map((file) => file.fileType).sort()).to.deep.equal(['p-held', 'p-held', 'p-held', 'p-other', 'p-other']);
    for (const file of resumed) await manager.completeFile(file.fileUrl, STATS);
  });

  it('work() in several worker processes claims no file of a paused type, inside its one claim statement; resume lets them run', async () => {
    const manager = new CheckpointManager(database.ds);
    await manager.register([...files('w-open', 12), ...files('w-held', 6)]);
    expect(await manager.pause({ fileType: 'w-held' })).to.equal(true);
    for (let w = 0; w < 3; w++) children.push(startChild(WORKER, ['drain', database.url, `w${w}`]));
    await Promise.all(children.map((child) => child.exited));
    const results = children.map(resultOf);
    expect(results.reduce((sum, r) => sum + r.processed, 0)).to.equal(12);
    expect(await effects('w-open')).to.equal(12);
    expect(await effects('w-held')).to.equal(0);
    expect(await statuses('w-held')).to.deep.equal(Array(6).fill('pending'));

    expect(await manager.resume({ fileType: 'w-held' })).to.equal(true);
    log.clear();
    const summary = await manager.work(
      async (file, tx) => {
        if (tx) await tx.query(sql('INSERT INTO control_effects (file_url, worker) VALUES (?, ?)'), [file.fileUrl, 'parent']);
        return STATS;
      },
      { batchSize: 2, drain: true },
    ).done;
    expect(summary).to.include({ processed: 6, failed: 0, cancelled: 0, claimLost: 0 });
    expect(await effects('w-held')).to.equal(6);
    // The pause is read by the claim statement itself: no statement of its own per claim.
    const pauseReads = log.queries.filter((q) => q.sql.includes('checkpoint_file_types'));
    expect(pauseReads.length).to.be.greaterThan(0);
    for (const query of pauseReads) expect(query.sql).to.include('file_checkpoints');
  });

  it('cancel: a pending or failed file becomes cancelled and is never claimed; requeue brings it back', async () => {
    const manager = new CheckpointManager(database.ds, { maxRetries: 0 });
    const [pending, failed] = files('c-queued', 2);
    await manager.register([pending, failed]);
    expect(await manager.claimFile(failed.fileUrl, failed.fileType, failed.fileTimestamp)).to.equal(true);
    await manager.failFile(failed.fileUrl, 'boom');

    expect(await manager.cancel(pending.fileUrl)).to.equal(true);
    expect(await manager.cancel(failed.fileUrl)).to.equal(true, 'a dead letter too');
    expect(await manager.cancel(pending.fileUrl)).to.equal(false);
    expect(await manager.cancel('s3://bucket/c-queued/unknown.csv')).to.equal(false);
    expect(await statuses('c-queued')).to.deep.equal(['cancelled', 'cancelled']);
    expect(await manager.claimNext(10, { fileType: 'c-queued' })).to.deep.equal([]);
    expect(await manager.claimFile(pending.fileUrl, pending.fileType, pending.fileTimestamp)).to.equal(false);
    expect((await manager.summary()).cancelled).to.equal(2);
    expect(await manager.deadLetters()).to.deep.equal([]);

    expect(await manager.requeue(pending.fileUrl)).to.equal(true);
    const [again] = await manager.claimNext(10, { fileType: 'c-queued' });
    expect(again.fileUrl).to.equal(pending.fileUrl);
    await manager.completeFile(again.fileUrl, STATS);
    expect(await manager.cancel(pending.fileUrl)).to.equal(false, 'completed');
    expect((await manager.summary()).cancelled).to.equal(1);
  });

  it('CLI: files pause/resume [--type T] and files cancel <url>, exit 0 when nothing changed', async () => {
    const db = ['--db', database.url];
    const manager = new CheckpointManager(database.ds);
    const [file] = files('cli-type', 1);
    await manager.register([file]);
    const before = (await manager.summary()).cancelled;
    const paused = await cliJson(['files', 'pause', '--type', 'cli-type', ...db]);
    expect(paused).to.deep.include({ code: 0 });
    expect(paused.json).to.include({ ok: true, changed: true, fileType: 'cli-type' });
    expect((await cliJson(['files', 'pause', '--type', 'cli-type', ...db])).json).to.include({ ok: true, changed: false });
    expect((await cliJson(['files', ...db])).json.pausedTypes).to.deep.equal(['cli-type']);
    expect(await manager.claimNext(1, { fileType: 'cli-type' })).to.deep.equal([]);
    const resumed = await cliJson(['files', 'resume', ...db]);
    expect(resumed.json).to.include({ ok: true, changed: true });
    expect((await cliJson(['files', 'resume', '--type', 'cli-type', ...db])).json).to.include({ ok: true, changed: false });

    const cancelled = await cli(['files', 'cancel', file.fileUrl, ...db]);
    expect(cancelled.code).to.equal(0);
    expect(cancelled.stdout.join('\n')).to.include('Cancelled');
    expect(await statuses('cli-type')).to.deep.equal(['cancelled']);
    const again = await cliJson(['files', 'cancel', file.fileUrl, ...db]);
    expect(again.code).to.equal(0);
    expect(again.json).to.include({ ok: true, changed: false });
    expect((await cliJson(['files', ...db])).json).to.include({ cancelled: before + 1 });
  });

  if (DRIVER !== 'sqlite') {
    it("cancel of a file running in another process: its handler's signal aborts, its writes are gone, it counts as cancelled", async () => {
      const manager = new CheckpointManager(database.ds);
      const [file] = files('c-running', 1);
      await manager.register([file]);
      const child = startChild(WORKER, ['cancel', database.url, 'canceller']);
      children.push(child);
      await child.waitForLine((line) => line === `started ${file.fileUrl}`);
      expect(await manager.cancel(file.fileUrl)).to.equal(true);
      await child.waitForLine((line) => line === `aborted ${file.fileUrl}`);
      const { code } = await child.exited;
      expect(code, child.stderr()).to.equal(0);
      expect(resultOf(child)).to.include({ processed: 0, failed: 0, cancelled: 1, claimLost: 0 });
      expect(await effects('c-running')).to.equal(0);
      expect(await statuses('c-running')).to.deep.equal(['cancelled']);

      expect(await manager.requeue(file.fileUrl)).to.equal(true);
      const summary = await manager.work(() => STATS, { fileType: 'c-running', drain: true }).done;
      expect(summary).to.include({ processed: 1, cancelled: 0 });
      expect(await statuses('c-running')).to.deep.equal(['completed']);
    });
  } else {
    it('on SQLite, a cancel of a file in flight waits for its transaction and returns false when the file completed', async () => {
      const manager = new CheckpointManager(database.ds);
      const [file] = files('c-sqlite', 1);
      await manager.register([file]);
      const child = startChild(WORKER, ['hold', database.url, 'holder']);
      children.push(child);
      await child.waitForLine((line) => line === `started ${file.fileUrl}`);
      const cancelled = manager.cancel(file.fileUrl);
      child.send('go');
      expect(await cancelled).to.equal(false);
      expect((await child.exited).code, child.stderr()).to.equal(0);
      expect(resultOf(child)).to.include({ processed: 1, cancelled: 0 });
      expect(await statuses('c-sqlite')).to.deep.equal(['completed']);
      expect(await effects('c-sqlite')).to.equal(1);
    });
  }

  it('a file cancelled while work() runs it in this process: signal, no writes, counted cancelled', async () => {
    const manager = new CheckpointManager(database.ds, { leaseMs: 300 });
    const [file] = files('c-local', 1);
    await manager.register([file]);
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const worker = manager.work(
      async (claimed: FileCheckpoint, tx, ctx) => {
        await tx!.query(sql('INSERT INTO control_effects (file_url, worker) VALUES (?, ?)'), [claimed.fileUrl, 'local']);
        started();
        // SQLite: the cancel waits for this transaction, so the handler ends without it.
        if (DRIVER !== 'sqlite') await aborted(ctx.signal);
        return STATS;
      },
      { fileType: 'c-local', drain: true },
    );
    await running;
    const cancelled = manager.cancel(file.fileUrl);
    const summary = await worker.done;
    if (DRIVER === 'sqlite') {
      expect(await cancelled).to.equal(false);
      expect(summary).to.include({ processed: 1, cancelled: 0 });
    } else {
      expect(await cancelled).to.equal(true);
      expect(summary).to.include({ processed: 0, cancelled: 1, claimLost: 0, failed: 0 });
      expect(await effects('c-local')).to.equal(0);
    }
  });
});

describe('file claims control in memory (new CheckpointManager(null))', function () {
  it('pause, resume, cancel of a queued and of a running file, requeue', async () => {
    const manager = new CheckpointManager(null, { leaseMs: 60 });
    await manager.register([...files('mem-held', 2), ...files('mem-run', 1)]);
    expect(await manager.pause({ fileType: 'mem-held' })).to.equal(true);
    expect((await manager.summary()).pausedTypes).to.include('mem-held');
    expect(await manager.claimNext(10, { fileType: 'mem-held' })).to.deep.equal([]);
    expect(await manager.resume({ fileType: 'mem-held' })).to.equal(true);
    const [first] = files('mem-held', 1);
    expect(await manager.cancel(first.fileUrl)).to.equal(true);
    expect((await manager.claimNext(10, { fileType: 'mem-held' })).map((f) => f.fileUrl)).to.deep.equal([files('mem-held', 2)[1].fileUrl]);
    expect(await manager.requeue(first.fileUrl)).to.equal(true);
    expect((await manager.get(first.fileUrl))?.status).to.equal('pending');

    const [running] = files('mem-run', 1);
    const worker = manager.work(
      async (_file, _tx, ctx) => {
        void manager.cancel(running.fileUrl);
        await aborted(ctx.signal);
        return STATS;
      },
      { fileType: 'mem-run', drain: true },
    );
    expect(await worker.done).to.include({ processed: 0, cancelled: 1 });
    expect((await manager.get(running.fileUrl))?.status).to.equal('cancelled');
  });
});
