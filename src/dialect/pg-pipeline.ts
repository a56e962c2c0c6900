import { DatabaseError, serialize } from 'pg-protocol';
import type { QueryRunner } from 'typeorm';
import { pgClientOf } from './pg-client';

/**
 * A statement of the library's own with its bound parameters (strings, numbers or null); with
 * `prepare`, parsed and planned once per connection (a named statement).
 */
export interface BoundStatement {
  sql: string;
  parameters: (string | number | null)[];
  prepare?: boolean;
}

// Every message comes from pg-protocol's `serialize` (node-postgres' own writer); those without a
// body are the same bytes every time.
export const EXECUTE = serialize.execute();
export const SYNC = serialize.sync();
/** Describe of the unnamed portal: the RowDescription a captured statement's rows are named by. */
const DESCRIBE_PORTAL = serialize.describe({ type: 'P', name: '' });

/** Parameters go as text; pg-protocol's writer takes strings (or null) only. */
const asText = (value: BoundStatement['parameters'][number]) => (value === null ? null : String(value));

/** Bind of `statement` (named, or the unnamed one) to the unnamed portal. */
function bindMessage(statement: string, parameters: BoundStatement['parameters']): Buffer {
  return serialize.bind({ statement, values: parameters, valueMapper: asText });
}

/** Parse, Bind and Execute of an unnamed statement, for the extended query protocol. */
export function executeMessages(sql: string, parameters: BoundStatement['parameters']): Buffer[] {
  return [serialize.parse({ text: sql }), bindMessage('', parameters), EXECUTE];
}

// Names of their own: pg's parsedStatements does not see what a pipeline prepares, so a text
// shared with `executePrepared` under one name could be parsed twice on a connection.
const pipelinePreparedNames = new Map<string, string>();
/** The named statements each pg client is known to hold (added once a pipeline using them succeeded). */
const preparedOnClient = new WeakMap<object, Set<string>>();

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

/** A pipelined transaction ended before its last statements: the pipeline before it failed, or `proceed` resolved to false. */
export class AbandonedPipeline extends Error {
  constructor() {
    super('The pipeline was abandoned before its last statements.');
  }
}

/** The pipeline last handed to each pg client: the one a gated pipeline waits for. */
const lastPipelines = new WeakMap<object, MessagePipeline>();

/**
 * A pipeline of extended-protocol messages ending in Sync (a simple-protocol one: without), sent
 * as one write through pg's query queue (pg hands a query object with `submit` the connection, as
 * pg-copy-streams does): the command tags arrive in order, then ReadyForQuery — or an
 * ErrorResponse, after which the server skips the rest up to the Sync. A gated pipeline
 * (`proceed`) may write its head earlier (`sendHead`) and decides on its tail when pg submits it,
 * i.e. once the pipeline before it ended.
 */
