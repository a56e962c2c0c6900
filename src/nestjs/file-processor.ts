import { applyDecorators, Injectable, SetMetadata } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { FileCheckpoint } from '../../entities/FileCheckpoint';
import type { FileHandlerContext, HandlerStats } from '../claims/worker';
import { InvalidArgumentError } from '../core/errors';

/** How `CheckpointModule` runs a `@FileProcessor` provider: the `work()` options it starts it with. */
export interface FileProcessorOptions {
  /** Only files of this type. Default: any type. */
  fileType?: string;
  /** Files in flight in this process (default 1). */
  concurrency?: number;
  /** Files claimed per claim (default 10). */
  batchSize?: number;
  /** Files committed per transaction (default 1). */
  commitEvery?: number;
  /** Idle poll interval in milliseconds (default 1000); PostgreSQL wakes workers at once on new files anyway. */
  pollMs?: number;
  /** The `name` given to `TypeOrmModule.forRoot` whose CheckpointModule runs it; omit for the default. */
  dataSource?: string;
}

/** What a `@FileProcessor` class implements: one claimed file, its writes through `tx`. */
export interface FileProcessorHandler {
  /**
   * Processes one claimed file; writes through `tx` commit with its completion. Throwing fails the file (it is retried while it has
   * retries left). `ctx.signal` aborts when the file is cancelled (`CheckpointManager.cancel`).
   */
  process(file: FileCheckpoint, tx: EntityManager | undefined, ctx: FileHandlerContext): Promise<HandlerStats> | HandlerStats;
}

export const FILE_PROCESSOR = Symbol('typeorm-checkpoint:file-processor');

const KNOWN = new Set(['fileType', 'concurrency', 'batchSize', 'commitEvery', 'pollMs', 'dataSource']);

/**
 * Marks a provider whose `process(file, tx)` handles claimed files: `CheckpointModule` starts a
 * worker (`manager.work`) for it when the application starts and stops it gracefully on shutdown.
 * The class is also made `@Injectable()`.
 */
export function FileProcessor(options: FileProcessorOptions = {}): ClassDecorator {
  if (typeof options !== 'object' || options === null)
    throw new InvalidArgumentError('@FileProcessor(options): options must be an object.');
  const unknown = Object.keys(options).filter((key) => !KNOWN.has(key));
  if (unknown.length > 0) throw new InvalidArgumentError(`@FileProcessor: unknown option(s) ${unknown.join(', ')}.`);
  return applyDecorators(Injectable(), SetMetadata(FILE_PROCESSOR, { ...options }));
}
