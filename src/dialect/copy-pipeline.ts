import { serialize } from 'pg-protocol';
import type { QueryRunner } from 'typeorm';
import { BINARY_HEADER, BINARY_TRAILER } from './copy-binary';
import type { CopyRows } from './copy-text';
import { type BoundStatement, executeMessages, PipelineBuilder, type PipelineGate } from './pg-pipeline';
import type { TableRef } from './dialect';
import { doubleQuote, qualifiedTable } from './shared-sql';

export type { BoundStatement } from './pg-pipeline';

/**
 * Statements that `copyRows` runs before and after the COPY, in the same round trip; with
 * `proceed`, pipelined behind the transaction still running on the connection (PipelineGate):
 * `after` is sent only once that one committed and `proceed` resolved to true.
 */
export interface CopyAround extends PipelineGate {
  before?: BoundStatement[];
  after?: BoundStatement[];
  /** The rows are in the binary format (`CopyBinary`), not COPY text. */
  binary?: boolean;
  /**
   * The COPY is a named statement of the connection, parsed once (the server then skips parsing
   * each of a chunk's statements). Only for a caller that retries when the connection dropped it
   * (DEALLOCATE ALL: UNKNOWN_PREPARED_STATEMENT fails the transaction).
   */
  prepare?: boolean;
  /**
   * Rows per COPY statement (default `COPY_ROWS_PER_STATEMENT`): a load whose statements need not
   * end at chunk boundaries sends larger ones, paying the per-statement costs below less often.
   */
  statementRows?: number;
}

// PostgreSQL ≤ 16 remembers each tuple slot of a COPY's insert buffer (up to 1,000) in a resource
// owner whose lookup is linear for equal entries: a COPY of n rows costs O(n²) (~0.9 ms for 1,000).
// Each statement has fixed costs too: above all its CopyInResponse, which the server flushes to the
// socket at once (a send of its own: 7 % of the backend's CPU with 125-row statements), and its
// executor set-up. 250 rows (four statements per chunk of 1,000) against 125: median 0.96× the wall
// time and 0.975× the server CPU (12 interleaved pairs of 4.1M-row imports, 2026-12-03; 200 and 500
// no better, 1,000 clearly worse). All of a chunk's statements go in one round trip.
const COPY_ROWS_PER_STATEMENT = 250;

const COPY_DONE = serialize.copyDone();
const BINARY_HEADER_DATA = serialize.copyData(BINARY_HEADER);
const BINARY_TRAILER_DATA = serialize.copyData(BINARY_TRAILER);

const copyStatements = new Map<string, { sql: string; messages: Buffer }>();

/**
 * Parse, Bind and Execute of the COPY … FROM STDIN of `table` and `columns`, made once. Unnamed:
 * a named one would fail a caller's transaction on a connection that dropped it (DEALLOCATE ALL).
 */
function copyStatement(table: string | TableRef, columns: string[], binary: boolean): { sql: string; messages: Buffer } {
  const ref = typeof table === 'string' ? { name: table } : table;
  const key = JSON.stringify([ref.schema ?? null, ref.name, columns, binary]);
  let statement = copyStatements.get(key);
  if (!statement) {
    const sql = `COPY ${qualifiedTable(ref, doubleQuote)} (${columns.map(doubleQuote).join(', ')}) FROM STDIN${binary ? ' (FORMAT binary)' : ''}`;
    statement = { sql, messages: Buffer.concat(executeMessages(sql, [])) };
    copyStatements.set(key, statement);
  }
  return statement;
}

/**
 * PostgreSQL's bulk path on the runner's own connection (its transaction): `around.before`, the
 * rows in COPY FROM STDIN statements of `COPY_ROWS_PER_STATEMENT` rows, `around.after`, all in
 * one round trip. Each statement is logged through the DataSource's logger (the COPY once), as
 * TypeORM logs its own queries.
 */
export async function copyFromStdin(
  runner: QueryRunner,
  table: string | TableRef,
  columns: string[],
  rows: CopyRows,
  around: CopyAround = {},
): Promise<void> {
  const pipeline = await PipelineBuilder.on(runner);
  const binary = around.binary === true;
  const copy = copyStatement(table, columns, binary);
  for (const statement of around.before ?? []) pipeline.statement(statement);
  if (rows.rows > 0) pipeline.log(copy.sql, []);
  const perStatement = around.statementRows ?? COPY_ROWS_PER_STATEMENT;
  for (let row = 0; row < rows.rows; row += perStatement) {
    const from = row === 0 ? 0 : rows.ends[row - 1];
    const data = rows.bytes.subarray(from, rows.ends[Math.min(rows.rows, row + perStatement) - 1]);
    // The rows are copied once, into the CopyData message (a statement's rows at a time).
    if (around.prepare) pipeline.statement({ sql: copy.sql, parameters: [], prepare: true }, false);
    else pipeline.raw(copy.messages);
    if (binary) pipeline.raw(BINARY_HEADER_DATA).raw(serialize.copyData(data)).raw(BINARY_TRAILER_DATA);
    else pipeline.raw(serialize.copyData(data));
    pipeline.raw(COPY_DONE);
  }
  pipeline.startTail();
  for (const statement of around.after ?? []) pipeline.statement(statement);
  await pipeline.send(around);
}
