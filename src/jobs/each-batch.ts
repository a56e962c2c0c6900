import type { EntityManager } from 'typeorm';
import { FingerprintMismatchError, InvalidArgumentError } from '../core/errors';
import { encodeJson, type Json, decodeJson } from '../core/json';
import {
  assertKind,
  insertJob,
  type JobRow,
  jobLockAtBegin,
  jobUpdateAtCommit,
  lockJob,
  readJob,
  updateJob,
  updateJobUnchanged,
  validateName,
  toStatus,
} from './job-store';
import { type Progress, progressSince } from '../core/progress';
import { endedTotal, startingTotal } from './job-total';
import { type Db, dataSourceOf, transact } from '../core/transaction';
import { TransactionLane } from '../core/transaction-lane';
import { LoopSpans, type SpanScope } from '../core/telemetry';
import { dialectOf } from '../dialect';
import { JOBS } from '../control/control-store';
import { stopFor, type StopReason } from '../control/job-state';
import { type ControlOptions, LoopControl, validateControlOptions } from '../control/loop-control';

/** One page of a source; `next === null` marks the last page. */
export interface Page<T> {
  /** The page's items; an empty array ends the job (no batch is run for it). */
  items: T[];
  /** The cursor stored with this batch and passed back to the source for the next page; `null` ends the job after this batch. */
  next: Json;
}

/**
 * Returns the page after `cursor` (`null` on the very first call), at most `limit` items. May carry
 * a `total` of its own (a property of the function): how many items the whole job will visit.
 */
export type Source<T> = {
  (cursor: Json, limit: number, tx: EntityManager): Promise<Page<T>> | Page<T>;
  /**
   * How many items the job will visit over its whole run (null: unknown), asked once when the job
   * starts, or when a job stored without a total resumes; shown as `status().total` and
   * `Progress.total` until the job ends. `sqlSource` estimates it from the database.
   */
  total?: (tx: EntityManager) => Promise<number | null>;
};

/** Options of {@link eachBatch}; `signal`, `maxRuntimeMs`, `throttle` and `whilePaused` are {@link ControlOptions}. */
export interface EachBatchOptions extends ControlOptions {
  /** Called after each committed batch; an error it throws propagates out of `eachBatch`. */
  onProgress?(progress: Progress): void;
  /** Identifies the input; resuming the job with a different fingerprint throws `FINGERPRINT_MISMATCH` (a job stored without one adopts it). At most 512 characters. */
  fingerprint?: string;
}

/** `batches`/`items` count this call only; `status()` has the totals. */
export interface EachBatchResult {
  /** Batches committed by this call. */
  batches: number;
  /** Items committed by this call. */
  items: number;
  /** True if the job is finished (now or by an earlier run); false if it stopped before its end. */
  done: boolean;
  /** The last committed cursor (`null` if no batch has committed yet). */
  cursor: Json;
  /** Why the call returned before the job's end (a pause, a cancel, `maxRuntimeMs`, `signal`); absent when it ran to its natural end. */
  stopped?: StopReason;
}

function validate(name: unknown, source: unknown, limit: unknown, handler: unknown, options: EachBatchOptions): void {
  validateName(name);
  if (typeof source !== 'function') throw new InvalidArgumentError('eachBatch: source must be a function.');
  if (typeof handler !== 'function') throw new InvalidArgumentError('eachBatch: handler must be a function.');
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit <= 0) {
    throw new InvalidArgumentError(`eachBatch: limit must be a positive safe integer, got ${String(limit)}.`);
  }
  if (options.fingerprint !== undefined && (typeof options.fingerprint !== 'string' || options.fingerprint.length > 512)) {
    throw new InvalidArgumentError('eachBatch: fingerprint must be a string of at most 512 characters.');
  }
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') {
    throw new InvalidArgumentError('eachBatch: onProgress must be a function.');
  }
  validateControlOptions(options, 'eachBatch');
}

export function checkFingerprint(row: JobRow, fingerprint: string | undefined): void {
  if (fingerprint !== undefined && row.fingerprint !== null && row.fingerprint !== fingerprint) {
    throw new FingerprintMismatchError(
      `Job "${row.name}" was started with fingerprint "${row.fingerprint}", not "${fingerprint}": it is another input. ` +
        'Use another job name, or reset() the job (undoing its writes yourself) to start over.',
    );
  }
}

export function checkPage<T>(page: unknown): Page<T> {
  const candidate = page as Page<T> | null;
  if (typeof candidate !== 'object' || candidate === null || !Array.isArray(candidate.items) || !('next' in candidate)) {
    throw new InvalidArgumentError('eachBatch: the source must return { items: [...], next: cursor }.');
  }
  return candidate;
}

