import type { EventEmitter } from 'node:events';
import type { DataSource } from 'typeorm';
import { doubleQuote } from './shared-sql';

/** The few members of a pg `Client` that listening needs. */
interface ListeningClient extends EventEmitter {
  connect(): Promise<void>;
  query(text: string): Promise<unknown>;
  end(): Promise<void>;
}

/** The pool TypeORM's postgres driver keeps: its options are the ones a new pg Client takes. */
interface PgDriver {
  master?: { options: Record<string, unknown> };
  postgres: { Client: new (options: Record<string, unknown>) => ListeningClient };
}

/** Longest pause between attempts to re-establish a lost listening connection. */
const MAX_RECONNECT_PAUSE_MS = 2000;

/**
 * `LISTEN channel` on one dedicated connection (a new pg Client with the DataSource's pool
 * options, so it never takes a pooled connection from the application). A lost connection is
 * reported and re-established with a growing pause; `wake` is called once it listens again, since
 * notifications sent meanwhile are lost.
 */
export function listenOnPostgres(
  dataSource: DataSource,
  channel: string,
  wake: () => void,
  onError: (error: unknown) => void,
): { close(): Promise<void> } {
  const driver = dataSource.driver as unknown as PgDriver;
  let closed = false;
  let client: ListeningClient | undefined;
  let failures = 0;
  let retry: NodeJS.Timeout | undefined;

  const lost = (current: ListeningClient, error: unknown) => {
    if (client !== current || closed) return;
    client = undefined;
    current.end().catch(() => undefined);
    onError(error);
    failures += 1;
    retry = setTimeout(() => void connect(), Math.min(MAX_RECONNECT_PAUSE_MS, 50 * 2 ** failures));
  };

  const connect = async () => {
    retry = undefined;
    if (closed) return;
    const current = new driver.postgres.Client({ ...(driver.master?.options ?? {}) });
    client = current;
    current.on('notification', () => wake());
    current.on('error', (error: unknown) => lost(current, error));
    current.on('end', () => lost(current, new Error('the listening connection ended')));
    try {
      await current.connect();
      await current.query(`LISTEN ${doubleQuote(channel)}`);
    } catch (error) {
      lost(current, error);
      return;
    }
    if (closed) {
      await current.end().catch(() => undefined);
      return;
    }
    if (failures > 0) wake();
    failures = 0;
  };
  void connect();

  return {
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      const current = client;
      client = undefined;
      if (current) await current.end().catch(() => undefined);
    },
  };
}
