import type { FileCheckpoint, FileStatus } from '../../entities/FileCheckpoint';
import {
  type Claimant,
  claimLost,
  EVERY_TYPE,
  type ClaimStore,
  type ClaimSummary,
  emptySummary,
  type FileRef,
  type HeartbeatOutcome,
  type HeldClaim,
  LEASE_EXPIRED,
  type ProcessingStats,
  type Subscription,
} from './claim-store';
import { leaseStillCountsAt } from './lease-rules';

/** A `file_checkpoints` row held in memory; times in epoch milliseconds, as in the table. */
interface MemoryRow {
  fileUrl: string;
  fileType: string;
  fileTimestamp: number;
  status: FileStatus;
  recordsTotal: number;
  recordsFiltered: number;
  recordsPersisted: number;
  processingTimeMs: number;
  errorMessage: string | null;
  retryCount: number;
  maxRetries: number;
  processedBy: string | null;
  claimToken: number;
  leaseExpiresAt: number | null;
  startedAt: number | null;
  completedAt: number | null;
  createdAt: number;
}

// The same predicates as the SQL in database-claim-store.ts and the PostgreSQL functions.
function isClaimable(row: MemoryRow, now: number): boolean {
  if (row.status === 'pending') return true;
  if (row.retryCount >= row.maxRetries) return false;
  if (row.status === 'failed') return true;
  return row.status === 'processing' && row.leaseExpiresAt !== null && row.leaseExpiresAt <= now;
}

function isDeadLetter(row: MemoryRow): boolean {
  return row.status === 'failed' && row.retryCount >= row.maxRetries;
}

function expireLastAttempt(row: MemoryRow, now: number): void {
  if (row.status === 'processing' && !leaseStillCountsAt(row, now)) {
    row.status = 'failed';
    row.errorMessage = LEASE_EXPIRED;
    row.leaseExpiresAt = null;
  }
}

function toFileCheckpoint(row: MemoryRow): FileCheckpoint {
  const date = (ms: number | null): Date | null => (ms === null ? null : new Date(ms));
  return {
    ...row,
    fileTimestamp: new Date(row.fileTimestamp),
    leaseExpiresAt: date(row.leaseExpiresAt),
    startedAt: date(row.startedAt),
    completedAt: date(row.completedAt),
    createdAt: new Date(row.createdAt),
  };
}

function newRow(fileUrl: string, fileType: string, fileTimestamp: Date, maxRetries: number, now: number): MemoryRow {
  return {
    fileUrl,
    fileType,
    fileTimestamp: fileTimestamp.getTime(),
    status: 'pending',
    recordsTotal: 0,
    recordsFiltered: 0,
    recordsPersisted: 0,
    processingTimeMs: 0,
    errorMessage: null,
    retryCount: 0,
    maxRetries,
    processedBy: null,
    claimToken: 0,
    leaseExpiresAt: null,
    startedAt: null,
    completedAt: null,
    createdAt: now,
  };
}

function compareQueueOrder(a: MemoryRow, b: MemoryRow): number {
  if (a.createdAt !== b.createdAt) return a.createdAt - b.createdAt;
  return a.fileUrl < b.fileUrl ? -1 : a.fileUrl > b.fileUrl ? 1 : 0;
}

/**
 * The store for `db === null`: one per process, shared by every manager in it, so workers in one
 * process coordinate exactly as they would through the table. Each operation runs without an
 * `await` between its check and its write, which makes it atomic on Node's single thread.
 */
class MemoryClaimStore implements ClaimStore {
  private readonly rows = new Map<string, MemoryRow>();
  /** The paused file types (`'*'`: every type), with when they were paused. */
  private readonly paused = new Map<string, number>();
  /** The in-process counterpart of PostgreSQL's NOTIFY: idle workers of this store wake at once. */
  private readonly wakers = new Set<() => void>();

  private wakeAll(): void {
    for (const wake of this.wakers) wake();
  }

