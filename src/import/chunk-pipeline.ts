import type { EntityManager } from 'typeorm';
import { isRetryable } from '../core/database-errors';
import { FingerprintMismatchError, InvalidInputError } from '../core/errors';
import { progressSince, type Progress } from '../core/progress';
import { LoopSpans, type SpanScope } from '../core/telemetry';
import { dataSourceOf, type Db, joinsTransaction, MAX_ATTEMPTS, retryPause, transact } from '../core/transaction';
import { AbandonedPipeline } from '../dialect';
import { stopFor, type StopReason } from '../control/job-state';
import type { LoopControl } from '../control/loop-control';
import { cursorMismatch } from './apply-chunk';
import { fingerprintMismatch } from './begin';
import { type ImportRow, readImport } from './import-store';
import { ChunkInFlight, type ChunkOrder } from './chunk-in-flight';
import type { SourceRecord } from './source-blocks';
import type { ImportFileResult } from './import-file';

/**
 * The one chunk pipeline of `importFile`, for both of its modes (id/value rows and records): chunks
 * are committed in order, each with the checkpoint, up to `depth` of them in flight while the next
 * is read; before each chunk the loop's control (pause, cancel, throttle, time slice, signal) is
 * asked; the call ends with the committed checkpoint and why it stopped.
 */

/** What a call of `importFile` reports, whichever mode wrote the rows. */
export type PipelineResult = Pick<ImportFileResult, 'batch' | 'digest' | 'nextIndex' | 'rows' | 'done' | 'stopped' | 'batches' | 'items'>;

/** What committing one chunk did: the checkpoint after it, the rows it wrote, and whether the batch was found paused or cancelled instead. */
export interface ChunkOutcome {
  next: number;
  /** Rows written (0 when the chunk did not advance the checkpoint). */
  written: number;
  /** True when this chunk advanced the checkpoint (a chunk of only skipped or invalid rows writes none). */
  advanced: boolean;
  stopped?: 'paused' | 'cancelled';
}

/** A chunk as the pipeline sees it: where it starts in the source. */
export interface PipelineChunk {
  start: number;
}

export interface PipelineOptions<C extends PipelineChunk> {
  db: Db;
  batch: string;
  record: SourceRecord;
  /** The file's row count. */
  total: number;
  /** The committed checkpoint when pass 2 begins. */
  nextIndex: number;
  /** Chunks in flight at most: 2 on a pipelined connection (the next one is sent while one commits). */
  depth: number;
  control: LoopControl;
  signal?: AbortSignal;
  onProgress?: (progress: Progress) => void;
  /** Commits one chunk; null, nothing kept, when the chunk before it failed or the import stopped. */
  commit(chunk: C, order: ChunkOrder, span: SpanScope): Promise<ChunkOutcome | null>;
  /** Called for each chunk that advanced the checkpoint, before its progress is reported. */
  counted?(chunk: C): void;
  /** What an earlier step of this call already committed (the id/value rows' preload). */
  already?: { rows: number; chunks: number };
}

/** The commit/submit/stop skeleton of pass 2. */
export class ChunkPipeline<C extends PipelineChunk> {
  readonly result: PipelineResult;
  /** Bytes of the file read so far (for progress). */
  bytes = 0;
  private chunks: number;
  /** Chunks this call has sent (committed or in flight). */
  private started = 0;
  private readonly startedAt = Date.now();
  private readonly spans = new LoopSpans();
  private readonly inFlight: ChunkInFlight<C>;

  constructor(private readonly options: PipelineOptions<C>) {
    const { batch, record, nextIndex, already } = options;
    this.result = { batch, digest: record.digest, nextIndex, rows: already?.rows ?? 0, done: false };
    this.chunks = already?.chunks ?? 0;
    this.inFlight = new ChunkInFlight((chunk, order) => this.commit(chunk, order), options.depth);
  }

  /** The chunk that ends the file waits for the end of the file: only then is all of it verified. */
  endsBefore(index: number): boolean {
    return index + 1 < this.options.total;
  }

  /** The next source row this call still has to commit. */
  get next(): number {
    return this.result.nextIndex;
  }

  /**
   * Waits until another chunk may go (`depth` in flight), asks the loop's control, then sends the
   * chunk `take` makes from the checkpoint on (another runner of this import may have committed
   * some of its rows already); false when the import is to stop instead.
   */
  async submit(take: (from: number) => C | null): Promise<boolean> {
    const { result, inFlight } = this;
    const { total, signal, control } = this.options;
    await inFlight.ready();
    // An abort during the chunk in flight stops before the next one, the file's last chunk included.
    if (result.nextIndex < total && !result.stopped && !signal?.aborted) {
      // The throttle's wait and the limits, with nothing in flight while it waits.
      const done = { batches: this.chunks, items: result.rows, begun: this.started > 0 };
      const why = await control.beforeBatch(done, () => inFlight.settle());
      if (why && !result.stopped && result.nextIndex < total) result.stopped = why;
    }
    if (result.nextIndex >= total || signal?.aborted || result.stopped) {
      if (signal?.aborted && result.nextIndex < total) result.stopped ??= 'signal';
      // Never return with a chunk in flight: its connection goes back to the pool after the import.
      await inFlight.settle();
      return false;
    }
    const taken = take(result.nextIndex);
    if (taken) {
      inFlight.start(taken);
      this.started++;
    }
    return true;
  }

