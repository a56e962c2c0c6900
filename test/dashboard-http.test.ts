import connect from 'connect';
import express from 'express';
import { expect } from 'chai';
import type { IncomingMessage } from 'node:http';
import { type BeforeQueryEvent, DataSource, type EntitySubscriberInterface, QueryFailedError } from 'typeorm';
import {
  checkpointEntities,
  CheckpointManager,
  createDashboard,
  type DashboardOptions,
  dataSourceOptionsFromUrl,
  eachBatch,
  importFile,
  type FilesData,
  type JobsData,
  listPartitions,
  type OverviewData,
} from '../src';
import { readRowsDirectly, rowMaker } from '../src/dialect/sqlite-read-rows';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqlLog } from './support/sql-log';
import { TYPESCRIPT_NODE_ARGS } from './support/child';
import type { ImportsData } from '../src/dashboard/imports-page';
import type { ImportRejectsData } from '../src/dashboard/import-rejects-page';
import { count, DRIVER, sql, useTestDatabase } from './support/database';
import { html, raw } from '../src/dashboard/html';
import { countCell, formatCount, formatRate, formatTime, queryValue, rateCell, timeCell } from '../src/dashboard/layout';
import { DashboardSearchIndexes1765065600000 } from '../migrations/1765065600000-DashboardSearchIndexes';
import { CheaperFileUpdates1765238400000 } from '../migrations/1765238400000-CheaperFileUpdates';
import { ThrottledUntil1765756800000 } from '../migrations/1765756800000-ThrottledUntil';
import {
  type DashboardState,
  HOSTILE,
  makePartitionedState,
  makeState,
  type PartitionedState,
  RECORDS,
  useDashboardServers,
} from './support/dashboard-state';

