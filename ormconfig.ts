import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { checkpointEntities, checkpointMigrations, dataSourceOptionsFromUrl, DEFAULT_DATABASE_URL } from './src';

/** The DataSource used by the CLI and by TypeORM's migration CLI (`typeorm -d ormconfig.ts …`). */
export default new DataSource({
  ...dataSourceOptionsFromUrl(process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL),
  entities: checkpointEntities,
  migrations: checkpointMigrations,
});
