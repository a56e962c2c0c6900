import express from 'express';
import { expect } from 'chai';
import type { IncomingMessage } from 'node:http';
import { CheckpointManager, createDashboard, type DashboardOptions, type FilesData, type OverviewData } from '../src';
import type { ImportsData } from '../src/dashboard/imports-page';
import type { ImportRejectsData } from '../src/dashboard/import-rejects-page';
import { count, DRIVER, sql, useTestDatabase } from './support/database';
import { html, raw } from '../src/dashboard/html';
import { type DashboardState, HOSTILE, makeState, RECORDS, type Served, serve } from './support/dashboard-state';

describe(`dashboard over HTTP (${DRIVER})`, function () {
  const db = useTestDatabase('dashboard_http');
  let state: DashboardState;
  const servers: Served[] = [];

  before(async () => {
    state = await makeState(db.ds);
  });

  after(async () => {
    for (const server of servers) await server.close();
  });

  async function start(options: DashboardOptions = {}): Promise<string> {
    const handler = createDashboard(db.ds, options);
    const server = await serve((req, res) => void handler(req, res));
    servers.push(server);
    return server.url;
  }

  async function json<T>(url: string): Promise<T> {
    const response = await fetch(url);
    expect(response.status, url).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^application\/json/);
    return (await response.json()) as T;
  }

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

    const jobs = await json<{ page: string; items: { name: string; done: boolean; items: number; batches: number }[]; next: null; partitioned: [] }>(`${base}/api/jobs`);
    expect(jobs.items.map(({ name, done, items, batches }) => ({ name, done, items, batches }))).to.deep.equal([
      { name: HOSTILE.job, done: true, items: 3, batches: 1 },
    ]);
    expect(jobs.next).to.equal(null);
    expect(jobs.partitioned).to.deep.equal([]);
    const steps = await json<{ items: { name: string; recorded: boolean; value: string }[] }>(`${base}/api/steps`);
    expect(steps.items).to.have.length(1);
    expect(JSON.parse(steps.items[0].value)).to.deep.equal(HOSTILE.stepValue);
    const imports = await json<ImportsData>(`${base}/api/imports`);
    expect(imports.items.map(({ batch, rows, total, written, skipped, invalid, chunks }) => ({ batch, rows, total, written, skipped, invalid, chunks }))).to.deep.equal([
      { batch: HOSTILE.import, rows: 2, total: 2, written: 2, skipped: 0, invalid: 0, chunks: 1 },
      { batch: HOSTILE.records, rows: RECORDS.total, total: RECORDS.total, written: RECORDS.written, skipped: RECORDS.skipped, invalid: RECORDS.invalid.length, chunks: RECORDS.chunks },
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
    expect(imports).to.include(html`href="/imports/rejects?${new URLSearchParams({ batch: HOSTILE.records }).toString()}"`.text);
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
    const attempts: Record<string, string>[] = [{ origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' }, { origin: 'http://evil.example' }, {}];
    for (const headers of attempts) {
      const response = await fetch(`${base}/files/requeue`, { method: 'POST', headers: { ...FORM, ...headers }, body: requeueForm(state.deadUrl), redirect: 'manual' });
      expect(response.status, JSON.stringify(headers)).to.equal(403);
    }
    expect(await fileStatus(state.deadUrl)).to.equal('failed');
    const reset = await fetch(`${base}/jobs/reset`, { method: 'POST', headers: { ...FORM, 'sec-fetch-site': 'same-site' }, body: `name=${encodeURIComponent(HOSTILE.job)}` });
    expect(reset.status).to.equal(403);
    expect(await count(db.ds, sql('SELECT COUNT(*) FROM checkpoint_jobs WHERE name = ?'), [HOSTILE.job])).to.equal(1);
  });

  it('read-only: no action controls, and every POST is 403 even from the same origin', async () => {
    const base = await start({ readOnly: true });
    const page = await (await fetch(`${base}/files?status=dead`)).text();
    expect(page).to.include('dead letter');
    expect(page).to.not.include('method="post"');
    expect(page).to.not.include('Reset…');
    const response = await fetch(`${base}/files/requeue`, { method: 'POST', headers: { ...FORM, 'sec-fetch-site': 'same-origin' }, body: requeueForm(state.deadUrl) });
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
    const post = await fetch(`${base}/files/requeue`, { method: 'POST', headers: { ...FORM, ...viewer, 'sec-fetch-site': 'same-origin' }, body: requeueForm(state.deadUrl) });
    expect(post.status).to.equal(403);
    for (const path of ['/', '/api/overview', '/files', '/assets/dashboard.js']) {
      expect((await fetch(`${base}${path}`, { headers: { 'x-user': 'stranger' } })).status, path).to.equal(403);
    }
    expect(await fileStatus(state.deadUrl)).to.equal('failed');
    expect(seen).to.include('viewer').and.to.include('stranger');
  });

  it('a same-origin POST requeues the selected dead letters and redirects back (303)', async () => {
    const base = await start({ authorize: async () => 'write' as const });
    const response = await fetch(`${base}/files/requeue`, {
      method: 'POST',
      headers: { ...FORM, origin: base },
      body: new URLSearchParams([['url', state.deadUrl], ['selected', '1'], ['back', 'files?status=dead']]).toString(),
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
    const server = await serve(app);
    servers.push(server);
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
    const result = await manager.processFile(state.pendingUrl, 'csv', new Date(0), () => ({ totalRows: 1, filteredRows: 0, persistedRows: 1 }));
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

describe('dashboard html templates', function () {
  it('escape every interpolated value unless it is Html; arrays are joined; null, undefined and false print nothing', () => {
    const name = `<a href="x" onclick='y'>&\`</a>`;
    expect(html`<td title="${name}">${name}</td>`.text).to.equal(
      '<td title="&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&#96;&lt;/a&gt;">&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&#96;&lt;/a&gt;</td>',
    );
    expect(html`<ul>${['<1>', html`<li>${'2'}</li>`]}</ul>`.text).to.equal('<ul>&lt;1&gt;<li>2</li></ul>');
    expect(html`${null}${undefined}${false}${0}${raw('<br>')}`.text).to.equal('0<br>');
  });
});
