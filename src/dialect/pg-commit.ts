import { serialize } from 'pg-protocol';
import type { DataSource, QueryRunner } from 'typeorm';
import { errorCodes } from '../core/database-errors';
import type { FinalStatement, IsolationLevel, PipelinedCommit, PipelinedOutcome } from './dialect';
import { executeMessages, PipelineBuilder, simpleQuery } from './pg-pipeline';

// The guard below divides by zero when a final statement changed fewer rows than it must: nothing
// else in a commit pipeline divides, so this SQLSTATE (division_by_zero) means "not held".
const NOT_HELD = '22012';

const COMMIT_SQL = 'COMMIT';
const COMMIT = Buffer.concat(executeMessages(COMMIT_SQL, []));
// The dialect's asynchronousCommit statement, prebuilt, and its expression form (SET LOCAL as a function).
const ASYNCHRONOUS_SQL = 'SET LOCAL synchronous_commit = off';
const ASYNCHRONOUS = Buffer.concat(executeMessages(ASYNCHRONOUS_SQL, []));
export const ASYNCHRONOUS_COMMIT_EXPRESSION = "set_config('synchronous_commit', 'off', true)";
// An after-commit statement is planned once per connection (a generic plan, reused), not for each
// run: its transaction turns that on for itself (plan_cache_mode is PostgreSQL 12's; older servers skip it).
const GENERIC_PLANS_SQL =
  "SELECT set_config('plan_cache_mode', 'force_generic_plan', true) WHERE current_setting('server_version_num')::int >= 120000";
const ROLLBACK_SQL = 'ROLLBACK';
const ROLLBACK = serialize.query(ROLLBACK_SQL);

const beginTexts = new Map<IsolationLevel | undefined, { sql: string; simple: Buffer; extended: Buffer }>();

function begin(isolation: IsolationLevel | undefined): { sql: string; simple: Buffer; extended: Buffer } {
  let text = beginTexts.get(isolation);
  if (!text) {
    // `isolation` is one of four fixed spellings (IsolationLevel), never a caller's string.
    const sql = isolation === undefined ? 'START TRANSACTION' : `START TRANSACTION ISOLATION LEVEL ${isolation}`;
    text = { sql, simple: serialize.query(sql), extended: Buffer.concat(executeMessages(sql, [])) };
    beginTexts.set(isolation, text);
  }
  return text;
}

const guardedTexts = new Map<string, Map<string, string>>();

/**
 * `update` (an UPDATE without RETURNING, `$n` placeholders) as a statement that fails with
 * division_by_zero unless it changed exactly as many rows as its last parameter says, which
 * aborts the transaction before the COMMIT sent after it. `unflushed`: it also does what
 * `SET LOCAL synchronous_commit = off` does, saving that statement its own parse and execution.
 * `returning` (FinalStatement.flag): a boolean over the changed rows, answered as `flagged`.
 */
function guarded(update: string, parameters: number, unflushed: boolean, returning?: string): string {
  // Keyed by `update` itself, whose hash V8 keeps on the string: a key joined from it would be hashed anew at every call.
  let variants = guardedTexts.get(update);
  if (variants === undefined) guardedTexts.set(update, (variants = new Map()));
  const key = `${unflushed ? 'u' : 'f'}${returning ?? ''}`;
  let sql = variants.get(key);
  if (sql === undefined) {
    sql =
      `WITH changed AS (${update} RETURNING ${returning === undefined ? '1' : `(${returning}) AS flagged`}) ` +
      `SELECT 1 / (CASE WHEN COUNT(*) = $${parameters + 1} THEN 1 ELSE 0 END) AS held` +
      `${returning === undefined ? '' : ', COALESCE(bool_or(changed.flagged), false) AS flagged'}` +
      `${unflushed ? `, ${ASYNCHRONOUS_COMMIT_EXPRESSION} AS unflushed` : ''} FROM changed`;
    variants.set(key, sql);
  }
  return sql;
}

const lockedTexts = new Map<string, string>();

/**
 * `select` (a SELECT … FOR UPDATE, `$n` placeholders) as a statement that fails with
 * division_by_zero unless it locked exactly as many rows as its last parameter says. Under READ
 * COMMITTED a row changed by a transaction the lock waited for is checked again in its new version.
 */
function guardedLock(select: string, parameters: number): string {
  let sql = lockedTexts.get(select);
  if (sql === undefined) {
    sql = `WITH locked AS (${select}) SELECT 1 / (CASE WHEN COUNT(*) = $${parameters + 1} THEN 1 ELSE 0 END) AS held FROM locked`;
    lockedTexts.set(select, sql);
  }
  return sql;
}

