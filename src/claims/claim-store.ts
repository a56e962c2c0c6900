import type { EntityManager } from 'typeorm';
import type { FileCheckpoint } from '../../entities/FileCheckpoint';
import { ClaimLostError } from '../core/errors';
import type { TransactionLane } from '../core/transaction-lane';

/** What a worker reports when it finishes a file. */
export interface ProcessingStats {
  /** Records read from the file (stored as `recordsTotal`). */
  totalRows: number;
  /** Records filtered out (stored as `recordsFiltered`). */
  filteredRows: number;
  /** Records persisted (stored as `recordsPersisted`). */
  persistedRows: number;
  /** How long processing took, in milliseconds (stored as `processingTimeMs`). */
  durationMs: number;
}

/** A file to queue (`register`) or claim. */
export interface FileRef {
  /** The file's URL, its identity (never a local path). */
  fileUrl: string;
  /** The caller's category for the file, used to filter claims. */
  fileType: string;
  /** The file's own timestamp (stored; it does not set the claim order). */
  fileTimestamp: Date;
}

/** Counts by status (`failed` includes the dead letters) and the completed files' statistics. */
export interface ClaimSummary {
  /** Files waiting for a claim. */
  pending: number;
  /** Files claimed and not yet finished. */
  processing: number;
  /** Files completed. */
  completed: number;
  /** Files whose latest attempt failed, dead letters included. */
  failed: number;
  /** Files cancelled (`cancel`): never claimed again until `requeue`. */
  cancelled: number;
  /** Files with no retries left (failed, or a lease that expired on the last attempt). */
  deadLetters: number;
  /** Sum of every file's `recordsTotal` (set when a file completes). */
  recordsTotal: number;
  /** Sum of every file's `recordsFiltered`. */
  recordsFiltered: number;
  /** Sum of every file's `recordsPersisted`. */
  recordsPersisted: number;
  /** Sum of every file's `processingTimeMs`, in milliseconds. */
  processingTimeMs: number;
  /** The paused file types, sorted (`'*'`: every type is paused); empty when nothing is paused. */
  pausedTypes: string[];
}

/** A summary with every count at 0, for a store to add its files to. */
export function emptySummary(pausedTypes: string[]): ClaimSummary {
  return {
    pending: 0,
    processing: 0,
    completed: 0,
    failed: 0,
    cancelled: 0,
    deadLetters: 0,
    recordsTotal: 0,
    recordsFiltered: 0,
    recordsPersisted: 0,
    processingTimeMs: 0,
    pausedTypes,
  };
}

/** The file type `pause()` without a type stores: every type is paused. */
export const EVERY_TYPE = '*';

/** Which file type `pause` and `resume` apply to. */
export interface FileTypeOptions {
  /** One file type; omitted: every type (stored as `'*'`). */
  fileType?: string;
}

/** What a heartbeat of several claims found: the claims still held, and those cancelled meanwhile. */
export interface HeartbeatOutcome {
  /** URLs whose claim is held (lease extended). */
  kept: Set<string>;
  /** URLs cancelled (`cancel`) while this claim held them: their completion will be refused. */
  cancelled: Set<string>;
}

/** A claim a worker holds: the file and the token its claim returned. */
export interface HeldClaim {
  fileUrl: string;
  token: number;
}

/** A wake-up subscription (PostgreSQL LISTEN, or the in-memory store's own events). */
export interface Subscription {
  close(): Promise<void>;
}

/** Who claims, and on what terms: `maxRetries` only matters for rows this claim creates. */
export interface Claimant {
  workerId: string;
  maxRetries: number;
  leaseMs: number;
}

/**
 * The next files' claim, sent with a completion's commit where the store can (`claimsWithCommit`):
 * it commits on its own, right after the completion's commit, in the same round trip.
 */
export interface NextClaim {
  /** How many files to claim, asked when the commit is sent (0: none). */
  limit(): number;
  fileType: string | undefined;
  claimant: Claimant;
  /** The files claimed (committed). */
  claimed(files: FileCheckpoint[]): void;
  /** The claim failed; the completion before it committed all the same. */
  failed(error: unknown): void;
}

/**
 * The claim rules, implemented once over SQL and once in memory with identical semantics.
 * `now` is the caller's clock in epoch milliseconds; a `token` is what a claim returned, and
 * every write that presents one applies only while it is current and the file is processing.
 */
