import { pausedTypesSql } from '../claims/claim-sql';
import { CheckpointManager } from '../claims/checkpoint-manager';
import { DatabaseClaimStore } from '../claims/database-claim-store';
import { type ControlState, controlStateOf } from '../control/job-state';
import { cancel, pause, resume } from '../control/pause';
import type { Db } from '../core/transaction';
import { validateName } from '../jobs/job-store';
import { containsPattern, type PageContext, pageContext, read, toBoolean, toNumber } from './dashboard-sql';
import { deadLetterCondition, expireLeases } from './files-page';
import { type Html, html } from './html';
import { formatCount, href, layout, type View } from './layout';

/** The pages a pause, resume or cancel goes back to. */
const CONTROL_BACKS = ['jobs', 'imports'] as const;
type ControlBack = (typeof CONTROL_BACKS)[number];

/** Dead letters requeued per transaction by "requeue all matching". */
export const REQUEUE_BATCH = 500;

// Fixed markup, made once.
const PAUSED = html`<span class="state state-warn">paused</span>`;
const CANCELLED = html`<span class="state state-bad">cancelled</span>`;
const THROTTLED = html` <span class="state state-warn">throttled</span>`;
const NOTHING = html``;

/** A job's or import's badge for an operator's state: paused or cancelled; null while active (its other badge shows). */
export function controlBadge(state: ControlState): Html | null {
  return state === 'paused' ? PAUSED : state === 'cancelled' ? CANCELLED : null;
}

/** The "throttled" badge, after the state's, while a loop of the row waits on its throttle. */
export function throttledBadge(throttled: boolean): Html {
  return throttled ? THROTTLED : NOTHING;
}

/** True while `throttled_until` (epoch ms or null, as read) is ahead of `now`. */
export function isThrottled(throttledUntil: unknown, now: number): boolean {
  return throttledUntil !== null && throttledUntil !== undefined && toNumber(throttledUntil) > now;
}

/**
 * The buttons that apply to a row in its state (where writes are allowed): Pause while active,
 * Resume while paused, and "Cancel…" (to the confirmation page) until it is done or cancelled.
 */
export function controlButtons(view: View, name: string, state: ControlState, done: boolean, back: ControlBack): Html {
  if (!view.canWrite) return NOTHING;
  const form = (action: 'pause' | 'resume', label: string) =>
    html`<form method="post" action="${view.base}jobs/${action}" class="inline"><input type="hidden" name="name" value="${name}"><input type="hidden" name="back" value="${back}"><button type="submit">${label}</button></form>`;
  return html`${!done && state === 'active' ? form('pause', 'Pause') : ''}${state === 'paused' ? form('resume', 'Resume') : ''}${
    !done && state !== 'cancelled' ? html` <a class="action" href="${href(view, 'jobs/cancel', { name, back })}">Cancel&hellip;</a>` : ''
  }`;
}

/** What a name stands for on the cancel page: a batch or partitioned job, or an import batch. */
export interface CancelTarget {
  /** `batch` or `partitioned` (a job), or `import` (an import batch). */
  kind: 'batch' | 'partitioned' | 'import';
  /** The operator's state. */
  state: ControlState;
  /** True once it finished. */
  done: boolean;
  /** Items (import: source rows) committed so far. */
  items: number;
}

/** The confirmation page of "cancel a job or import" (`jobs/cancel?name=…`). */
export interface CancelData {
  /** Which page this data is for. */
  page: 'jobs/cancel';
  /** The job's name or the import's batch id. */
  name: string;
  /** Where to go afterwards: `jobs` or `imports`. */
  back: ControlBack;
  /** The job and the import batch of that name (a name may be both); empty when there is neither. */
  targets: CancelTarget[];
}

function controlBack(value: string | null): ControlBack {
  return (CONTROL_BACKS as readonly string[]).includes(value ?? '') ? (value as ControlBack) : 'jobs';
}

