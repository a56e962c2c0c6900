import { mkdirSync } from 'node:fs';
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { DASHBOARD_BASE as BASE, useDashboardBrowser, visitLinks } from './support/browser';
import { CheckpointManager, eachBatch, listPartitions, type Source } from '../src';
import { DRIVER, sql, useTestDatabase } from './support/database';
import { type DashboardState, HOSTILE, makePartitionedState, makeState, type PartitionedState, RECORDS } from './support/dashboard-state';

/** Resolves once the page has sent `n` more live-refresh requests and had their answers. */
function refreshes(page: Page, n: number): Promise<void> {
  let left = n;
  return new Promise((resolve) => {
    const seen = (response: { request(): { headers(): Record<string, string> } }) => {
      if (response.request().headers()['x-dashboard-refresh'] !== '1' || --left > 0) return;
      page.off('response', seen);
      resolve();
    };
    page.on('response', seen);
  });
}

describe(`dashboard in Chromium (${DRIVER})`, function () {
  const db = useTestDatabase('dashboard_browser');
  let state: DashboardState;

  before(async () => {
    state = await makeState(db.ds);
  });

  const dashboard = useDashboardBrowser(() => db.ds, { title: 'Ops <checkpoint>' });
  const open = (path: string) => dashboard.open(path);

  it('renders every page from the state made through the API; hostile names and errors are text and run nothing', async () => {
    const expectations: [string, string[]][] = [
      ['', [HOSTILE.file, HOSTILE.error, 'Dead letters: 1']],
      ['jobs', [HOSTILE.job]],
      ['steps', [HOSTILE.step]],
      ['imports', [HOSTILE.import, HOSTILE.records]],
      [`imports/rejects?batch=${encodeURIComponent(HOSTILE.records)}`, [HOSTILE.records, `${HOSTILE.reject},many`]],
      ['files?status=dead', [HOSTILE.file, HOSTILE.error]],
      [`jobs/reset?name=${encodeURIComponent(HOSTILE.job)}`, [HOSTILE.job]],
    ];
    for (const [path, texts] of expectations) {
      const { page, problems } = await open(path);
      const text = await page.locator('main').innerText();
      for (const expected of texts) expect(text, path).to.include(expected);
      expect(await page.evaluate('window.__pwned'), path).to.equal(undefined);
      expect(await page.title()).to.include('Ops <checkpoint>');
      expect(problems, path).to.deep.equal([]);
      await page.close();
    }
    // The step's recorded result is collapsible JSON: closed at first, the JSON text inside.
    const { page } = await open('steps');
    const details = page.locator('details').first();
    expect(await details.getAttribute('open')).to.equal(null);
    await details.locator('summary').click();
    expect(JSON.parse(await details.locator('pre').innerText())).to.deep.equal(HOSTILE.stepValue);
    await page.close();
  });

  it("the imports page: rows / total with a bar, written, chunks, skipped, invalid linking to the batch's rejects", async () => {
    const { page, problems } = await open('imports');
    const row = page.locator('tbody tr', { hasText: HOSTILE.records });
    const cells = await row.locator('td').allInnerTexts();
    const headers = await page.locator('thead th').allInnerTexts();
    const cell = (name: string) => cells[headers.indexOf(name)];
    expect(cell('Rows')).to.equal(`${RECORDS.total} / ${RECORDS.total}`);
    expect(await row.locator('progress').getAttribute('value')).to.equal(String(RECORDS.total));
    expect(cell('Written')).to.equal(String(RECORDS.written));
    expect(cell('Chunks')).to.equal(String(RECORDS.chunks));
    expect(cell('Skipped')).to.equal(String(RECORDS.skipped));
    expect(cell('Invalid')).to.equal(String(RECORDS.invalid.length));
    // The invalid count links to the batch's rejects: clicked while live refresh polls every 150 ms
    // (an unchanged page is left as it is, and a click in progress is never swapped out from under it).
    await refreshes(page, 2);
    await row.locator('a', { hasText: String(RECORDS.invalid.length) }).click();
    await page.waitForURL(`${dashboard.url}${BASE}imports/rejects?batch=${encodeURIComponent(HOSTILE.records)}`);
    // The row index cells' text (textContent: no dependence on layout, which innerText has).
    const rejected = await page.locator('main tbody tr td:first-child').allTextContents();
    expect(rejected).to.deep.equal(RECORDS.invalid.map(String));
    expect(await page.evaluate('window.__pwned')).to.equal(undefined);
    expect(problems).to.deep.equal([]);
    await page.close();
  });

  it('follows every link under the nested base path with no broken link or asset, under CSP, without console errors', async () => {
    const { page, problems } = await open('');
    const visited = await visitLinks(page, BASE);
    expect(visited).to.include.members([BASE, `${BASE}jobs`, `${BASE}steps`, `${BASE}imports`, `${BASE}files`]);
    expect(await page.evaluate('getComputedStyle(document.body).margin')).to.equal('0px');
    expect(problems).to.deep.equal([]);
    await page.close();
  });

  it('live refresh leaves an unchanged page as it is: the same nodes after several polls, a link clicked works', async () => {
    const { page, problems } = await open('jobs');
    await page.evaluate("window.__main = document.getElementById('dashboard-main')");
    await refreshes(page, 4);
    expect(await page.evaluate("window.__main === document.getElementById('dashboard-main')")).to.equal(true);
    expect(await page.evaluate("document.documentElement.hasAttribute('data-refreshed')")).to.equal(false);
    await page.locator('nav.subtabs a', { hasText: 'done' }).click();
    await page.waitForURL(`${dashboard.url}${BASE}jobs?state=done`);
    expect(await page.locator('main').innerText()).to.include(HOSTILE.job);
    expect(problems).to.deep.equal([]);
    await page.close();
  });

  it('live refresh shows a change without reloading the page', async () => {
    const { page, problems } = await open('files?status=pending');
    await page.evaluate('window.__sameDocument = true');
    const url = 's3://bucket/arrived-later.csv';
    expect(await page.locator('main').innerText()).to.not.include(url);
    await new CheckpointManager(db.ds).register([{ fileUrl: url, fileType: 'csv', fileTimestamp: new Date(0) }]);
    await page.locator('main td.name', { hasText: url }).waitFor();
    expect(await page.evaluate('window.__sameDocument')).to.equal(true);
    expect(problems).to.deep.equal([]);
    await page.close();
  });

  it('a click on Requeue makes the dead letter pending', async () => {
    const { page, problems } = await open('files?status=dead');
    await page.locator('tr', { hasText: HOSTILE.error }).getByRole('button', { name: 'Requeue' }).click();
    await page.waitForURL(`${dashboard.url}${BASE}files?status=dead`);
    const rows = (await db.ds.query(sql('SELECT status FROM file_checkpoints WHERE file_url = ?'), [state.deadUrl])) as {
      status: string;
    }[];
    expect(rows[0].status).to.equal('pending');
    expect(await page.locator('main').innerText()).to.include('No files.');
    if (process.env.DASHBOARD_SCREENSHOT) {
      // Put the dead letter back so the screenshot shows a problem, as a real fleet would.
      const manager = new CheckpointManager(db.ds, { maxRetries: 0 });
      await db.ds.query(sql('UPDATE file_checkpoints SET max_retries = 0 WHERE file_url = ?'), [state.deadUrl]);
      await manager.claimFile(state.deadUrl, 'csv', new Date(0));
      await manager.failFile(state.deadUrl, 'row 17: value is not an integer');
      await manager.processFile('s3://bucket/done.csv', 'csv', new Date(0), () => ({
        totalRows: 120,
        filteredRows: 3,
        persistedRows: 117,
      }));
      await page.goto(`${dashboard.url}${BASE}files`);
      mkdirSync('docs', { recursive: true });
      await page.screenshot({ path: 'docs/dashboard.png', fullPage: true });
    }
    expect(problems).to.deep.equal([]);
    await page.close();
  });
});

