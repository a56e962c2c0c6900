import type { EntityManager } from 'typeorm';
import { FingerprintMismatchError, InvalidArgumentError } from '../core/errors';
import { encodeJson, type Json, decodeJson } from '../core/json';
import { assertKind, insertJob, type JobRow, lockJob, readJob, updateJob, validateName, toStatus } from './job-store';
import { type Progress, progressSince } from '../core/progress';
import { type Db, transact } from '../core/transaction';
import { traced } from '../core/telemetry';

/** One page of a source; `next === null` marks the last page. */
export interface Page<T> {
  items: T[];
  next: Json;
}

/** Returns the page after `cursor` (`null` on the very first call), at most `limit` items. */
export type Source<T> = (cursor: Json, limit: number, tx: EntityManager) => Promise<Page<T>> | Page<T>;

export interface EachBatchOptions {
  onProgress?(progress: Progress): void;
  /** Stops cleanly after the current batch commits. */
  signal?: AbortSignal;
  /** Identifies the input; resuming a job with a different fingerprint is FINGERPRINT_MISMATCH. */
  fingerprint?: string;
}

/** `batches`/`items` count this call only; `status()` has the totals. */
export interface EachBatchResult {
  batches: number;
  items: number;
  done: boolean;
  cursor: Json;
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

type Round = { kind: 'finished'; cursor: Json } | { kind: 'batch'; items: number; cursor: Json; done: boolean };

/**
 * Runs job `name` to completion, one batch per transaction: `source(cursor)`, then
 * `handler(items, tx)`, then the new cursor — committed together with the handler's writes.
 * A crashed or failed run resumes at the first uncommitted batch.
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
    return stored ? { ...result, done: toStatus(stored).done, cursor: toStatus(stored).cursor } : result;
  }

  // The job row exists before the first batch, so a job whose first batch failed is listed.
  const start = await transact(db, async (tx) => {
    await insertJob(tx, name, 'batch', fingerprint ?? null);
    const row = (await lockJob(tx, name)) as JobRow;
    assertKind(row, 'batch');
    checkFingerprint(row, fingerprint);
    if (fingerprint !== undefined && row.fingerprint === null) await updateJob(tx, name, { fingerprint });
    return toStatus(row);
  });
  result.cursor = start.cursor;
  if (start.done) return { ...result, done: true };

  const startedAt = Date.now();
  while (!signal?.aborted) {
    const round = await traced('batch', { job: name }, (span) => transact(db, async (tx): Promise<Round> => {
      // Re-read under the lock: another runner may have committed batches since.
      const row = await lockJob(tx, name);
      if (!row) {
        throw new InvalidArgumentError(`Job "${name}" was reset while running; run eachBatch again to start over.`);
      }
      checkFingerprint(row, fingerprint);
      const cursor = decodeJson(row.cursor);
      if (row.done === true || Number(row.done) === 1) return { kind: 'finished', cursor };
      span.set({ index: Number(row.batches) });
      const page = checkPage<T>(await source(cursor, limit, tx));
      const now = Date.now();
      if (page.items.length === 0) {
        await updateJob(tx, name, { done: true, finished_at: now });
        return { kind: 'finished', cursor };
      }
      const next = encodeJson(page.next, 'The cursor returned by the source');
      await handler(page.items, tx);
      const done = page.next === null;
      await updateJob(tx, name, {
        cursor: next,
        done,
        batches: Number(row.batches) + 1,
        items: Number(row.items) + page.items.length,
        ...(done ? { finished_at: now } : {}),
      });
      span.committed(page.items.length, true);
      return { kind: 'batch', items: page.items.length, cursor: decodeJson(next), done };
    }));
    result.cursor = round.cursor;
    if (round.kind === 'finished') return { ...result, done: true };
    result.batches += 1;
    result.items += round.items;
    onProgress?.(progressSince(startedAt, { name, batches: result.batches, items: result.items }));
    if (round.done) return { ...result, done: true };
  }
  return result;
}
