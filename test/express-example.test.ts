import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { checkpoint, values } from '../src';
import type { ImportReport } from '../examples/express/import-runs';
import { type Child, kill, startChild } from './support/child';
import { count, DRIVER, sql, useTestDatabase } from './support/database';

const SERVER = 'examples/express/server.ts';

interface Server {
  child: Child;
  url: string;
}

function event(line: string): Record<string, unknown> | null {
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return null;
  }
}

/** Waits for the server's JSON log line of `name` (for `batch`, when given) and returns it. */
async function waitForEvent(
  server: Server,
  name: string,
  match: (e: Record<string, unknown>) => boolean = () => true,
): Promise<Record<string, unknown>> {
  const line = await server.child.waitForLine((text) => {
    const parsed = event(text);
    return parsed !== null && parsed.event === name && match(parsed);
  });
  return event(line) as Record<string, unknown>;
}

async function postImport(
  server: Server,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown>; location: string | null }> {
  const response = await fetch(`${server.url}/imports`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown>, location: response.headers.get('location') };
}

async function getImport(server: Server, batch: string): Promise<{ status: number; body: ImportReport & { code?: string } }> {
  const response = await fetch(`${server.url}/imports/${encodeURIComponent(batch)}`);
  return { status: response.status, body: (await response.json()) as ImportReport & { code?: string } };
}

/** NDJSON rows `r000000…` with values derived from the index, so every row can be checked. */
function writeRows(path: string, rows: number, value: (i: number) => number = (i) => i * 7 - 3): [string, number][] {
  const expected: [string, number][] = [];
  const lines: string[] = [];
  for (let i = 0; i < rows; i++) {
    const id = `r${String(i).padStart(6, '0')}`;
    expected.push([id, value(i)]);
    lines.push(JSON.stringify({ id, value: value(i) }));
  }
  writeFileSync(path, `${lines.join('\n')}\n`);
  return expected;
}