export interface ClaimStore {
  /** Claims one file (creating its row if needed) in one atomic statement: the new token, or null. */
  claim(file: FileRef, claimant: Claimant, now: number): Promise<number | null>;
  /** Claims up to `limit` pending, retryable or lease-expired files; returns them as claimed. */
  claimNext(limit: number, fileType: string | undefined, claimant: Claimant, now: number): Promise<FileCheckpoint[]>;
  complete(fileUrl: string, token: number, stats: ProcessingStats, now: number): Promise<boolean>;
  /**
   * Runs `work` and completes the claim with its stats in the same transaction (`tx` is undefined
   * in memory); throws CLAIM_LOST, keeping none of work's writes, when the claim is no longer current.
   * With a `lane` (a worker slot's), the transaction may run on the lane's kept runner.
   */
  completeWith(
    fileUrl: string,
    token: number,
    work: (tx: EntityManager | undefined) => Promise<ProcessingStats>,
    lane?: TransactionLane,
    next?: NextClaim,
  ): Promise<ProcessingStats>;
  /**
   * Runs `work` for several claimed files in one transaction and completes them all with one fenced
   * statement before its one commit; throws CLAIM_LOST, keeping none of work's writes, when any of
   * the claims is no longer current. `work` returns one stats per file, in order. `lane` as for completeWith.
   */
  completeAll(
    files: HeldClaim[],
    work: (tx: EntityManager | undefined) => Promise<ProcessingStats[]>,
    lane?: TransactionLane,
    next?: NextClaim,
  ): Promise<ProcessingStats[]>;
  /**
   * True when completeWith and completeAll on a lane can claim the next files (`next`) in their
   * commit's round trip; elsewhere `next` is ignored and the caller claims with claimNext.
   */
  claimsWithCommit?(): boolean;
  fail(fileUrl: string, token: number, errorMessage: string): Promise<boolean>;
  /**
   * Gives claimed but unstarted files back: `pending` again with the attempt count they had before
   * the claim (a pending row's next claim counts no attempt), their tokens fenced off. Returns how many.
   */
  release(files: HeldClaim[]): Promise<number>;
  /**
   * Calls `wake` whenever files may have become claimable (registered or requeued elsewhere), until
   * closed; `onError` hears a lost subscription (it is re-established). Undefined: workers only poll.
   */
  subscribe?(wake: () => void, onError: (error: unknown) => void): Subscription | undefined;
  heartbeat(fileUrl: string, token: number, leaseExpiresAt: number): Promise<boolean>;
  /**
   * Extends the leases of several claims in one statement where it can; returns the URLs whose
   * claim is still held, and, from the same statement, those cancelled while held.
   */
  heartbeatAll(files: HeldClaim[], leaseExpiresAt: number): Promise<HeartbeatOutcome>;
  isCompleted(fileUrl: string): Promise<boolean>;
  /** Whether the claim under `token` is held still (a read: it waits for no row lock, and changes nothing). */
  isHeld(fileUrl: string, token: number, now: number): Promise<boolean>;
  get(fileUrl: string, now: number): Promise<FileCheckpoint | null>;
  /** Inserts pending rows for files not yet known; returns how many it inserted. */
  register(files: FileRef[], maxRetries: number, now: number): Promise<number>;
  deadLetters(now: number): Promise<FileCheckpoint[]>;
  /** Makes a failed (dead letter or not) or cancelled file pending again with a fresh retry budget. */
  requeue(fileUrl: string, now: number): Promise<boolean>;
  summary(now: number): Promise<ClaimSummary>;
  /** Pauses `fileType` (`'*'`: every type); false when it was paused already. */
  pause(fileType: string, now: number): Promise<boolean>;
  /** Resumes `fileType`, or with undefined every paused type; false when nothing was paused. */
  resume(fileType: string | undefined): Promise<boolean>;
  /**
   * Cancels a pending, failed or processing file (its completion is then refused); false when it is
   * unknown, completed or cancelled already.
   */
  cancel(fileUrl: string): Promise<boolean>;
}

export { LEASE_EXPIRED } from './lease-rules';

export function claimLost(fileUrl: string, action: string): ClaimLostError {
  return new ClaimLostError(
    `Cannot ${action} "${fileUrl}": this manager no longer holds its claim (another worker took it over after the ` +
      'lease expired, it was completed, failed or requeued, or it was never claimed here). Nothing was changed; ' +
      'drop this file and claim the next one.',
  );
}