type Advance = { cursor: string; batches: number; items: number };

/** A batch begun without the job row's lock found the row moved (another runner, a reset): rolled back, never leaves eachBatch. */
class JobRowMoved extends Error {}

type Round =
  | { kind: 'finished'; cursor: Json }
  /** The batch found the job row moved before its handler ran (JobRowMoved): run it again under the lock. */
  | { kind: 'moved' }
  /** The job row, read under its lock before the batch, says paused or cancelled: no batch ran. */
  | { kind: 'stopped'; stop: 'paused' | 'cancelled' }
  /** `advance`: the job row as the batch leaves it, written with the COMMIT unless `advanced` (already written). */
  | { kind: 'batch'; items: number; cursor: Json; done: boolean; advance?: Advance; advanced?: boolean };

function jobReset(name: string): InvalidArgumentError {
  return new InvalidArgumentError(`Job "${name}" was reset while running; run eachBatch again to start over.`);
}

/**
 * Runs job `name` to completion, one batch per transaction: `source(cursor)`, then
 * `handler(items, tx)`, then the new cursor — committed together with the handler's writes.
 * A crashed or failed run resumes at the first uncommitted batch; a handler's error re-raises
 * unchanged after its batch rolls back. Throws `INVALID_ARGUMENT` (bad arguments),
 * `FINGERPRINT_MISMATCH` (another input under this name) or `NON_SERIALIZABLE` (a cursor that is not JSON).
 */