  /**
   * Runs pass 2: `read` reads the file and submits its chunks (false when a submit said stop); the
   * chunks in flight are settled however it ends, and the error that stopped the import wins.
   */
  async run(read: () => Promise<boolean>, close?: () => Promise<void>): Promise<PipelineResult> {
    try {
      if (await read()) await this.inFlight.settle();
    } catch (error) {
      await this.inFlight.settle().catch(() => undefined);
      throw error;
    } finally {
      this.spans.flush();
      await close?.();
    }
    return this.ended();
  }

  /** The result: `done` once every row is committed, `stopped` only when the call ended before that. */
  ended(): PipelineResult {
    const done = this.result.nextIndex >= this.options.total;
    const { stopped: why, ...rest } = this.result;
    return { ...rest, done, ...(why && !done ? { stopped: why } : {}) };
  }

  private async commit(chunk: C, order: ChunkOrder): Promise<void> {
    const { batch, total, record, onProgress } = this.options;
    const outcome = await this.spans.traced('import.chunk', { job: batch, index: chunk.start }, async (span) => {
      const committed = await this.options.commit(chunk, order, span);
      span.committed(committed?.written ?? 0, committed?.advanced ?? false);
      return committed;
    });
    // Results are taken in chunk order; an abandoned chunk (null) changed nothing.
    await order.previous;
    if (outcome === null) return;
    const { result } = this;
    result.nextIndex = outcome.next;
    // The checkpoint statement found the batch paused or cancelled: no chunk goes after this one.
    if (outcome.stopped) result.stopped ??= outcome.stopped;
    if (!outcome.advanced) return;
    result.rows += outcome.written;
    this.options.counted?.(chunk);
    this.chunks++;
    const progress = { name: batch, batches: this.chunks, items: result.rows, total, bytes: this.bytes, totalBytes: record.bytes };
    onProgress?.(progressSince(this.startedAt, progress));
  }
}

/**
 * Why the checkpoint is not at a chunk's `start`, from the committed row: the one state check of
 * every committer. Another runner went past `start` (skip ahead, nothing written), or the batch
 * is paused or cancelled (stop); anything else is CURSOR_MISMATCH or FINGERPRINT_MISMATCH.
 */
export function notAtStart(batch: string, digest: string, start: number, stored: ImportRow | undefined): ChunkOutcome {
  if (stored === undefined) throw cursorMismatch(batch, stored, start);
  if (stored.digest !== digest) throw fingerprintMismatch(batch, stored.digest, digest);
  const next = Number(stored.next_index);
  const stop = stopFor(stored);
  if (stop) return { next, written: 0, advanced: false, stopped: stop };
  if (next > start) return { next, written: 0, advanced: false };
  throw cursorMismatch(batch, stored, start);
}

/**
 * A chunk's transaction on a pipelined connection, with the one retry policy: sent behind a chunk
 * that did not commit (`AbandonedPipeline`), it goes again once that one has settled, or not at
 * all (null); serialization failures and deadlocks are retried as `transact` retries them.
 */
export async function pipelinedWrite<T>(order: ChunkOrder, signal: AbortSignal | undefined, write: () => Promise<T>): Promise<T | null> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (error) {
      if (error instanceof AbandonedPipeline) {
        if (!(await order.previous) || signal?.aborted) return null;
        attempt--;
        continue;
      }
      if (attempt >= MAX_ATTEMPTS || !isRetryable(error)) throw error;
    }
    await retryPause(attempt);
  }
}

/** Committed only after the chunk before it, and not once the import is stopped. */
export function proceedAfter(order: ChunkOrder, signal: AbortSignal | undefined): Promise<boolean> {
  return order.previous.then((committed) => committed && !signal?.aborted);
}

/**
 * What a call returns when it stopped before it wrote anything: `stopped` (the signal, or a pause
 * or cancel found before it began: then with `batches: 0` and `items: 0`, as every loop returns
 * such a call), unless the batch is done.
 */
export async function stoppedBefore(db: Db, batch: string, stopped: StopReason): Promise<PipelineResult> {
  const state = await storedState(db, batch);
  if (state.done) return state;
  return stopped === 'paused' || stopped === 'cancelled' ? { ...state, batches: 0, items: 0, stopped } : { ...state, stopped };
}

/** What is committed for `batch`, for a call stopped before it wrote anything. */
async function storedState(db: Db, batch: string): Promise<PipelineResult> {
  const row = await transact(db, (tx: EntityManager) => readImport(tx, batch));
  const nextIndex = row ? Number(row.next_index) : 0;
  const total = row?.total_rows === null || row === undefined ? null : Number(row.total_rows);
  return { batch, digest: row?.digest ?? '', nextIndex, rows: 0, done: total !== null && nextIndex >= total };
}

export function changedBetweenPasses(batch: string, record: SourceRecord): FingerprintMismatchError {
  return new FingerprintMismatchError(
    `The file of import "${batch}" (or what map makes of it) changed while it was being imported (digest ${record.digest} when validated).`,
  );
}

/** In pass 2 the bytes are those pass 1 validated, so a row error can only mean the file changed. */
export async function* unchanged<T>(items: AsyncGenerator<T>, batch: string, record: SourceRecord): AsyncGenerator<T> {
  try {
    yield* items;
  } catch (error) {
    if (error instanceof InvalidInputError) throw changedBetweenPasses(batch, record);
    throw error;
  }
}

/**
 * Whether the import opens its own transactions on a connection it holds: not inside a caller's
 * transaction, and no configured isolation level (that applies to TypeORM's transactions, which
 * `transact` opens).
 */
export function holdsConnection(db: Db): boolean {
  const isolation = (dataSourceOf(db).options as { isolationLevel?: string }).isolationLevel;
  return !joinsTransaction(db) && isolation === undefined;
}
