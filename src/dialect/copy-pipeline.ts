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

/** A message of PostgreSQL's frontend protocol: type, length (itself included), body. */
function frontendMessage(type: string, ...body: Buffer[]): Buffer {
  const length = body.reduce((sum, part) => sum + part.length, 4);
  const head = Buffer.allocUnsafe(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(length, 1);
  return Buffer.concat([head, ...body]);
}

const cString = (text: string) => Buffer.from(`${text}\0`);
const int16 = (value: number) => Buffer.from([(value >> 8) & 0xff, value & 0xff]);

function int32(value: number): Buffer {
  const out = Buffer.allocUnsafe(4);
  out.writeInt32BE(value);
  return out;
}

/** Bind (text parameters) of `statement` (named, or the unnamed one) to the unnamed portal. */
function bindMessage(statement: string, parameters: BoundStatement['parameters']): Buffer {
  const values = parameters.map((value) => {
    if (value === null) return int32(-1);
    const text = Buffer.from(String(value));
    return Buffer.concat([int32(text.length), text]);
  });
  return frontendMessage('B', cString(''), cString(statement), int16(0), int16(values.length), ...values, int16(0));
}

const EXECUTE = frontendMessage('E', cString(''), int32(0));

/** Parse, Bind and Execute of an unnamed statement, for the extended query protocol. */
function executeMessages(sql: string, parameters: BoundStatement['parameters']): Buffer[] {
  return [frontendMessage('P', cString(''), cString(sql), int16(0)), bindMessage('', parameters), EXECUTE];
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
  return [frontendMessage('C', Buffer.from('S'), cString(name)), frontendMessage('P', cString(name), cString(statement.sql), int16(0)), bind, EXECUTE];
}

const COPY_DONE = frontendMessage('c');
const SYNC = frontendMessage('S');
const copyStatements = new Map<string, Buffer>();

/** Parse, Bind and Execute of a COPY … FROM STDIN, made once per table and columns. */
function copyStatement(table: string, columns: string[]): Buffer {
  const sql = `COPY ${doubleQuote(table)} (${columns.map(doubleQuote).join(', ')}) FROM STDIN`;
  let messages = copyStatements.get(sql);
  if (!messages) {
    messages = Buffer.concat(executeMessages(sql, []));
    copyStatements.set(sql, messages);
  }
  return messages;
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
 * one round trip.
 */
export async function copyFromStdin(runner: QueryRunner, table: string, columns: string[], rows: CopyRows, around: CopyAround = {}): Promise<void> {
  const client = await pgClientOf<{ query(query: MessagePipeline): unknown }>(runner);
  let known = preparedOnClient.get(client);
  if (!known) {
    known = new Set();
    preparedOnClient.set(client, known);
  }
  const used: string[] = [];
  const messages = (around.before ?? []).flatMap((statement) => statementMessages(statement, known, used));
  const copy = copyStatement(table, columns);
  for (let row = 0; row < rows.rows; row += COPY_ROWS_PER_STATEMENT) {
    const from = row === 0 ? 0 : rows.ends[row - 1];
    const data = rows.bytes.subarray(from, rows.ends[Math.min(rows.rows, row + COPY_ROWS_PER_STATEMENT) - 1]);
    messages.push(copy, Buffer.concat([Buffer.from('d'), int32(data.length + 4)]), data, COPY_DONE);
  }
  messages.push(...(around.after ?? []).flatMap((statement) => statementMessages(statement, known, used)), SYNC);
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