describe(`dashboard over HTTP (${DRIVER})`, function () {
  const db = useTestDatabase('dashboard_http');
  let state: DashboardState;
  const { listen, start, json } = useDashboardServers(() => db.ds);

  before(async () => {
    state = await makeState(db.ds);
  });

  async function fileStatus(url: string): Promise<string> {
    const rows = (await db.ds.query(sql('SELECT status FROM file_checkpoints WHERE file_url = ?'), [url])) as { status: string }[];
    return rows[0].status;
  }

  function requeueForm(url: string): string {
    return new URLSearchParams({ one: url, back: 'files?status=dead' }).toString();
  }

  const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

  it('serves every page as HTML and its data as JSON under api/, from the same state', async () => {
    const base = await start();
    const overview = await json<OverviewData>(`${base}/api/overview`);
    expect(overview.page).to.equal('overview');
    expect(overview.problems.map((p) => p.kind)).to.deep.equal(['dead-letters']);
    expect(overview.problems[0].examples).to.deep.equal([{ name: HOSTILE.file, detail: HOSTILE.error }]);
    expect(overview.jobs).to.deep.equal({ running: 0, stalled: 0, done: 1 });
    expect(overview.steps).to.deep.equal({ recorded: 1, pending: 0 });
    expect(overview.imports).to.deep.equal({ total: 2, done: 2 });
    expect(overview.files).to.include({ all: 2, pending: 1, failed: 1, dead: 1, completed: 0, processing: 0 });

    const jobs = await json<JobsData>(`${base}/api/jobs`);
    expect(
      jobs.items.map(({ name, kind, done, items, batches, partitions }) => ({ name, kind, done, items, batches, partitions })),
    ).to.deep.equal([{ name: HOSTILE.job, kind: 'batch', done: true, items: 3, batches: 1, partitions: null }]);
    expect(jobs.next).to.equal(null);
    const steps = await json<{ items: { name: string; recorded: boolean; value: string }[] }>(`${base}/api/steps`);
    expect(steps.items).to.have.length(1);
    expect(JSON.parse(steps.items[0].value)).to.deep.equal(HOSTILE.stepValue);
    const imports = await json<ImportsData>(`${base}/api/imports`);
    expect(
      imports.items.map(({ batch, rows, total, written, skipped, invalid, chunks }) => ({
        batch,
        rows,
        total,
        written,
        skipped,
        invalid,
        chunks,
      })),
    ).to.deep.equal([
      { batch: HOSTILE.import, rows: 2, total: 2, written: 2, skipped: 0, invalid: 0, chunks: 1 },
      {
        batch: HOSTILE.records,
        rows: RECORDS.total,
        total: RECORDS.total,
        written: RECORDS.written,
        skipped: RECORDS.skipped,
        invalid: RECORDS.invalid.length,
        chunks: RECORDS.chunks,
      },
    ]);
    for (const item of imports.items) {
      expect(item.done).to.equal(true);
      expect(item.etaMs).to.equal(null);
      expect(item.startedAt).to.be.a('number').and.at.most(item.lastCommitAt!);
    }
    const dead = await json<FilesData>(`${base}/api/files?status=dead`);
    expect(dead.items.map((f) => [f.url, f.dead, f.error])).to.deep.equal([[HOSTILE.file, true, HOSTILE.error]]);
    expect(dead.throughput.completed).to.have.length(60);

    const rejectsPath = `/imports/rejects?batch=${encodeURIComponent(HOSTILE.records)}`;
    for (const path of ['/', '/jobs', '/steps', '/imports', rejectsPath, '/files', `/jobs/reset?name=${encodeURIComponent(HOSTILE.job)}`]) {
      const response = await fetch(base + path);
      expect(response.status, path).to.equal(200);
      const page = await response.text();
      expect(page, path).to.not.include('<script>window');
      expect(page, path).to.not.match(/<img src=x/);
      // All ASCII (sent as such): the names and errors outside ASCII are there as character references.
      expect(page, path).to.match(/^[\x00-\x7f]*$/);
      expect(response.headers.get('content-length'), path).to.equal(String(page.length));
    }
    expect(await (await fetch(`${base}/jobs`)).text()).to.include('&#8212; &#220;n&#239;c&#246;d&#233; &#9731; &#20013;');
  });

  it('reads as TypeORM would: the same data as with query subscribers (which see each statement), and each statement logged', async () => {
    const seen: string[] = [];
    class QueryWatcher implements EntitySubscriberInterface {
      beforeQuery(event: BeforeQueryEvent): void {
        seen.push(event.query);
      }
    }
    const log = new SqlLog();
    const logged = new DataSource({ ...dataSourceOptionsFromUrl(db.url), entities: checkpointEntities, logger: log, logging: true });
    const watched = new DataSource({ ...dataSourceOptionsFromUrl(db.url), entities: checkpointEntities });
    await logged.initialize();
    await watched.initialize();
    watched.subscribers.push(new QueryWatcher());
    try {
      const served = async (ds: DataSource) => (await listen((req, res) => void createDashboard(ds)(req, res))).url;
      const [direct, throughTypeorm] = [await served(logged), await served(watched)];
      for (const path of ['jobs', 'steps', 'imports', 'files', 'files?status=dead', 'files?q=a']) {
        log.clear();
        seen.length = 0;
        // The throughput chart's hour ends at the request's time: left out.
        const data = async (base: string) => ({ ...(await json<Record<string, unknown>>(`${base}/api/${path}`)), throughput: undefined });
        expect(await data(direct), path).to.deep.equal(await data(throughTypeorm));
        const selects = (statements: string[]) => statements.filter((text) => /^\s*(SELECT|WITH)/i.test(text));
        expect(selects(log.queries.map((query) => query.sql)), path).to.deep.equal(selects(seen)).and.not.be.empty;
      }
    } finally {
      await logged.destroy();
      await watched.destroy();
    }
  });

  it('reads SQLite rows directly only on better-sqlite3; a failing read is logged and raised as QueryFailedError', async () => {
    const log = new SqlLog();
    const errors: string[] = [];
    log.logQueryError = ((error: string | Error) => void errors.push(String(error))) as SqlLog['logQueryError'];
    const logged = new DataSource({ ...dataSourceOptionsFromUrl(db.url), entities: checkpointEntities, logger: log, logging: true });
    await logged.initialize();
    log.clear();
    try {
      const read = () => readRowsDirectly(logged, 'SELECT "name", "done" FROM "checkpoint_jobs" WHERE "name" = ?', ['no such job']);
      if (logged.options.type !== 'better-sqlite3') {
        expect(read()).to.equal(undefined);
        expect(log.queries).to.deep.equal([]);
        return;
      }
      expect(read()).to.deep.equal([]);
      expect(readRowsDirectly(logged, 'SELECT 1 AS "one", ? AS "two"', [true])).to.deep.equal([{ one: 1, two: 1 }]);
      const [odd] = readRowsDirectly(logged, `SELECT 1 AS "__proto__", 2 AS "a'}""\\", 3 AS "constructor"`, [])!;
      expect(Object.getPrototypeOf(odd)).to.equal(Object.prototype);
      expect(Object.entries(odd)).to.deep.equal([
        ['__proto__', 1],
        ['a\'}"\\', 2],
        ['constructor', 3],
      ]);
      expect(() => readRowsDirectly(logged, 'SELECT "nope" FROM "no_such_table"', [])).to.throw(QueryFailedError);
      expect(log.queries.map((query) => query.sql)).to.have.length(4);
      expect(errors).to.have.length(1);
    } finally {
      await logged.destroy();
    }
  });

  it("lists a batch's rejects in row order, keyset-paginated, escaped; the imports page links to them", async () => {
    const base = await start();
    const batch = encodeURIComponent(HOSTILE.records);
    const first = await json<ImportRejectsData>(`${base}/api/imports/rejects?batch=${batch}&limit=1`);
    expect(first.items.map((reject) => reject.rowIndex)).to.deep.equal([RECORDS.invalid[0]]);
    expect(first.items[0]).to.deep.include({ raw: `${HOSTILE.reject},many` });
    expect(first.items[0].reason).to.match(/^qty: /);
    expect(first.next).to.equal(String(RECORDS.invalid[0]));
    const second = await json<ImportRejectsData>(`${base}/api/imports/rejects?batch=${batch}&limit=1&after=${first.next}`);
    expect(second.items.map((reject) => reject.rowIndex)).to.deep.equal([RECORDS.invalid[1]]);
    expect(second.next).to.equal(null);
    const all = await json<ImportRejectsData>(`${base}/api/imports/rejects?batch=${batch}`);
    expect(all.items.map((reject) => reject.rowIndex)).to.deep.equal(RECORDS.invalid);
    const none = await json<ImportRejectsData>(`${base}/api/imports/rejects?batch=${encodeURIComponent(HOSTILE.import)}`);
    expect(none.items).to.deep.equal([]);

    const page = await (await fetch(`${base}/imports/rejects?batch=${batch}`)).text();
    expect(page).to.include(html`<code class="raw">${HOSTILE.reject},many</code>`.text);
    expect(page).to.not.include(HOSTILE.reject);
    const imports = await (await fetch(`${base}/imports`)).text();
    expect(imports).to.include(html`href="/imports/rejects?batch=${encodeURIComponent(HOSTILE.records)}"`.text);
    expect(imports).to.match(/<progress max="6" value="6">/);

    for (const query of ['', `batch=${batch}&after=-1`, `batch=${batch}&after=x`]) {
      const response = await fetch(`${base}/api/imports/rejects?${query}`);
      expect(response.status, query).to.equal(400);
      expect(((await response.json()) as { error: { code: string } }).error.code).to.equal('INVALID_ARGUMENT');
    }
  });

  it('filters in the URL: an unknown filter value is 400 INVALID_ARGUMENT; search finds by URL substring', async () => {
    const base = await start();
    const response = await fetch(`${base}/api/files?status=bogus`);
    expect(response.status).to.equal(400);
    expect(((await response.json()) as { error: { code: string } }).error.code).to.equal('INVALID_ARGUMENT');
    const found = await json<FilesData>(`${base}/api/files?q=${encodeURIComponent('pending.c')}`);
    expect(found.items.map((f) => f.url)).to.deep.equal([state.pendingUrl]);
    const literal = await json<FilesData>(`${base}/api/files?q=${encodeURIComponent('%')}`);
    expect(literal.items).to.deep.equal([]);
  });

  it('refuses a cross-origin POST, or one with neither Sec-Fetch-Site nor Origin (403), and changes nothing', async () => {
    const base = await start();
    const attempts: Record<string, string>[] = [
      { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' },
      { origin: 'http://evil.example' },
      {},
    ];
    for (const headers of attempts) {
      const response = await fetch(`${base}/files/requeue`, {
        method: 'POST',
        headers: { ...FORM, ...headers },
        body: requeueForm(state.deadUrl),
        redirect: 'manual',
      });
      expect(response.status, JSON.stringify(headers)).to.equal(403);
    }
    expect(await fileStatus(state.deadUrl)).to.equal('failed');
    const reset = await fetch(`${base}/jobs/reset`, {
      method: 'POST',
      headers: { ...FORM, 'sec-fetch-site': 'same-site' },
      body: `name=${encodeURIComponent(HOSTILE.job)}`,
    });
    expect(reset.status).to.equal(403);
    expect(await count(db.ds, sql('SELECT COUNT(*) FROM checkpoint_jobs WHERE name = ?'), [HOSTILE.job])).to.equal(1);
  });

  it('read-only: no action controls, and every POST is 403 even from the same origin', async () => {
    const base = await start({ readOnly: true });
    const page = await (await fetch(`${base}/files?status=dead`)).text();
    expect(page).to.include('dead letter');
    expect(page).to.not.include('method="post"');
    // No "Reset…" link on the jobs page (it is there when writes are allowed: the first test's page).
    expect(await (await fetch(`${base}/jobs`)).text()).to.not.include('jobs/reset');
    const response = await fetch(`${base}/files/requeue`, {
      method: 'POST',
      headers: { ...FORM, 'sec-fetch-site': 'same-origin' },
      body: requeueForm(state.deadUrl),
    });
    expect(response.status).to.equal(403);
    expect(await fileStatus(state.deadUrl)).to.equal('failed');
  });

  it("authorize: 'read' shows pages without actions and refuses POSTs; 'none' refuses everything", async () => {
    const seen: string[] = [];
    const base = await start({
      authorize: (req: IncomingMessage) => {
        seen.push(String(req.headers['x-user']));
        return req.headers['x-user'] === 'viewer' ? 'read' : 'none';
      },
    });
    const viewer = { 'x-user': 'viewer' };
    const page = await fetch(`${base}/files?status=dead`, { headers: viewer });
    expect(page.status).to.equal(200);
    expect(await page.text()).to.not.include('method="post"');
    const post = await fetch(`${base}/files/requeue`, {
      method: 'POST',
      headers: { ...FORM, ...viewer, 'sec-fetch-site': 'same-origin' },
      body: requeueForm(state.deadUrl),
    });
    expect(post.status).to.equal(403);
    // Every request, a path the dashboard does not know included (served alone, with no application behind it).
    for (const path of ['/', '/api/overview', '/files', '/assets/dashboard.js', '/nope', '/api/nope']) {
      expect((await fetch(`${base}${path}`, { headers: { 'x-user': 'stranger' } })).status, path).to.equal(403);
    }
    expect(await fileStatus(state.deadUrl)).to.equal('failed');
    expect(seen).to.include('viewer').and.to.include('stranger');
  });

  it('markup kept per URL (head, tabs, search form) follows the query and the write access of each request', async () => {
    const base = await start({ authorize: (req: IncomingMessage) => (req.headers['x-user'] === 'viewer' ? 'read' : 'write') });
    const page = async (path: string, user = 'admin') => (await fetch(`${base}${path}`, { headers: { 'x-user': user } })).text();
    for (let round = 0; round < 2; round++) {
      const writer = await page('/jobs?state=done&q=job');
      expect(writer).to.include('jobs/reset?name=');
      expect(writer).to.not.include('read-only');
      expect(writer).to.include('href="/jobs?state=running&amp;q=job"').and.to.include('name="q" value="job"');
      expect(writer).to.include('aria-current="page">done</a>');
      expect(writer).to.not.include('aria-current="page">all</a>');
      const reader = await page('/jobs?state=done&q=job', 'viewer');
      expect(reader).to.include('<span class="badge">read-only</span>');
      expect(reader).to.not.include('jobs/reset?name=');
      const all = await page('/jobs');
      expect(all).to.include('aria-current="page">all</a>');
      expect(all).to.not.include('aria-current="page">done</a>');
      expect(all).to.include('href="/jobs?state=running"').and.to.include('name="q" value=""');
      expect(await page('/steps?state=pending&q=job'))
        .to.include('<title>Steps &middot; ')
        .and.to.include('href="/steps?state=all&amp;q=job"');
      // A long query is made every time, not kept.
      const long = 'x'.repeat(3000 + round);
      expect(await page(`/jobs?q=${long}`)).to.include(`name="q" value="${long}"`);
    }
  });

  it('a same-origin POST requeues the selected dead letters and redirects back (303)', async () => {
    const base = await start({ authorize: async () => 'write' as const });
    const response = await fetch(`${base}/files/requeue`, {
      method: 'POST',
      headers: { ...FORM, origin: base },
      body: new URLSearchParams([
        ['url', state.deadUrl],
        ['selected', '1'],
        ['back', 'files?status=dead'],
      ]).toString(),
      redirect: 'manual',
    });
    expect(response.status).to.equal(303);
    expect(response.headers.get('location')).to.equal('/files?status=dead');
    expect(await fileStatus(state.deadUrl)).to.equal('pending');
    // Make it dead again for the other tests.
    const manager = new CheckpointManager(db.ds, { maxRetries: 0 });
    await db.ds.query(sql('UPDATE file_checkpoints SET max_retries = 0 WHERE file_url = ?'), [state.deadUrl]);
    expect(await manager.claimFile(state.deadUrl, 'csv', new Date(0))).to.equal(true);
    await manager.failFile(state.deadUrl, HOSTILE.error);
  });

  it('mounted in Express under a nested path: redirects the bare mount point to its slash and links under it', async () => {
    const app = express();
    app.use('/ops/nested', createDashboard(db.ds));
    app.use((_req, res) => void res.status(404).send('app 404'));
    const server = await listen(app);
    const bare = await fetch(`${server.url}/ops/nested?x=1`, { redirect: 'manual' });
    expect(bare.status).to.equal(302);
    expect(bare.headers.get('location')).to.equal('/ops/nested/?x=1');
    const page = await (await fetch(`${server.url}/ops/nested/`)).text();
    const links = [...page.matchAll(/(?:href|src|action)="([^"]+)"/g)].map((m) => m[1].replace(/&amp;/g, '&'));
    expect(links.length).to.be.greaterThan(5);
    for (const link of links) expect(link, link).to.match(/^\/ops\/nested\//);
    // Paths the dashboard does not know fall through to the application.
    expect(await (await fetch(`${server.url}/ops/nested/nope`)).text()).to.equal('app 404');
  });

  it('mounted in Connect under a nested path (which sets no baseUrl): links, assets and the redirect after a POST stay under it', async () => {
    const app = connect();
    const dashboard = createDashboard(db.ds);
    app.use(
      '/ops/nested',
      (req: IncomingMessage, res: import('node:http').ServerResponse, next: (error?: unknown) => void) => void dashboard(req, res, next),
    );
    app.use((_req: IncomingMessage, res: import('node:http').ServerResponse) => {
      res.statusCode = 404;
      res.end('app 404');
    });
    const server = await listen(app);
    const bare = await fetch(`${server.url}/ops/nested?x=1`, { redirect: 'manual' });
    expect(bare.headers.get('location')).to.equal('/ops/nested/?x=1');
    const page = await (await fetch(`${server.url}/ops/nested/files?status=dead`)).text();
    const links = [...page.matchAll(/(?:href|src|action)="([^"]+)"/g)].map((m) => m[1].replace(/&amp;/g, '&'));
    expect(links.length).to.be.greaterThan(5);
    for (const link of links) expect(link, link).to.match(/^\/ops\/nested\//);
    for (const asset of links.filter((link) => /\.(js|css)$/.test(link)))
      expect((await fetch(`${server.url}${asset}`)).status, asset).to.equal(200);
    // An action redirects back under the mount point.
    const posted = await fetch(`${server.url}/ops/nested/files/requeue`, {
      method: 'POST',
      headers: { ...FORM, origin: server.url },
      body: new URLSearchParams([
        ['url', state.deadUrl],
        ['selected', '1'],
        ['back', 'files?status=dead'],
      ]).toString(),
      redirect: 'manual',
    });
    expect(posted.status).to.equal(303);
    expect(posted.headers.get('location')).to.equal('/ops/nested/files?status=dead');
    expect(await fileStatus(state.deadUrl)).to.equal('pending');
    // Make it dead again for the other tests.
    await db.ds.query(sql('UPDATE file_checkpoints SET max_retries = 0 WHERE file_url = ?'), [state.deadUrl]);
    const manager = new CheckpointManager(db.ds, { maxRetries: 0 });
    expect(await manager.claimFile(state.deadUrl, 'csv', new Date(0))).to.equal(true);
    await manager.failFile(state.deadUrl, HOSTILE.error);
    expect(await (await fetch(`${server.url}/ops/nested/nope`)).text()).to.equal('app 404');
  });

  it('keyset pagination visits each of 10,000 files exactly once', async function () {
    const manager = new CheckpointManager(db.ds);
    const urls = Array.from({ length: 10_000 }, (_, i) => `s3://many/${String(i).padStart(5, '0')}-${(i * 7919) % 10_000}.csv`);
    await manager.register(urls.map((fileUrl) => ({ fileUrl, fileType: 'csv', fileTimestamp: new Date(0) })));
    const base = await start();
    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const query = new URLSearchParams({ q: 's3://many/', limit: '500', status: 'pending', ...(after !== null ? { after } : {}) });
      const page: FilesData = await json<FilesData>(`${base}/api/files?${query.toString()}`);
      seen.push(...page.items.map((f) => f.url));
      after = page.next;
      pages += 1;
    } while (after !== null);
    expect(seen).to.have.length(10_000);
    expect(new Set(seen).size).to.equal(10_000);
    expect([...seen].sort()).to.deep.equal([...urls].sort());
    expect(pages).to.equal(20);
  });

  it('draws the files completed in the last hour, per minute, as SVG on the server', async () => {
    const manager = new CheckpointManager(db.ds);
    const result = await manager.processFile(state.pendingUrl, 'csv', new Date(0), () => ({
      totalRows: 1,
      filteredRows: 0,
      persistedRows: 1,
    }));
    expect(result.claimed).to.equal(true);
    const base = await start();
    const files = await json<FilesData>(`${base}/api/files?status=completed`);
    expect(files.throughput.completed.reduce((a, b) => a + b, 0)).to.equal(1);
    expect(files.throughput.completed[59] + files.throughput.completed[58]).to.equal(1);
    const page = await (await fetch(`${base}/files`)).text();
    expect(page.match(/<rect class="bar"/g)).to.have.length(1);
    expect(page).to.include('Files completed per minute, last hour: 1');
  });
});

describe(`dashboard: partitioned jobs over HTTP (${DRIVER})`, function () {
  const db = useTestDatabase('dashboard_partitions_http');
  let state: PartitionedState;
  const { start, json } = useDashboardServers(() => db.ds);
  const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

  before(async () => {
    state = await makePartitionedState(db.ds);
  });

  const statuses = async () => (await listPartitions(db.ds, state.job)).map((range) => range.status);
  const retryForm = () => new URLSearchParams({ name: state.job, back: 'jobs?state=dead' }).toString();

  it("lists the partitioned job with its progress and each range: state, rows, the dead range's error", async () => {
    const base = await start();
    const jobs = await json<JobsData>(`${base}/api/jobs`);
    expect(jobs.items.map((job) => [job.name, job.kind, job.done])).to.deep.equal([[state.job, 'partitioned', false]]);
    const [job] = jobs.items;
    expect(job.partitions!.counts).to.deep.equal({ pending: 0, running: 0, done: 3, dead: 1 });
    expect(job.partitions!.ranges.map(({ index, state, items, batches }) => ({ index, state, items, batches }))).to.deep.equal(
      state.ranges.map(({ index, status, items, batches }) => ({ index, state: status, items, batches })),
    );
    const total = state.ranges.reduce((sum, range) => sum + range.items, 0);
    expect(total).to.be.greaterThan(0).and.lessThan(400);
    expect(job.items).to.equal(total);
    // Only the dead range is left, and it waits for a retry: no ETA.
    expect(job.etaMs).to.equal(null);
    expect(job.partitions!.ranges.find((range) => range.index === state.dead.index)!.error).to.equal(HOSTILE.rangeError);
    // Only the partitioned job has a dead range; the "dead" tab lists it, "stalled" (batch jobs) does not.
    expect((await json<JobsData>(`${base}/api/jobs?state=dead`)).items.map((item) => item.name)).to.deep.equal([state.job]);
    expect((await json<JobsData>(`${base}/api/jobs?state=stalled`)).items).to.deep.equal([]);
    expect((await json<JobsData>(`${base}/api/jobs?state=running`)).items.map((item) => item.name)).to.deep.equal([state.job]);

    const page = await (await fetch(`${base}/jobs`)).text();
    expect(page.match(/class="range range-[a-z]+"/g)).to.have.length(4);
    expect(page.match(/class="range range-dead"/g)).to.have.length(1);
    expect(page).to.include('<progress max="4" value="3">');
    expect(page).to.include('Retry dead ranges');
    expect(page).to.not.include('<script>window');
  });

  it("puts the dead range among the overview's problems, linking to the jobs with dead ranges", async () => {
    const base = await start();
    const overview = await json<OverviewData>(`${base}/api/overview`);
    expect(overview.problems.map((problem) => [problem.kind, problem.count, problem.path])).to.deep.equal([
      ['dead-ranges', 1, 'jobs?state=dead'],
    ]);
    expect(overview.problems[0].examples).to.deep.equal([{ name: `${state.job} #${state.dead.index}`, detail: HOSTILE.rangeError }]);
    expect(overview.jobs).to.deep.equal({ running: 1, stalled: 0, done: 0 });
  });

  it('refuses "retry dead ranges" cross-origin, read-only or with authorize "read" (403), changing nothing; hides the control', async () => {
    const before = await statuses();
    const plain = await start();
    const attempts: Record<string, string>[] = [{ origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' }, {}];
    for (const headers of attempts) {
      const response = await fetch(`${plain}/jobs/retry-dead-ranges`, {
        method: 'POST',
        headers: { ...FORM, ...headers },
        body: retryForm(),
        redirect: 'manual',
      });
      expect(response.status, JSON.stringify(headers)).to.equal(403);
    }
    const readOnly = await start({ readOnly: true });
    expect(await (await fetch(`${readOnly}/jobs`)).text()).to.not.include('retry-dead-ranges');
    const viewer = await start({ authorize: () => 'read' });
    expect(await (await fetch(`${viewer}/jobs`)).text()).to.not.include('retry-dead-ranges');
    for (const base of [readOnly, viewer]) {
      const response = await fetch(`${base}/jobs/retry-dead-ranges`, {
        method: 'POST',
        headers: { ...FORM, 'sec-fetch-site': 'same-origin' },
        body: retryForm(),
      });
      expect(response.status).to.equal(403);
    }
    expect(await statuses()).to.deep.equal(before);
    expect(before).to.include('dead');
  });

  it('an unknown or empty job name is 400 INVALID_ARGUMENT; a same-origin POST calls retryDead and redirects back (303)', async () => {
    const base = await start({ authorize: () => 'write' });
    const empty = await fetch(`${base}/jobs/retry-dead-ranges`, {
      method: 'POST',
      headers: { ...FORM, 'sec-fetch-site': 'same-origin' },
      body: 'name=',
    });
    expect(empty.status).to.equal(400);
    expect(((await empty.json()) as { error: { code: string } }).error.code).to.equal('INVALID_ARGUMENT');
    const asJson = await fetch(`${base}/jobs/retry-dead-ranges`, {
      method: 'POST',
      headers: { ...FORM, 'sec-fetch-site': 'same-origin', accept: 'application/json' },
      body: new URLSearchParams({ name: 'no such job' }).toString(),
    });
    expect(await asJson.json()).to.deep.equal({ revived: 0 });
    const response = await fetch(`${base}/jobs/retry-dead-ranges`, {
      method: 'POST',
      headers: { ...FORM, origin: base },
      body: retryForm(),
      redirect: 'manual',
    });
    expect(response.status).to.equal(303);
    expect(response.headers.get('location')).to.equal('/jobs?state=dead');
    const ranges = await listPartitions(db.ds, state.job);
    expect(ranges.map((range) => range.status)).to.deep.equal(state.ranges.map((range) => (range.status === 'dead' ? 'pending' : 'done')));
    expect((await json<OverviewData>(`${base}/api/overview`)).problems).to.deep.equal([]);
  });

  it('calls a partitioned job stalled when none of its ranges has committed for 10 minutes', async () => {
    const base = await start();
    const longAgo = Date.now() - 11 * 60 * 1000;
    // As if the job and its ranges had last moved 11 minutes ago (no clock of the dashboard's to turn).
    await db.ds.query(sql('UPDATE checkpoint_partitions SET updated_at = ? WHERE job_name = ?'), [longAgo, state.job]);
    // The job's own row older still: its last commit is its ranges'.
    await db.ds.query(sql('UPDATE checkpoint_jobs SET updated_at = ? WHERE name = ?'), [longAgo - 60 * 60 * 1000, state.job]);
    const stalled = await json<JobsData>(`${base}/api/jobs?state=stalled`);
    expect(stalled.items.map((job) => [job.name, job.stalled])).to.deep.equal([[state.job, true]]);
    expect((await json<JobsData>(`${base}/api/jobs?state=running`)).items).to.deep.equal([]);
    const overview = await json<OverviewData>(`${base}/api/overview`);
    expect(overview.problems.map((problem) => [problem.kind, problem.count])).to.deep.equal([['stalled-jobs', 1]]);
    expect(overview.problems[0].examples).to.deep.equal([{ name: state.job, detail: `last commit ${formatTime(longAgo)}` }]);
    expect(overview.jobs).to.deep.equal({ running: 0, stalled: 1, done: 0 });
    // One range committing again is enough to make it running.
    await db.ds.query(sql('UPDATE checkpoint_partitions SET updated_at = ? WHERE job_name = ? AND partition_index = ?'), [
      Date.now(),
      state.job,
      state.dead.index,
    ]);
    expect((await json<JobsData>(`${base}/api/jobs?state=running`)).items.map((job) => [job.name, job.stalled])).to.deep.equal([
      [state.job, false],
    ]);
  });

  it("a partitioned job's reset confirmation says what is forgotten: its plan and ranges, planned again by the next eachPartition", async () => {
    const base = await start();
    const page = await (await fetch(`${base}/jobs/reset?name=${encodeURIComponent(state.job)}`)).text();
    expect(page).to.include('the next <code>eachPartition</code> plans it again');
    expect(page).to.not.include('the next call of the step');
  });

  it('a file whose lease expired on its last attempt is a dead letter on the pages (not a processing row with an expired lease), with its Requeue', async () => {
    const url = 's3://expired/last-attempt.csv';
    const manager = new CheckpointManager(db.ds, { maxRetries: 0, leaseMs: 60_000 });
    expect(await manager.claimFile(url, 'csv', new Date(0))).to.equal(true);
    // As if the worker had died a minute ago (no clock of the dashboard's to turn).
    await db.ds.query(sql('UPDATE file_checkpoints SET lease_expires_at = ? WHERE file_url = ?'), [Date.now() - 60_000, url]);
    const base = await start({ authorize: () => 'write' });
    const overview = await json<OverviewData>(`${base}/api/overview`);
    expect(
      overview.problems.filter((problem) => problem.kind !== 'stalled-jobs').map((problem) => [problem.kind, problem.count]),
    ).to.deep.equal([['dead-letters', 1]]);
    expect(overview.files).to.include({ dead: 1, expiredLeases: 0, processing: 0 });
    const dead = await json<FilesData>(`${base}/api/files?status=dead`);
    expect(dead.items.map((file) => [file.url, file.status, file.dead])).to.deep.equal([[url, 'failed', true]]);
    expect((await json<FilesData>(`${base}/api/files?status=processing`)).items).to.deep.equal([]);
    const page = await (await fetch(`${base}/files?status=dead`)).text();
    expect(page).to.include('Requeue');
    const requeued = await fetch(`${base}/files/requeue`, {
      method: 'POST',
      headers: { ...FORM, origin: base },
      body: new URLSearchParams({ one: url }).toString(),
      redirect: 'manual',
    });
    expect(requeued.status).to.equal(303);
    const [row] = (await db.ds.query(sql('SELECT status FROM file_checkpoints WHERE file_url = ?'), [url])) as { status: string }[];
    expect(row.status).to.equal('pending');
  });
});

describe(`dashboard indexes (${DRIVER})`, function () {
  const db = useTestDatabase('dashboard_indexes');
  const { start, json } = useDashboardServers(() => db.ds);

  it('counts and searches files in every status from the indexes that updates of a file leave alone', async () => {
    const manager = new CheckpointManager(db.ds);
    const urls = ['idx/one.csv', 'idx/two.csv', 'idx/three.csv', 'idx/four.csv'];
    await manager.register(urls.map((fileUrl) => ({ fileUrl, fileType: 'idx', fileTimestamp: new Date(1) })));
    const [first, second, third] = await manager.claimNext(3, { fileType: 'idx' });
    await manager.completeFile(first.fileUrl, { totalRows: 1, filteredRows: 0, persistedRows: 1, durationMs: 1 });
    await manager.failFile(second.fileUrl, 'boom');
    // A file first seen by a claim: inserted by the claim's own statement.
    expect(await manager.claimFile('idx/five.csv', 'idx', new Date(1))).to.equal(true);
    const base = await start();
    const files = await json<FilesData>(`${base}/api/files`);
    expect(files.counts).to.include({ all: 5, pending: 1, processing: 2, completed: 1, failed: 1 });
    expect(files.throughput.completed.reduce((sum, n) => sum + n, 0)).to.equal(1);
    for (const file of [first, second, third, { fileUrl: 'idx/five.csv' }]) {
      const found = await json<FilesData>(`${base}/api/files?q=${encodeURIComponent(file.fileUrl.slice(4, 8))}`);
      expect(found.items.map((f) => f.url)).to.deep.equal([file.fileUrl]);
    }
    if (DRIVER !== 'postgres') return;
    // PostgreSQL: the URLs (and their trigram index) live in a table written once per file, kept in step by triggers.
    const urlRows = () => count(db.ds, "SELECT COUNT(*) FROM file_checkpoint_urls WHERE file_url LIKE 'idx/%'");
    expect(await urlRows()).to.equal(5);
    await db.ds.query("DELETE FROM file_checkpoints WHERE file_url = 'idx/four.csv'");
    expect(await urlRows()).to.equal(4);
    expect((await json<FilesData>(`${base}/api/files?q=four`)).items).to.deep.equal([]);
    const predicates = (await db.ds.query(
      "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'file_checkpoints' AND indexname IN ('IDX_file_checkpoints_open_status', 'IDX_file_checkpoints_completed') ORDER BY indexname",
    )) as { indexname: string; indexdef: string }[];
    expect(predicates.map((row) => [row.indexname, /WHERE (.*)$/.exec(row.indexdef)?.[1]])).to.deep.equal([
      ['IDX_file_checkpoints_completed', "((status)::text = 'completed'::text)"],
      ['IDX_file_checkpoints_open_status', "((status)::text <> 'completed'::text)"],
    ]);
    await db.ds.query('TRUNCATE file_checkpoints');
    expect(await count(db.ds, 'SELECT COUNT(*) FROM file_checkpoint_urls')).to.equal(0);
  });

  it('indexes range states everywhere and, on PostgreSQL with pg_trgm, file URLs by trigrams; running the migration again changes nothing', async () => {
    const indexNames = async () => {
      const runner = db.ds.createQueryRunner();
      try {
        return {
          ranges: (await runner.getTable('checkpoint_partitions'))!.indices.map((index) => index.name),
          trigrams:
            DRIVER === 'postgres'
              ? await count(db.ds, "SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'IDX_file_checkpoint_urls_file_url_trgm'")
              : 0,
          // Moved to file_checkpoint_urls by migration 1765238400000: updates of files add no trigram entries.
          fileTrigrams:
            DRIVER === 'postgres'
              ? await count(db.ds, "SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'IDX_file_checkpoints_file_url_trgm'")
              : 0,
        };
      } finally {
        await runner.release();
      }
    };
    const before = await indexNames();
    expect(before.ranges).to.include('IDX_checkpoint_partitions_status');
    // This machine's PostgreSQL has pg_trgm; the migration leaves the index out only where it is not available.
    expect(before.trigrams).to.equal(DRIVER === 'postgres' ? 1 : 0);
    expect(before.fileTrigrams).to.equal(0);
    const runner = db.ds.createQueryRunner();
    try {
      await new DashboardSearchIndexes1765065600000().up(runner);
      await new CheaperFileUpdates1765238400000().up(runner);
    } finally {
      await runner.release();
    }
    expect(await indexNames()).to.deep.equal(before);
  });
});

describe('dashboard: SQLite row objects', function () {
  // Names that would break or change generated code if spliced into it unescaped, and __proto__.
  const NAMES = ['__proto__', 'a"b', "c'd", 'e\\', '}; globalThis.pwned = 1; ({', '\u2028', 'x', 'x', 'constructor', ''];
  const VALUES = [{ polluted: true }, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  const EXPECTED = [
    ['__proto__', { polluted: true }],
    ['a"b', 1],
    ["c'd", 2],
    ['e\\', 3],
    ['}; globalThis.pwned = 1; ({', 4],
    ['\u2028', 5],
    ['x', 7],
    ['constructor', 8],
    ['', 9],
  ];

  it('makes a plain object of each name as data: own __proto__, last of a repeated name, no code run', function () {
    const row = rowMaker(NAMES)(VALUES);
    expect(Object.getPrototypeOf(row)).to.equal(Object.prototype);
    expect(Object.entries(row)).to.deep.equal(EXPECTED);
    expect((row as { polluted?: unknown }).polluted).to.equal(undefined);
    expect((globalThis as { pwned?: unknown }).pwned).to.equal(undefined);
  });

  it('makes the same objects where code cannot be generated from strings', function () {
    const script = `const { rowMaker } = require(${JSON.stringify(require.resolve('../src/dialect/sqlite-read-rows'))});
      let generated = true; try { new Function('return 1'); } catch { generated = false; }
      const row = rowMaker(${JSON.stringify(NAMES)})(${JSON.stringify(VALUES)});
      process.stdout.write(JSON.stringify({ generated, proto: Object.getPrototypeOf(row) === Object.prototype, entries: Object.entries(row) }));`;
    const out = execFileSync(process.execPath, ['--disallow-code-generation-from-strings', ...TYPESCRIPT_NODE_ARGS, '-e', script], {
      encoding: 'utf8',
    });
    expect(JSON.parse(out)).to.deep.equal({ generated: false, proto: true, entries: EXPECTED });
  });
});

describe('dashboard formatting', function () {
  it('formatTime writes UTC to the second as toISOString does, across leap days, centuries and outside years 0–9999', () => {
    const iso = (ms: number) =>
      new Date(ms)
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, 'Z');
    const cases = [
      0, -1, 951_782_400_000, 951_868_799_999, 4_107_542_400_000, 1_796_121_380_218, -62_162_035_200_000, -62_162_035_200_001,
      253_402_300_799_999, 253_402_300_800_000, 8.64e15,
    ];
    for (let i = 0; i < 2000; i++) cases.push(Math.floor((i - 1000) * 123_456_789_013.7));
    for (const ms of cases) expect(formatTime(ms), String(ms)).to.equal(iso(ms));
    expect(formatTime(null)).to.equal('—');
  });

  it('countCell, rateCell and timeCell write the formatted text exactly as escaping it would', () => {
    const numbers = [0, 1, -1, 999, 1000, -1234567, 0.05, 99.95, 123.456, 2 ** 53, -(2 ** 60), 1e21, NaN, Infinity, -Infinity];
    for (const n of numbers) {
      expect(countCell(n).text, String(n)).to.equal(html`${formatCount(n)}`.text);
      expect(rateCell(n).text, String(n)).to.equal(html`${formatRate(n)}`.text);
    }
    for (const ms of [0, -1, 1_796_121_380_218, -62_162_035_200_001, 8.64e15])
      expect(timeCell(ms).text, String(ms)).to.equal(html`${formatTime(ms)}`.text);
    for (const none of [countCell(null), rateCell(null), timeCell(null)]) expect(none.text).to.equal(html`${'—'}`.text);
  });

  it('formatRate writes a rate under 100 to the nearest tenth, with one decimal', () => {
    for (let i = 0; i < 5000; i++) {
      const rate = ((i * 7919) % 100_000) / 1000 + i / 1e7;
      const text = formatRate(rate);
      expect(text, String(rate)).to.match(/^\d+\.\d\/s$/);
      expect(Math.abs(Number(text.slice(0, -2)) - rate), String(rate)).to.be.at.most(0.05 + 1e-9);
    }
    expect([formatRate(0), formatRate(99.94), formatRate(99.96), formatRate(1234.5)]).to.deep.equal([
      '0.0/s',
      '99.9/s',
      '100.0/s',
      '1235/s',
    ]);
  });

  it('queryValue encodes as encodeURIComponent does', () => {
    for (const value of ['job-000001', "a.b_c~d!e*f'(g)", 'a b', 'a&b=c?d#e/f', '<é—😀>', '%41', '+']) {
      expect(queryValue(value), value).to.equal(encodeURIComponent(value));
    }
  });
});

describe('dashboard html templates', function () {
  it('escape every interpolated value unless it is Html; arrays are joined; null, undefined and false print nothing', () => {
    const name = `<a href="x" onclick='y'>&\`</a>`;
    expect(html`<td title="${name}">${name}</td>`.text).to.equal(
      '<td title="&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&#96;&lt;/a&gt;">&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&#96;&lt;/a&gt;</td>',
    );
    expect(html`<ul>${['<1>', html`<li>${'2'}</li>`]}</ul>`.text).to.equal('<ul>&lt;1&gt;<li>2</li></ul>');
    expect(html`${null}${undefined}${false}${0}${raw('<br>')}`.text).to.equal('0<br>');
    // Each special character alone, after plain text: the scan for one must see every kind, anywhere.
    const alone = ['&', '<', '>', '"', "'", '`'].map((c) => html`${`plain text ${c}`}`.text);
    expect(alone).to.deep.equal(['&amp;', '&lt;', '&gt;', '&quot;', '&#39;', '&#96;'].map((e) => `plain text ${e}`));
    // Outside ASCII: each character by its code point (a surrogate pair is one), ASCII around it kept.
    expect(html`${'a\u007fé—<😀>z'}`.text).to.equal('a&#127;&#233;&#8212;&lt;&#128512;&gt;z');
  });
});

describe(`dashboard: pause, resume, cancel, file types and requeue all over HTTP (${DRIVER})`, function () {
  const db = useTestDatabase('dashboard_control');
  const { start, json } = useDashboardServers(() => db.ds);
  const JOB = 'control <b>"job"</b> & co';
  const IMPORT = 'control-import <i>1</i>';
  const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
  const SAME_ORIGIN = { ...FORM, 'sec-fetch-site': 'same-origin' };
  const DEAD_MATCHING = 1100;
  let dir: string;
  let importedRows: number;

  /** Stops after two batches: the throttle, asked before the second, aborts the signal the loop checks before the third. */
  function stopAfterTwo(): { signal: AbortSignal; throttle: (info: { batches: number }) => number } {
    const controller = new AbortController();
    return {
      signal: controller.signal,
      throttle: ({ batches }) => {
        if (batches === 1) controller.abort();
        return 0;
      },
    };
  }

  async function stateOf(table: 'checkpoint_jobs' | 'checkpoint_imports', key: string): Promise<string> {
    const column = table === 'checkpoint_jobs' ? 'name' : 'id';
    const rows = (await db.ds.query(sql(`SELECT state FROM ${table} WHERE ${column} = ?`), [key])) as { state: string }[];
    return rows[0].state;
  }

  function post(base: string, path: string, fields: Record<string, string>, headers: Record<string, string> = SAME_ORIGIN) {
    return fetch(`${base}/${path}`, { method: 'POST', headers, body: new URLSearchParams(fields).toString(), redirect: 'manual' });
  }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'dashboard-control-'));
    const source = (cursor: unknown) => {
      const from = cursor === null ? 0 : Number(cursor);
      return { items: from < 50 ? [from] : [], next: from < 50 ? from + 1 : null };
    };
    expect(await eachBatch(db.ds, JOB, source, 1, () => undefined, stopAfterTwo())).to.include({ done: false, stopped: 'signal' });
    const file = join(dir, 'rows.csv');
    writeFileSync(file, ['id,value', 'a,1', 'b,2', 'c,3', 'd,4', 'e,5'].join('\n') + '\n');
    const imported = await importFile(db.ds, IMPORT, file, { size: 1, ...stopAfterTwo() });
    expect(imported).to.include({ done: false, stopped: 'signal' });
    // One or two chunks, as the dialect runs a chunk ahead or not.
    importedRows = imported.nextIndex;
    expect(importedRows).to.be.within(1, 2);
    // Dead letters: 1,100 whose URL contains "dead-a" (more than two requeue batches), 3 others.
    const manager = new CheckpointManager(db.ds, { maxRetries: 0 });
    const files = [
      ...Array.from({ length: DEAD_MATCHING }, (_, i) => `s3://bucket/dead-a/${String(i).padStart(5, '0')}.csv`),
      ...[0, 1, 2].map((i) => `s3://bucket/dead-b/${i}.csv`),
    ];
    for (let i = 0; i < files.length; i += 500) {
      await manager.register(files.slice(i, i + 500).map((fileUrl) => ({ fileUrl, fileType: 'csv', fileTimestamp: new Date(0) })));
    }
    await db.ds.query(sql(`UPDATE file_checkpoints SET status = 'failed', retry_count = 1, max_retries = 0, error_message = 'broke'`));
    await manager.register([{ fileUrl: 's3://bucket/other.json', fileType: 'json', fileTimestamp: new Date(0) }]);
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  it('shows Pause and Cancel on an active job and import, Resume once paused, with the paused badge; the POSTs change the state (303 back)', async () => {
    const base = await start();
    let jobs = await (await fetch(`${base}/jobs`)).text();
    expect(jobs)
      .to.include('action="/jobs/pause"')
      .and.to.include(`href="/jobs/cancel?name=${encodeURIComponent(JOB)}&amp;back=jobs"`);
    expect(jobs).to.not.include('action="/jobs/resume"');
    expect(jobs).to.include('state-running">running');

    const paused = await post(base, 'jobs/pause', { name: JOB, back: 'jobs' });
    expect(paused.status).to.equal(303);
    expect(paused.headers.get('location')).to.equal('/jobs');
    expect(await stateOf('checkpoint_jobs', JOB)).to.equal('paused');
    jobs = await (await fetch(`${base}/jobs`)).text();
    expect(jobs).to.include('state-warn">paused').and.to.include('action="/jobs/resume"');
    expect(jobs).to.not.include('action="/jobs/pause"');
    expect((await json<JobsData>(`${base}/api/jobs`)).items[0]).to.include({ name: JOB, state: 'paused', throttled: false });
    expect((await post(base, 'jobs/resume', { name: JOB, back: 'jobs' })).status).to.equal(303);
    expect(await stateOf('checkpoint_jobs', JOB)).to.equal('active');

    // An import batch by its batch id, back to the imports page.
    let imports = await (await fetch(`${base}/imports`)).text();
    expect(imports).to.include('action="/jobs/pause"').and.to.include('name="back" value="imports"');
    const pausedImport = await post(base, 'jobs/pause', { name: IMPORT, back: 'imports' });
    expect(pausedImport.headers.get('location')).to.equal('/imports');
    expect(await stateOf('checkpoint_imports', IMPORT)).to.equal('paused');
    imports = await (await fetch(`${base}/imports`)).text();
    expect(imports).to.include('state-warn">paused').and.to.include('action="/jobs/resume"');
    expect((await json<ImportsData>(`${base}/api/imports`)).items[0]).to.include({
      batch: IMPORT,
      state: 'paused',
      rows: importedRows,
      total: 5,
    });
    await post(base, 'jobs/resume', { name: IMPORT, back: 'imports' });
    expect(await stateOf('checkpoint_imports', IMPORT)).to.equal('active');
    // The JSON answer of an action says whether it changed anything.
    const again = await fetch(`${base}/jobs/resume`, {
      method: 'POST',
      headers: { ...SAME_ORIGIN, accept: 'application/json' },
      body: new URLSearchParams({ name: IMPORT }).toString(),
    });
    expect(await again.json()).to.deep.equal({ resumed: false });
  });

  it('refuses pause, resume, cancel, file type and requeue-all POSTs cross-origin, read-only and for a reader (403), changing nothing', async () => {
    const writer = await start();
    const readOnly = await start({ readOnly: true });
    const reader = await start({ authorize: () => 'read' });
    const attempts: [string, Record<string, string>][] = [
      ['jobs/pause', { name: JOB }],
      ['jobs/cancel', { name: JOB }],
      ['jobs/cancel', { name: IMPORT }],
      ['files/pause', { type: 'csv' }],
      ['files/requeue-all', { q: 'dead-a' }],
    ];
    for (const [path, fields] of attempts) {
      const crossOrigin = await post(writer, path, fields, { ...FORM, origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' });
      expect(crossOrigin.status, path).to.equal(403);
      expect((await post(readOnly, path, fields)).status, path).to.equal(403);
      expect((await post(reader, path, fields)).status, path).to.equal(403);
    }
    expect(await stateOf('checkpoint_jobs', JOB)).to.equal('active');
    expect(await stateOf('checkpoint_imports', IMPORT)).to.equal('active');
    expect((await new CheckpointManager(db.ds).summary()).pausedTypes).to.deep.equal([]);
    expect(await count(db.ds, sql(`SELECT COUNT(*) FROM file_checkpoints WHERE status = 'failed'`))).to.equal(DEAD_MATCHING + 3);
    // No controls where writes are not allowed; the confirmation pages say so instead of a form.
    for (const base of [readOnly, reader]) {
      for (const path of ['/jobs', '/imports', '/files?status=dead']) {
        const page = await (await fetch(`${base}${path}`)).text();
        expect(page, path).to.not.include('method="post"').and.to.not.include('Cancel&hellip;').and.to.not.include('requeue-all');
      }
      expect(await (await fetch(`${base}/jobs/cancel?name=${encodeURIComponent(JOB)}`)).text()).to.include('cancelling is not allowed');
      expect(await (await fetch(`${base}/files/requeue-all?q=dead-a`)).text()).to.include('requeueing is not allowed');
    }
    // An empty name is 400.
    expect((await post(writer, 'jobs/pause', { name: '' })).status).to.equal(400);
  });

  it('pauses and resumes a file type, listing the paused types', async () => {
    const base = await start();
    let page = await (await fetch(`${base}/files`)).text();
    expect(page).to.include('No file type is paused.').and.to.include('action="/files/pause"');
    const paused = await post(base, 'files/pause', { type: 'json', back: 'files?status=pending' });
    expect(paused.status).to.equal(303);
    expect(paused.headers.get('location')).to.equal('/files?status=pending');
    const manager = new CheckpointManager(db.ds);
    expect((await manager.summary()).pausedTypes).to.deep.equal(['json']);
    expect(await manager.claimNext(1, { fileType: 'json' })).to.deep.equal([]);
    page = await (await fetch(`${base}/files`)).text();
    expect(page).to.include('<code>json</code> <span class="state state-warn">paused</span>');
    expect(page).to.include('action="/files/resume"').and.to.include('name="type" value="json"');
    expect((await json<FilesData>(`${base}/api/files`)).pausedTypes).to.deep.equal(['json']);
    // Empty: every type.
    await post(base, 'files/pause', { type: '' });
    expect((await manager.summary()).pausedTypes).to.deep.equal(['*', 'json']);
    expect(await (await fetch(`${base}/files`)).text()).to.include('<code>every type</code>');
    await post(base, 'files/resume', { type: '*' });
    await post(base, 'files/resume', { type: 'json' });
    expect((await manager.summary()).pausedTypes).to.deep.equal([]);
  });

  it('cancel asks on a page of its own what it cancels, then cancels; no Pause, Resume or Cancel is left on the row', async () => {
    const base = await start();
    const confirm = await (await fetch(`${base}/jobs/cancel?name=${encodeURIComponent(JOB)}&back=jobs`)).text();
    expect(confirm).to.include('<code class="name">control &lt;b&gt;&quot;job&quot;&lt;/b&gt; &amp; co</code>');
    expect(confirm).to.include('the batch job (active, 2 items committed)').and.to.include('action="/jobs/cancel"');
    expect(await stateOf('checkpoint_jobs', JOB)).to.equal('active');
    const cancelled = await post(base, 'jobs/cancel', { name: JOB, back: 'jobs' });
    expect(cancelled.status).to.equal(303);
    expect(await stateOf('checkpoint_jobs', JOB)).to.equal('cancelled');
    const jobs = await (await fetch(`${base}/jobs`)).text();
    expect(jobs).to.include('state-bad">cancelled');
    expect(jobs).to.not.include('action="/jobs/pause"').and.to.not.include('action="/jobs/resume"').and.to.not.include('Cancel&hellip;');
    expect(await (await fetch(`${base}/jobs/cancel?name=${encodeURIComponent(JOB)}`)).text()).to.include('There is nothing to cancel');
    // The import, from the imports page.
    const importConfirm = await (await fetch(`${base}/jobs/cancel?name=${encodeURIComponent(IMPORT)}&back=imports`)).text();
    expect(importConfirm)
      .to.include(`the import batch (active, ${importedRows} row${importedRows === 1 ? '' : 's'} committed)`)
      .and.to.include('name="back" value="imports"');
    expect((await post(base, 'jobs/cancel', { name: IMPORT, back: 'imports' })).headers.get('location')).to.equal('/imports');
    expect(await stateOf('checkpoint_imports', IMPORT)).to.equal('cancelled');
    expect(await (await fetch(`${base}/imports`)).text()).to.include('state-bad">cancelled');
  });

  it('requeues all the dead letters matching the search, after a page that names their exact number', async () => {
    const base = await start();
    const dead = await (await fetch(`${base}/files?status=dead&q=dead-a`)).text();
    expect(dead).to.include('href="/files/requeue-all?q=dead-a"').and.to.include('Requeue all matching this filter');
    const unfiltered = await (await fetch(`${base}/files?status=dead`)).text();
    expect(unfiltered).to.include(`Requeue all ${formatCount(DEAD_MATCHING + 3)} matching this filter`);
    const confirm = await (await fetch(`${base}/files/requeue-all?q=dead-a`)).text();
    expect(confirm).to.include(`Requeue all <strong class="count">${formatCount(DEAD_MATCHING)}</strong> dead letters`);
    expect(confirm).to.include('<input type="hidden" name="q" value="dead-a">');
    expect(await count(db.ds, sql(`SELECT COUNT(*) FROM file_checkpoints WHERE status = 'pending'`))).to.equal(1);
    const requeued = await post(base, 'files/requeue-all', { q: 'dead-a', back: 'files?status=dead&q=dead-a' });
    expect(requeued.status).to.equal(303);
    expect(requeued.headers.get('location')).to.equal('/files?status=dead&q=dead-a');
    expect(
      await count(
        db.ds,
        sql(`SELECT COUNT(*) FROM file_checkpoints WHERE status = 'pending' AND retry_count = 0 AND error_message IS NULL`),
      ),
    ).to.equal(DEAD_MATCHING + 1);
    expect(await count(db.ds, sql(`SELECT COUNT(*) FROM file_checkpoints WHERE status = 'failed'`))).to.equal(3);
    expect(await (await fetch(`${base}/files/requeue-all?q=dead-a`)).text()).to.include('No dead letters');
    // The rest, through the JSON answer.
    const rest = await fetch(`${base}/files/requeue-all`, {
      method: 'POST',
      headers: { ...SAME_ORIGIN, accept: 'application/json' },
      body: new URLSearchParams({ q: '' }).toString(),
    });
    expect(await rest.json()).to.deep.equal({ requeued: 3 });
  });

  it("shows 'throttled' while a loop waits on its throttle (written as a wait over a second begins, cleared as it ends)", async () => {
    const base = await start();
    const name = 'throttled job';
    const controller = new AbortController();
    let waiting!: () => void;
    const asked = new Promise<void>((resolve) => (waiting = resolve));
    const source = (cursor: unknown) => ({ items: cursor === null ? [1] : [2], next: cursor === null ? 1 : null });
    const run = eachBatch(db.ds, name, source, 1, () => undefined, {
      signal: controller.signal,
      throttle: ({ batches }) => {
        if (batches === 1) waiting();
        return batches === 1 ? 3_600_000 : 0;
      },
    });
    await asked;
    // The mark is written after the throttle answers: wait for the row to say so.
    const until = async () =>
      ((await db.ds.query(sql('SELECT throttled_until FROM checkpoint_jobs WHERE name = ?'), [name])) as { throttled_until: unknown }[])[0]
        .throttled_until;
    while ((await until()) === null) await new Promise((resolve) => setImmediate(resolve));
    expect(Number(await until())).to.be.above(Date.now() + 3_000_000);
    const row = () => json<JobsData>(`${base}/api/jobs?q=throttled`).then((data) => data.items[0]);
    expect(await row()).to.include({ name, throttled: true, state: 'active' });
    expect(await (await fetch(`${base}/jobs?q=throttled`)).text()).to.include('state-warn">throttled');
    controller.abort();
    expect(await run).to.include({ stopped: 'signal', done: false });
    expect(await until()).to.equal(null);
    expect(await row()).to.include({ throttled: false });
    expect(await (await fetch(`${base}/jobs?q=throttled`)).text()).to.not.include('throttled</span>');
  });

  it('adds throttled_until once to both tables: the migration is a no-op when run again', async () => {
    const runner = db.ds.createQueryRunner();
    try {
      await new ThrottledUntil1765756800000().up(runner);
      for (const name of ['checkpoint_jobs', 'checkpoint_imports']) {
        const columns = (await runner.getTable(name))!.columns.filter((column) => column.name === 'throttled_until');
        expect(columns, name).to.have.length(1);
        expect(columns[0].isNullable, name).to.equal(true);
      }
    } finally {
      await runner.release();
    }
  });
});