describe(`examples/express: resumable imports over HTTP (${DRIVER})`, () => {
  const db = useTestDatabase('express');
  let dir: string;
  const servers: Server[] = [];

  async function startServer(): Promise<Server> {
    const child = startChild(SERVER, [], { DATABASE_URL: db.url, PORT: '0' });
    const server: Server = { child, url: '' };
    servers.push(server);
    server.url = String((await waitForEvent(server, 'listening')).url);
    return server;
  }

  async function itemRows(batch: string): Promise<number> {
    return count(db.ds, sql('SELECT COUNT(*) AS n FROM checkpoint_import_items WHERE batch = ?'), [batch]);
  }

  before(() => (dir = mkdtempSync(join(tmpdir(), 'ck-express-'))));

  afterEach(async () => {
    for (const server of servers.splice(0)) await kill(server.child);
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  it('POST /imports starts an import in the background; GET /imports/:batch reports it', async () => {
    const file = join(dir, 'small.ndjson');
    const expected = writeRows(file, 10);
    const server = await startServer();

    const started = await postImport(server, { batch: 'small', path: file, size: 3 });
    expect(started.status).to.equal(202);
    expect(started.location).to.equal('/imports/small');
    expect(started.body).to.include({ batch: 'small', state: 'running' });
    await waitForEvent(server, 'done', (e) => e.batch === 'small');

    const report = await getImport(server, 'small');
    expect(report.status).to.equal(200);
    expect(report.body).to.deep.equal({ batch: 'small', state: 'done', nextIndex: 10, totalRows: 10 });
    expect(await values(db.ds, 'small')).to.deep.equal(expected);

    // Posting a finished import again is a no-op that reports it done.
    expect((await postImport(server, { batch: 'small', path: file, size: 3 })).status).to.equal(202);
    await waitForEvent(server, 'done', (e) => e.batch === 'small' && e.rows === 0);
    expect(await itemRows('small')).to.equal(10);
  });

  it('answers 400 INVALID_ARGUMENT for a bad body and 404 for an unknown batch', async () => {
    const server = await startServer();
    for (const body of [
      { path: '/x.csv' },
      { batch: 'b', path: '' },
      { batch: 'b', path: '/x.csv', size: 0 },
      { batch: 'b', path: '/x', format: 'xml' },
      '{not json',
    ]) {
      const response = await postImport(server, body);
      expect(response.status, JSON.stringify(body)).to.equal(400);
      expect(response.body.code).to.equal('INVALID_ARGUMENT');
    }
    const unknown = await getImport(server, 'never-started');
    expect(unknown.status).to.equal(404);
    expect(unknown.body.code).to.equal('NOT_FOUND');
  });

  it('refuses another file under a finished batch (FINGERPRINT_MISMATCH) and changes nothing', async () => {
    const original = join(dir, 'guarded.ndjson');
    const expected = writeRows(original, 6);
    const other = join(dir, 'guarded-other.ndjson');
    writeRows(other, 6, (i) => i);
    const server = await startServer();
    await postImport(server, { batch: 'guarded', path: original });
    await waitForEvent(server, 'done', (e) => e.batch === 'guarded');

    expect((await postImport(server, { batch: 'guarded', path: other })).status).to.equal(202);
    const failed = await waitForEvent(server, 'failed', (e) => e.batch === 'guarded');
    expect(failed.code).to.equal('FINGERPRINT_MISMATCH');
    const report = await getImport(server, 'guarded');
    expect(report.body).to.deep.include({ state: 'failed', nextIndex: 6, totalRows: 6 });
    expect(report.body.error?.code).to.equal('FINGERPRINT_MISMATCH');
    expect(await values(db.ds, 'guarded')).to.deep.equal(expected);
  });

  it('resumes after the server is killed with SIGKILL mid-import: every row exactly once', async () => {
    const rows = 20_000;
    const file = join(dir, 'large.ndjson');
    const expected = writeRows(file, rows);
    const first = await startServer();
    expect((await postImport(first, { batch: 'large', path: file, size: 100 })).status).to.equal(202);
    // Killed a few chunks in, while the import is far from its end (200 chunks).
    await waitForEvent(first, 'progress', (e) => e.batch === 'large' && Number(e.rows) >= 300);
    await kill(first.child);

    const committed = (await checkpoint(db.ds, 'large')) as number;
    expect(committed).to.be.at.least(300);
    expect(committed).to.be.below(rows);
    expect(committed % 100).to.equal(0);
    // The rows and the checkpoint committed together: none of the chunk in flight survived.
    expect(await itemRows('large')).to.equal(committed);

    const second = await startServer();
    const interrupted = await getImport(second, 'large');
    expect(interrupted.body).to.deep.equal({ batch: 'large', state: 'stopped', nextIndex: committed, totalRows: rows });
    expect((await postImport(second, { batch: 'large', path: file, size: 100 })).status).to.equal(202);
    const done = await waitForEvent(second, 'done', (e) => e.batch === 'large');
    expect(done).to.include({ nextIndex: rows, rows: rows - committed });

    expect((await getImport(second, 'large')).body).to.deep.equal({ batch: 'large', state: 'done', nextIndex: rows, totalRows: rows });
    expect(await itemRows('large')).to.equal(rows);
    expect(await count(db.ds, sql('SELECT COUNT(DISTINCT id) AS n FROM checkpoint_import_items WHERE batch = ?'), ['large'])).to.equal(
      rows,
    );
    expect(await values(db.ds, 'large')).to.deep.equal(expected);
  });

  it('on SIGTERM stops after the chunk in flight commits and exits cleanly; a later POST resumes', async () => {
    const rows = 20_000;
    const file = join(dir, 'graceful.ndjson');
    const expected = writeRows(file, rows);
    const first = await startServer();
    await postImport(first, { batch: 'graceful', path: file, size: 100 });
    await waitForEvent(first, 'progress', (e) => e.batch === 'graceful' && Number(e.rows) >= 300);
    first.child.process.kill('SIGTERM');
    const stopped = await waitForEvent(first, 'stopped', (e) => e.batch === 'graceful');
    expect(await first.child.exited).to.deep.equal({ code: 0, signal: null });
    const committed = (await checkpoint(db.ds, 'graceful')) as number;
    expect(stopped.nextIndex).to.equal(committed);
    expect(committed).to.be.below(rows);
    expect(await itemRows('graceful')).to.equal(committed);

    const second = await startServer();
    await postImport(second, { batch: 'graceful', path: file, size: 100 });
    await waitForEvent(second, 'done', (e) => e.batch === 'graceful');
    expect(await values(db.ds, 'graceful')).to.deep.equal(expected);
  });
});
