import type { PageContext } from './dashboard-sql';
import { type Html, html } from './html';
import type { View } from './layout';

/**
 * The place where partitioned jobs (issue 14: their partitions table, `listPartitions`) join the
 * dashboard. Until that feature is merged there is nothing to read, so the hooks below return
 * empty results; they are the only places to change: the pages and the JSON API already carry
 * `partitioned` / `deadRanges`.
 */
export interface PartitionedJobView {
  name: string;
  done: boolean;
  /** Per-range progress for the bars. */
  ranges: { index: number; state: string; items: number; total: number | null; error: string | null }[];
}

export interface DeadRangeView {
  job: string;
  index: number;
  error: string | null;
}

export async function loadPartitionedJobs(_ctx: PageContext): Promise<PartitionedJobView[]> {
  return [];
}

/** Dead ranges, for the overview's problems (partitioned jobs' ranges out of attempts). */
export async function loadDeadRanges(_ctx: PageContext): Promise<DeadRangeView[]> {
  return [];
}

export function renderPartitionedJobs(jobs: PartitionedJobView[], _view: View): Html {
  if (jobs.length === 0) return html``;
  return html`<section class="partitioned"><h2>Partitioned jobs</h2>${jobs.map(
    (job) => html`<h3>${job.name}</h3><ul>${job.ranges.map((range) => html`<li>#${range.index} ${range.state} ${range.items}</li>`)}</ul>`,
  )}</section>`;
}
