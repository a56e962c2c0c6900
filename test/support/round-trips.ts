import type { EventEmitter } from 'node:events';
import type { DataSource } from 'typeorm';

/**
 * Counts what a PostgreSQL DataSource sends on its pooled connections: each `client.query` call is
 * one statement or one pipeline, i.e. one round trip (pg sends the next only once the last ended).
 */
export function countRoundTrips(dataSource: DataSource): { sent: number } {
  const counter = { sent: 0 };
  const pool = (dataSource.driver as unknown as { master: EventEmitter & { _clients?: unknown[] } }).master;
  const count = (client: { query: (...args: unknown[]) => unknown }) => {
    const query = client.query;
    client.query = function (this: unknown, ...args: unknown[]) {
      counter.sent += 1;
      return query.apply(this, args);
    };
  };
  // Clients the pool holds already (the migrations' connection), and every one it opens later.
  for (const client of (pool._clients ?? []) as Parameters<typeof count>[0][]) count(client);
  pool.on('connect', count);
  return counter;
}
