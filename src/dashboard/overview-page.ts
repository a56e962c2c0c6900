import { type PageContext, read, toBoolean, toNumber } from './dashboard-sql';
import { expireLeases, type FileCounts, loadFileCounts } from './files-page';
import { type Html, html } from './html';
import { stalledCondition } from './jobs-page';
import { formatCount, formatTime, href, layout, type View } from './layout';
import { lastRangeCommit, loadDeadRanges } from './partitions-hook';

const SAMPLE = 5;

/** Something that needs a person, listed before the counts. */
export interface Problem {
  kind: 'dead-letters' | 'dead-ranges' | 'stalled-jobs' | 'expired-leases';
  count: number;
  /** The page listing all of them, relative to the mount point. */
  path: string;
  /** The first few: names or URLs with their error where there is one. */
  examples: { name: string; detail: string | null }[];
}

export interface OverviewData {
  page: 'overview';
  /** Only the kinds with a count above zero, in this order: dead letters, dead ranges, stalled jobs, expired leases. */
  problems: Problem[];
  jobs: { running: number; stalled: number; done: number };
  steps: { recorded: number; pending: number };
  imports: { total: number; done: number };
  files: FileCounts;
}

export async function loadOverview(ctx: PageContext): Promise<OverviewData> {
  await expireLeases(ctx);
  const q = (name: string) => ctx.dialect.quote(name);
  const jobs = await read(ctx, async (query) => {
    const byKind = await query(`SELECT ${q('kind')}, ${q('done')}, COUNT(*) AS ${q('n')} FROM ${q('checkpoint_jobs')} GROUP BY ${q('kind')}, ${q('done')}`, []);
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
    const deadSample = await query(
      `SELECT ${q('file_url')}, SUBSTR(${q('error_message')}, 1, 200) AS ${q('error_text')} FROM ${q('file_checkpoints')} ` +
        `WHERE ${q('status')} = ? AND ${q('retry_count')} >= ${q('max_retries')} ORDER BY ${q('file_url')} LIMIT ${SAMPLE}`,
      ['failed'],
    );
    const expiredSample = await query(
      `SELECT ${q('file_url')}, ${q('lease_expires_at')} FROM ${q('file_checkpoints')} WHERE ${q('status')} = ? AND ${q('lease_expires_at')} <= ? ` +
        `ORDER BY ${q('file_url')} LIMIT ${SAMPLE}`,
      ['processing', ctx.now],
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
      path: 'files?status=dead',
      examples: jobs.deadSample.map((row) => ({ name: String(row.file_url), detail: row.error_text === null ? null : String(row.error_text) })),
    },
    {
      kind: 'dead-ranges',
      count: deadRanges.count,
      path: 'jobs?state=dead',
      examples: deadRanges.sample.map((range) => ({ name: `${range.job} #${range.index}`, detail: range.error })),
    },
    {
      kind: 'stalled-jobs',
      count: jobs.stalled,
      path: 'jobs?state=stalled',
      examples: jobs.stalledSample.map((row) => ({ name: String(row.name), detail: `last commit ${formatTime(Math.max(toNumber(row.updated_at), toNumber(row.range_updated_at)))}` })),
    },
    {
      kind: 'expired-leases',
      count: files.expiredLeases,
      path: 'files?status=processing',
      examples: jobs.expiredSample.map((row) => ({ name: String(row.file_url), detail: `lease expired ${formatTime(toNumber(row.lease_expires_at))}` })),
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

function card(label: string, value: number, link: string, tone = ''): Html {
  return html`<a class="card ${tone}" href="${link}"><span class="value">${formatCount(value)}</span><span class="label">${label}</span></a>`;
}

export function renderOverview(data: OverviewData, view: View): Html {
  const problems =
    data.problems.length === 0
      ? html`<p class="ok">No problems: no dead letters, dead ranges, stalled jobs or expired leases.</p>`
      : data.problems.map(
          (problem) => html`<section class="problem" data-kind="${problem.kind}">
<h3><a href="${view.base}${problem.path}">${PROBLEM_LABELS[problem.kind]}: ${formatCount(problem.count)}</a></h3>
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
      card(status === 'dead' ? 'dead letters' : status, data.files[status], href(view, 'files', { status }), status === 'dead' && data.files.dead > 0 ? 'bad' : ''),
    )}</div>`,
  );
}