  /** The row of a claim still held (as the database's fenced statements and `leaseStillCounts` hold it). */
  private current(fileUrl: string, token: number, now = Date.now()): MemoryRow | undefined {
    const row = this.rows.get(fileUrl);
    if (!row || row.status !== 'processing' || row.claimToken !== token) return undefined;
    // A lease that expired on the last allowed attempt: a dead letter, whether or not a reader has marked it yet.
    return leaseStillCountsAt(row, now) ? row : undefined;
  }

  async isHeld(fileUrl: string, token: number, now: number): Promise<boolean> {
    return this.current(fileUrl, token, now) !== undefined;
  }

  private take(row: MemoryRow, claimant: Claimant, now: number): void {
    if (row.status !== 'pending') row.retryCount += 1;
    row.claimToken += 1;
    row.processedBy = claimant.workerId;
    row.startedAt = now;
    row.leaseExpiresAt = now + claimant.leaseMs;
    row.status = 'processing';
  }

  private expireAll(now: number): void {
    for (const row of this.rows.values()) expireLastAttempt(row, now);
  }

  async claim(file: FileRef, claimant: Claimant, now: number): Promise<number | null> {
    let row = this.rows.get(file.fileUrl);
    if (!row) {
      row = newRow(file.fileUrl, file.fileType, file.fileTimestamp, claimant.maxRetries, now);
      this.rows.set(file.fileUrl, row);
    } else {
      expireLastAttempt(row, now);
      if (!isClaimable(row, now)) return null;
    }
    this.take(row, claimant, now);
    return row.claimToken;
  }

  private isPaused(fileType: string): boolean {
    return this.paused.has(EVERY_TYPE) || this.paused.has(fileType);
  }

  async claimNext(limit: number, fileType: string | undefined, claimant: Claimant, now: number): Promise<FileCheckpoint[]> {
    this.expireAll(now);
    const picked = [...this.rows.values()]
      .filter((row) => isClaimable(row, now) && (fileType === undefined || row.fileType === fileType) && !this.isPaused(row.fileType))
      .sort(compareQueueOrder)
      .slice(0, limit);
    for (const row of picked) this.take(row, claimant, now);
    return picked.map(toFileCheckpoint);
  }

  async complete(fileUrl: string, token: number, stats: ProcessingStats, now: number): Promise<boolean> {
    const row = this.current(fileUrl, token);
    if (!row) return false;
    row.status = 'completed';
    row.recordsTotal = stats.totalRows;
    row.recordsFiltered = stats.filteredRows;
    row.recordsPersisted = stats.persistedRows;
    row.processingTimeMs = stats.durationMs;
    row.completedAt = now;
    row.leaseExpiresAt = null;
    return true;
  }

  async completeWith(fileUrl: string, token: number, work: (tx: undefined) => Promise<ProcessingStats>): Promise<ProcessingStats> {
    const stats = await work(undefined);
    if (!(await this.complete(fileUrl, token, stats, Date.now()))) throw claimLost(fileUrl, 'complete');
    return stats;
  }

  async completeAll(files: HeldClaim[], work: (tx: undefined) => Promise<ProcessingStats[]>): Promise<ProcessingStats[]> {
    const stats = await work(undefined);
    const lost = files.find((file) => !this.current(file.fileUrl, file.token));
    if (lost) throw claimLost(lost.fileUrl, 'complete');
    const now = Date.now();
    for (const [i, file] of files.entries()) await this.complete(file.fileUrl, file.token, stats[i], now);
    return stats;
  }

  async release(files: HeldClaim[]): Promise<number> {
    let released = 0;
    for (const file of files) {
      const row = this.current(file.fileUrl, file.token);
      if (!row) continue;
      // retryCount stays: a pending row's next claim counts no attempt, so the count is as before this claim.
      row.status = 'pending';
      row.claimToken += 1;
      row.leaseExpiresAt = null;
      released += 1;
    }
    if (released > 0) this.wakeAll();
    return released;
  }

  subscribe(wake: () => void): Subscription {
    this.wakers.add(wake);
    return {
      close: async () => {
        this.wakers.delete(wake);
      },
    };
  }

  async fail(fileUrl: string, token: number, errorMessage: string): Promise<boolean> {
    const row = this.current(fileUrl, token);
    if (!row) return false;
    row.status = 'failed';
    row.errorMessage = errorMessage;
    row.leaseExpiresAt = null;
    return true;
  }