class MessagePipeline {
  readonly tags: string[] = [];
  /** The rows of the statement at `captureAt` (0-based, in the order sent): column names, then each row's text values. */
  readonly captured: { names: string[]; rows: (string | null)[][] } = { names: [], rows: [] };
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
    private head: Buffer[],
    // Let go of once written (`previous` and the messages): the last pipeline of a connection
    // is remembered, and must not keep every one before it alive.
    private options: { tail?: Buffer[]; previous?: MessagePipeline; proceed?: Promise<boolean>; sync?: boolean } = {},
    private readonly captureAt = -1,
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
    const { proceed, previous } = this.options;
    if (proceed === undefined) this.finish(connection, true);
    else if (previous?.failed) this.finish(connection, false);
    else {
      proceed.then(
        (go) => this.finish(connection, go),
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
    if (complete) for (const message of this.options.tail ?? []) connection.stream.write(message);
    if (this.options.sync !== false) connection.stream.write(SYNC);
    connection.stream.uncork();
    this.head = [];
    this.options = {};
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
    this.head = [];
    this.options = {};
    // What an abandoned head ran into (the failed transaction before it) is no error of its own.
    if (this.abandoned) this.settle(new AbandonedPipeline());
    else this.settle(this.failed ? this.error : undefined);
  }

  // The statement whose rows are wanted is the one whose command tag comes next.
  handleRowDescription(message: { fields: { name: string }[] }): void {
    if (this.tags.length === this.captureAt) this.captured.names = message.fields.map((field) => field.name);
  }

  handleDataRow(message: { fields: (string | null)[] }): void {
    if (this.tags.length === this.captureAt) this.captured.rows.push(message.fields);
  }

  // Messages whose content the library's pipelines need nothing from.
  handleCopyInResponse(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}

/**
 * A pipelined transaction on a connection the caller holds: everything up to the builder's tail is
 * sent at once, even while the connection still runs the pipeline before it, but the tail only once
 * that one succeeded and `proceed` resolved to true; otherwise the pipeline ends without its tail
 * and fails with `AbandonedPipeline` (the caller rolls its transaction back). `proceed` must not
 * wait for anything else on this connection. `onSent` is called once the pipeline is on its way: a
 * pipeline sent after it is sent after it on the wire.
 */
export interface PipelineGate {
  proceed?: Promise<boolean>;
  onSent?: () => void;
}

/**
 * Builds the messages of one pipeline on one connection: statements of the library's own (prepared
 * ones once per connection) and prebuilt messages, then `send` writes them with a Sync.
 */
export class PipelineBuilder {
  private readonly head: Buffer[] = [];
  private tail: Buffer[] | undefined;
  private readonly used: string[] = [];
  private sent: MessagePipeline | undefined;
  /** Statements added so far. */
  private count = 0;
  private captureAt = -1;

  private constructor(
    private readonly runner: QueryRunner,
    private readonly client: PgClient,
    private readonly known: Set<string>,
  ) {}

  static async on(runner: QueryRunner): Promise<PipelineBuilder> {
    const client = await pgClientOf<PgClient>(runner);
    let known = preparedOnClient.get(client);
    if (!known) {
      known = new Set();
      preparedOnClient.set(client, known);
    }
    return new PipelineBuilder(runner, client, known);
  }

  /**
   * Adds `statement`, logged through the DataSource's logger as TypeORM logs its own queries: a
   * known named statement is only bound; an unknown one is first closed (no error when it does not
   * exist: a failed pipeline may or may not have parsed it) and parsed under its name. With
   * `capture`, its rows are kept (see `rows`).
   */
  statement(statement: BoundStatement, logged = true, capture = false): this {
    if (capture) this.captureAt = this.count;
    this.count += 1;
    if (logged) this.log(statement.sql, statement.parameters);
    const execute = capture ? [DESCRIBE_PORTAL, EXECUTE] : [EXECUTE];
    if (!statement.prepare) {
      this.messages.push(serialize.parse({ text: statement.sql }), bindMessage('', statement.parameters), ...execute);
      return this;
    }
    let name = pipelinePreparedNames.get(statement.sql);
    if (name === undefined) {
      name = `typeorm_checkpoint_pipeline_${pipelinePreparedNames.size + 1}`;
      pipelinePreparedNames.set(statement.sql, name);
    }
    this.used.push(name);
    const bind = bindMessage(name, statement.parameters);
    if (this.known.has(name)) this.messages.push(bind, ...execute);
    else this.messages.push(serialize.close({ type: 'S', name }), serialize.parse({ name, text: statement.sql }), bind, ...execute);
    return this;
  }

  /** Adds prebuilt messages; `sql`, when given, is logged, and the messages count as that one statement. */
  raw(messages: Buffer, sql?: string): this {
    if (sql !== undefined) {
      this.count += 1;
      this.log(sql, []);
    }
    this.messages.push(messages);
    return this;
  }

  log(sql: string, parameters: unknown[]): void {
    this.runner.connection.logger.logQuery(sql, parameters, this.runner);
  }

  /** Statements that completed (before an error, the ones ahead of the failing one). */
  get completed(): number {
    return this.sent?.tags.length ?? 0;
  }

  /** The rows of the statement added with `capture` (text values by column name), once sent. */
  get rows(): Record<string, string | null>[] {
    const captured = this.sent?.captured;
    if (!captured) return [];
    return captured.rows.map((values) => {
      const row: Record<string, string | null> = {};
      for (const [i, name] of captured.names.entries()) row[name] = values[i];
      return row;
    });
  }

  /** Where added messages go: the head, or the tail once `startTail` was called. */
  private get messages(): Buffer[] {
    return this.tail ?? this.head;
  }

  /** What is added from now on is the tail: the part a gated `send` holds back until it may proceed. */
  startTail(): this {
    this.tail = [];
    return this;
  }

  /**
   * Sends everything with a Sync in one write; resolves with the command tags, or rejects with the
   * first error. With a `gate` (see PipelineGate), the head may go while the connection still runs
   * the pipeline before, and the tail only once that one succeeded and `proceed` said so.
   */
  async send(gate: PipelineGate = {}): Promise<string[]> {
    const client = this.client;
    const head = this.head;
    const tail = this.tail ?? [];
    const last = lastPipelines.get(client);
    const previous = gate.proceed && last && !last.finished ? last : undefined;
    let pipeline: MessagePipeline;
    if (previous) {
      // Sent behind the pipeline still running: its tail waits for `proceed`, which waits for that
      // one's success, so nothing it needs on this connection can queue behind this one.
      pipeline = new MessagePipeline(head, { tail, previous, proceed: gate.proceed }, this.captureAt);
      // pg sends a query once the one before it ended; with nothing else waiting in its queue, the
      // head can go as soon as the running pipeline has written its last message (its COMMIT may
      // still wait for its own `proceed`: a head written before it would join its transaction).
      const connection = client.connection;
      if (connection && client._queryQueue?.length === 0) previous.sendBehind(() => pipeline.sendHead(connection));
    } else {
      // Nothing of ours runs on the connection: whatever the pipeline before did with it after its
      // failure (ROLLBACK, lookups) has ended before `proceed` settles, so wait for it here.
      if (gate.proceed && !(await gate.proceed)) throw new AbandonedPipeline();
      pipeline = new MessagePipeline([...head, ...tail], {}, this.captureAt);
    }
    lastPipelines.set(client, pipeline);
    this.sent = pipeline;
    client.query(pipeline);
    gate.onSent?.();
    try {
      await pipeline.done;
    } catch (error) {
      for (const name of this.used) this.known.delete(name);
      throw error;
    }
    for (const name of this.used) this.known.add(name);
    return pipeline.tags;
  }
}

/** Runs one simple-protocol statement (no parameters: BEGIN, ROLLBACK) on the runner's connection, logged. */
export async function simpleQuery(runner: QueryRunner, message: Buffer, sql: string): Promise<void> {
  const client = await pgClientOf<PgClient>(runner);
  runner.connection.logger.logQuery(sql, [], runner);
  const pipeline = new MessagePipeline([message], { sync: false });
  client.query(pipeline);
  await pipeline.done;
}
