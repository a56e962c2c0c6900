import { expect } from 'chai';
import { CheckpointManager } from '../src';
import { FileProcessor } from '../src/nestjs';
import { type Child, kill, startChild } from './support/child';
import { count, DRIVER, sql, useTestDatabase } from './support/database';

const APP = 'examples/nestjs/main.ts';

function event(line: string): Record<string, unknown> | null {
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return null;
  }
}

function waitForEvent(child: Child, name: string, url?: string): Promise<string> {
  return child.waitForLine((line) => {
    const parsed = event(line);
    return parsed?.event === name && (url === undefined || parsed.url === url);
  });
}

const files = (names: string[]) =>
  names.map((name) => ({ fileUrl: `s3://reports/${name}`, fileType: 'report', fileTimestamp: new Date(0) }));

describe(`NestJS example: @FileProcessor in a worker process (${DRIVER})`, function () {
  const db = useTestDatabase('nestjs_example');

  it('starts the worker on bootstrap, processes registered files, and drains on SIGTERM', async () => {
    const child = startChild(APP, [], { DATABASE_URL: db.url });
    try {
      await waitForEvent(child, 'ready');
      const manager = new CheckpointManager(db.ds);
      await manager.register(files(['a.csv', 'b.csv', 'c.csv']));
      for (const name of ['a.csv', 'b.csv', 'c.csv']) await waitForEvent(child, 'processed', `s3://reports/${name}`);

      // Both slots (concurrency 2) taken by files in flight, three more claimed in the same batch and
      // waiting. (SQLite: d2's transaction waits for d1's, the one connection's, but it has started.)
      // Registered in one transaction, d1 then d2 made older than the rest: the worker claims all five
      // in one batch in that order (files registered together otherwise come in no particular order).
      await db.ds.transaction(async (tx) => {
        await new CheckpointManager(tx).register(files(['d1.hold', 'd2.hold', 'e.csv', 'f.csv', 'g.csv']));
        for (const [name, older] of [
          ['d1.hold', 2],
          ['d2.hold', 1],
        ] as const) {
          await tx.query(sql('UPDATE file_checkpoints SET created_at = created_at - ? WHERE file_url = ?'), [
            older,
            `s3://reports/${name}`,
          ]);
        }
      });
      await waitForEvent(child, 'processing', 's3://reports/d1.hold');
      if (DRIVER !== 'sqlite') await waitForEvent(child, 'processing', 's3://reports/d2.hold');
      child.process.kill('SIGTERM');
      // The held files are let go once the worker is stopping: it starts no other file from then on.
      await child.waitForLine((line) => line.includes('stopping ReportProcessor'));
      child.send('go');
      await waitForEvent(child, 'processed', 's3://reports/d1.hold');
      await waitForEvent(child, 'processed', 's3://reports/d2.hold');
      expect(await child.waitForLine((line) => line.includes('stopped ReportProcessor'))).to.include('5 processed, 0 failed');
      await waitForEvent(child, 'shutdown');
      const exited = await child.exited;
      expect(exited.signal ?? exited.code).to.be.oneOf(['SIGTERM', 0]);

      // The files in flight finished; the waiting ones were given back without an attempt.
      for (const name of ['d1.hold', 'd2.hold']) expect(await manager.get(`s3://reports/${name}`)).to.include({ status: 'completed' });
      for (const name of ['e.csv', 'f.csv', 'g.csv']) {
        expect(await manager.get(`s3://reports/${name}`), name).to.include({ status: 'pending', retryCount: 0, claimToken: 2 });
      }
      expect(
        child.lines.some(
          (line) =>
            event(line)?.event === 'processing' && String(event(line)?.url).endsWith('.csv') && /[efg]\.csv/.test(String(event(line)?.url)),
        ),
      ).to.equal(false);
      expect(await count(db.ds, 'SELECT COUNT(*) FROM processed_files')).to.equal(5);
      expect(await count(db.ds, sql('SELECT COUNT(*) FROM processed_files WHERE file_url = ?'), ['s3://reports/d1.hold'])).to.equal(1);
    } finally {
      await kill(child);
    }
  });

  it('@FileProcessor refuses options it does not know with INVALID_ARGUMENT', () => {
    expect(() => FileProcessor({ fileTyp: 'report' } as never))
      .to.throw()
      .with.property('code', 'INVALID_ARGUMENT');
    expect(() => FileProcessor(null as never))
      .to.throw()
      .with.property('code', 'INVALID_ARGUMENT');
    expect(FileProcessor({ fileType: 'report', concurrency: 2 })).to.be.a('function');
  });
});
