import { setTimeout as sleep } from 'node:timers/promises';
import type { DataSource } from 'typeorm';
import { ownStatementError } from '../core/database-errors';
import { InvalidArgumentError } from '../core/errors';
import { run } from '../core/run-statement';
import { controlEvent } from '../core/telemetry';
import { autocommit, type Db, dataSourceOf, joinsTransaction } from '../core/transaction';
import { type Dialect, dialectOf } from '../dialect';
import { type BoundedDelete, boundedDeleteOf, type DeleteTarget } from '../dialect/bounded-delete';

/**
 * What {@link prune} may delete: `jobs` (finished or cancelled batch and partitioned jobs, with
 * their ranges), `imports` (the checkpoint rows and rejects of finished or cancelled import
 * batches), `files` (completed or cancelled file claims) and `steps` (recorded steps).
 */
export type PruneKind = 'jobs' | 'imports' | 'files' | 'steps';

/** Every kind {@link prune} knows. */
export const PRUNE_KINDS: readonly PruneKind[] = ['jobs', 'imports', 'files', 'steps'];

/** The kinds {@link prune} deletes when none are named: `steps` only when named, since a step whose record is deleted runs again. */
export const DEFAULT_PRUNE_KINDS: readonly PruneKind[] = ['jobs', 'imports', 'files'];

/** The most rows one of {@link prune}'s statements deletes: each is a transaction of its own. */
export const PRUNE_BATCH_ROWS = 1000;

/** Options of {@link prune}. */
export interface PruneOptions {
  /** Delete what finished more than this many milliseconds ago (a positive finite number). */
  olderThan: number;
  /** What to delete (default `['jobs', 'imports', 'files']`). */
  kinds?: PruneKind[];
  /** Count what would be deleted, and delete nothing. */
  dryRun?: boolean;
}

/** What {@link prune} deleted (with `dryRun`: would delete), per kind; 0 for a kind not asked for. */
export interface PruneResult {
  /** Batch and partitioned jobs (rows of `checkpoint_jobs`). */
  jobs: number;
  /** Ranges of those partitioned jobs (rows of `checkpoint_partitions`). */
  ranges: number;
  /** Import batches (rows of `checkpoint_imports`). */
  imports: number;
  /** Rejects of those import batches (rows of `checkpoint_import_rejects`). */
  rejects: number;
  /** File claims (rows of `file_checkpoints`). */
  files: number;
  /** Steps (rows of `checkpoint_jobs` of kind `step`). */
  steps: number;
  /** The cut-off: rows whose time is before it (epoch ms) were deleted. */
  before: number;
  /** True when nothing was deleted, only counted. */
  dryRun: boolean;
}

type Column = (name: string) => string;

/** The SQL conditions (one `?`: the cut-off) of the rows each kind deletes, over a table's columns. */
const FINISHED = {
  // A job is aged by its last commit (`updated_at`): a finished job's last batch, or its cancel.
  job: (c: Column) =>
    `${c('kind')} IN ('batch', 'partitioned') AND ${c('state')} <> 'paused' AND (${c('done')} OR ${c('state')} = 'cancelled') AND ${c('updated_at')} < ?`,
  step: (c: Column) => `${c('kind')} = 'step' AND ${c('done')} AND ${c('updated_at')} < ?`,
  // An import batch is finished when every source row is committed, or cancelled; aged by its last commit.
  import: (c: Column) =>
    `${c('state')} <> 'paused' AND (${c('state')} = 'cancelled' OR (${c('total_rows')} IS NOT NULL AND ${c('next_index')} >= ${c('total_rows')})) AND ${c('updated_at')} < ?`,
  completedFile: (c: Column) => `${c('status')} = 'completed' AND ${c('completed_at')} < ?`,
  // A cancelled file is aged by when it ended (completed_at, when its cancel records it), else its last claim, else its registration.
  cancelledFile: (c: Column) => `${c('status')} = 'cancelled' AND ${cancelledAt(c)} < ?`,
};

function cancelledAt(c: Column): string {
  return `COALESCE(${c('completed_at')}, ${c('started_at')}, ${c('created_at')})`;
}

/** The statements of one prune run on one database, its cut-off bound into each. */
class Pruner {
  private readonly dialect: Dialect;
  private readonly deletes: BoundedDelete;

  constructor(
    private readonly dataSource: DataSource,
    private readonly before: number,
  ) {
    this.dialect = dialectOf(dataSource);
    this.deletes = boundedDeleteOf(this.dialect);
  }

  private q = (identifier: string): string => this.dialect.quote(identifier);

  /** Columns of `table` qualified by its name (or an alias), so a correlated subquery refers to the right row. */
  private of =
    (table: string): Column =>
    (name) =>
      `${this.q(table)}.${this.q(name)}`;

