import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { EntityManager } from 'typeorm';
import { DEFAULT_LEASE_MS, DEFAULT_MAX_RETRIES, keepLeased } from '../claims/lease-rules';
import { ClaimLostError, InvalidArgumentError } from '../core/errors';
import { HandlerFailure } from '../core/handler-failure';
import { decodeJson, encodeJson, type Json } from '../core/json';
import { type Progress, progressSince } from '../core/progress';
import { LoopSpans, type SpanScope, traced } from '../core/telemetry';
import { autocommit, type Db, dataSourceOf, joinsTransaction, transact } from '../core/transaction';
import { TransactionLane } from '../core/transaction-lane';
import { dialectOf } from '../dialect';
import { checkFingerprint, checkPage } from './each-batch';
import { assertKind, insertJob, type JobRow, lockJob, updateJob, validateName } from './job-store';
import { endedTotal, startingTotal } from './job-total';
import {
  claimRange,
  commitRange,
  commitRangeAtCommit,
  countRanges,
  insertRanges,
  lockForBatch,
  type PartitionInfo,
  rangeState,
  type RangeRow,
  rangeTotals,
  reviveDeadRanges,
  selectRanges,
  settleRange,
  toPartitionInfo,
  unfinishedRanges,
  unfinishedRangesAndState,
} from './partition-store';
import { isPartitionable, type PartitionableSource } from './sql-source';
import { JOBS, readState } from '../control/control-store';
import { stopFor, type StopReason } from '../control/job-state';
import { type ControlOptions, LoopControl, validateControlOptions } from '../control/loop-control';

/**
 * Options of {@link eachPartition}; `signal`, `maxRuntimeMs`, `throttle` and `whilePaused` are
 * {@link ControlOptions}. On a stop (a pause or cancel, `maxRuntimeMs`, `signal`) the ranges in
 * flight commit their batch and are released (pending, no attempt counted). `whilePaused`
 * defaults to `'wait'` with `wait: true`.
 */
export interface EachPartitionOptions extends ControlOptions {
  /** Ranges the first caller plans (default 16); a stored plan is never changed. */
  partitions?: number;
  /** Ranges this process runs at once (default 1; in turn on SQLite). */
  concurrency?: number;
  /** A range gets `1 + maxRetries` attempts, then it is dead until `retryDead` (default 3). */
  maxRetries?: number;
  /** How long a range's claim lasts without a batch commit or heartbeat, in milliseconds (default 300000: 5 minutes). */
  leaseMs?: number;
  /** Return only when every range is finished or dead (default: when none is left to claim); keeps waiting while the job is paused. */
  wait?: boolean;
  /** Called after each batch this process commits, with this call's totals. */
  onProgress?(progress: Progress): void;
  /** Identifies the input; resuming the job with a different fingerprint throws `FINGERPRINT_MISMATCH`. */
  fingerprint?: string;
}

/** `batches`/`items`: this call's; `partitions`: the plan's range count; `done`: every range finished. */
export interface EachPartitionResult {
  /** Batches this call committed. */
  batches: number;
  /** Items this call committed. */
  items: number;
  /** How many ranges the stored plan has. */
  partitions: number;
  /** True if every range was finished when the call returned (false with dead or unfinished ranges). */
  done: boolean;
  /** Why the call returned before the job's end (a pause, a cancel, `maxRuntimeMs`, `signal`); absent when it ran to its natural end. */
  stopped?: StopReason;
}

const DEFAULT_PARTITIONS = 16;
const MAX_PARTITIONS = 10_000;

function checkCount(value: unknown, what: string, min: number, max: number): void {
  if (value !== undefined && (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max)) {
    throw new InvalidArgumentError(`eachPartition: ${what} must be an integer from ${min} to ${max}, got ${String(value)}.`);
  }
}

