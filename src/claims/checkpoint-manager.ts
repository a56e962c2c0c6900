import { randomBytes } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import type { FileCheckpoint } from '../../entities/FileCheckpoint';
import { ClaimLostError, InvalidArgumentError } from '../core/errors';
import { type Db, dataSourceOf } from '../core/transaction';
import { traced } from '../core/telemetry';
import { checkCount, checkFile, checkFileType, checkFileUrl, checkMaxRetries, checkStats, checkWorkerId } from './claim-arguments';
import {
  type Claimant,
  claimLost,
  type ClaimStore,
  type ClaimSummary,
  EVERY_TYPE,
  type FileRef,
  type FileTypeOptions,
  type ProcessingStats,
} from './claim-store';
import { DatabaseClaimStore } from './database-claim-store';
import { memoryClaimStore } from './memory-claim-store';
import { type FileHandler, type HandlerStats, startWorker, type Worker, type WorkOptions } from './worker';

/** Where claims live: a `Db`, a getter for one, or `null` for the process-wide in-memory store. */
export type ClaimDb = Db | (() => Db | null) | null;

/** Options of a {@link CheckpointManager}. */
export interface CheckpointManagerOptions {
  /** Informational (stored as `processed_by`); the claim token is what fences. Default: `worker_<time>_<random hex>`. */
  workerId?: string;
  /** Re-claims allowed after the first attempt, stored on rows this manager creates (default 3). */
  maxRetries?: number;
  /** How long a claim lasts without a heartbeat before another worker may take it, in milliseconds (default 300000: 5 minutes). */
  leaseMs?: number;
}

export type { HandlerStats } from './worker';

/**
 * What {@link CheckpointManager.processFile} returns: the stored statistics when this call claimed and
 * completed the file; `claimed: false` (the handler did not run) when the file was completed, held
 * under a live lease, or out of retries.
 */
export type ProcessFileResult =
  | {
      /** This call claimed the file and completed it. */
      claimed: true;
      /** The statistics stored with the completion. */
      stats: ProcessingStats;
    }
  | {
      /** The file was not claimable: completed, held under a live lease, or out of retries. */
      claimed: false;
      /** No statistics: the handler did not run. */
      stats: null;
    };

import { DEFAULT_LEASE_MS, DEFAULT_MAX_RETRIES } from './lease-rules';

export { DEFAULT_LEASE_MS, DEFAULT_MAX_RETRIES };

/** Error messages are diagnostics: U+0000 (which PostgreSQL text refuses) becomes U+FFFD. */
function storableMessage(message: string): string {
  return message.replace(/\0/g, '\uFFFD');
}

/** `options.fileType` of pause/resume, checked; undefined: every type. */
function fileTypeOf(options: FileTypeOptions, where: string): string | undefined {
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError(`${where}: options must be an object.`);
  if (options.fileType !== undefined) checkFileType(options.fileType);
  return options.fileType;
}

/**
 * Claims files (by URL) for one worker so that each file is processed exactly once across all
 * workers sharing the store, with retries, leases, fencing tokens and dead letters. A thin shell:
 * it validates arguments (else `INVALID_ARGUMENT`), keeps the tokens this instance holds, and
 * delegates to the store. A write under a claim another worker has taken over throws `CLAIM_LOST`;
 * a failing database store throws `STORE_UNAVAILABLE`, never falling back to memory.
 */
export class CheckpointManager {
  private readonly claimant: Claimant;
  /** The token of every claim this instance holds, with the store (DataSource or memory) it is from. */
  private readonly held = new Map<string, { token: number; store: object }>();
  /** The files a processFile of this instance is running now. */
  private readonly processing = new Set<string>();

  constructor(
    private readonly db: ClaimDb,
    options: CheckpointManagerOptions = {},
  ) {
    if (db !== null && typeof db !== 'function') dataSourceOf(db);
    if (typeof options !== 'object' || options === null) {
      throw new InvalidArgumentError('CheckpointManager options must be an object.');
    }
    const workerId = options.workerId ?? `worker_${Date.now()}_${randomBytes(3).toString('hex')}`;
    const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    checkWorkerId(workerId);
    checkMaxRetries(maxRetries);
    checkCount(leaseMs, 'leaseMs', { min: 1 });
    this.claimant = { workerId, maxRetries, leaseMs };
  }

  /** This manager's worker id (the option, or the one generated). */
  getWorkerId(): string {
    return this.claimant.workerId;
  }

  /** The store for this call: the getter is asked every time; only an explicit null means memory. */
  private resolve(): { store: ClaimStore; key: object } {
    const db = typeof this.db === 'function' ? this.db() : this.db;
    if (db === null) return { store: memoryClaimStore, key: memoryClaimStore };
    if (db === undefined) {
      throw new InvalidArgumentError('The CheckpointManager getter returned undefined: return a DataSource, an EntityManager or null.');
    }
    return { store: new DatabaseClaimStore(db), key: dataSourceOf(db) };
  }