/**
 * PostgreSQL's commit pipeline: the final statements, COMMIT and the next transaction's BEGIN as
 * extended-protocol messages with one Sync, one round trip. A final that changed too few rows
 * raises an error, after which the server skips the rest up to the Sync: nothing commits.
 */
export const pgPipelinedCommit: PipelinedCommit = {
  openingInCommit: true,

  async begin(runner: QueryRunner, isolation?: IsolationLevel): Promise<void> {
    const text = begin(isolation);
    await simpleQuery(runner, text.simple, text.sql);
  },

  async commit(runner: QueryRunner, finals: FinalStatement[], options): Promise<PipelinedOutcome> {
    const pipeline = await PipelineBuilder.on(runner);
    // The last final (an aggregate: one row, so one call) turns the commit asynchronous when there is one.
    const folded = options.asynchronous === true && finals.length > 0;
    // The pipeline keeps the rows of one statement: a flagged final's, unless an after-commit statement's are wanted.
    const flaggedAt = options.after ? -1 : finals.findIndex((final) => final.flag !== undefined);
    for (const [i, final] of finals.entries()) {
      const returning = i === flaggedAt ? final.flag?.returning : undefined;
      const sql = guarded(final.sql, final.parameters.length, folded && i === finals.length - 1, returning);
      pipeline.statement({ sql, parameters: [...final.parameters, final.expected], prepare: true }, true, i === flaggedAt);
    }
    const answer = () => (flaggedAt >= 0 ? { flagged: pipeline.rows[0]?.flagged === 't' } : {});
    if (options.asynchronous && !folded) pipeline.raw(ASYNCHRONOUS, ASYNCHRONOUS_SQL);
    pipeline.raw(COMMIT, COMMIT_SQL);
    // Statements up to and including the COMMIT: once that many completed, the transaction committed.
    const committedAt = finals.length + (options.asynchronous && !folded ? 1 : 0) + 1;
    // The after-commit statement in a transaction of its own: a statement sent on its own before the
    // next BEGIN without a Sync between them would become part of that transaction.
    let afterCommittedAt = Infinity;
    if (options.after) {
      const own = begin(undefined);
      pipeline.raw(own.extended, own.sql);
      pipeline.statement({ sql: GENERIC_PLANS_SQL, parameters: [], prepare: true });
      pipeline.statement({ sql: options.after.sql, parameters: options.after.parameters, prepare: true }, true, true);
      pipeline.raw(COMMIT, COMMIT_SQL);
      afterCommittedAt = committedAt + 4;
    }
    const opening = options.beginNext ? (options.opening ?? []) : [];
    if (options.beginNext) {
      const next = begin(options.isolation);
      pipeline.raw(next.extended, next.sql);
      for (const statement of opening) {
        pipeline.statement({
          sql: guardedLock(statement.sql, statement.parameters.length),
          parameters: [...statement.parameters, statement.expected],
          prepare: true,
        });
      }
    }
    try {
      await pipeline.send();
      return {
        held: true,
        opened: options.beginNext === true,
        ...(options.after ? { after: { rows: pipeline.rows } } : {}),
        ...answer(),
      };
    } catch (error) {
      if (pipeline.completed >= committedAt) {
        // Committed; what followed failed (the after-commit statement, or the next transaction's
        // opening statements: their rows changed, a lock timeout, …): end the transaction it left
        // open, if any, so the next one begins afresh. A broken connection raises here.
        if (pipeline.completed > committedAt) await simpleQuery(runner, ROLLBACK, ROLLBACK_SQL);
        const after = options.after ? (pipeline.completed >= afterCommittedAt ? { rows: pipeline.rows } : { error }) : undefined;
        return { held: true, opened: false, ...(after ? { after } : {}), ...answer() };
      }
      // Only a guard divides: a final that errs this way found its rows changed by someone else.
      if (pipeline.completed < finals.length && errorCodes(error).includes(NOT_HELD)) return { held: false, opened: false };
      throw error;
    }
  },

  async rollback(runner: QueryRunner): Promise<void> {
    await simpleQuery(runner, ROLLBACK, ROLLBACK_SQL);
  },

  connectionWanted(dataSource: DataSource): boolean {
    // pg-pool's count of connect() calls queued for a free client (TypeORM's driver calls its pool `master`).
    const pool = (dataSource.driver as unknown as { master?: { waitingCount?: number } }).master;
    return (pool?.waitingCount ?? 0) > 0;
  },
};