function validate(db: Db, name: unknown, source: unknown, limit: unknown, handler: unknown, options: EachPartitionOptions): void {
  validateName(name);
  if (typeof source !== 'function' || !isPartitionable(source as PartitionableSource<unknown>)) {
    throw new InvalidArgumentError('eachPartition: source must be a PartitionableSource, e.g. one built by sqlSource().');
  }
  if (typeof handler !== 'function') throw new InvalidArgumentError('eachPartition: handler must be a function.');
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit <= 0) {
    throw new InvalidArgumentError(`eachPartition: limit must be a positive safe integer, got ${String(limit)}.`);
  }
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('eachPartition: options must be an object.');
  checkCount(options.partitions, 'partitions', 1, MAX_PARTITIONS);
  checkCount(options.concurrency, 'concurrency', 1, 1000);
  checkCount(options.maxRetries, 'maxRetries', 0, 1_000_000);
  checkCount(options.leaseMs, 'leaseMs', 1, 2_147_483_647);
  if (options.wait !== undefined && typeof options.wait !== 'boolean')
    throw new InvalidArgumentError('eachPartition: wait must be a boolean.');
  if (options.fingerprint !== undefined && (typeof options.fingerprint !== 'string' || options.fingerprint.length > 512)) {
    throw new InvalidArgumentError('eachPartition: fingerprint must be a string of at most 512 characters.');
  }
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') {
    throw new InvalidArgumentError('eachPartition: onProgress must be a function.');
  }
  validateControlOptions(options, 'eachPartition');
  // Ranges commit batch by batch, each fenced by its claim: inside a caller's transaction nothing
  // would be durable, and a worker's claim could never be seen by the others.
  if (joinsTransaction(db)) {
    throw new InvalidArgumentError(
      'eachPartition never joins a transaction: call it with the DataSource (or a manager outside any transaction).',
    );
  }
}

/** A batch that must not commit: its fenced commit changed nothing, or (SQLite) its lock found the job paused or cancelled. */
class BatchRefused extends Error {}

function claimLost(name: string, index: number): ClaimLostError {
  return new ClaimLostError(
    `Range ${index} of job "${name}" was taken over by another worker (its lease expired: the process stalled), or the job was ` +
      'reset. This batch was rolled back; the range resumes at its committed cursor elsewhere.',
  );
}

/**
 * Plans the job once, under its lock, in one transaction: the first caller splits the source's
 * key space into ranges from the data; everyone after reads the frozen plan. Returns the plan's
 * range count and the job's total: the ranges cover the whole key space, so the sum of their
 * estimates is the whole source's, estimated once (one statement, not one per range).
 */
async function plan<T>(
  db: Db,
  name: string,
  source: PartitionableSource<T>,
  partitions: number,
  maxRetries: number,
  fingerprint?: string,
): Promise<{ count: number; total: number | null; stop: 'paused' | 'cancelled' | undefined }> {
  return transact(db, async (tx) => {
    await insertJob(tx, name, 'partitioned', fingerprint ?? null);
    const row = (await lockJob(tx, name)) as JobRow;
    assertKind(row, 'partitioned');
    checkFingerprint(row, fingerprint);
    if (fingerprint !== undefined && row.fingerprint === null) await updateJob(tx, name, { fingerprint });
    // A paused or cancelled job's call does not call the source (its estimate neither).
    const stop = stopFor(row);
    const total = stop ? null : await startingTotal(tx, row, source.total);
    const planned = await countRanges(tx, name);
    if (planned > 0) return { count: planned, total, stop };
    const boundaries = await source.partitioning.boundaries(partitions, tx);
    await insertRanges(tx, name, boundaries, maxRetries, Date.now());
    return { count: boundaries.length + 1, total, stop };
  });
}

/**
 * Marks the job done when its last range finishes, its total then the ranges' item count; the job
 * row is locked so two last finishers see each other.
 */
async function finishJobIfLast(tx: EntityManager, name: string): Promise<void> {
  const row = await lockJob(tx, name);
  if (!row || (await unfinishedRanges(tx, name)) !== 0) return;
  const now = Date.now();
  const items = (await rangeTotals(tx, [name], now)).get(name)?.items ?? 0;
  await updateJob(tx, name, { done: true, finished_at: now, ...endedTotal(items) });
}

function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * Runs one job over a huge source with any number of processes on any number of machines: the
 * first caller plans ranges; every caller claims ranges (the file claims' lease, fencing and
 * retry rules) and runs each with `eachBatch`'s semantics, its cursor committed with the
 * handler's writes by a statement fenced by the claim token. Throws `CLAIM_LOST` when a stalled
 * worker's range was taken over, `INVALID_ARGUMENT` when called inside a transaction or with bad
 * arguments, `FINGERPRINT_MISMATCH` for another input under this name; a handler's error re-raises
 * unchanged after its range is released for a retry. A pause or cancel (from any process) stops
 * every process's call after the batches in flight, which commit; their ranges are released.
 */
