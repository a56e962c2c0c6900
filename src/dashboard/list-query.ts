import type { Dialect } from '../dialect';
import { choice, containsPattern, keysetPage, type PageContext, pageSize, read } from './dashboard-sql';

/**
 * What a keyset-paginated list reads from the URL: a state tab, a substring search, a page size and the cursor.
 * @inline
 */
export interface ListFilters<S extends string> {
  /** The selected state tab. */
  state: S;
  /** The search text, matched as a substring (of the name, or the URL for files); empty for none. */
  q: string;
  /** Rows per page, 1 to 500 (default 50). */
  limit: number;
  /** The page starts after this key; null for the first page. */
  after: string | null;
}

/** Reads a list's filters; `stateParameter` names the tab's parameter (`state`, or `status` for files). */
export function listFilters<S extends string>(
  query: URLSearchParams,
  stateParameter: string,
  states: readonly S[],
  fallback: S,
): ListFilters<S> {
  return {
    state: choice(stateParameter, query.get(stateParameter), states, fallback),
    q: query.get('q') ?? '',
    limit: pageSize(query.get('limit')),
    after: query.get('after') || null,
  };
}

/** A WHERE clause built one condition at a time, each with its bound parameters (`?` placeholders). */
export class Conditions {
  private readonly conditions: string[] = [];
  readonly parameters: unknown[] = [];

  add(condition: string, ...parameters: unknown[]): this {
    this.conditions.push(condition);
    this.parameters.push(...parameters);
    return this;
  }

  /** The substring search on `searched` and the keyset cursor on `key`, as every list has them. */
  searchAndAfter(ctx: PageContext, searched: string, key: string, filters: Pick<ListFilters<string>, 'q' | 'after'>): this {
    if (filters.q !== '') this.add(`${ctx.dialect.quote(searched)} LIKE ? ESCAPE '!'`, containsPattern(filters.q));
    if (filters.after !== null) this.add(`${ctx.dialect.quote(key)} > ?`, filters.after);
    return this;
  }

  /** ` WHERE a AND b`, or nothing. */
  where(): string {
    return this.conditions.length > 0 ? ` WHERE ${this.conditions.join(' AND ')}` : '';
  }
}

/**
 * The statement texts of the lists, per dialect and shape: the same string object on every request,
 * so it is neither built nor hashed again (SQLite's direct reads find their prepared statement by it).
 */
const statementTexts = new WeakMap<Dialect, Map<string, string>>();

/**
 * One page of `checkpoint_jobs` rows (batch jobs, steps, partitioned jobs) in name order: the
 * conditions given, the name search and the cursor, `limit + 1` rows fetched to know the next page.
 * `shape` names the columns and the conditions' text (not their parameters): the statement's text
 * is made once per shape (with or without search and cursor), so two shapes must never share a name.
 */
export async function selectJobPage(
  ctx: PageContext,
  shape: string,
  columns: () => string,
  conditions: Conditions,
  filters: ListFilters<string>,
): Promise<{ rows: Record<string, unknown>[]; next: string | null }> {
  conditions.searchAndAfter(ctx, 'name', 'name', filters);
  let texts = statementTexts.get(ctx.dialect);
  if (texts === undefined) {
    texts = new Map();
    statementTexts.set(ctx.dialect, texts);
  }
  const key = `${shape}${filters.q !== '' ? '\0q' : ''}${filters.after !== null ? '\0after' : ''}`;
  let text = texts.get(key);
  if (text === undefined) {
    const q = (name: string) => ctx.dialect.quote(name);
    text = `SELECT ${columns()} FROM ${q('checkpoint_jobs')}${conditions.where()} ORDER BY ${q('name')} LIMIT ?`;
    texts.set(key, text);
  }
  const rows = await read(ctx, (query) => query(text, [...conditions.parameters, filters.limit + 1]));
  const page = keysetPage(rows, filters.limit, (row) => String(row.name));
  return { rows: page.items, next: page.next };
}