export async function loadCancel(ctx: PageContext, query: URLSearchParams): Promise<CancelData> {
  const name = query.get('name') ?? '';
  validateName(name);
  const q = (identifier: string) => ctx.dialect.quote(identifier);
  const jobs = await read(ctx, (run) =>
    run(
      `SELECT ${q('kind')}, ${q('state')}, ${q('done')}, ${q('items')} FROM ${q('checkpoint_jobs')} ` +
        `WHERE ${q('name')} = ? AND ${q('kind')} IN ('batch', 'partitioned')`,
      [name],
    ),
  );
  const imports = await read(ctx, (run) =>
    run(`SELECT ${q('state')}, ${q('next_index')}, ${q('total_rows')} FROM ${q('checkpoint_imports')} WHERE ${q('id')} = ?`, [name]),
  );
  const targets: CancelTarget[] = [
    ...jobs.map((row) => ({
      kind: row.kind === 'partitioned' ? ('partitioned' as const) : ('batch' as const),
      state: controlStateOf(row.state),
      done: toBoolean(row.done),
      items: toNumber(row.items),
    })),
    ...imports.map((row) => ({
      kind: 'import' as const,
      state: controlStateOf(row.state),
      done: row.total_rows !== null && row.total_rows !== undefined && toNumber(row.next_index) >= toNumber(row.total_rows),
      items: toNumber(row.next_index),
    })),
  ];
  return { page: 'jobs/cancel', name, back: controlBack(query.get('back')), targets };
}

function describe(target: CancelTarget): string {
  const what = target.kind === 'import' ? 'import batch' : `${target.kind} job`;
  const state = target.done ? 'done' : target.state;
  const unit = target.kind === 'import' ? 'row' : 'item';
  return `the ${what} (${state}, ${formatCount(target.items)} ${target.items === 1 ? unit : `${unit}s`} committed)`;
}

export function renderCancel(data: CancelData, view: View): Html {
  const open = data.targets.filter((target) => !target.done && target.state !== 'cancelled');
  const backLink = html`<a href="${href(view, data.back)}">Back</a>`;
  const body =
    open.length === 0
      ? html`<p>There is nothing to cancel named <code class="name">${data.name}</code>${
          data.targets.length > 0 ? ` (${data.targets.map(describe).join('; ')})` : ''
        }.</p><p>${backLink}</p>`
      : html`<div class="confirm">
<p>Cancel <code class="name">${data.name}</code>: ${open.map(describe).join('; ')}? Its loops stop after the batch in flight, and no call runs it again until it is reset (an import: <code>replaceImport</code>). The work committed so far stays.</p>
${
  view.canWrite
    ? html`<form method="post" action="${view.base}jobs/cancel"><input type="hidden" name="name" value="${data.name}"><input type="hidden" name="back" value="${data.back}"><button type="submit" class="danger">Cancel it</button> ${backLink}</form>`
    : html`<p class="note">Read-only: cancelling is not allowed here.</p>`
}
</div>`;
  return layout(view, `Cancel ${data.name}`, body);
}

/** The control actions: pause, resume and cancel by name (a job or an import batch), back to the page it came from. */
export async function controlAction(
  db: Db,
  operation: 'pause' | 'resume' | 'cancel',
  name: string | undefined,
  back: (fallback: string) => string,
): Promise<{ result: Record<string, unknown>; back: string }> {
  validateName(name);
  const run = { pause, resume, cancel }[operation];
  return {
    result: { [operation === 'pause' ? 'paused' : operation === 'resume' ? 'resumed' : 'cancelled']: await run(db, name) },
    back: back('jobs'),
  };
}

/** The file types paused now, sorted (`'*'`: every type). */
export async function loadPausedTypes(ctx: PageContext): Promise<string[]> {
  const rows = await read(ctx, (run) => run(pausedTypesSql(ctx.dialect), []));
  return rows.map((row) => String(row.file_type));
}

/** Pauses a file type (empty: every type) or resumes one. */
export async function fileTypeAction(db: Db, operation: 'pause' | 'resume', type: string | undefined): Promise<Record<string, unknown>> {
  const manager = new CheckpointManager(db);
  const options = type === undefined || type === '' ? {} : { fileType: type };
  return operation === 'pause' ? { paused: await manager.pause(options) } : { resumed: await manager.resume(options) };
}

