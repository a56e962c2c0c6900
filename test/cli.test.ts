import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eachBatch, eachPartition, listPartitions, reset, sqlSource, status, step } from '../src';
import { rejection } from './support/expect-code';
import { CheckpointManager } from '../src/claims/checkpoint-manager';
import { type Child, startChild, TYPESCRIPT_NODE_ARGS } from './support/child';
import { cli, cliJson, finished, startCli } from './support/cli-run';
import { count, createTestDatabase, DRIVER, sql, useTestDatabase } from './support/database';

const ROOT = join(__dirname, '..');
const CLI = 'src/cli/main.ts';

/** Resolves once the child's stderr so far matches `pattern`. */
function waitForStderr(child: Child, pattern: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = (): boolean => pattern.test(child.stderr());
    if (check()) return resolve();
    const stderr = child.process.stderr!;
    const onData = (): void => {
      if (!check()) return;
      stderr.off('data', onData);
      resolve();
    };
    stderr.on('data', onData);
    void child.exited.then(() => reject(new Error(`CLI exited before stderr matched ${pattern}:\n${child.stderr()}`)));
  });
}

function csv(rows: [string, number][]): string {
  return `id,value\n${rows.map(([id, value]) => `${id},${value}`).join('\n')}\n`;
}

function sampleRows(n: number, prefix = 'r', factor = 7): [string, number][] {
  return Array.from({ length: n }, (_, i) => [`${prefix}${String(i).padStart(6, '0')}`, i * factor - 3]);
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

describe(`typeorm-checkpoint CLI (${DRIVER})`, function () {
  const database = useTestDatabase('cli');
  let dir: string;
  let db: string[];

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ck-cli-'));
    db = ['--db', database.url];
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  function file(name: string, content: string): string {
    const path = join(dir, name);
    writeFileSync(path, content);
    return path;
  }

  async function storedRows(batch: string): Promise<[string, number][]> {
    const rows = (await database.ds.query(sql('SELECT id, value FROM checkpoint_import_items WHERE batch = ? ORDER BY id'), [batch])) as {
      id: string;
      value: number | string;
    }[];
    return rows.map((row) => [row.id, Number(row.value)]);
  }

  describe('import', () => {
    it('imports a CSV in chunks and prints one JSON line with the result; every row is stored once', async () => {
      const rows = sampleRows(1000);
      const content = csv(rows);
      const path = file('basic.csv', content);
      const { code, json } = await cliJson(['import', path, '--batch', 'basic', '--size', '100', ...db]);
      expect(code).to.equal(0);
      expect(json).to.include({ ok: true, batch: 'basic', digest: sha256(content), nextIndex: 1000, rows: 1000, done: true });
      expect(await storedRows('basic')).to.deep.equal(rows);

      // Rerunning a finished import writes nothing and stays ok.
      const again = await cliJson(['import', path, '--batch', 'basic', ...db]);
      expect(again.code).to.equal(0);
      expect(again.json).to.include({ ok: true, nextIndex: 1000, rows: 0, done: true });
      expect(await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_import_items WHERE batch = ?'), ['basic'])).to.equal(1000);
    });

    it('takes the format from the extension (.ndjson, .json); --format overrides it', async () => {
      const rows = sampleRows(5, 'f');
      const ndjson = file('rows.ndjson', rows.map(([id, value]) => JSON.stringify({ id, value })).join('\n'));
      const json = file('rows.json', JSON.stringify(rows.map(([id, value]) => ({ id, value }))));
      const csvAsText = file('rows.txt', csv(rows));
      const [a, b, c, d] = await Promise.all([
        cliJson(['import', ndjson, '--batch', 'fmt-ndjson', ...db]),
        cliJson(['import', json, '--batch', 'fmt-json', ...db]),
        cliJson(['import', csvAsText, '--batch', 'fmt-csv', '--format', 'csv', ...db]),
        // The same bytes read as JSON are not valid input.
        cliJson(['import', csvAsText, '--batch', 'fmt-wrong', '--format', 'json', ...db]),
      ]);
      for (const [run, batch] of [
        [a, 'fmt-ndjson'],
        [b, 'fmt-json'],
        [c, 'fmt-csv'],
      ] as const) {
        expect(run.code, run.stderr).to.equal(0);
        expect(run.json).to.include({ ok: true, done: true, nextIndex: 5 });
        expect(await storedRows(batch)).to.deep.equal(rows);
      }
      expect(d.code).to.equal(2);
      expect(d.json).to.include({ ok: false, code: 'INVALID_INPUT' });
    });

    it('prints one plain progress line per chunk on stderr when stderr is not a TTY', async () => {
      const path = file('progress.csv', csv(sampleRows(1000)));
      const run = await cli(['import', path, '--batch', 'progress', '--size', '100', ...db]);
      expect(run.code, run.stderr).to.equal(0);
      const lines = run.stderr.split('\n').filter((line) => line.length > 0);
      expect(lines).to.have.length(10);
      lines.forEach((line, i) => expect(line).to.match(new RegExp(`\\b${(i + 1) * 100}/1000 rows\\b.*rows/s.*ETA`)));
      // Without --json the result is readable text on stdout, not JSON.
      expect(run.stdout.join('\n')).to.not.match(/^\{/);
      expect(run.stdout.join('\n')).to.include('progress');
    });

    it('draws a live progress bar (rows, rows/s, ETA) when run on a TTY', async () => {
      const path = file('tty.csv', csv(sampleRows(1000)));
      const command = [
        process.execPath,
        ...TYPESCRIPT_NODE_ARGS,
        join(ROOT, CLI),
        'import',
        path,
        '--batch',
        'tty',
        '--size',
        '100',
        '--db',
        database.url,
      ]
        .map((arg) => `'${arg.replace(/'/g, `'\\''`)}'`)
        .join(' ');
      // `script` runs the command on a pseudo-terminal, so stdout and stderr are TTYs.
      const child = spawn('script', ['-qec', command, '/dev/null'], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      expect(code, output).to.equal(0);
      expect(output).to.match(/import tty \[=+-*\] 100% \| 1000\/1000 rows \| \d+ rows\/s \| ETA \S+/);
      // Cursor control: a redrawn bar, not appended lines.
      expect(output).to.include('\u001b[');
      expect(await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_import_items WHERE batch = ?'), ['tty'])).to.equal(1000);
    });

    it('Ctrl-C stops after the current chunk (exit 1, says where); rerunning resumes and ends with every row once', async () => {
      const rows = sampleRows(30_000, 's');
      const path = file('interrupt.csv', csv(rows));
      const child = startCli(['import', path, '--batch', 'interrupt', '--size', '30', '--json', ...db]);
      const run = finished(child);
      await waitForStderr(child, /rows\/s/);
      child.process.kill('SIGINT');
      const { code, stdout, stderr } = await run;
      expect(code, stderr).to.equal(1);
      expect(stdout).to.have.length(1);
      const stopped = JSON.parse(stdout[0]) as Record<string, any>;
      expect(stopped).to.include({ ok: false, code: 'INTERRUPTED', batch: 'interrupt', done: false });
      const at = stopped.nextIndex as number;
      expect(at).to.be.greaterThan(0).and.lessThan(30_000);
      expect(at % 30, 'stopped on a chunk boundary').to.equal(0);
      expect(stopped.message).to.include(String(at));
      // What was committed is exactly the chunks before the stop.
      expect(await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_import_items WHERE batch = ?'), ['interrupt'])).to.equal(at);
      const status1 = await cliJson(['status', 'interrupt', ...db]);
      expect(status1.json.import).to.include({ nextIndex: at, done: false });

      const resumed = await cliJson(['import', path, '--batch', 'interrupt', '--size', '30', ...db]);
      expect(resumed.code, resumed.stderr).to.equal(0);
      expect(resumed.json).to.include({ ok: true, nextIndex: 30_000, rows: 30_000 - at, done: true });
      expect(await storedRows('interrupt')).to.deep.equal(rows);
    });

    it('refuses a changed file under an existing batch: FINGERPRINT_MISMATCH, exit 2, a hint at --replace; nothing changes', async () => {
      const original = sampleRows(50, 'm');
      const path = file('changing.csv', csv(original));
      expect((await cliJson(['import', path, '--batch', 'changing', '--size', '10', ...db])).code).to.equal(0);
      writeFileSync(path, csv(sampleRows(40, 'n', 3)));

      const [json, human] = await Promise.all([
        cliJson(['import', path, '--batch', 'changing', ...db]),
        cli(['import', path, '--batch', 'changing', ...db]),
      ]);
      expect(json.code).to.equal(2);
      expect(json.json).to.include({ ok: false, code: 'FINGERPRINT_MISMATCH' });
      expect(json.json.hint).to.include('--replace');
      expect(human.code).to.equal(2);
      expect(human.stderr).to.include('FINGERPRINT_MISMATCH').and.include('--replace');
      expect(await storedRows('changing')).to.deep.equal(original);
      const after = await cliJson(['status', 'changing', ...db]);
      expect(after.json.import).to.include({ digest: sha256(csv(original)), nextIndex: 50 });
    });

    it('--replace restarts the batch on the new file: the old rows are gone, the new ones stored once', async () => {
      const path = file('replace.csv', csv(sampleRows(60, 'old')));
      expect((await cliJson(['import', path, '--batch', 'replace', '--size', '10', ...db])).code).to.equal(0);
      const next = sampleRows(45, 'new', 5);
      writeFileSync(path, csv(next));

      const replaced = await cliJson(['import', path, '--batch', 'replace', '--size', '10', '--replace', ...db]);
      expect(replaced.code, replaced.stderr).to.equal(0);
      expect(replaced.json).to.include({ ok: true, replaced: true, digest: sha256(csv(next)), nextIndex: 45, rows: 45, done: true });
      expect(await storedRows('replace')).to.deep.equal(next);

      // The same file again with --replace: nothing to replace, nothing imported twice.
      const again = await cliJson(['import', path, '--batch', 'replace', '--replace', ...db]);
      expect(again.json).to.include({ ok: true, replaced: false, rows: 0, nextIndex: 45 });
      expect(await storedRows('replace')).to.deep.equal(next);
    });

    it('--replace with a file the import would refuse replaces nothing: the batch keeps the previous file and its rows', async () => {
      const path = file('replace-invalid.csv', csv(sampleRows(30, 'old')));
      expect((await cliJson(['import', path, '--batch', 'replace-invalid', '--size', '10', ...db])).code).to.equal(0);
      const previous = await storedRows('replace-invalid');
      writeFileSync(path, 'id,value\na,1\nb,2\nc,1.5\n');
      const refused = await cliJson(['import', path, '--batch', 'replace-invalid', '--replace', ...db]);
      expect(refused.code).to.equal(2);
      expect(refused.json).to.include({ ok: false, code: 'INVALID_INPUT', index: 2 });
      expect(String(refused.json.message)).to.include('not replaced');
      expect(await storedRows('replace-invalid')).to.deep.equal(previous);
      const status = await cliJson(['status', 'replace-invalid', ...db]);
      expect(status.json.import).to.include({ digest: sha256(csv(sampleRows(30, 'old'))), nextIndex: 30 });
    });

    it('rejects invalid input with INVALID_INPUT (exit 2, the row index) before writing anything', async () => {
      const path = file('invalid.csv', 'id,value\na,1\nb,2\nc,1.5\n');
      const { code, json } = await cliJson(['import', path, '--batch', 'invalid', ...db]);
      expect(code).to.equal(2);
      expect(json).to.include({ ok: false, code: 'INVALID_INPUT', index: 2 });
      expect(await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_import_items WHERE batch = ?'), ['invalid'])).to.equal(0);
    });
  });

  describe('status, list, reset', () => {
    before(async () => {
      await eachBatch(
        database.ds,
        'cli-job',
        (cursor) => ({ items: [1, 2, 3], next: cursor === null ? 1 : null }),
        3,
        () => {},
      );
      await step(database.ds, 'cli-step', () => ({ answer: 42 }));
      const path = file('listed.csv', csv(sampleRows(20, 'l')));
      expect((await cliJson(['import', path, '--batch', 'listed', '--size', '5', ...db])).code).to.equal(0);
    });

    it('status <name> shows a job or step, or an import batch (digest, nextIndex, total rows)', async () => {
      const [job, stepped, batch, unknown] = await Promise.all([
        cliJson(['status', 'cli-job', ...db]),
        cliJson(['status', 'cli-step', ...db]),
        cliJson(['status', 'listed', ...db]),
        cliJson(['status', 'nothing-here', ...db]),
      ]);
      expect(job.code).to.equal(0);
      expect(job.json).to.include({ ok: true, found: true, import: null });
      expect(job.json.job).to.include({ name: 'cli-job', kind: 'batch', done: true, batches: 2, items: 6 });
      expect(stepped.json.job).to.deep.include({ name: 'cli-step', kind: 'step', done: true, value: { answer: 42 } });
      expect(batch.json).to.include({ ok: true, found: true, job: null });
      expect(batch.json.import).to.include({
        batch: 'listed',
        digest: sha256(csv(sampleRows(20, 'l'))),
        nextIndex: 20,
        totalRows: 20,
        done: true,
      });
      expect(unknown.code).to.equal(0);
      expect(unknown.json).to.include({ ok: true, found: false, job: null, import: null });
    });

    it("status <name> shows an unfinished job's state as status() has it: active", async () => {
      const stop = new AbortController();
      const source = (cursor: unknown) => ({ items: [1], next: Number(cursor ?? 0) + 1 });
      expect(await eachBatch(database.ds, 'cli-active', source, 1, () => stop.abort(), { signal: stop.signal })).to.include({
        done: false,
      });
      const shown = await cli(['status', 'cli-active', ...db]);
      expect(shown.code).to.equal(0);
      expect(shown.stdout.join('\n')).to.include('job "cli-active": active, 1 batches, 1 items');
      await reset(database.ds, 'cli-active');
    });

    it('status without a name gives an overview; list gives every job, step and import', async () => {
      const [overview, listed, human] = await Promise.all([cliJson(['status', ...db]), cliJson(['list', ...db]), cli(['list', ...db])]);
      expect(overview.code).to.equal(0);
      expect(overview.json.ok).to.equal(true);
      expect(overview.json.jobs.total).to.be.at.least(1);
      expect(overview.json.steps.total).to.be.at.least(1);
      expect(overview.json.imports.total).to.be.at.least(1);
      expect(overview.json).to.have.property('files');
      expect(listed.code).to.equal(0);
      const names = (listed.json.jobs as { name: string }[]).map((job) => job.name);
      expect(names).to.include.members(['cli-job', 'cli-step']);
      const batches = (listed.json.imports as { batch: string; nextIndex: number }[]).map((batch) => batch.batch);
      expect(batches).to.include('listed');
      expect(human.code).to.equal(0);
      expect(human.stdout.join('\n')).to.include('cli-job').and.include('listed');
    });

    it('reset <name> forgets a job, or deletes an import batch with its rows; an unknown name resets nothing', async () => {
      const [job, batch, unknown] = await Promise.all([
        cliJson(['reset', 'cli-job', ...db]),
        cliJson(['reset', 'listed', ...db]),
        cliJson(['reset', 'nothing-here', ...db]),
      ]);
      expect(job.code).to.equal(0);
      expect(job.json).to.include({ ok: true, job: true, import: false });
      expect(await status(database.ds, 'cli-job')).to.equal(null);
      expect(batch.json).to.include({ ok: true, job: false, import: true, deletedRows: 20 });
      expect(await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_import_items WHERE batch = ?'), ['listed'])).to.equal(0);
      expect(await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_imports WHERE id = ?'), ['listed'])).to.equal(0);
      expect(unknown.json).to.include({ ok: true, job: false, import: false, deletedRows: 0 });
      // A reset import starts over from the first row.
      const path = join(dir, 'listed.csv');
      expect((await cliJson(['import', path, '--batch', 'listed', ...db])).json).to.include({ rows: 20, nextIndex: 20 });
    });
  });

  describe('files', () => {
    it('files prints the claims summary', async () => {
      const manager = new CheckpointManager(database.ds, { maxRetries: 0 });
      await manager.register([
        { fileUrl: 's3://bucket/a.csv', fileType: 'csv', fileTimestamp: new Date(0) },
        { fileUrl: 's3://bucket/b.csv', fileType: 'csv', fileTimestamp: new Date(0) },
        { fileUrl: 's3://bucket/c.csv', fileType: 'csv', fileTimestamp: new Date(0) },
      ]);
      expect(await manager.claimFile('s3://bucket/a.csv', 'csv', new Date(0))).to.equal(true);
      await manager.completeFile('s3://bucket/a.csv', { totalRows: 10, filteredRows: 2, persistedRows: 8, durationMs: 5 });
      expect(await manager.claimFile('s3://bucket/b.csv', 'csv', new Date(0))).to.equal(true);
      await manager.failFile('s3://bucket/b.csv', 'boom');
      const [json, human] = await Promise.all([cliJson(['files', ...db]), cli(['files', ...db])]);
      expect(json.code).to.equal(0);
      expect(json.json).to.deep.include({
        ok: true,
        pending: 1,
        processing: 0,
        completed: 1,
        failed: 1,
        deadLetters: 1,
        recordsTotal: 10,
        recordsFiltered: 2,
        recordsPersisted: 8,
        processingTimeMs: 5,
      });
      expect(human.code).to.equal(0);
      expect(human.stdout.join('\n')).to.include('dead letters 1');
      const overview = await cliJson(['status', ...db]);
      expect(overview.json.files).to.include({ pending: 1, completed: 1, deadLetters: 1 });
    });
  });

  describe('partitioned jobs', () => {
    it('status and list show a partitioned job with its ranges; retry-dead revives dead ranges; reset forgets the job and its ranges', async () => {
      await database.ds.query('CREATE TABLE cli_rows (id integer PRIMARY KEY)');
      await database.ds.query(
        sql(`INSERT INTO cli_rows (id) VALUES ${Array.from({ length: 40 }, () => '(?)').join(', ')}`),
        Array.from({ length: 40 }, (_, i) => i + 1),
      );
      const source = await sqlSource(database.ds, 'cli_rows', 'id');
      const failing = (items: Record<string, unknown>[]) => {
        if (items.some((item) => item.id === 35)) throw new Error('boom');
      };
      await rejection(eachPartition(database.ds, 'cli-ranges', source, 10, failing, { partitions: 4, maxRetries: 0 }));
      await eachPartition(database.ds, 'cli-ranges', source, 10, failing, { partitions: 4, maxRetries: 0 });
      const [shown, human, listed] = await Promise.all([
        cliJson(['status', 'cli-ranges', ...db]),
        cli(['status', 'cli-ranges', ...db]),
        cliJson(['list', ...db]),
      ]);
      expect(shown.json.job).to.deep.include({
        kind: 'partitioned',
        done: false,
        items: 30,
        partitions: { pending: 0, running: 0, done: 3, dead: 1 },
      });
      expect((shown.json.ranges as { status: string }[]).map((range) => range.status)).to.deep.equal(['done', 'done', 'done', 'dead']);
      expect(human.stdout.join('\n')).to.include('3 done, 0 running, 0 pending, 1 dead of 4 ranges').and.include('RANGE');
      expect(
        (listed.json.jobs as { name: string; partitions?: unknown }[]).find((job) => job.name === 'cli-ranges')!.partitions,
      ).to.deep.equal({
        pending: 0,
        running: 0,
        done: 3,
        dead: 1,
      });
      const overview = await cliJson(['status', ...db]);
      expect(overview.json.partitioned).to.deep.include({ total: 1, done: 0, items: 30 });
      expect((await cliJson(['retry-dead', 'cli-ranges', ...db])).json).to.include({ ok: true, revived: 1 });
      expect((await listPartitions(database.ds, 'cli-ranges'))[3]).to.include({ status: 'pending', attempts: 0 });
      expect((await cliJson(['reset', 'cli-ranges', ...db])).json).to.include({ ok: true, job: true });
      expect(await listPartitions(database.ds, 'cli-ranges')).to.deep.equal([]);
    });
  });

  describe('databases and exit codes', () => {
    it('uses DATABASE_URL when there is no --db, and --db over DATABASE_URL', async () => {
      await step(database.ds, 'env-step', () => 1);
      const elsewhere = `sqlite:${join(dir, 'elsewhere.sqlite')}`;
      const [fromEnv, fromOption, other] = await Promise.all([
        cliJson(['status', 'env-step'], { DATABASE_URL: database.url }),
        cliJson(['status', 'env-step', ...db], { DATABASE_URL: elsewhere }),
        cliJson(['status', 'env-step'], { DATABASE_URL: elsewhere }),
      ]);
      expect(fromEnv.json).to.include({ ok: true, found: true });
      expect(fromOption.json).to.include({ ok: true, found: true });
      expect(other.json).to.include({ ok: true, found: false });
    });

    it('defaults to ./checkpoint.sqlite, migrated on first use', async () => {
      const cwd = mkdtempSync(join(tmpdir(), 'ck-cli-cwd-'));
      try {
        const path = file('embedded.csv', csv(sampleRows(10, 'e')));
        const env = { DATABASE_URL: '' };
        const first = await finished(startChild('test/fixtures/cli-in-dir.ts', [cwd, 'status', '--json'], env));
        expect(first.code, first.stderr).to.equal(0);
        expect(JSON.parse(first.stdout[0])).to.include({ ok: true, database: 'sqlite:checkpoint.sqlite' });
        expect(existsSync(join(cwd, 'checkpoint.sqlite'))).to.equal(true);
        const imported = await finished(startChild('test/fixtures/cli-in-dir.ts', [cwd, 'import', path, '--batch', 'e', '--json'], env));
        expect(imported.code, imported.stderr).to.equal(0);
        expect(JSON.parse(imported.stdout[0])).to.include({ ok: true, nextIndex: 10, done: true });
      } finally {
        rmSync(cwd, { recursive: true, force: true });
      }
    });

    it('migrate runs the pending migrations on a fresh database, then has nothing to do', async () => {
      const fresh = await createTestDatabase('cli_migrate');
      try {
        const first = await cliJson(['migrate', '--db', fresh.url]);
        expect(first.code).to.equal(0);
        expect(first.json.ok).to.equal(true);
        expect(first.json.executed).to.be.an('array').that.is.not.empty;
        const second = await cliJson(['migrate', '--db', fresh.url]);
        expect(second.json).to.deep.include({ ok: true, executed: [] });
        const opened = await fresh.open();
        expect(await count(opened, 'SELECT COUNT(*) FROM checkpoint_imports')).to.equal(0);
      } finally {
        await fresh.drop();
      }
    });

    it('exits 2 with INVALID_ARGUMENT on usage errors, printing the code (as JSON with --json)', async () => {
      const path = file('usage.csv', csv(sampleRows(3)));
      const runs = await Promise.all([
        cli(['frobnicate', ...db]),
        cli(['import', path, ...db]), // no --batch
        cli(['import', path, '--batch', 'usage', '--size', '0', ...db]),
        cli(['import', path, '--batch', 'usage', '--format', 'xml', ...db]),
        cli(['import', file('usage.xml', 'id,value\n'), '--batch', 'usage', ...db]), // unknown extension
        cli(['import', join(dir, 'missing.csv'), '--batch', 'usage', ...db]),
        cli(['status', '--db', 'oracle://nope']),
        cli([]),
      ]);
      for (const run of runs) {
        expect(run.code, run.stderr).to.equal(2);
        expect(run.stderr).to.include('INVALID_ARGUMENT');
      }
      const json = await cliJson(['import', path, '--size', 'many', ...db]);
      expect(json.code).to.equal(2);
      expect(json.json).to.include({ ok: false, code: 'INVALID_ARGUMENT' });
      expect(json.json.message).to.be.a('string');
      expect(await count(database.ds, sql('SELECT COUNT(*) FROM checkpoint_imports WHERE id = ?'), ['usage'])).to.equal(0);
    });

    it('exits 1 with DATABASE_ERROR when the database cannot be reached', async () => {
      // PostgreSQL/MySQL: nothing listens on port 1; SQLite: the database file's "directory" is a plain file.
      const blocker = file('not-a-directory', '');
      const unreachable =
        DRIVER === 'postgres'
          ? 'postgres://postgres@127.0.0.1:1/none'
          : DRIVER === 'mysql'
            ? 'mysql://root@127.0.0.1:1/none'
            : `sqlite:${join(blocker, 'x.sqlite')}`;
      const [json, human] = await Promise.all([cliJson(['status', '--db', unreachable]), cli(['list', '--db', unreachable])]);
      expect(json.code).to.equal(1);
      expect(json.json).to.include({ ok: false, code: 'DATABASE_ERROR' });
      expect(human.code).to.equal(1);
      expect(human.stderr).to.include('DATABASE_ERROR');
    });

    it('--help and --version exit 0', async () => {
      const [help, version] = await Promise.all([cli(['--help']), cli(['--version'])]);
      expect(help.code).to.equal(0);
      expect(help.stdout.join('\n')).to.include('import').and.include('migrate');
      expect(version.code).to.equal(0);
      expect(version.stdout[0]).to.match(/^\d+\.\d+\.\d+/);
    });
  });
});