describe(`dashboard in Chromium: pause and resume (${DRIVER})`, function () {
  const db = useTestDatabase('dashboard_browser_control');
  const JOB = 'nightly-backfill';

  before(async () => {
    await makeState(db.ds);
    // A job of 24,000 items stopped after two batches of 1,000: the throttle asked before the
    // second aborts the signal the loop checks before the third.
    for (const name of [JOB, 'orders-reindex']) await stopAfterTwo(name);
  });

  async function stopAfterTwo(name: string): Promise<void> {
    const controller = new AbortController();
    const source: Source<number> = Object.assign(
      (cursor: unknown) => {
        const from = cursor === null ? 0 : Number(cursor);
        return { items: Array.from({ length: 1000 }, (_, i) => from + i), next: from + 1000 };
      },
      { total: () => Promise.resolve(24_000) },
    );
    const result = await eachBatch(db.ds, name, source, 1000, () => undefined, {
      signal: controller.signal,
      throttle: ({ batches }) => {
        if (batches === 1) controller.abort();
        return 0;
      },
    });
    expect(result).to.include({ stopped: 'signal', done: false });
  }

  const dashboard = useDashboardBrowser(() => db.ds);

  it('a click on Pause shows the paused badge and Resume; a click on Resume makes it running again', async () => {
    const { page, problems } = await dashboard.open('jobs');
    const row = page.locator('tbody tr', { hasText: JOB });
    expect(await row.locator('.state').first().innerText()).to.equal('running');
    expect(await row.getByRole('button', { name: 'Resume' }).count()).to.equal(0);
    await row.getByRole('button', { name: 'Pause' }).click();
    await row.locator('.state', { hasText: 'paused' }).waitFor();
    expect(page.url()).to.equal(`${dashboard.url}${BASE}jobs`);
    const stored = async () =>
      ((await db.ds.query(sql('SELECT state FROM checkpoint_jobs WHERE name = ?'), [JOB])) as { state: string }[])[0].state;
    expect(await stored()).to.equal('paused');
    expect(await row.getByRole('button', { name: 'Pause' }).count()).to.equal(0);
    expect(await row.getByRole('link', { name: 'Cancel…' }).count()).to.equal(1);
    if (process.env.DASHBOARD_SCREENSHOT) {
      // Jobs that ran for a while, as in a real fleet (here they took milliseconds).
      await db.ds.query(sql('UPDATE checkpoint_jobs SET started_at = updated_at - 25000 WHERE name IN (?, ?)'), [JOB, 'orders-reindex']);
      await page.reload();
      mkdirSync('docs', { recursive: true });
      await page.screenshot({ path: 'docs/operating.png', fullPage: true });
    }
    await row.getByRole('button', { name: 'Resume' }).click();
    await row.locator('.state', { hasText: 'running' }).waitFor();
    expect(await stored()).to.equal('active');
    expect(await row.getByRole('button', { name: 'Pause' }).count()).to.equal(1);
    expect(problems).to.deep.equal([]);
    await page.close();
  });
});