/** The confirmation page of "requeue all dead letters matching this filter" (`files/requeue-all?q=…`). */
export interface RequeueAllData {
  /** Which page this data is for. */
  page: 'files/requeue-all';
  /** The URL search; empty: every dead letter. */
  q: string;
  /** The dead letters matching it now, counted exactly (not capped as the list's counts are). */
  count: number;
}

/** The dead letters' condition with the URL search, and its parameters. */
function deadMatching(ctx: PageContext, q: string): [string, unknown[]] {
  const dead = deadLetterCondition(ctx);
  return q === '' ? [dead, []] : [`${dead} AND ${ctx.dialect.quote('file_url')} LIKE ? ESCAPE '!'`, [containsPattern(q)]];
}

export async function loadRequeueAll(ctx: PageContext, query: URLSearchParams): Promise<RequeueAllData> {
  await expireLeases(ctx);
  const q = query.get('q') ?? '';
  const [condition, parameters] = deadMatching(ctx, q);
  const quote = (name: string) => ctx.dialect.quote(name);
  // Exact: a deliberate action reads what it has to, once.
  const rows = await read(ctx, (run) =>
    run(`SELECT COUNT(*) AS ${quote('n')} FROM ${quote('file_checkpoints')} WHERE ${condition}`, parameters),
  );
  return { page: 'files/requeue-all', q, count: toNumber(rows[0]?.n) };
}

export function renderRequeueAll(data: RequeueAllData, view: View): Html {
  const filter = data.q === '' ? html`` : html` whose URL contains <code class="name">${data.q}</code>`;
  const backHref = href(view, 'files', { status: 'dead', q: data.q });
  const body =
    data.count === 0
      ? html`<p>No dead letters${filter}.</p><p><a href="${backHref}">Back</a></p>`
      : html`<div class="confirm">
<p>Requeue all <strong class="count">${formatCount(data.count)}</strong> dead letters${filter}? Each is claimable again, with its retries counted from zero.</p>
${
  view.canWrite
    ? html`<form method="post" action="${view.base}files/requeue-all"><input type="hidden" name="q" value="${data.q}"><input type="hidden" name="back" value="${`files?${new URLSearchParams({ status: 'dead', q: data.q }).toString()}`}"><button type="submit" class="danger">Requeue ${formatCount(data.count)}</button> <a href="${backHref}">Cancel</a></form>`
    : html`<p class="note">Read-only: requeueing is not allowed here.</p>`
}
</div>`;
  return layout(view, 'Requeue dead letters', body);
}

/**
 * Requeues every dead letter matching the URL search, {@link REQUEUE_BATCH} at a time, each batch
 * its own transaction: the batch is read in key order after the last one's key, then requeued by key
 * (a file that stopped being a dead letter meanwhile is left alone). How many were requeued.
 */
export async function requeueAllDead(db: Db, q: string): Promise<number> {
  const ctx = pageContext(db);
  await expireLeases(ctx);
  const [condition, parameters] = deadMatching(ctx, q);
  const quote = (name: string) => ctx.dialect.quote(name);
  const store = new DatabaseClaimStore(db);
  let after = '';
  let requeued = 0;
  for (;;) {
    const rows = await read(ctx, (run) =>
      run(
        `SELECT ${quote('url_hash')} FROM ${quote('file_checkpoints')} WHERE ${condition} AND ${quote('url_hash')} > ? ` +
          `ORDER BY ${quote('url_hash')} LIMIT ${REQUEUE_BATCH}`,
        [...parameters, after],
      ),
    );
    if (rows.length === 0) return requeued;
    const hashes = rows.map((row) => String(row.url_hash));
    requeued += await store.requeueDead(hashes);
    after = hashes[hashes.length - 1];
    if (rows.length < REQUEUE_BATCH) return requeued;
  }
}
