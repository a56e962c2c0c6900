import { expect } from 'chai';
import { createDashboard, type FilesData, type OverviewData } from '../src';
import { COUNT_CAP } from '../src/dashboard/files-page';
import { count, DRIVER, sql, useTestDatabase } from './support/database';
import { useDashboardServers } from './support/dashboard-state';
import { SqlLog } from './support/sql-log';

const MINUTE = 60_000;

/** `n` rows numbered `g` = 1…n: generate_series, a recursive CTE, or (MariaDB stops recursion at 1,000) a product of digits. */
function numbers(n: number): string {
  if (DRIVER === 'postgres') return `generate_series(1, ${n}) g`;
  if (DRIVER === 'sqlite') return `(WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ${n}) SELECT g FROM s) s`;
  const digits = `(${Array.from({ length: 10 }, (_, d) => `SELECT ${d} AS d`).join(' UNION ALL ')})`;
  const places = ['a', 'b', 'c', 'e', 'f'];
  const g = places.map((place, i) => `${10 ** i} * ${place}.d`).join(' + ');
  return `(SELECT ${g} + 1 AS g FROM ${places.map((place) => `${digits} ${place}`).join(', ')}) s WHERE g <= ${n}`;
}

/**
 * Inserts `n` files numbered 1…n in one statement, with status, retries and completion time given
 * as SQL expressions of `g`. The key only has to be unique here, not the URL's hash.
 */
async function insertFiles(ds: SuiteDs, n: number, columns: { status: string; retry: string; completedAt: string }): Promise<void> {
  const key = DRIVER === 'postgres' ? 'md5(g::text) || md5(g::text)' : DRIVER === 'mysql' ? 'SHA2(g, 256)' : "printf('%064d', g)";
  const url = DRIVER === 'mysql' ? "CONCAT('scale/file-', g, '.csv')" : "'scale/file-' || g || '.csv'";
  await ds.query(
    'INSERT INTO file_checkpoints (url_hash, file_url, file_type, file_timestamp, status, retry_count, max_retries, claim_token, ' +
      `completed_at, error_message, created_at) SELECT ${key}, ${url}, 'scale', 0, ${columns.status}, ${columns.retry}, 3, 0, ` +
      `${columns.completedAt}, 'boom', g FROM ${numbers(n)}`,
  );
}

type SuiteDs = ReturnType<typeof useTestDatabase>['ds'];