export async function eachBatch<T>(
  db: Db,
  name: string,
  source: Source<T>,
  limit: number,
  handler: (items: T[], tx: EntityManager) => unknown,
  options: EachBatchOptions = {},
): Promise<EachBatchResult> {
  validate(name, source, limit, handler, options);
  const { signal, fingerprint, onProgress } = options;
  const result: EachBatchResult = { batches: 0, items: 0, done: false, cursor: null };
  if (signal?.aborted) {
    const stored = await transact(db, async (tx) => readJob(tx, name));
    const stopped = { ...result, stopped: 'signal' as const };
    if (!stored) return stopped;
    const { done, cursor } = toStatus(stored);
    // A finished job's call ends as it would have anyway: nothing was stopped.
    return done ? { ...result, done, cursor } : { ...stopped, cursor };
  }
  const control = new LoopControl(db, JOBS, name, options);

  // The job row exists before the first batch, so a job whose first batch failed is listed.
  const start = await transact(db, async (tx) => {
    await insertJob(tx, name, 'batch', fingerprint ?? null);
    const row = (await lockJob(tx, name)) as JobRow;
    assertKind(row, 'batch');
    checkFingerprint(row, fingerprint);
    if (fingerprint !== undefined && row.fingerprint === null) await updateJob(tx, name, { fingerprint });
    // The estimate is read here, once per call, never per batch; not for a paused or cancelled job,
    // whose call does not call the source.
    const stop = stopFor(row);
    const total = stop ? null : await startingTotal(tx, row, source.total);
    return { ...toStatus(row), total, stop };
  });
  result.cursor = start.cursor;
  if (start.done) return { ...result, done: true };
  // A paused or cancelled job: the source is not called (with whilePaused 'wait', once resumed, the first batch reads the row again).
  const held = start.stop && (await control.stopped(start.stop));
  if (held) return { ...result, stopped: held };
  // Resumed while it waited: now the estimate.
  if (start.stop) start.total = await transact(db, async (tx) => startingTotal(tx, (await lockJob(tx, name)) as JobRow, source.total));

  let followed = false;
  // What the last batch committed on the lane: its transaction's opening statement locked the job
  // row only if the row was still so (no other runner committed since), so it need not be re-read.
  let left: Advance | undefined;
  const dialect = dialectOf(dataSourceOf(db));
  // Where that opening lock would cost a round trip of its own (MySQL/MariaDB), the batch after
  // reads its page without it, then locks the row by advancing it only while it is as `left` says,
  // before the handler writes anything; a row moved meanwhile (another runner, a reset) rolls the
  // batch back and it runs again under the lock. Either way the handler runs only under the lock.
  const advanceFirst = dialect.pipelinedCommit?.openingInCommit === false;
  /**
   * One batch in `tx`. With `advanceAtCommit`, a batch that is not the last leaves the job row's
   * update to the caller, which sends it with the COMMIT (the row stays locked until then);
   * `opened`: `tx` began with the last batch's commit, with the job row locked as `left` says (on
   * MySQL/MariaDB not yet locked: see `advanceFirst`).
   */
  const batch = async (tx: EntityManager, span: SpanScope, advanceAtCommit: boolean, opened = false): Promise<Round> => {
    followed = false;
    const unlocked = opened && advanceFirst ? left : undefined;
    let row: Pick<JobRow, 'cursor' | 'batches' | 'items'>;
    if (opened && left) {
      row = left;
    } else {
      // Re-read under the lock: another runner may have committed batches since.
      const locked = await lockJob(tx, name);
      if (!locked) throw jobReset(name);
      checkFingerprint(locked, fingerprint);
      if (locked.done === true || Number(locked.done) === 1) return { kind: 'finished', cursor: decodeJson(locked.cursor) };
      const stop = stopFor(locked);
      if (stop) return { kind: 'stopped', stop };
      row = locked;
    }
    const cursor = decodeJson(row.cursor);
    span.set({ index: Number(row.batches) });
    const page = checkPage<T>(await source(cursor, limit, tx));
    const now = Date.now();
    if (page.items.length === 0) {
      const ended = { done: true, finished_at: now, ...endedTotal(Number(row.items)) };
      if (!unlocked) await updateJob(tx, name, ended);
      else if (!(await updateJobUnchanged(tx, name, ended, unlocked))) throw new JobRowMoved();
      return { kind: 'finished', cursor };
    }
    const next = encodeJson(page.next, 'The cursor returned by the source');
    const done = page.next === null;
    const advance = { cursor: next, batches: Number(row.batches) + 1, items: Number(row.items) + page.items.length };
    const final = { ...advance, done, ...(done ? { finished_at: now, ...endedTotal(advance.items) } : {}) };
    if (unlocked && !(await updateJobUnchanged(tx, name, final, unlocked))) throw new JobRowMoved();
    await handler(page.items, tx);
    span.committed(page.items.length, true);
    const round = { kind: 'batch' as const, items: page.items.length, cursor: decodeJson(next), done };
    if (advanceAtCommit && !done) {
      // Another batch follows at once unless the call is stopping or may wait: its BEGIN goes with this COMMIT.
      followed = control.followsAtOnce();
      return { ...round, advance, advanced: unlocked !== undefined };
    }
    if (!unlocked) await updateJob(tx, name, final);
    return round;
  };

  // PostgreSQL, in a transaction of its own: one connection kept for the run, and each batch's
  // cursor update, COMMIT, the next batch's BEGIN and its lock of the job row in one round trip.
  // MySQL/MariaDB: the same connection, each batch's COMMIT beginning the next (COMMIT AND CHAIN).
  const lane = TransactionLane.fits(db) ? new TransactionLane(() => followed, { giveWay: true }) : undefined;
  const startedAt = control.startedAt;
  const spans = new LoopSpans();
  // Any wait between batches happens outside a transaction: one begun ahead is rolled back first.
  const leave = async () => lane?.close();
  try {
    for (;;) {
      const why = await control.beforeBatch(result, leave);
      if (why) return { ...result, stopped: why };
      const round = await spans.traced('batch', { job: name }, async (span): Promise<Round> => {
        if (!lane) return transact(db, (tx) => batch(tx, span, false));
        let outcome;
        try {
          outcome = await lane.transact(
            db,
            (tx, opened) => batch(tx, span, true, opened),
            (ran) => (ran.kind === 'batch' && ran.advance && !ran.advanced ? [jobUpdateAtCommit(dialect, name, ran.advance)] : []),
            `committing a batch of job "${name}"`,
            (ran) => (ran.kind === 'batch' && ran.advance && !advanceFirst ? [jobLockAtBegin(dialect, name, ran.advance)] : []),
          );
        } catch (error) {
          if (!(error instanceof JobRowMoved)) throw error;
          // Rolled back before the handler ran: the batch runs again under the lock, which re-reads the row.
          left = undefined;
          return { kind: 'moved' };
        }
        // The transaction held the job row's lock, so only a reset racing a lost lock gets here.
        if (!outcome.held) throw jobReset(name);
        if (outcome.result.kind === 'batch') left = outcome.result.advance;
        return outcome.result;
      });
      if (round.kind === 'moved') continue;
      if (round.kind === 'stopped') {
        await leave();
        const stopped = await control.stopped(round.stop);
        if (stopped) return { ...result, stopped };
        continue;
      }
      result.cursor = round.cursor;
      if (round.kind === 'finished') return { ...result, done: true };
      result.batches += 1;
      result.items += round.items;
      const progress = { name, batches: result.batches, items: result.items, ...(start.total === null ? {} : { total: start.total }) };
      onProgress?.(progressSince(startedAt, progress));
      if (round.done) return { ...result, done: true };
    }
  } finally {
    spans.flush();
    // Rolls back a BEGIN sent ahead for a batch that will not run, and gives the connection back.
    await lane?.close();
  }
}
