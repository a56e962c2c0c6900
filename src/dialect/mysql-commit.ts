import type { DataSource, QueryRunner } from 'typeorm';
import type { IsolationLevel, PipelinedCommit, PipelinedOutcome } from './dialect';
import { affectedRows } from './shared-sql';

/**
 * MySQL/MariaDB's counterpart of PostgreSQL's commit pipeline. mysql2 sends one statement per round
 * trip (without `multipleStatements`), so the finals and the COMMIT are a round trip each; what is
 * saved is the next transaction's opening: `COMMIT AND CHAIN` begins it in the COMMIT's round trip,
 * with the same isolation level, so neither TypeORM's `SET TRANSACTION ISOLATION LEVEL` nor `START
 * TRANSACTION` is sent again while the lane runs. The session's own settings are never changed (`SET
 * TRANSACTION` applies to the next transaction only), so the connection goes back to the pool as it came.
 */
export const mysqlPipelinedCommit: PipelinedCommit = {
  openingInCommit: false,

  async begin(runner: QueryRunner, isolation?: IsolationLevel): Promise<void> {
    // `isolation` is one of four fixed spellings (IsolationLevel), never a caller's string.
    if (isolation !== undefined) await runner.query(`SET TRANSACTION ISOLATION LEVEL ${isolation}`);
    await runner.query('START TRANSACTION');
  },

  async commit(runner, finals, options): Promise<PipelinedOutcome> {
    // mysql2's found-rows flag makes affectedRows the rows matched; the library's finals change every
    // row they match (a counter or the status moves), so matched and changed agree either way.
    let flagged = false;
    for (const final of finals) {
      const affected = await affectedRows(runner, final.sql, final.parameters);
      // A flagged final changes one row more when its answer is yes (see FinalStatement.flag).
      if (final.flag && affected === final.expected + 1) flagged = true;
      else if (affected !== final.expected) return { held: false, opened: false };
    }
    const answer = finals.some((final) => final.flag) ? { flagged } : {};
    // No per-transaction setting lets a COMMIT skip the log flush here (`asynchronous` is PostgreSQL's).
    if (options.beginNext !== true) {
      await runner.query('COMMIT');
      return { held: true, opened: false, ...answer };
    }
    await runner.query('COMMIT AND CHAIN');
    try {
      for (const statement of options.opening ?? []) {
        const rows = (await runner.query(statement.sql, statement.parameters)) as unknown[];
        if (rows.length !== statement.expected) {
          await runner.query('ROLLBACK');
          return { held: true, opened: false, ...answer };
        }
      }
    } catch {
      // Committed; the next transaction's opening failed (a lock wait timeout, …): end it, so the
      // next one begins afresh. A broken connection raises here.
      await runner.query('ROLLBACK');
      return { held: true, opened: false, ...answer };
    }
    return { held: true, opened: true, ...answer };
  },

  async rollback(runner: QueryRunner): Promise<void> {
    await runner.query('ROLLBACK');
  },

  connectionWanted(dataSource: DataSource): boolean {
    // mysql2's queue of getConnection() calls waiting for a free connection (TypeORM's driver calls its pool `pool`).
    const pool = (dataSource.driver as unknown as { pool?: { _connectionQueue?: { length: number } } }).pool;
    return (pool?._connectionQueue?.length ?? 0) > 0;
  },
};