  private async read(sql: string, parameters: unknown[], what: string): Promise<Record<string, unknown>[]> {
    return autocommit(this.dataSource, (manager) => run<Record<string, unknown>[]>(manager, this.dialect.sql(sql), parameters, what));
  }

  private async count(table: string, where: string, parameters: unknown[]): Promise<number> {
    const rows = await this.read(
      `SELECT COUNT(*) AS ${this.q('n')} FROM ${this.q(table)} WHERE ${where}`,
      parameters,
      `counting ${table} to prune`,
    );
    return Number(rows[0]?.n ?? 0);
  }

  /** Deletes every row of `target`, at most {@link PRUNE_BATCH_ROWS} per statement (each its own transaction). */
  private async deleteAll(target: DeleteTarget): Promise<number> {
    let total = 0;
    let from: number | undefined;
    for (;;) {
      const { sql, parameters } = this.deletes.statement(target, PRUNE_BATCH_ROWS, from);
      const { deleted, last } = await autocommit(this.dataSource, async (manager) => {
        try {
          return this.deletes.read(await this.dialect.execute(manager.queryRunner!, sql, parameters));
        } catch (error) {
          throw ownStatementError(error, `pruning ${target.table}`);
        }
      });
      total += deleted;
      if (deleted < PRUNE_BATCH_ROWS) return total;
      from = last;
      // SQLite's write lock is not fair: leave it free a moment, so another process's writer gets it.
      if (this.dialect.writerHandoverMs) await sleep(this.dialect.writerHandoverMs);
    }
  }

  /**
   * Deletes the children of each parent that `parentWhere` selects (in pages of parent keys), then
   * the parents that have no child left: a parent is never deleted before its children.
   */
  private async deleteWithChildren(parent: Family): Promise<{ parents: number; children: number }> {
    const { q } = this;
    const p = this.of('parent');
    const childOfParent = `${q('child')}.${q(parent.childKey)} = ${p(parent.key)}`;
    const hasChildren = `EXISTS (SELECT 1 FROM ${q(parent.childTable)} ${q('child')} WHERE ${childOfParent})`;
    let children = 0;
    let after: string | undefined;
    for (;;) {
      const page = await this.read(
        `SELECT ${p(parent.key)} AS ${q('key')} FROM ${q(parent.table)} ${q('parent')} WHERE ${parent.where(p)} AND ${hasChildren}` +
          `${after === undefined ? '' : ` AND ${p(parent.key)} > ?`} ORDER BY ${p(parent.key)} LIMIT 100`,
        after === undefined ? [this.before] : [this.before, after],
        `listing ${parent.table} to prune`,
      );
      for (const row of page) {
        const key = String(row.key);
        const c = this.of(parent.childTable);
        // The parent is checked again in every statement: one that changed since the page was read is left alone.
        const stillFinished = `EXISTS (SELECT 1 FROM ${q(parent.table)} ${q('parent')} WHERE ${p(parent.key)} = ? AND ${parent.where(p)})`;
        children += await this.deleteAll({
          table: parent.childTable,
          where: `${c(parent.childKey)} = ? AND ${stillFinished}`,
          parameters: [key, key, this.before],
          position: c(parent.childPosition),
        });
      }
      if (page.length < 100) break;
      after = String(page[page.length - 1].key);
    }
    const t = this.of(parent.table);
    const childless = `NOT EXISTS (SELECT 1 FROM ${q(parent.childTable)} ${q('child')} WHERE ${q('child')}.${q(parent.childKey)} = ${t(parent.key)})`;
    const parents = await this.deleteAll({
      table: parent.table,
      where: `${parent.where(t)} AND ${childless}`,
      parameters: [this.before],
      position: t('updated_at'),
    });
    return { parents, children };
  }

  /** Counts what `deleteWithChildren` would delete. */
  private async countWithChildren(parent: Family): Promise<{ parents: number; children: number }> {
    const { q } = this;
    const p = this.of('parent');
    const c = this.of(parent.childTable);
    const parents = await this.count(parent.table, parent.where(this.of(parent.table)), [this.before]);
    const children = await this.count(
      parent.childTable,
      `EXISTS (SELECT 1 FROM ${q(parent.table)} ${q('parent')} WHERE ${p(parent.key)} = ${c(parent.childKey)} AND ${parent.where(p)})`,
      [this.before],
    );
    return { parents, children };
  }

  async jobs(dryRun: boolean): Promise<{ parents: number; children: number }> {
    return dryRun ? this.countWithChildren(JOB_FAMILY) : this.deleteWithChildren(JOB_FAMILY);
  }

  async imports(dryRun: boolean): Promise<{ parents: number; children: number }> {
    return dryRun ? this.countWithChildren(IMPORT_FAMILY) : this.deleteWithChildren(IMPORT_FAMILY);
  }

