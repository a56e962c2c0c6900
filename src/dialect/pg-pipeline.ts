import { serialize } from 'pg-protocol';
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

  // Messages whose content the library's pipelines need nothing from.
  handleCopyInResponse(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}

/**
 * Builds the messages of one pipeline on one connection: statements of the library's own (prepared
 * ones once per connection) and prebuilt messages, then `send` writes them with a Sync.
 */
export class PipelineBuilder {
  private readonly messages: Buffer[] = [];
  private readonly used: string[] = [];
  private sent: MessagePipeline | undefined;

  private constructor(
    private readonly runner: QueryRunner,
    private readonly client: { query(query: MessagePipeline): unknown },
    private readonly known: Set<string>,
  ) {}

  static async on(runner: QueryRunner): Promise<PipelineBuilder> {
    const client = await pgClientOf<{ query(query: MessagePipeline): unknown }>(runner);
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
   * exist: a failed pipeline may or may not have parsed it) and parsed under its name.
   */
  statement(statement: BoundStatement): this {
    this.log(statement.sql, statement.parameters);
    if (!statement.prepare) {
      this.messages.push(...executeMessages(statement.sql, statement.parameters));
      return this;
    }
    let name = pipelinePreparedNames.get(statement.sql);
    if (name === undefined) {
      name = `typeorm_checkpoint_pipeline_${pipelinePreparedNames.size + 1}`;
      pipelinePreparedNames.set(statement.sql, name);
    }
    this.used.push(name);
    const bind = bindMessage(name, statement.parameters);
    if (this.known.has(name)) this.messages.push(bind, EXECUTE);
    else this.messages.push(serialize.close({ type: 'S', name }), serialize.parse({ name, text: statement.sql }), bind, EXECUTE);
    return this;
  }

  /** Adds prebuilt messages (`sql`, when given, is logged). */
  raw(messages: Buffer, sql?: string): this {
    if (sql !== undefined) this.log(sql, []);
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

  /** Sends everything with a Sync in one write; resolves with the command tags, or rejects with the first error. */
  async send(): Promise<string[]> {
    const pipeline = new MessagePipeline([...this.messages, SYNC]);
    this.sent = pipeline;
    this.client.query(pipeline);
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
  const client = await pgClientOf<{ query(query: MessagePipeline): unknown }>(runner);
  runner.connection.logger.logQuery(sql, [], runner);
  const pipeline = new MessagePipeline([message]);
  client.query(pipeline);
  await pipeline.done;
}
