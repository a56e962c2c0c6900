import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
// In an application: from 'typeorm-checkpoint' and 'typeorm-checkpoint/nestjs'.
import { checkpointMigrations, DEFAULT_DATABASE_URL, dataSourceOptionsFromUrl } from '../../src';
import { CheckpointModule } from '../../src/nestjs';
import { ProcessedFile, ProcessedFiles1764720000001 } from './processed-file';
import { log, ReportProcessor } from './report-processor';

@Module({
  imports: [
    TypeOrmModule.forRoot({
      ...dataSourceOptionsFromUrl(process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL),
      entities: [ProcessedFile],
      autoLoadEntities: true,
      migrations: [...checkpointMigrations, ProcessedFiles1764720000001],
      migrationsRun: true,
      retryAttempts: 0,
    } as TypeOrmModuleOptions),
    CheckpointModule.forRoot(),
  ],
  providers: [ReportProcessor],
})
class AppModule {}

// DATABASE_URL: postgres://…, mysql://… or sqlite:path. A worker process: no HTTP server needed.
async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn', 'log'] });
  // SIGTERM/SIGINT close the application: the processor's worker finishes the files in flight and
  // gives its claimed but unstarted files back before the data source closes.
  app.enableShutdownHooks();
  await app.init();
  log({ event: 'ready' });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
