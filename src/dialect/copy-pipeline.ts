import { serialize } from 'pg-protocol';
import type { QueryRunner } from 'typeorm';
import type { CopyRows } from './copy-text';
import { pgClientOf } from './pg-client';
import { doubleQuote } from './shared-sql';

/**
 * A statement of the library's own with its bound parameters (strings, numbers or null); with
 * `prepare`, parsed and planned once per connection (a named statement).
 */
export interface BoundStatement {
  sql: string;
  parameters: (string | number | null)[];
  prepare?: boolean;
}

/** Statements that `copyRows` runs before and after the COPY, in the same round trip. */
export interface CopyAround {
  before?: BoundStatement[];
  after?: BoundStatement[];
}

// PostgreSQL ≤ 16 remembers each tuple slot of a COPY's insert buffer (up to 1,000) in a resource
// owner whose lookup is linear for equal entries: a COPY of n rows costs O(n²) (~0.9 ms for 1,000).
// Statements of 125 rows measured cheapest against the fixed cost of each (~25 µs); all of them
// go in one round trip.
const COPY_ROWS_PER_STATEMENT = 125;

// Every message comes from pg-protocol's `serialize` (node-postgres' own writer); those without a
// body are the same bytes every time.
const EXECUTE = serialize.execute();
const COPY_DONE = serialize.copyDone();
const SYNC = serialize.sync();

/** Parameters go as text; pg-protocol's writer takes strings (or null) only. */
const asText = (value: BoundStatement['parameters'][number]) => (value === null ? null : String(value));

/** Bind of `statement` (named, or the unnamed one) to the unnamed portal. */
function bindMessage(statement: string, parameters: BoundStatement['parameters']): Buffer {
  return serialize.bind({ statement, values: parameters, valueMapper: asText });
}

/** Parse, Bind and Execute of an unnamed statement, for the extended query protocol. */
function executeMessages(sql: string, parameters: BoundStatement['parameters']): Buffer[] {
  return [serialize.parse({ text: sql }), bindMessage('', parameters), EXECUTE];
}

// Names of their own: pg's parsedStatements does not see what a pipeline prepares, so a text
// shared with `executePrepared` under one name could be parsed twice on a connection.
const copyPreparedNames = new Map<string, string>();
/** The named statements each pg client is known to hold (added once a pipeline using them succeeded). */
const preparedOnClient = new WeakMap<object, Set<string>>();

/**
 * The messages of `statement`: a known named statement is only bound; an unknown one is first
 * closed (no error when it does not exist: a failed pipeline may or may not have parsed it) and
 * parsed under its name.
 */
function statementMessages(statement: BoundStatement, known: Set<string>, used: string[]): Buffer[] {
  if (!statement.prepare) return executeMessages(statement.sql, statement.parameters);
  let name = copyPreparedNames.get(statement.sql);
  if (name === undefined) {
    name = `typeorm_checkpoint_copy_${copyPreparedNames.size + 1}`;
    copyPreparedNames.set(statement.sql, name);
  }
  used.push(name);
  const bind = bindMessage(name, statement.parameters);
  if (known.has(name)) return [bind, EXECUTE];
  return [serialize.close({ type: 'S', name }), serialize.parse({ name, text: statement.sql }), bind, EXECUTE];
}

const copyStatements = new Map<string, { sql: string; messages: Buffer }>();

/**
 * Parse, Bind and Execute of the COPY … FROM STDIN of `table` and `columns`, made once. Unnamed:
 * a named one would fail a caller's transaction on a connection that dropped it (DEALLOCATE ALL).
 */
function copyStatement(table: string, columns: string[]): { sql: string; messages: Buffer } {
  const key = JSON.stringify([table, columns]);
  let statement = copyStatements.get(key);
  if (!statement) {
    const sql = `COPY ${doubleQuote(table)} (${columns.map(doubleQuote).join(', ')}) FROM STDIN`;
    statement = { sql, messages: Buffer.concat(executeMessages(sql, [])) };
    copyStatements.set(key, statement);
  }
  return statement;
}

/** The pg connection's socket, as a query object passed to `client.query` sees it. */
interface PgConnection {
  stream: { cork(): void; uncork(): void; write(chunk: Buffer): boolean };
}

/**
 * A pipeline of extended-protocol messages ending in Sync, sent as one write through pg's query
 * queue (pg hands a query object with `submit` the connection, as pg-copy-streams does): the
 * command tags arrive in order, then ReadyForQuery — or an ErrorResponse, after which the server
 * skips the rest up to the Sync.
 */
class MessagePipeline {
  readonly tags: string[] = [];
  readonly done: Promise<void>;
  private settle!: (error?: unknown) => void;

  constructor(private readonly messages: Buffer[]) {
    this.done = new Promise<void>((resolve, reject) => (this.settle = (error) => (error === undefined ? resolve() : reject(error))));
  }

  submit(connection: PgConnection): void {
    connection.stream.cork();
    for (const message of this.messages) connection.stream.write(message);
    connection.stream.uncork();
  }

  /** pg wraps it with its query timeout, when one is configured. */
  callback(): void {
    // Settled through handleReadyForQuery / handleError.
  }

  handleCommandComplete(message: { text: string }): void {
    this.tags.push(message.text);
  }

  handleError(error: unknown): void {
    this.settle(error ?? new Error('query failed'));
  }

  handleReadyForQuery(): void {
    this.settle();
  }

  // Messages a COPY pipeline does not produce, or needs nothing from.
  handleCopyInResponse(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}

/**
 * PostgreSQL's bulk path on the runner's own connection (its transaction): `around.before`, the
 * rows in COPY FROM STDIN statements of `COPY_ROWS_PER_STATEMENT` rows, `around.after`, all in
 * one round trip. Each statement is logged through the DataSource's logger (the COPY once), as
 * TypeORM logs its own queries.
 */
export async function copyFromStdin(runner: QueryRunner, table: string, columns: string[], rows: CopyRows, around: CopyAround = {}): Promise<void> {
  const client = await pgClientOf<{ query(query: MessagePipeline): unknown }>(runner);
  let known = preparedOnClient.get(client);
  if (!known) {
    known = new Set();
    preparedOnClient.set(client, known);
  }
  const used: string[] = [];
  const before = around.before ?? [];
  const after = around.after ?? [];
  const copy = copyStatement(table, columns);
  const logger = runner.connection.logger;
  for (const statement of before) logger.logQuery(statement.sql, statement.parameters, runner);
  if (rows.rows > 0) logger.logQuery(copy.sql, [], runner);
  for (const statement of after) logger.logQuery(statement.sql, statement.parameters, runner);
  const messages = before.flatMap((statement) => statementMessages(statement, known, used));
  for (let row = 0; row < rows.rows; row += COPY_ROWS_PER_STATEMENT) {
    const from = row === 0 ? 0 : rows.ends[row - 1];
    const data = rows.bytes.subarray(from, rows.ends[Math.min(rows.rows, row + COPY_ROWS_PER_STATEMENT) - 1]);
    // The rows are copied once, into the CopyData message (125 rows at a time).
    messages.push(copy.messages, serialize.copyData(data), COPY_DONE);
  }
  messages.push(...after.flatMap((statement) => statementMessages(statement, known, used)), SYNC);
  const pipeline = new MessagePipeline(messages);
  client.query(pipeline);
  try {
    await pipeline.done;
  } catch (error) {
    for (const name of used) known.delete(name);
    throw error;
  }
  for (const name of used) known.add(name);
}
