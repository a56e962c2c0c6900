import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { DataSource } from 'typeorm';
// In an application: from 'typeorm-checkpoint'.
import { checkpointEntities, checkpointMigrations, DEFAULT_DATABASE_URL, dataSourceOptionsFromUrl } from '../../src';
import { createApp } from './app';
import { ImportRuns } from './import-runs';

// DATABASE_URL: postgres://…, mysql://… or sqlite:path; PORT 0 picks a free port.
async function main(): Promise<void> {
  const dataSource = new DataSource({
    ...dataSourceOptionsFromUrl(process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL),
    entities: checkpointEntities,
    migrations: checkpointMigrations,
  });
  await dataSource.initialize();
  await dataSource.runMigrations();

  const log = (event: Record<string, unknown>) => console.log(JSON.stringify(event));
  const runs = new ImportRuns(dataSource, log);
  const server = createApp(dataSource, { runs }).listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? '127.0.0.1', () => {
    const { address, port } = server.address() as AddressInfo;
    log({ event: 'listening', url: `http://${address}:${port}` });
  });

  // SIGTERM/Ctrl-C: let each import commit its current chunk, then stop; a later POST resumes it.
  const shutdown = async () => {
    server.close();
    await runs.stopAll();
    await dataSource.destroy();
    log({ event: 'shutdown' });
  };
  process.once('SIGTERM', () => void shutdown());
  process.once('SIGINT', () => void shutdown());
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