  private tokenFor(fileUrl: string, key: object): number | undefined {
    const claim = this.held.get(fileUrl);
    return claim && claim.store === key ? claim.token : undefined;
  }

  /** Claims the file unless it is completed, held under a live lease, or out of retries. */
  async claimFile(fileUrl: string, fileType: string, fileTimestamp: Date): Promise<boolean> {
    const file = checkFile({ fileUrl, fileType, fileTimestamp }, 'claimFile');
    const { store, key } = this.resolve();
    return this.claimIn(store, key, file);
  }

  private async claimIn(store: ClaimStore, key: object, file: FileRef): Promise<boolean> {
    const token = await store.claim(file, this.claimant, Date.now());
    if (token === null) return false;
    this.held.set(file.fileUrl, { token, store: key });
    return true;
  }

  /** Marks the file completed, only while this instance's claim is current (else CLAIM_LOST). */
  async completeFile(fileUrl: string, stats: ProcessingStats): Promise<void> {
    checkFileUrl(fileUrl);
    const checked = checkStats(stats);
    const { store, key } = this.resolve();
    await this.fenced(fileUrl, key, 'complete', true, (token) => store.complete(fileUrl, token, checked, Date.now()));
  }

  /** Marks the file failed; it is claimable again while it has retries left, else a dead letter. */
  async failFile(fileUrl: string, errorMessage: string): Promise<void> {
    checkFileUrl(fileUrl);
    if (typeof errorMessage !== 'string') throw new InvalidArgumentError('failFile: errorMessage must be a string.');
    const { store, key } = this.resolve();
    await this.fenced(fileUrl, key, 'fail', true, (token) => store.fail(fileUrl, token, storableMessage(errorMessage)));
  }

  /** Extends this instance's lease on the file by `leaseMs` from now. */
  async heartbeat(fileUrl: string): Promise<void> {
    checkFileUrl(fileUrl);
    const { store, key } = this.resolve();
    await this.fenced(fileUrl, key, 'extend the lease of', false, (token) =>
      store.heartbeat(fileUrl, token, Date.now() + this.claimant.leaseMs),
    );
  }

  /** Applies `write` with this instance's token; a write that matched nothing means the claim is lost. */
  private async fenced(
    fileUrl: string,
    key: object,
    action: string,
    releases: boolean,
    write: (token: number) => Promise<boolean>,
  ): Promise<void> {
    const token = this.tokenFor(fileUrl, key);
    if (token === undefined) throw claimLost(fileUrl, action);
    // A refused token is kept: presenting it again is refused again, and changes nothing.
    if (!(await write(token))) throw claimLost(fileUrl, action);
    if (releases) this.held.delete(fileUrl);
  }

  /** True if the file is completed (in the store this call resolves to). */
  async isProcessed(fileUrl: string): Promise<boolean> {
    checkFileUrl(fileUrl);
    return this.resolve().store.isCompleted(fileUrl);
  }

  /** The file's row, or null when the store has never seen it. */
  async get(fileUrl: string): Promise<FileCheckpoint | null> {
    checkFileUrl(fileUrl);
    return this.resolve().store.get(fileUrl, Date.now());
  }

  /**
   * Claims the file (unless this instance already holds it, e.g. from `claimNext`), runs `fn` and
   * marks the file completed in the same transaction as fn's writes: both commit, or neither.
   * If anything fails the file is failed (best effort) and the error re-raised unchanged.
   */
  async processFile(
    fileUrl: string,
    fileType: string,
    fileTimestamp: Date,
    fn: (tx: EntityManager | undefined) => Promise<HandlerStats> | HandlerStats,
  ): Promise<ProcessFileResult> {
    const file = checkFile({ fileUrl, fileType, fileTimestamp }, 'processFile');
    if (typeof fn !== 'function') throw new InvalidArgumentError('processFile: fn must be a function.');
    return traced('file', { file_url: fileUrl, file_type: fileType, worker: this.claimant.workerId }, async (span) => {
      const result = await this.processClaimed(file, fn);
      span.set({ claimed: result.claimed });
      if (result.claimed) span.committed(result.stats.persistedRows, false);
      return result;
    });
  }

  private async processClaimed(
    file: FileRef,
    fn: (tx: EntityManager | undefined) => Promise<HandlerStats> | HandlerStats,
  ): Promise<ProcessFileResult> {
    const { fileUrl } = file;
    const { store, key } = this.resolve();
    // Another processFile of this instance runs the file now: as a concurrent claimer, this one did not claim it.
    if (this.processing.has(fileUrl)) return { claimed: false, stats: null };
    this.processing.add(fileUrl);
    try {
      // A claim this instance made before (claimFile, claimNext) is processed under its token while
      // the row says it is held still (a read, which waits for no row lock); a lost one is
      // forgotten, and the file claimed as any caller would claim it, so fn does not run for a
      // claim already lost. (One lost after the read is refused at the fenced completion, as ever.)
      let token = this.tokenFor(fileUrl, key);
      if (token !== undefined && !(await store.isHeld(fileUrl, token, Date.now()))) {
        this.held.delete(fileUrl);
        token = undefined;
      }
      if (token === undefined) {
        if (!(await this.claimIn(store, key, file))) return { claimed: false, stats: null };
        token = this.tokenFor(fileUrl, key)!;
      }
      return await this.processHeld(store, fileUrl, token, fn);
    } finally {
      this.processing.delete(fileUrl);
    }
  }

