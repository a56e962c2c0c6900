import { type PageContext, read, toBoolean, toNumber } from './dashboard-sql';
import { cappedCount, deadLetterCondition, expireLeases, type FileCounts, loadFileCounts } from './files-page';
import { type Html, html } from './html';
import { stalledCondition } from './jobs-page';
import { formatCount, formatTime, href, layout, type View } from './layout';
import { lastRangeCommit, loadDeadRanges } from './partitions-hook';

const SAMPLE = 5;

/** Something that needs a person, listed before the counts. */
export interface Problem {
  /** Which kind of problem: dead-letter files, dead ranges, stalled jobs or expired file leases. */
  kind: 'dead-letters' | 'dead-ranges' | 'stalled-jobs' | 'expired-leases';
  /** How many there are; at least this many when `capped`. */
  count: number;
  /** The count stopped at the cap of file counts, 10,000 (dead letters, expired leases): the page says "10,000+". */
  capped: boolean;
  /** The page listing all of them, relative to the mount point. */
  path: string;
  /** The first few: names or URLs with their error where there is one. */
  examples: {
    /** The file URL, the job name, or `job #index` for a range. */
    name: string;
    /** Its error, or the time of its last commit or lease expiry; null when there is none. */
    detail: string | null;
  }[];
}

/** The overview page's data (`api/overview`): problems first, then counts by kind and state. */
export interface OverviewData {
  /** Which page this data is for. */
  page: 'overview';
  /** Only the kinds with a count above zero, in this order: dead letters, dead ranges, stalled jobs, expired leases. */
  problems: Problem[];
  /** Batch and partitioned jobs by state (`stalled`: not done, no commit for 10 minutes). */
  jobs: {
    /** Not done, and not stalled. */
    running: number;
    /** Not done, and no commit for 10 minutes. */
    stalled: number;
    /** Finished. */
    done: number;
  };
  /** Steps by state (`pending`: its row exists but no result is recorded). */
  steps: {
    /** Steps with a recorded result. */
    recorded: number;
    /** Steps whose row exists without a result (running, or failed). */
    pending: number;
  };
  /** Import batches: all of them, and the finished ones. */
  imports: {
    /** Every import batch. */
    total: number;
    /** The finished ones. */
    done: number;
  };
  /** File claims by status. */
  files: FileCounts;
}

export async function loadOverview(ctx: PageContext): Promise<OverviewData> {
  await expireLeases(ctx);
  const q = (name: string) => ctx.dialect.quote(name);
  const jobs = await read(ctx, async (query) => {
    const byKind = await query(
      `SELECT ${q('kind')}, ${q('done')}, COUNT(*) AS ${q('n')} FROM ${q('checkpoint_jobs')} GROUP BY ${q('kind')}, ${q('done')}`,
      [],
    );
    const [stalledWhere, stalledParameters] = stalledCondition(ctx, true);
    const stalled = await query(`SELECT COUNT(*) AS ${q('n')} FROM ${q('checkpoint_jobs')} WHERE ${stalledWhere}`, stalledParameters);
    const stalledSample = await query(
      // A partitioned job's last commit is its ranges' (its own row's updated_at is older).
      `SELECT ${q('name')}, ${q('updated_at')}, ${lastRangeCommit(ctx)} AS ${q('range_updated_at')} FROM ${q('checkpoint_jobs')} ` +
        `WHERE ${stalledWhere} ORDER BY ${q('updated_at')} LIMIT ${SAMPLE}`,
      stalledParameters,
    );
    const imports = await query(
      `SELECT COUNT(*) AS ${q('n')}, SUM(CASE WHEN ${q('total_rows')} IS NOT NULL AND ${q('next_index')} >= ${q('total_rows')} THEN 1 ELSE 0 END) AS ${q('done')} FROM ${q('checkpoint_imports')}`,
      [],
    );
    // The first dead letters of the files page's dead-letter list (in key order, from the last attempts' index).
    const deadSample = await query(
      `SELECT ${q('file_url')}, SUBSTR(${q('error_message')}, 1, 200) AS ${q('error_text')} FROM ${q('file_checkpoints')} ` +
        `WHERE ${deadLetterCondition(ctx)} ORDER BY ${q('url_hash')} LIMIT ${SAMPLE}`,
      [],
    );
    // `<> 'completed'` repeats the open status index's predicate, which SQLite's planner needs to use it.
    const expiredSample = await query(
      `SELECT ${q('file_url')}, ${q('lease_expires_at')} FROM ${q('file_checkpoints')} ` +
        `WHERE ${q('status')} <> 'completed' AND ${q('status')} = 'processing' AND ${q('lease_expires_at')} <= ? ORDER BY ${q('file_url')} LIMIT ${SAMPLE}`,
      [ctx.now],
    );
    return { byKind, stalled: toNumber(stalled[0]?.n), stalledSample, imports: imports[0] ?? {}, deadSample, expiredSample };
  });
  const files = await loadFileCounts(ctx);
  const deadRanges = await loadDeadRanges(ctx);
  const count = (kind: string, done: boolean) =>
    jobs.byKind.filter((row) => row.kind === kind && toBoolean(row.done) === done).reduce((sum, row) => sum + toNumber(row.n), 0);
  const problems: Problem[] = [
    {
      kind: 'dead-letters',
      count: files.dead,
      capped: files.capped.includes('dead'),
      path: 'files?status=dead',
      examples: jobs.deadSample.map((row) => ({
        name: String(row.file_url),
        detail: row.error_text === null ? null : String(row.error_text),
      })),
    },
    {
      kind: 'dead-ranges',
      count: deadRanges.count,
      capped: false,
      path: 'jobs?state=dead',
      examples: deadRanges.sample.map((range) => ({ name: `${range.job} #${range.index}`, detail: range.error })),
    },
    {
      kind: 'stalled-jobs',
      count: jobs.stalled,
      capped: false,
      path: 'jobs?state=stalled',
      examples: jobs.stalledSample.map((row) => ({
        name: String(row.name),
        detail: `last commit ${formatTime(Math.max(toNumber(row.updated_at), toNumber(row.range_updated_at)))}`,
      })),
    },
    {
      kind: 'expired-leases',
      count: files.expiredLeases,
      capped: files.capped.includes('expiredLeases'),
      path: 'files?status=processing',
      examples: jobs.expiredSample.map((row) => ({
        name: String(row.file_url),
        detail: `lease expired ${formatTime(toNumber(row.lease_expires_at))}`,
      })),
    },
  ];
  // Partitioned jobs count with the batch jobs, as on the jobs page.
  const running = count('batch', false) + count('partitioned', false);
  return {
    page: 'overview',
    problems: problems.filter((problem) => problem.count > 0),
    jobs: { running: running - jobs.stalled, stalled: jobs.stalled, done: count('batch', true) + count('partitioned', true) },
    steps: { recorded: count('step', true), pending: count('step', false) },
    imports: { total: toNumber(jobs.imports.n), done: toNumber(jobs.imports.done) },
    files,
  };
}

