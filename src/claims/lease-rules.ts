/**
 * The claim rules shared by file claims (`file_checkpoints`) and partitioned jobs' ranges
 * (`checkpoint_partitions`): both tables have `status` ('pending' | 'processing' | 'completed' |
 * 'failed'), `retry_count`, `max_retries`, `claim_token`, `processed_by`, `started_at` and
 * `lease_expires_at` (epoch ms). `column(name)` says how a statement refers to one of them.
 */
type ColumnRef = (name: string) => string;

export const DEFAULT_MAX_RETRIES = 3;
export const DEFAULT_LEASE_MS = 5 * 60 * 1000;

/** The error message a lease that expired on the last allowed attempt leaves on its dead row. */
export const LEASE_EXPIRED = 'lease expired';

/** Pending, failed with retries left, or processing with an expired lease and retries left. */
export function claimableCondition(column: ColumnRef, now: string): string {
  const c = column;
  return (
    `(${c('status')} = 'pending' OR (${c('status')} = 'failed' AND ${c('retry_count')} < ${c('max_retries')})` +
    ` OR (${c('status')} = 'processing' AND ${c('lease_expires_at')} <= ${now} AND ${c('retry_count')} < ${c('max_retries')}))`
  );
}

/**
 * The SET list of a claim: a re-claim (not of a pending row) counts an attempt, and the token moves
 * on, fencing off the previous holder. `status` last because MySQL applies assignments in order.
 */
export function claimAssignments(column: ColumnRef, worker: string, startedAt: string, leaseExpiresAt: string): [string, string][] {
  const c = column;
  return [
    ['retry_count', `${c('retry_count')} + CASE WHEN ${c('status')} = 'pending' THEN 0 ELSE 1 END`],
    ['claim_token', `${c('claim_token')} + 1`],
    ['processed_by', worker],
    ['started_at', startedAt],
    ['lease_expires_at', leaseExpiresAt],
    ['status', "'processing'"],
  ];
}

/**
 * `status = 'processing'` for a statement that finds its rows by their key, written so that no
 * planner answers it from a status index instead: PostgreSQL's, whose statistics count few
 * processing rows, would otherwise walk every processing row, and every dead index entry of one
 * since the last vacuum, on each completion and heartbeat.
 */
export function stillProcessing(column: ColumnRef): string {
  return `CASE ${column('status')} WHEN 'processing' THEN 1 ELSE 0 END = 1`;
}

/** The fencing condition after the row's key: the presented token is current and the row still processing. */
export function fencedCondition(column: ColumnRef, token: string): string {
  return `${column('claim_token')} = ${token} AND ${stillProcessing(column)}`;
}

/** A processing row whose lease expired on its last allowed attempt: it becomes dead (failed, LEASE_EXPIRED). */
export function expiredOnLastAttempt(column: ColumnRef, now: string): string {
  const c = column;
  return `${c('status')} = 'processing' AND ${c('lease_expires_at')} <= ${now} AND ${c('retry_count')} >= ${c('max_retries')}`;
}

/**
 * The claim is not one whose lease expired on its last allowed attempt: such a file is a dead
 * letter (SPEC), though no reader may have marked it yet, so its holder's completion, failure and
 * heartbeat are refused (CLAIM_LOST) as for any lost claim.
 */
export function leaseStillCounts(column: ColumnRef, now: string): string {
  const c = column;
  return `(${c('lease_expires_at')} IS NULL OR ${c('lease_expires_at')} > ${now} OR ${c('retry_count')} < ${c('max_retries')})`;
}

/** `leaseStillCounts` for a row read into memory (lease end in epoch ms, or null). */
export function leaseStillCountsAt(row: { leaseExpiresAt: number | null; retryCount: number; maxRetries: number }, now: number): boolean {
  return row.leaseExpiresAt === null || row.leaseExpiresAt > now || row.retryCount < row.maxRetries;
}

/** Failed with no retries left: a dead letter (file) or a dead range. */
export function deadCondition(column: ColumnRef): string {
  return `${column('status')} = 'failed' AND ${column('retry_count')} >= ${column('max_retries')}`;
}

/**
 * Renews a lease at a third of `leaseMs` while long work runs, so the holder keeps its claim
 * without code of the user's. `beat` resolves false when the claim was lost; that and any error
 * are kept for the caller (the fenced commit afterwards is what decides), never thrown from a timer.
 */
export function keepLeased(leaseMs: number, beat: () => Promise<boolean>): { stop(): { lost: boolean; error: unknown } } {
  const outcome: { lost: boolean; error: unknown } = { lost: false, error: undefined };
  let inFlight = false;
  const timer = setInterval(
    () => {
      if (inFlight || outcome.lost) return;
      inFlight = true;
      beat().then(
        (held) => {
          inFlight = false;
          if (!held) outcome.lost = true;
        },
        (error: unknown) => {
          inFlight = false;
          outcome.error = error;
        },
      );
    },
    Math.max(1, Math.floor(leaseMs / 3)),
  );
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      return outcome;
    },
  };
}