  private async processHeld(
    store: ClaimStore,
    fileUrl: string,
    token: number,
    fn: (tx: EntityManager | undefined) => Promise<HandlerStats> | HandlerStats,
  ): Promise<ProcessFileResult> {
    const started = Date.now();
    try {
      const stats = await store.completeWith(fileUrl, token, async (tx) => checkStats(await fn(tx), Date.now() - started));
      this.held.delete(fileUrl);
      return { claimed: true, stats };
    } catch (error) {
      if (!(error instanceof ClaimLostError)) {
        const message = storableMessage(error instanceof Error ? error.message : String(error));
        // The original error is the one worth raising; if marking the failure fails too, the
        // lease still frees the file for another attempt.
        await store.fail(fileUrl, token, message).catch(() => false);
        this.held.delete(fileUrl);
      }
      throw error;
    }
  }

  /** Adds pending rows for files the store does not know yet; returns how many it added. */
  async register(files: FileRef[]): Promise<number> {
    if (!Array.isArray(files)) throw new InvalidArgumentError('register: files must be an array of { fileUrl, fileType, fileTimestamp }.');
    const unique = new Map<string, FileRef>();
    files.forEach((file, i) => {
      const checked = checkFile(file, `register: files[${i}]`);
      if (!unique.has(checked.fileUrl)) unique.set(checked.fileUrl, checked);
    });
    if (unique.size === 0) return 0;
    return this.resolve().store.register([...unique.values()], this.claimant.maxRetries, Date.now());
  }

  /** Claims up to `limit` pending, retryable or lease-expired files (oldest first) for this instance. */
  async claimNext(limit: number, options: { fileType?: string } = {}): Promise<FileCheckpoint[]> {
    checkCount(limit, 'claimNext: limit', { min: 1 });
    if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('claimNext: options must be an object.');
    if (options.fileType !== undefined) checkFileType(options.fileType);
    const { store, key } = this.resolve();
    const claimed = await store.claimNext(limit, options.fileType, this.claimant, Date.now());
    for (const file of claimed) this.held.set(file.fileUrl, { token: file.claimToken, store: key });
    return claimed;
  }

  /** Failed files with no retries left (including leases that expired on the last attempt). */
  async deadLetters(): Promise<FileCheckpoint[]> {
    return this.resolve().store.deadLetters(Date.now());
  }

  /** Makes a failed, dead-letter or cancelled file pending again with a fresh retry budget; false otherwise. */
  async requeue(fileUrl: string): Promise<boolean> {
    checkFileUrl(fileUrl);
    return this.resolve().store.requeue(fileUrl, Date.now());
  }

  /**
   * Runs `handler` for every claimable file until stopped (or, with `drain`, until none is left):
   * claims in batches, heartbeats every held file, commits one file (or `commitEvery` files) per
   * transaction, and on `stop()` finishes the files in flight and gives the unstarted ones back.
   */
  work(handler: FileHandler, options: WorkOptions = {}): Worker {
    return startWorker({ claimant: this.claimant, store: () => this.resolve().store }, handler, options);
  }

  /**
   * Pauses a file type (`{ fileType }`), or every type (no `fileType`): `claimNext` and `work()`
   * claim no file of it until `resume`; files in flight finish. True when it was not paused before.
   */
  async pause(options: FileTypeOptions = {}): Promise<boolean> {
    return this.resolve().store.pause(fileTypeOf(options, 'pause') ?? EVERY_TYPE, Date.now());
  }

  /**
   * Resumes a paused file type (`{ fileType }`), or, with no `fileType`, every paused type (whether
   * paused one by one or all at once). True when something was paused; false changes nothing.
   */
  async resume(options: FileTypeOptions = {}): Promise<boolean> {
    return this.resolve().store.resume(fileTypeOf(options, 'resume'));
  }

  /**
   * Cancels a file: a pending or failed one is never claimed again (until `requeue`); a processing
   * one's handler sees `ctx.signal` abort when its worker learns of it (at the latest at its next
   * heartbeat), and its completion is refused, its writes rolled back. False when the file is
   * unknown, completed or cancelled already.
   */
  async cancel(fileUrl: string): Promise<boolean> {
    checkFileUrl(fileUrl);
    return this.resolve().store.cancel(fileUrl);
  }

  /** Counts of every file in the store by status, with the completed files' statistics and the paused types. */
  async summary(): Promise<ClaimSummary> {
    return this.resolve().store.summary(Date.now());
  }
}
