import type { DataSource, EntityManager } from 'typeorm';
import { ownStatementError } from '../core/database-errors';
import { InvalidArgumentError } from '../core/errors';
import { run } from '../core/run-statement';
import { autocommitLazily, type Db, dataSourceOf } from '../core/transaction';
import { type Dialect, dialectOf } from '../dialect';

/** What every page's data function reads through: the database, its dialect and one clock reading. */
export interface PageContext {
  readonly db: Db;
  readonly dataSource: DataSource;
  readonly dialect: Dialect;
  /** Milliseconds since the epoch, read once per request so a page is consistent with itself. */
  readonly now: number;
}

export function pageContext(db: Db, now = Date.now()): PageContext {
  const dataSource = dataSourceOf(db);
  return { db, dataSource, dialect: dialectOf(dataSource), now };
}

/**
 * Runs the page's read statements on one connection without a transaction of its own (reads of
 * committed state). `text` uses `?` placeholders; identifiers are quoted by the caller.
 */
export function read<T>(
  ctx: PageContext,
  fn: (
    query: <R = Record<string, unknown>>(text: string, parameters: unknown[]) => Promise<R[]>,
    manager: () => EntityManager,
  ) => Promise<T>,
): Promise<T> {
  // The QueryRunner is made only if a statement goes through TypeORM (see autocommitLazily).
  return autocommitLazily(ctx.db, (manager) =>
    fn(<R>(text: string, parameters: unknown[]) => readRows<R>(ctx, manager, text, parameters), manager),
  );
}

const WHAT = 'reading the dashboard data';

/** One statement's rows: by the dialect's own read path where it has one, else through TypeORM. */
function readRows<R>(ctx: PageContext, manager: () => EntityManager, text: string, parameters: unknown[]): Promise<R[]> {
  const sql = ctx.dialect.sql(text);
  if (ctx.dialect.readRows !== undefined) {
    try {
      const rows = ctx.dialect.readRows(ctx.dataSource, sql, parameters);
      if (rows !== undefined) return Promise.resolve(rows as R[]);
    } catch (error) {
      return Promise.reject(ownStatementError(error, WHAT));
    }
  }
  return run<R[]>(manager(), sql, parameters, WHAT);
}

/** A `LIKE` pattern matching `text` anywhere, literally (`%`, `_` and `!` escaped with `!`). */
export function containsPattern(text: string): string {
  return `%${text.replace(/[!%_]/g, (c) => `!${c}`)}%`;
}

export const PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 500;

/** Reads a list page's size from the URL (`limit`), 1…500, default 50. */
export function pageSize(value: string | null): number {
  if (value === null || value === '') return PAGE_SIZE;
  const n = Number(value);
  if (!/^[0-9]+$/.test(value) || n < 1 || n > MAX_PAGE_SIZE) {
    throw new InvalidArgumentError(`limit must be an integer from 1 to ${MAX_PAGE_SIZE}, got "${value}".`);
  }
  return n;
}

/** Reads an enumerated filter from the URL; anything else is INVALID_ARGUMENT. */
export function choice<T extends string>(name: string, value: string | null, allowed: readonly T[], fallback: T): T {
  if (value === null || value === '') return fallback;
  if (!(allowed as readonly string[]).includes(value)) {
    throw new InvalidArgumentError(`${name} must be one of ${allowed.join(', ')}, got "${value}".`);
  }
  return value as T;
}

/** Splits `limit + 1` fetched rows into the page and the keyset cursor of the next one. */
export function keysetPage<R, K>(rows: R[], limit: number, key: (row: R) => K): { items: R[]; next: K | null } {
  if (rows.length <= limit) return { items: rows, next: null };
  const items = rows.slice(0, limit);
  return { items, next: key(items[items.length - 1]) };
}

export function toNumber(value: unknown): number {
  return value === null || value === undefined ? 0 : Number(value);
}

export function toNullableNumber(value: unknown): number | null {
  return value === null || value === undefined ? null : Number(value);
}

export function toBoolean(value: unknown): boolean {
  return value === true || Number(value) === 1;
}