describe(`dashboard in Chromium: partitioned jobs (${DRIVER})`, function () {
  const db = useTestDatabase('dashboard_browser_partitions');
  let state: PartitionedState;

  before(async () => {
    state = await makePartitionedState(db.ds);
  });

  const dashboard = useDashboardBrowser(() => db.ds);

  it('shows the dead range among the problems and per-range bars; a click on "Retry dead ranges" revives it', async () => {
    const { page, problems } = await dashboard.open('');
    const overview = await page.locator('section[data-kind="dead-ranges"]').innerText();
    expect(overview).to.include('Dead ranges: 1').and.include(`${state.job} #${state.dead.index}`).and.include(HOSTILE.rangeError);
    // Clicked while the page refreshes every 150 ms.
    await refreshes(page, 2);
    await page.locator('section[data-kind="dead-ranges"] h3 a').click();
    await page.waitForURL(`${dashboard.url}${BASE}jobs?state=dead`);

    const row = page.locator('tr[data-kind="partitioned"]');
    expect(await row.locator('td.name').innerText()).to.include(state.job);
    expect(await row.locator('.ranges .range').count()).to.equal(4);
    expect(await row.locator('.ranges .range-dead').count()).to.equal(1);
    expect(await row.locator('.ranges .range-done').count()).to.equal(3);
    // The ranges' bar is drawn by the stylesheet (no inline style under the CSP): the segments have a width.
    const widths = await row.locator('.ranges .range').evaluateAll((spans) => spans.map((span) => span.getBoundingClientRect().width));
    for (const width of widths) expect(width).to.be.greaterThan(1);
    // Each segment names its range's state and rows; the dead range has a line with its error.
    for (const range of state.ranges) {
      const title = await row.locator(`.ranges .range[data-range="${range.index}"]`).getAttribute('title');
      expect(title).to.equal(
        `#${range.index} ${range.status}: ${range.items.toLocaleString('en-US')} rows, ${range.batches.toLocaleString('en-US')} batches`,
      );
    }
    expect(await row.locator(`ul.dead-ranges li[data-range="${state.dead.index}"]`).innerText())
      .to.include('dead after 1 attempt,')
      .and.include(HOSTILE.rangeError);
    expect(await page.evaluate('window.__pwned')).to.equal(undefined);

    await row.getByRole('button', { name: 'Retry dead ranges' }).click();
    await page.waitForURL(`${dashboard.url}${BASE}jobs?state=dead`);
    expect(await page.locator('main').innerText()).to.include('No jobs.');
    const ranges = await listPartitions(db.ds, state.job);
    expect(ranges.find((range) => range.index === state.dead.index)!.status).to.equal('pending');
    await page.goto(`${dashboard.url}${BASE}jobs`);
    expect(await page.locator('tr[data-kind="partitioned"] .ranges .range-dead').count()).to.equal(0);
    expect(await page.locator('tr[data-kind="partitioned"] .ranges .range-pending').count()).to.equal(1);
    expect(problems).to.deep.equal([]);
    await page.close();
  });
});
