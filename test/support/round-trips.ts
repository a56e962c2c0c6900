import type { EventEmitter } from 'node:events';
import type { DataSource } from 'typeorm';
import type { OpenOptions } from './database';
import { SqlLog } from './sql-log';

type Sender = Record<'query' | 'execute', (...args: unknown[]) => unknown>;

/** Wraps a connection's `methods` so that each call counts one round trip. */
function counting(counter: { sent: number }, methods: readonly (keyof Sender)[]) {
  return (connection: Sender) => {
    for (const method of methods) {
      const send = connection[method];
      connection[method] = function (this: unknown, ...args: unknown[]) {
        counter.sent += 1;
        return send.apply(this, args);
      };
    }
  };
}

/**
 * Counts what a PostgreSQL or MySQL/MariaDB DataSource sends on its pooled connections: each
 * `client.query` call (pg) is one statement or one pipeline, each `query`/`execute` call (mysql2)
 * one statement, i.e. one round trip (neither driver sends the next before the last ended).
 */
export function countRoundTrips(dataSource: DataSource): { sent: number } {
  const counter = { sent: 0 };
  const driver = dataSource.driver as unknown as {
    master?: EventEmitter & { _clients?: unknown[] };
    pool?: EventEmitter & { _allConnections?: { toArray(): unknown[] } };
  };
  if (driver.master) {
    const count = counting(counter, ['query']);
    // Clients the pool holds already (the migrations' connection), and every one it opens later.
    for (const client of (driver.master._clients ?? []) as Sender[]) count(client);
    driver.master.on('connect', count);
  } else if (driver.pool) {
    const count = counting(counter, ['query', 'execute']);
    for (const connection of (driver.pool._allConnections?.toArray() ?? []) as Sender[]) count(connection);
    driver.pool.on('connection', count);
  } else {
    throw new Error(`countRoundTrips: no pg or mysql2 pool on a ${dataSource.options.type} DataSource`);
  }
  return counter;
}

/**
 * A new DataSource of `database` whose statements are counted, for "no statement added per
 * batch" checks: on SQLite each logged statement (one call each), elsewhere each round trip.
 */
export async function statementCounter(
  database: { open(options?: OpenOptions): Promise<DataSource> },
  driver: string,
): Promise<{ dataSource: DataSource; sent: () => number }> {
  if (driver === 'sqlite') {
    const log = new SqlLog();
    const dataSource = await database.open({ logger: log });
    return { dataSource, sent: () => log.queries.length };
  }
  const dataSource = await database.open();
  const counter = countRoundTrips(dataSource);
  return { dataSource, sent: () => counter.sent };
}
