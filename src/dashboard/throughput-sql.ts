import { type PageContext, read, toNumber } from './dashboard-sql';
import type { Throughput } from './throughput-chart';

const MINUTE = 60_000;
const HOUR_BUCKETS = 60;
/**
 * A minute that ended this long ago is counted once and kept: completions commit within moments of
 * their `completed_at`, so its count no longer changes (see {@link loadThroughput}).
 */
const SETTLE_MS = 5 * MINUTE;

/** Completed files per settled minute (its start, ms since the epoch), and where the settled minutes end. */
interface SettledMinutes {
  /** Every minute that starts before this one is counted (a minute missing from `counts` had none). */
  until: number;
  counts: Map<number, number>;
}

/** Per DataSource: what the throughput chart counted before, so a refresh reads only the last minutes. */
const settledMinutes = new WeakMap<object, SettledMinutes>();

/**
 * Files completed per minute over the last hour, in minutes of the clock (the last one is the
 * current, partial minute), from the completed index (migration 1765238400000). A roll-up held by
 * the dashboard's process, not by the database, so that claims and completions write nothing more:
 * the first request counts the hour, and later ones count only the minutes since the last one that
 * had settled (ended 5 minutes before) and take the earlier ones from memory. A completion deleted
 * or requeued later stays in its minute on this process's chart until the minute leaves the hour.
 */
export async function loadThroughput(ctx: PageContext): Promise<Throughput> {
  const q = (name: string) => ctx.dialect.quote(name);
  const current = ctx.now - (ctx.now % MINUTE);
  const from = current - (HOUR_BUCKETS - 1) * MINUTE;
  const settled = Math.min(current, ctx.now - SETTLE_MS - ((ctx.now - SETTLE_MS) % MINUTE));
  const known = settledMinutes.get(ctx.dataSource);
  const since = known !== undefined && known.until > from ? Math.min(known.until, current) : from;
  // Bucket start offsets by subtraction and modulo: integer arithmetic that means the same on every database.
  const bucket = `${q('o')} - (${q('o')} % ${MINUTE})`;
  const rows = await read(ctx, (query) =>
    query(
      `SELECT ${bucket} AS ${q('bucket')}, COUNT(*) AS ${q('n')} FROM ` +
        `(SELECT ${q('completed_at')} - ? AS ${q('o')} FROM ${q('file_checkpoints')} WHERE ${q('status')} = 'completed' AND ${q('completed_at')} >= ?) ${q('recent')} GROUP BY ${bucket}`,
      [since, since],
    ),
  );
  const fresh = new Map<number, number>();
  for (const row of rows) fresh.set(since + toNumber(row.bucket), toNumber(row.n));
  const completed = new Array<number>(HOUR_BUCKETS).fill(0);
  for (let i = 0; i < HOUR_BUCKETS; i++) {
    const minute = from + i * MINUTE;
    completed[i] = (minute < since ? known?.counts.get(minute) : fresh.get(minute)) ?? 0;
  }
  if (settled > (known?.until ?? -Infinity)) {
    const counts = new Map<number, number>();
    for (let minute = from; minute < settled; minute += MINUTE) {
      const n = minute < since ? known?.counts.get(minute) : fresh.get(minute);
      if (n !== undefined && n > 0) counts.set(minute, n);
    }
    settledMinutes.set(ctx.dataSource, { until: settled, counts });
  }
  return { bucketMs: MINUTE, from, completed };
}
