import { validateName } from '../jobs/job-store';
import { status, type Status } from '../jobs/status';
import type { PageContext } from './dashboard-sql';
import { type Html, html } from './html';
import { formatCount, formatTime, href, layout, type View } from './layout';

/** The confirmation page of "reset a job": what would be forgotten. */
export interface ResetData {
  /** Which page this data is for. */
  page: 'jobs/reset';
  /** The name of the job or step to reset. */
  name: string;
  /** The job or step as stored; null when there is none (already reset). */
  job: Status | null;
}

export async function loadReset(ctx: PageContext, query: URLSearchParams): Promise<ResetData> {
  const name = query.get('name') ?? '';
  validateName(name);
  return { page: 'jobs/reset', name, job: await status(ctx.db, name) };
}

export function renderReset(data: ResetData, view: View): Html {
  const job = data.job;
  const back = job?.kind === 'step' ? 'steps' : 'jobs';
  const body =
    job === null
      ? html`<p>There is no job or step named <code class="name">${data.name}</code> (it may have been reset already).</p><p><a href="${href(view, back)}">Back</a></p>`
      : html`<div class="confirm">
<p>Reset the ${job.kind} <code class="name">${job.name}</code>? It is forgotten: ${
          job.kind === 'batch'
            ? html`the next <code>eachBatch</code> starts from the beginning (it has committed ${formatCount(job.batches)} batches, ${formatCount(job.items)} items, last at ${formatTime(job.updatedAt)}).`
            : job.kind === 'partitioned'
              ? html`its plan and ranges are dropped, and the next <code>eachPartition</code> plans it again and runs every range from the beginning (it has committed ${formatCount(job.batches)} batches, ${formatCount(job.items)} items, last at ${formatTime(job.updatedAt)}).`
              : html`the next call of the step runs it again.`
        } Its writes are not undone.</p>
${
  view.canWrite
    ? html`<form method="post" action="${view.base}jobs/reset"><input type="hidden" name="name" value="${job.name}"><input type="hidden" name="back" value="${back}"><button type="submit" class="danger">Reset ${job.kind}</button> <a href="${href(view, back)}">Cancel</a></form>`
    : html`<p class="note">Read-only: resetting is not allowed here.</p>`
}
</div>`;
  return layout(view, `Reset ${data.name}`, body);
}
