import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DataSource } from 'typeorm';
import { createDashboard } from '../dashboard';
import { type Outcome, success } from './outcome';

export interface DashboardCommandOptions {
  port: number;
  host: string;
  readOnly?: boolean;
}

/**
 * Serves the dashboard until SIGINT/SIGTERM. Prints where it listens as soon as it does (a JSON
 * line with `--json`); binds 127.0.0.1 unless told otherwise: it has no authentication of its own.
 */
export async function dashboardCommand(db: DataSource, options: DashboardCommandOptions, json: boolean): Promise<Outcome> {
  const handler = createDashboard(db, { readOnly: options.readOnly === true });
  const server = createServer((req, res) => void handler(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  const url = `http://${address.includes(':') ? `[${address}]` : address}:${port}/`;
  const readOnly = options.readOnly === true;
  process.stdout.write(
    json
      ? `${JSON.stringify({ ok: true, event: 'listening', url, readOnly })}\n`
      : `Dashboard on ${url}${readOnly ? ' (read-only)' : ''} — Ctrl-C stops it.\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      server.closeAllConnections();
      server.close(() => resolve());
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  return success({ event: 'stopped', url }, ['Dashboard stopped.']);
}
