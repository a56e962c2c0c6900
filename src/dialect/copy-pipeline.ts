import { DatabaseError, serialize } from 'pg-protocol';
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
  /**
   * Pipelined (a transaction's pipeline on a connection the caller holds): everything up to `after`
   * is sent at once, even while the connection still runs the pipeline before it, but `after` only
   * once that one succeeded and `proceed` resolved to true; otherwise the pipeline ends without
   * `after` and fails with `AbandonedPipeline` (the caller rolls its transaction back). `proceed`
   * must not wait for anything else on this connection.
   */
  proceed?: Promise<boolean>;
  /** Called once the pipeline is on its way: a pipeline sent after it is sent after it on the wire. */
  onSent?: () => void;
}

/** A pipelined transaction ended before `after`: the pipeline before it failed, or `proceed` resolved to false. */
export class AbandonedPipeline extends Error {
  constructor() {
    super('The pipeline was abandoned before its last statements.');
  }
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

/** The pipeline last handed to each pg client: the one a gated pipeline waits for. */
const lastPipelines = new WeakMap<object, MessagePipeline>();

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
  stream: { cork(): void; uncork(): void; write(chunk: Buffer): boolean; writable?: boolean };
}

/** The events of pg's connection a failed pipeline waits for. */
interface PgEvents {
  on(event: 'readyForQuery' | 'end', listener: () => void): unknown;
  off(event: 'readyForQuery' | 'end', listener: () => void): unknown;
}

/** The pg client as a pipeline uses it; `_queryQueue` (pg 8's queue of queries not yet sent) may be absent. */
interface PgClient {
  query(query: MessagePipeline): unknown;
  connection?: PgConnection;
  _queryQueue?: unknown[];
}

/**
 * A pipeline of extended-protocol messages ending in Sync, sent as one write through pg's query
 * queue (pg hands a query object with `submit` the connection, as pg-copy-streams does): the
 * command tags arrive in order, then ReadyForQuery — or an ErrorResponse, after which the server
 * skips the rest up to the Sync. A gated pipeline (`proceed`) may write its head earlier
 * (`sendHead`) and decides on its tail when pg submits it, i.e. once the pipeline before it ended.
 */
class MessagePipeline {
  readonly tags: string[] = [];
  readonly done: Promise<void>;
  failed = false;
  finished = false;
  private headSent = false;
  private complete = false;
  // Heads of pipelines sent behind this one, written right after this one's last message.
  private readonly behind: (() => void)[] = [];
  private abandoned = false;
  private error: unknown = undefined;
  private settle!: (error?: unknown) => void;

  constructor(
    private readonly head: Buffer[],
    private readonly tail: Buffer[] = [],
    private readonly previous: MessagePipeline | null = null,
    private readonly proceed: Promise<boolean> | null = null,
  ) {
    this.done = new Promise<void>((resolve, reject) => (this.settle = (error) => (error === undefined ? resolve() : reject(error))));
  }

  /**
   * Runs `send` (which writes another pipeline's head) once this pipeline's messages are all on
   * the wire, COMMIT included; never when it ends without them (the one behind is abandoned then).
   */
  sendBehind(send: () => void): void {
    if (this.complete) send();
    else if (!this.failed && !this.finished) this.behind.push(send);
  }

  /** Writes the head now: every message pg sends before this pipeline's is on the wire already. */
  sendHead(connection: PgConnection): void {
    this.headSent = true;
    connection.stream.cork();
    for (const message of this.head) connection.stream.write(message);
    connection.stream.uncork();
  }

  /** pg hands over the connection: the pipeline before this one has ended. */
  submit(connection: PgConnection): void {
    if (this.proceed === null) this.finish(connection, true);
    else if (this.previous?.failed) this.finish(connection, false);
    else {
      this.proceed.then(
        (proceed) => this.finish(connection, proceed),
        () => this.finish(connection, false),
      );
    }
  }

  /** Writes the rest, ending in Sync; an abandoned pipeline sends no more than the Sync. */
  private finish(connection: PgConnection, proceed: boolean): void {
    // The connection broke meanwhile: pg has failed this query already.
    if (this.finished || connection.stream.writable === false) return;
    this.abandoned = !proceed;
    // A head that failed on its own needs only the Sync that ends the server's skipping.
    const complete = proceed && !this.failed;
    // A pipeline after an abandoned one must not commit either.
    if (this.abandoned) this.failed = true;
    connection.stream.cork();
    if (complete && !this.headSent) for (const message of this.head) connection.stream.write(message);
    if (complete) for (const message of this.tail) connection.stream.write(message);
    connection.stream.write(SYNC);
    connection.stream.uncork();
    this.complete = complete;
    if (complete) for (const send of this.behind.splice(0)) send();
  }

  /** pg wraps it with its query timeout, when one is configured. */
  callback(): void {
    // Settled through handleReadyForQuery.
  }

  handleCommandComplete(message: { text: string }): void {
    this.tags.push(message.text);
  }

  /**
   * pg drops the query at an ErrorResponse; the pipeline settles at the ReadyForQuery after it
   * (once pg has handed the connection to the next query, so a ROLLBACK queues behind a pipeline
   * sent earlier), or at once when the connection broke.
   */
  handleError(error: unknown, connection?: PgEvents): void {
    this.failed = true;
    this.error ??= error ?? new Error('query failed');
    if (!(error instanceof DatabaseError) || !connection) {
      this.handleReadyForQuery();
      return;
    }
    // A FATAL error is followed by the end of the connection, not by ReadyForQuery.
    const ended = () => {
      connection.off('readyForQuery', ended);
      connection.off('end', ended);
      this.handleReadyForQuery();
    };
    connection.on('readyForQuery', ended);
    connection.on('end', ended);
  }

  /**
   * Settles only now, so pg has handed the connection to the next query before the caller reacts
   * (a ROLLBACK then queues behind a pipelined successor, which was sent first).
   */
  handleReadyForQuery(): void {
    if (this.finished) return;
    this.finished = true;
    // What an abandoned head ran into (the failed transaction before it) is no error of its own.
    if (this.abandoned) this.settle(new AbandonedPipeline());
    else this.settle(this.failed ? this.error : undefined);
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
  const client = await pgClientOf<PgClient>(runner);
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
  const tail = after.flatMap((statement) => statementMessages(statement, known, used));
  const last = lastPipelines.get(client);
  const previous = around.proceed && last && !last.finished ? last : null;
  let pipeline: MessagePipeline;
  if (previous) {
    // Sent behind the pipeline still running: its tail waits for `proceed`, which waits for that
    // one's success, so nothing it needs on this connection can queue behind this one.
    pipeline = new MessagePipeline(messages, tail, previous, around.proceed!);
    // pg sends a query once the one before it ended; with nothing else waiting in its queue, the
    // head can go as soon as the running pipeline has written its last message (its COMMIT may
    // still wait for its own `proceed`: a head written before it would join its transaction).
    const connection = client.connection;
    if (connection && client._queryQueue?.length === 0) previous.sendBehind(() => pipeline.sendHead(connection));
  } else {
    // Nothing of ours runs on the connection: whatever the chunk before does with it after its
    // failure (ROLLBACK, lookups) has to end before `proceed` settles, so wait for it here.
    if (around.proceed && !(await around.proceed)) throw new AbandonedPipeline();
    pipeline = new MessagePipeline([...messages, ...tail]);
  }
  lastPipelines.set(client, pipeline);
  client.query(pipeline);
  around.onSent?.();
  try {
    await pipeline.done;
  } catch (error) {
    for (const name of used) known.delete(name);
    throw error;
  }
  for (const name of used) known.add(name);
}