export async function eachPartition<T>(
  db: Db,
  name: string,
  source: PartitionableSource<T>,
  limit: number,
  handler: (items: T[], tx: EntityManager) => unknown,
  options: EachPartitionOptions = {},
): Promise<EachPartitionResult> {
  validate(db, name, source, limit, handler, options);
  const { signal, onProgress, fingerprint, wait = false } = options;
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
  const claimant = { workerId: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`, leaseMs };
  const result: EachPartitionResult = { batches: 0, items: 0, partitions: 0, done: false };
  if (signal?.aborted) {
    // Already stopped: report the stored plan, write nothing (not even a plan).
    const ranges = await transact(db, (tx) => selectRanges(tx, name));
    const done = ranges.length > 0 && ranges.every((range) => range.status === 'completed');
    return { ...result, partitions: ranges.length, done, ...(done ? {} : { stopped: 'signal' as const }) };
  }
  // `control` decides between calls of the lanes (a pause may wait for the resume); `rangeControl`,
  // asked before each batch of a range, never waits while paused: the range is released first.
  const control = new LoopControl(db, JOBS, name, { ...options, whilePaused: options.whilePaused ?? (wait ? 'wait' : 'return') });
  const rangeControl = new LoopControl(db, JOBS, name, { ...options, whilePaused: 'return' });
  const planned = await plan(db, name, source, options.partitions ?? DEFAULT_PARTITIONS, maxRetries, fingerprint);
  result.partitions = planned.count;
  // A paused or cancelled job: the source is not called (with whilePaused 'wait', once resumed, the ranges are claimed).
  const held = planned.stop && (await control.stopped(planned.stop));
  if (held) return { ...result, stopped: held };

  const dialect = dialectOf(dataSourceOf(db));
  const { singleConnection, supportsReturning: claimInOneStatement } = dialect;
  const pollMs = Math.min(1000, Math.max(10, Math.floor(leaseMs / 4)));
  const startedAt = control.startedAt;
  let stopping = false;
  let failure: { error: unknown } | undefined;
  const stop = (error: unknown) => {
    stopping = true;
    failure ??= { error };
  };
  // Why this run of the lanes stops before the job's end: the first reason any lane found.
  let halted: StopReason | undefined;
  const halt = (why: StopReason) => {
    stopping = true;
    halted ??= why;
  };
  /** Why the job's row says to stop (paused or cancelled), read in a transaction of its own; undefined to go on. */
  const storedStop = async () => stopFor({ state: await transact(db, (tx) => readState(tx, JOBS, name)) });
  /** After a fenced commit found the job paused or cancelled: which, read once (a resume since then: go on). */
  const haltForState = async (): Promise<void> => {
    const state = await storedStop();
    if (state) halt(state);
  };

  /**
   * Runs a claimed range batch by batch until it ends, the call stops, or the claim is lost, in
   * the `checkpoint.range` span `span`: each batch a `checkpoint.batch` span inside it.
   */
  const runRange = async (range: RangeRow, span: SpanScope): Promise<void> => {
    const index = Number(range.partition_index);
    let ranItems = 0;
    // The range's batches committed before the next one (its span's index).
    let batchIndex = Number(range.batches);
    const token = Number(range.claim_token);
    const lower = decodeJson(range.lower_key);
    const upper = decodeJson(range.upper_key);
    // The heartbeat's timer starts outside the batch transaction (its callbacks must not join it);
    // on SQLite a batch holds the write lock, so no one can take the range over meanwhile anyway.
    const heartbeat = singleConnection
      ? undefined
      : keepLeased(leaseMs, () => autocommit(db, (tx) => settleRange(tx, name, index, token, { heartbeat: Date.now() + leaseMs })));
    // The cursor the claim read, then what this worker's own commits stored: while the token is
    // current no one else can commit this range, and the fenced commit checks exactly that.
    let stored = range.cursor;
    // PostgreSQL: one connection kept while the range runs, and each batch's fenced cursor update,
    // COMMIT and the next batch's BEGIN in one round trip (a lost claim fails the update, so nothing commits).
    let followed = false;
    const batchLane = TransactionLane.fits(db) ? new TransactionLane(() => followed, { giveWay: true }) : undefined;
    /**
     * After a batch was refused (rolled back): the job's state, read once. Paused or cancelled:
     * the loop stops; else the claim was lost. On SQLite the batch's lock found that before the
     * handler ran; on PostgreSQL the fenced commit refuses a batch begun after a pause or cancel.
     */
    const refused = async () => {
      const state = await storedStop();
      if (!state) throw claimLost(name, index);
      return { items: 0, finished: false, next: stored, paused: true, state };
    };
    const batch = async (tx: EntityManager, commitAtCommit: boolean) => {
      followed = false;
      // SQLite: the job is paused or cancelled (read by the batch's first statement): no batch runs.
      if (!(await lockForBatch(tx, name, index))) throw new BatchRefused();
      const cursor: Json = stored === null ? lower : decodeJson(stored);
      const page = checkPage<T>(await source.partitioning.page(cursor, upper, limit, tx));
      const finished = page.items.length === 0 || page.next === null;
      const next =
        page.items.length === 0 ? stored : encodeJson(page.next === null ? cursor : page.next, 'The cursor returned by the source');
      if (page.items.length > 0) {
        try {
          await handler(page.items, tx);
        } catch (error) {
          throw new HandlerFailure(error);
        }
      }
      const now = Date.now();
      const change = {
        cursor: next,
        batches: page.items.length > 0 ? 1 : 0,
        items: page.items.length,
        finished,
        leaseExpiresAt: now + leaseMs,
        now,
      };
      if (commitAtCommit && !finished && next !== null) {
        followed = !stopping && rangeControl.followsAtOnce();
        return { items: page.items.length, finished, next, paused: false, change: { ...change, cursor: next, finished } };
      }
      const committed = await commitRange(tx, name, index, token, change);
      if (!committed.held) throw new BatchRefused();
      if (finished) await finishJobIfLast(tx, name);
      return { items: page.items.length, finished, next, paused: committed.paused };
    };
    // Inside the range's span: its batches' parent.
    const batchSpans = new LoopSpans();
    try {
      const release = async () => {
        await batchLane?.close();
        await transact(db, (tx) => settleRange(tx, name, index, token, { released: true }));
      };
      for (;;) {
        if (!stopping) {
          // The throttle, and after the first batch `maxRuntimeMs`: outside any transaction.
          const why = await rangeControl.beforeBatch(result, async () => batchLane?.close());
          if (why) halt(why);
        }
        if (stopping || signal?.aborted) {
          if (signal?.aborted) halt('signal');
          await release();
          return;
        }
        // The batch's span records the handler's own error; HandlerFailure (which tells it apart
        // from the library's failures below) is put back around it once the span has ended.
        let handlerFailed = false;
        const round = await batchSpans
          .traced('batch', { job: name, range: index, index: batchIndex }, async (batchSpan) => {
            try {
              let ran: Awaited<ReturnType<typeof batch>> | Awaited<ReturnType<typeof refused>>;
              // A batch refused inside its transaction (rolled back) or by its final statement: see `refused`.
              const unlessRefused = <R>(running: Promise<R>): Promise<R | null> =>
                running.catch((error: unknown) => {
                  if (error instanceof BatchRefused) return null;
                  throw error;
                });
              if (batchLane) {
                const outcome = await unlessRefused(
                  batchLane.transact(
                    db,
                    (tx) => batch(tx, true),
                    (done) => (done.change ? [commitRangeAtCommit(dialect, name, index, token, done.change)] : []),
                    `committing a range of job "${name}"`,
                  ),
                );
                if (outcome === null || !outcome.held) ran = await refused();
                else ran = outcome.flagged ? { ...outcome.result, paused: true } : outcome.result;
              } else {
                ran = (await unlessRefused(transact(db, (tx) => batch(tx, false)))) ?? (await refused());
              }
              if (ran.items > 0) batchSpan.committed(ran.items, true);
              return ran;
            } catch (error) {
              handlerFailed = error instanceof HandlerFailure;
              throw handlerFailed ? (error as HandlerFailure).failure : error;
            }
          })
          .catch((error: unknown) => {
            throw handlerFailed ? new HandlerFailure(error) : error;
          });
        stored = round.next;
        if (round.items > 0) {
          ranItems += round.items;
          batchIndex += 1;
          span.set({ items: ranItems });
          result.batches += 1;
          result.items += round.items;
          const total = planned.total === null ? {} : { total: planned.total };
          onProgress?.(progressSince(startedAt, { name, batches: result.batches, items: result.items, ...total }));
        }
        if (round.finished) {
          span.committed(ranItems, false);
          return;
        }
        // The job's row said paused or cancelled: this range's batch (if any) committed; it is released.
        if (round.paused) {
          await batchLane?.close();
          if ('state' in round && round.state) halt(round.state);
          else await haltForState();
        }
      }
    } catch (error) {
      if (error instanceof HandlerFailure) {
        // The batch rolled back; the range is released for a retry (an attempt counted), or is dead.
        await transact(db, (tx) => settleRange(tx, name, index, token, { failed: messageOf(error.failure) }));
        throw error.failure;
      }
      if (!(error instanceof ClaimLostError)) {
        // A failure of the library's own statements: give the range back at once rather than at
        // its lease's end. If that fails too (the database is gone), the lease frees it later.
        await transact(db, (tx) => settleRange(tx, name, index, token, { released: true })).catch(() => false);
      }
      throw error;
    } finally {
      batchSpans.flush();
      heartbeat?.stop();
      await batchLane?.close();
    }
  };

  const lane = async (): Promise<void> => {
    while (!stopping) {
      if (signal?.aborted) return halt('signal');
      const limit = result.batches > 0 ? rangeControl.limit() : undefined;
      if (limit) return halt(limit);
      // One statement where the dialect returns rows from an UPDATE: no transaction of its own.
      const range = await (claimInOneStatement ? autocommit : transact)(db, (tx) => claimRange(tx, name, claimant, Date.now()));
      if (!range) {
        // The claim takes nothing while the job is paused or cancelled: the call's last statement
        // reads which; a waiting call reads it before each poll.
        if (!wait) return;
        const state = await storedStop();
        if (state) return halt(state);
        if (await settled(db, name)) return;
        await pause(pollMs, signal);
        continue;
      }
      await traced('range', { job: name, index: Number(range.partition_index) }, (span) => runRange(range, span));
    }
  };

  const concurrency = options.concurrency ?? 1;
  for (;;) {
    await Promise.all(Array.from({ length: concurrency }, () => lane().catch(stop)));
    if (failure) throw failure.error;
    const left = await transact(db, (tx) => unfinishedRangesAndState(tx, name));
    result.done = left.open === 0;
    const why: StopReason | undefined = halted ?? (result.done ? undefined : stopFor(left));
    if (why === undefined) break;
    // A pause: with whilePaused 'wait' (default with `wait: true`), the lanes run again once resumed.
    const ended = why === 'paused' || why === 'cancelled' ? await control.stopped(why) : why;
    if (ended) {
      result.stopped = ended;
      break;
    }
    stopping = false;
    halted = undefined;
  }
  if (result.done) delete result.stopped;
  return result;
}

/** True when no range is left to run: every one finished or dead. */
async function settled(db: Db, name: string): Promise<boolean> {
  const now = Date.now();
  const ranges = await transact(db, (tx) => selectRanges(tx, name));
  return ranges.every((range) => ['done', 'dead'].includes(rangeState(range, now)));
}

function messageOf(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.replace(/\0/g, '\uFFFD');
}

/** Makes the job's dead ranges claimable again, each with a fresh attempt budget; how many it revived. */
export async function retryDead(db: Db, name: string): Promise<number> {
  validateName(name);
  return transact(db, (tx) => reviveDeadRanges(tx, name, Date.now()));
}

/** The ranges of a partitioned job in key order; `[]` for an unknown job. */
export async function listPartitions(db: Db, name: string): Promise<PartitionInfo[]> {
  validateName(name);
  const now = Date.now();
  const ranges = await transact(db, (tx) => selectRanges(tx, name));
  return ranges.map((range) => toPartitionInfo(range, now));
}