  async files(dryRun: boolean): Promise<number> {
    const c = this.of('file_checkpoints');
    const targets: DeleteTarget[] = [
      { table: 'file_checkpoints', where: FINISHED.completedFile(c), parameters: [this.before], position: c('completed_at') },
      { table: 'file_checkpoints', where: FINISHED.cancelledFile(c), parameters: [this.before], position: cancelledAt(c) },
    ];
    let total = 0;
    for (const target of targets) {
      total += dryRun ? await this.count(target.table, target.where, target.parameters) : await this.deleteAll(target);
    }
    return total;
  }

  async steps(dryRun: boolean): Promise<number> {
    const c = this.of('checkpoint_jobs');
    const target: DeleteTarget = {
      table: 'checkpoint_jobs',
      where: FINISHED.step(c),
      parameters: [this.before],
      position: c('updated_at'),
    };
    return dryRun ? this.count(target.table, target.where, target.parameters) : this.deleteAll(target);
  }
}

/** A table whose finished rows are pruned together with their rows in a child table. */
interface Family {
  table: string;
  key: string;
  where: (c: Column) => string;
  childTable: string;
  childKey: string;
  /** The child column walked in order within one parent (the second column of its primary key). */
  childPosition: string;
}

const JOB_FAMILY: Family = {
  table: 'checkpoint_jobs',
  key: 'name',
  where: FINISHED.job,
  childTable: 'checkpoint_partitions',
  childKey: 'job_name',
  childPosition: 'partition_index',
};

const IMPORT_FAMILY: Family = {
  table: 'checkpoint_imports',
  key: 'id',
  where: FINISHED.import,
  childTable: 'checkpoint_import_rejects',
  childKey: 'batch',
  childPosition: 'row_index',
};

function checkedOptions(options: PruneOptions): { olderThan: number; kinds: PruneKind[]; dryRun: boolean } {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError('prune(db, options): options must be an object such as { olderThan: 30 * 86_400_000 }.');
  }
  const { olderThan, kinds = DEFAULT_PRUNE_KINDS, dryRun = false } = options;
  if (typeof olderThan !== 'number' || !Number.isFinite(olderThan) || olderThan <= 0) {
    throw new InvalidArgumentError(`prune: olderThan must be a positive number of milliseconds, got ${String(olderThan)}.`);
  }
  if (!Array.isArray(kinds)) {
    throw new InvalidArgumentError(`prune: kinds must be an array of ${PRUNE_KINDS.map((k) => `'${k}'`).join(', ')}.`);
  }
  const unknown = kinds.find((kind) => !PRUNE_KINDS.includes(kind));
  if (unknown !== undefined) {
    throw new InvalidArgumentError(`prune: unknown kind ${JSON.stringify(unknown)}; the kinds are ${PRUNE_KINDS.join(', ')}.`);
  }
  if (typeof dryRun !== 'boolean') throw new InvalidArgumentError('prune: dryRun must be a boolean.');
  return { olderThan, kinds: [...new Set(kinds)], dryRun };
}

/**
 * Deletes the library's records of work that ended more than `olderThan` ms ago: finished or
 * cancelled batch and partitioned jobs (their ranges first), finished or cancelled import batches
 * (their rejects first), completed or cancelled file claims, and, only when named, steps. Returns
 * what it deleted per kind; with `dryRun`, what it would delete, deleting nothing.
 *
 * It never touches an active or paused job or import, `checkpoint_import_items` or the
 * application's tables. Each statement deletes at most 1,000 rows and is a transaction of its own,
 * so no lock is held long. It runs its own transactions: called inside one it throws
 * `INVALID_ARGUMENT`, as it does for an `olderThan` that is not a positive finite number or an
 * unknown kind (and changes nothing).
 */
export async function prune(db: Db, options: PruneOptions): Promise<PruneResult> {
  const { olderThan, kinds, dryRun } = checkedOptions(options);
  const dataSource = dataSourceOf(db);
  if (joinsTransaction(db)) {
    throw new InvalidArgumentError('prune runs short transactions of its own: call it outside a transaction.');
  }
  const before = Math.max(0, Math.floor(Date.now() - olderThan));
  const pruner = new Pruner(dataSource, before);
  const result: PruneResult = { jobs: 0, ranges: 0, imports: 0, rejects: 0, files: 0, steps: 0, before, dryRun };
  if (kinds.includes('jobs')) {
    const { parents, children } = await pruner.jobs(dryRun);
    result.jobs = parents;
    result.ranges = children;
  }
  if (kinds.includes('imports')) {
    const { parents, children } = await pruner.imports(dryRun);
    result.imports = parents;
    result.rejects = children;
  }
  if (kinds.includes('files')) result.files = await pruner.files(dryRun);
  if (kinds.includes('steps')) result.steps = await pruner.steps(dryRun);
  const { jobs, ranges, imports, rejects, files, steps } = result;
  controlEvent('prune', { dry_run: dryRun, jobs, ranges, imports, rejects, files, steps });
  return result;
}