const PROBLEM_LABELS: Record<Problem['kind'], string> = {
  'dead-letters': 'Dead letters',
  'dead-ranges': 'Dead ranges',
  'stalled-jobs': 'Stalled jobs (no commit for 10 minutes)',
  'expired-leases': 'Expired leases',
};

function card(label: string, value: number | string, link: string, tone = ''): Html {
  return html`<a class="card ${tone}" href="${link}"><span class="value">${typeof value === 'number' ? formatCount(value) : value}</span><span class="label">${label}</span></a>`;
}

export function renderOverview(data: OverviewData, view: View): Html {
  const problems =
    data.problems.length === 0
      ? html`<p class="ok">No problems: no dead letters, dead ranges, stalled jobs or expired leases.</p>`
      : data.problems.map(
          (problem) => html`<section class="problem" data-kind="${problem.kind}">
<h3><a href="${view.base}${problem.path}">${PROBLEM_LABELS[problem.kind]}: ${cappedCount(problem.count, problem.capped)}</a></h3>
<ul>${problem.examples.map((example) => html`<li><span class="name">${example.name}</span>${example.detail !== null ? html` <span class="error">${example.detail}</span>` : ''}</li>`)}</ul>
</section>`,
        );
  return layout(
    view,
    'Overview',
    html`<section class="problems"><h2>Problems</h2>${problems}</section>
<h2>Jobs</h2>
<div class="cards">${card('running', data.jobs.running, href(view, 'jobs', { state: 'running' }))}${card('stalled', data.jobs.stalled, href(view, 'jobs', { state: 'stalled' }), data.jobs.stalled > 0 ? 'bad' : '')}${card('done', data.jobs.done, href(view, 'jobs', { state: 'done' }))}</div>
<h2>Steps</h2>
<div class="cards">${card('recorded', data.steps.recorded, href(view, 'steps', { state: 'recorded' }))}${card('pending', data.steps.pending, href(view, 'steps', { state: 'pending' }))}</div>
<h2>Imports</h2>
<div class="cards">${card('imports', data.imports.total, href(view, 'imports'))}${card('done', data.imports.done, href(view, 'imports'))}</div>
<h2>File claims</h2>
<div class="cards">${(['pending', 'processing', 'completed', 'failed', 'dead'] as const).map((status) =>
      card(
        status === 'dead' ? 'dead letters' : status,
        cappedCount(data.files[status], data.files.capped.includes(status)),
        href(view, 'files', { status }),
        status === 'dead' && data.files.dead > 0 ? 'bad' : '',
      ),
    )}</div>`,
  );
}
