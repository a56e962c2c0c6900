import { type PageContext, toBoolean, toNullableNumber, toNumber } from './dashboard-sql';
import { type Html, html } from './html';
import { ELLIPSIS, formatTime, layout, NO_VALUE, pager, type View } from './layout';
import { resetLink, searchForm, stateTabs } from './jobs-page';
import { Conditions, type ListFilters, listFilters, selectJobPage } from './list-query';

/** Recorded results longer than this are cut (the database returns only this much). */
export const VALUE_CHARS = 2000;

export const STEP_STATES = ['all', 'recorded', 'pending'] as const;
export type StepState = (typeof STEP_STATES)[number];

/** One memoised step as the steps page lists it. Times are epoch milliseconds. */
export interface StepView {
  /** The step's name. */
  name: string;
  /** True once the result is recorded; a pending step's row exists while (or since) `f` failed or runs. */
  recorded: boolean;
  /** The recorded result as JSON text, cut at 2,000 characters. */
  value: string | null;
  /** True when `value` was cut. */
  valueTruncated: boolean;
  /** When the step's row was created. */
  startedAt: number;
  /** When the result was recorded; null until then. */
  finishedAt: number | null;
}

/** The steps page's data (`api/steps`). */
export interface StepsData {
  /** Which page this data is for. */
  page: 'steps';
  /** The filters read from the URL: state tab, name search, page size and position. */
  filters: ListFilters<StepState>;
  /** The steps of this page, in name order. */
  items: StepView[];
  /** The `after` value of the next page; null on the last page. */
  next: string | null;
}

export async function loadSteps(ctx: PageContext, query: URLSearchParams): Promise<StepsData> {
  const filters = listFilters(query, 'state', STEP_STATES, 'all');
  const q = (name: string) => ctx.dialect.quote(name);
  const conditions = new Conditions().add(`${q('kind')} = ?`, 'step');
  if (filters.state !== 'all') conditions.add(`${q('done')} = ?`, ctx.dialect.bindable(filters.state === 'recorded'));
  const page = await selectJobPage(
    ctx,
    `steps\0${filters.state}`,
    () =>
      `${q('name')}, ${q('done')}, ${q('started_at')}, ${q('finished_at')}, SUBSTR(${q('value')}, 1, ${VALUE_CHARS + 1}) AS ${q('value_text')}`,
    conditions,
    filters,
  );
  const items = page.rows.map((row): StepView => {
    const value = row.value_text === null || row.value_text === undefined ? null : String(row.value_text);
    return {
      name: String(row.name),
      recorded: toBoolean(row.done),
      value: value !== null && value.length > VALUE_CHARS ? value.slice(0, VALUE_CHARS) : value,
      valueTruncated: value !== null && value.length > VALUE_CHARS,
      startedAt: toNumber(row.started_at),
      finishedAt: toNullableNumber(row.finished_at),
    };
  });
  return { page: 'steps', filters, items, next: page.next };
}

/** Pretty-printed when the (untruncated) text parses; the raw text otherwise. */
function prettyJson(step: StepView): string {
  if (step.value === null) return '';
  if (step.valueTruncated) return `${step.value}…`;
  try {
    return JSON.stringify(JSON.parse(step.value), null, 2);
  } catch {
    return step.value;
  }
}

const RECORDED = html`<span class="state state-done">recorded</span>`;
const PENDING = html`<span class="state state-running">pending</span>`;

export function renderSteps(data: StepsData, view: View): Html {
  const rows = data.items.map(
    (step) => html`<tr>
<td class="name">${step.name}</td>
<td>${step.recorded ? RECORDED : PENDING}</td>
<td>${formatTime(step.finishedAt)}</td>
<td>${
      step.value === null
        ? NO_VALUE
        : html`<details data-key="${step.name}"><summary><code class="json">${step.value.slice(0, 60)}${step.value.length > 60 ? ELLIPSIS : ''}</code></summary><pre class="json">${prettyJson(step)}</pre>${
            step.valueTruncated ? html`<p class="note">Truncated at 2,000 characters.</p>` : ''
          }</details>`
    }</td>
<td>${resetLink(view, step.name)}</td>
</tr>`,
  );
  return layout(
    view,
    'Steps',
    html`${stateTabs(view, STEP_STATES, data.filters.state)}
${searchForm(view, { state: data.filters.state }, data.filters.q, 'Step name contains…')}
<table class="list">
<thead><tr><th>Name</th><th>State</th><th>Recorded at</th><th>Result</th><th></th></tr></thead>
<tbody>${rows.length > 0 ? rows : html`<tr><td colspan="5" class="empty">No steps.</td></tr>`}</tbody>
</table>
${pager(view, data.next)}`,
  );
}