  async heartbeat(fileUrl: string, token: number, leaseExpiresAt: number): Promise<boolean> {
    const row = this.current(fileUrl, token);
    if (!row) return false;
    row.leaseExpiresAt = leaseExpiresAt;
    return true;
  }

  async heartbeatAll(files: HeldClaim[], leaseExpiresAt: number): Promise<HeartbeatOutcome> {
    const outcome: HeartbeatOutcome = { kept: new Set(), cancelled: new Set() };
    for (const { fileUrl, token } of files) {
      if (await this.heartbeat(fileUrl, token, leaseExpiresAt)) outcome.kept.add(fileUrl);
      else if (this.rows.get(fileUrl)?.status === 'cancelled' && this.rows.get(fileUrl)?.claimToken === token)
        outcome.cancelled.add(fileUrl);
    }
    return outcome;
  }

  async isCompleted(fileUrl: string): Promise<boolean> {
    return this.rows.get(fileUrl)?.status === 'completed';
  }

  async get(fileUrl: string, now: number): Promise<FileCheckpoint | null> {
    const row = this.rows.get(fileUrl);
    if (!row) return null;
    expireLastAttempt(row, now);
    return toFileCheckpoint(row);
  }

  async register(files: FileRef[], maxRetries: number, now: number): Promise<number> {
    let inserted = 0;
    for (const file of files) {
      if (this.rows.has(file.fileUrl)) continue;
      this.rows.set(file.fileUrl, newRow(file.fileUrl, file.fileType, file.fileTimestamp, maxRetries, now));
      inserted += 1;
    }
    if (inserted > 0) this.wakeAll();
    return inserted;
  }

  async deadLetters(now: number): Promise<FileCheckpoint[]> {
    this.expireAll(now);
    return [...this.rows.values()]
      .filter(isDeadLetter)
      .sort((a, b) => (a.fileUrl < b.fileUrl ? -1 : a.fileUrl > b.fileUrl ? 1 : 0))
      .map(toFileCheckpoint);
  }

  async requeue(fileUrl: string, now: number): Promise<boolean> {
    const row = this.rows.get(fileUrl);
    if (!row) return false;
    expireLastAttempt(row, now);
    if (row.status !== 'failed' && row.status !== 'cancelled') return false;
    row.status = 'pending';
    row.retryCount = 0;
    row.errorMessage = null;
    row.leaseExpiresAt = null;
    this.wakeAll();
    return true;
  }

  async summary(now: number): Promise<ClaimSummary> {
    this.expireAll(now);
    const summary = emptySummary([...this.paused.keys()].sort());
    for (const row of this.rows.values()) {
      summary[row.status] += 1;
      if (isDeadLetter(row)) summary.deadLetters += 1;
      summary.recordsTotal += row.recordsTotal;
      summary.recordsFiltered += row.recordsFiltered;
      summary.recordsPersisted += row.recordsPersisted;
      summary.processingTimeMs += row.processingTimeMs;
    }
    return summary;
  }

  async pause(fileType: string, now: number): Promise<boolean> {
    if (this.paused.has(fileType)) return false;
    this.paused.set(fileType, now);
    return true;
  }

  async resume(fileType: string | undefined): Promise<boolean> {
    const changed = fileType === undefined ? this.paused.size > 0 : this.paused.has(fileType);
    if (fileType === undefined) this.paused.clear();
    else this.paused.delete(fileType);
    if (changed) this.wakeAll();
    return changed;
  }

  async cancel(fileUrl: string): Promise<boolean> {
    const row = this.rows.get(fileUrl);
    if (!row || (row.status !== 'pending' && row.status !== 'failed' && row.status !== 'processing')) return false;
    // The token stays: the worker holding the claim sees it cancelled at its heartbeat, and its completion is refused.
    row.status = 'cancelled';
    row.leaseExpiresAt = null;
    return true;
  }
}

/** The one in-memory store of this process. */
export const memoryClaimStore: ClaimStore = new MemoryClaimStore();