describe(`dashboard at scale (${DRIVER})`, function () {
  const log = new SqlLog();
  const db = useTestDatabase('dashboard_scale', { logger: log });
  const { listen, start, json } = useDashboardServers(() => db.ds);

  afterEach(async () => {
    await db.ds.query('DELETE FROM file_checkpoints');
  });

  it('answers the counts, the dead-letter list and the lease expiry from indexes, not by reading the table', async () => {
    // First in the file: a partial index that held many rows (the next test's) is larger, and
    // PostgreSQL's planner weighs its pages. After an outage: many failed files with retries left and few dead letters (1 in 280), so that a
    // plan sorting the failed files, or walking the key until it finds 51, reads far more than the dead letters.
    await insertFiles(db.ds, 20_000, {
      status:
        "CASE WHEN g % 100 < 60 THEN 'completed' WHEN g % 100 < 70 THEN 'pending' WHEN g % 100 < 98 THEN 'failed' ELSE 'processing' END",
      retry: 'CASE WHEN g % 1000 = 70 THEN 3 ELSE 0 END',
      completedAt: 'CASE WHEN g % 100 < 60 THEN g ELSE NULL END',
    });
    if (DRIVER === 'postgres') await db.ds.query('VACUUM ANALYZE file_checkpoints');
    else await db.ds.query(DRIVER === 'mysql' ? 'ANALYZE TABLE file_checkpoints' : 'ANALYZE');
    const base = await start({ refreshMs: 0 });
    const planned: { page: string; sql: string; plan: string }[] = [];
    for (const page of ['', 'files', 'files?status=dead', 'files?status=pending']) {
      log.clear();
      expect((await fetch(`${base}/${page}`)).status).to.equal(200);
      for (const statement of log.queries.filter((q) => /^\s*SELECT/i.test(q.sql) && /file_checkpoints/.test(q.sql))) {
        const explain = DRIVER === 'postgres' ? 'EXPLAIN' : DRIVER === 'sqlite' ? 'EXPLAIN QUERY PLAN' : 'EXPLAIN';
        const rows = (await db.ds.query(`${explain} ${statement.sql}`, statement.parameters)) as Record<string, unknown>[];
        const plan = rows
          .map((row) =>
            DRIVER === 'mysql' ? `${String(row.table)} ${String(row.type)} ${String(row.key)}` : String(row['QUERY PLAN'] ?? row.detail),
          )
          .join('\n');
        planned.push({ page, sql: statement.sql, plan });
      }
    }
    const fullScans = planned.filter(({ plan }) =>
      DRIVER === 'postgres'
        ? /Seq Scan on file_checkpoints\b/.test(plan)
        : DRIVER === 'sqlite'
          ? /^SCAN file_checkpoints$/m.test(plan)
          : /^file_checkpoints ALL /m.test(plan),
    );
    expect(fullScans.map(({ page, sql: text, plan }) => `/${page}: ${text}\n${plan}`)).to.deep.equal([]);
    if (DRIVER === 'mysql') return;
    // The dead-letter list and count from the last attempts' partial index.
    const lastAttempts = planned.filter(({ plan }) => plan.includes('IDX_file_checkpoints_last_attempts'));
    const deadList = lastAttempts.some(({ page, sql: text }) => page === 'files?status=dead' && /ORDER BY .url_hash. LIMIT/.test(text));
    expect(deadList).to.equal(true);
    expect(lastAttempts.some(({ sql: text }) => /^SELECT 'pending'.*UNION ALL/.test(text))).to.equal(true);
    // The lease expiry (claims' statement) read the whole table on SQLite before: its partial status index
    // holds open files, and `= 'processing'` alone does not tell SQLite's planner so. PostgreSQL may
    // as well take the status index for the files in flight.
    const expiry = /'processing' AND .lease_expires_at. <= .+ AND .retry_count. >= .max_retries./;
    if (DRIVER === 'sqlite') expect(lastAttempts.some(({ sql: text }) => expiry.test(text))).to.equal(true);
  });

  it('searches by URL substring without walking the key: every match once, page by page, in key order', async () => {
    await insertFiles(db.ds, 20_000, { status: "'completed'", retry: '0', completedAt: 'g' });
    if (DRIVER === 'postgres') await db.ds.query('VACUUM ANALYZE file_checkpoints, file_checkpoint_urls');
    const base = await start({ refreshMs: 0 });
    // file-1999.csv and file-19990.csv … file-19999.csv.
    const expected = (await db.ds.query("SELECT url_hash, file_url FROM file_checkpoints WHERE file_url LIKE '%file-1999%'")) as {
      url_hash: string;
      file_url: string;
    }[];
    expected.sort((a, b) => (a.url_hash < b.url_hash ? -1 : 1));
    expect(expected).to.have.length(11);
    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    log.clear();
    do {
      const cursor: string = after === null ? '' : `&after=${after}`;
      const page: FilesData = await json<FilesData>(`${base}/api/files?q=file-1999&limit=4${cursor}`);
      seen.push(...page.items.map((file) => file.url));
      after = page.next;
      pages++;
    } while (after !== null);
    expect(pages).to.equal(3);
    expect(seen).to.deep.equal(expected.map((row) => row.file_url));
    if (DRIVER === 'mysql') return;
    const search = log.queries.find((q) => /LIKE/.test(q.sql) && /ORDER BY/.test(q.sql) && q.parameters.length > 2)!;
    const explain = DRIVER === 'postgres' ? 'EXPLAIN' : 'EXPLAIN QUERY PLAN';
    const rows = (await db.ds.query(`${explain} ${search.sql}`, search.parameters)) as Record<string, unknown>[];
    const plan = rows.map((row) => String(row['QUERY PLAN'] ?? row.detail)).join('\n');
    if (DRIVER === 'postgres') {
      // The URLs' trigram index (migration 1765238400000), then each match by its key.
      expect(plan, plan).to.include('IDX_file_checkpoint_urls_file_url_trgm');
      // "file" is in every URL ANALYZE sampled: the index is searched for "1999" alone, and the
      // exact test leaves out its other candidates (file-11999.csv and the like).
      expect(search.parameters.slice(0, 2)).to.deep.equal(['%1999%', 'file-1999']);
      expect(plan).to.not.match(/Seq Scan on file_checkpoints\b/);
    } else {
      // The table in storage order and the first matches kept, not the key's index walked row by row.
      expect(plan).to.match(/^SCAN file_checkpoints$/m);
      expect(plan).to.include('USE TEMP B-TREE FOR ORDER BY');
      expect(plan).to.not.include('sqlite_autoindex_file_checkpoints');
    }
  });

  it('stops counting at 10,000: the API gives the number and names the capped counts, the pages say "10,000+"', async () => {
    // COUNT_CAP + 2 dead letters: failed, dead and all stop at the cap; pending and completed are exact.
    await insertFiles(db.ds, COUNT_CAP + 2, { status: "'failed'", retry: '3', completedAt: 'NULL' });
    const base = await start({ refreshMs: 0 });
    const files = await json<FilesData>(`${base}/api/files`);
    expect(files.counts).to.deep.equal({
      all: COUNT_CAP,
      pending: 0,
      processing: 0,
      completed: 0,
      failed: COUNT_CAP,
      dead: COUNT_CAP,
      expiredLeases: 0,
      capped: ['all', 'failed', 'dead'],
    });
    const page = await (await fetch(`${base}/files`)).text();
    expect(page).to.include('dead letters <span class="count">10,000+</span>');
    expect(page).to.include('pending <span class="count">0</span>');
    const overview = await json<OverviewData>(`${base}/api/overview`);
    expect(overview.problems.map((p) => [p.kind, p.count, p.capped])).to.deep.equal([['dead-letters', COUNT_CAP, true]]);
    const overviewPage = await (await fetch(`${base}/`)).text();
    expect(overviewPage).to.include('Dead letters: 10,000+');
    expect(overviewPage).to.include('<span class="value">10,000+</span><span class="label">dead letters</span>');

    // Exactly the cap is an exact count; one more completed file is over it.
    await db.ds.query(sql('DELETE FROM file_checkpoints WHERE file_url IN (?, ?)'), ['scale/file-1.csv', 'scale/file-2.csv']);
    await db.ds.query("UPDATE file_checkpoints SET status = 'completed', retry_count = 0, completed_at = 1");
    // Cancelled files (no tab of their own) count in `all`.
    await db.ds.query(sql("UPDATE file_checkpoints SET status = 'cancelled' WHERE file_url = ?"), ['scale/file-3.csv']);
    await insertFiles(db.ds, 1, { status: "'completed'", retry: '0', completedAt: '1' });
    const exact = await json<FilesData>(`${base}/api/files`);
    expect(exact.counts).to.include({ all: COUNT_CAP + 1, completed: COUNT_CAP, failed: 0, dead: 0 });
    expect(exact.counts.capped).to.deep.equal([]);
    expect(await (await fetch(`${base}/files`)).text()).to.include('completed <span class="count">10,000</span>');
    await db.ds.query(sql("UPDATE file_checkpoints SET status = 'completed' WHERE file_url = ?"), ['scale/file-3.csv']);
    expect((await json<FilesData>(`${base}/api/files`)).counts.capped).to.deep.equal(['all', 'completed']);
  });

  it('counts the settled minutes of the throughput chart once: a refresh reads only the last minutes', async () => {
    const now = Date.now();
    await insertFiles(db.ds, 3, { status: "'completed'", retry: '0', completedAt: `${now - 20 * MINUTE} + g` });
    // A DataSource of its own: the one of the other tests has counted these minutes already (before the rows were written).
    const fresh = await db.open({ logger: log });
    const handler = createDashboard(fresh, { refreshMs: 0 });
    const base = (await listen((req, res) => void handler(req, res))).url;
    const throughputReads = () => log.queries.filter((q) => /^SELECT .* AS .bucket./.test(q.sql)).map((q) => Number(q.parameters[0]));
    log.clear();
    const first = await json<FilesData>(`${base}/api/files`);
    expect(first.throughput.completed.reduce((a, b) => a + b, 0)).to.equal(3);
    const [firstSince] = throughputReads();
    expect(firstSince).to.equal(first.throughput.from);
    log.clear();
    const second = await json<FilesData>(`${base}/api/files`);
    expect(second.throughput.completed).to.deep.equal(first.throughput.completed);
    const [secondSince] = throughputReads();
    // From the first minute that had not settled (ended 5 minutes ago) at the first request, not from an hour ago.
    expect(secondSince).to.be.above(Date.now() - 7 * MINUTE);
    expect(await count(db.ds, 'SELECT COUNT(*) FROM file_checkpoints')).to.equal(3);
  });
});
