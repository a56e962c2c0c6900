import { type BeforeApplicationShutdown, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import type { DiscoveryService, Reflector } from '@nestjs/core';
import type { Worker } from '../claims/worker';
import { InvalidArgumentError } from '../core/errors';
import type { CheckpointService } from './checkpoint-service';
import { FILE_PROCESSOR, type FileProcessorHandler, type FileProcessorOptions } from './file-processor';

/**
 * Finds the application's `@FileProcessor` providers (for this module's data source) and runs a
 * worker for each: started on application bootstrap, stopped before shutdown closes the data
 * source (files in flight finish, claimed but unstarted ones are given back).
 */
export class FileProcessorHost implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly workers: { name: string; worker: Worker }[] = [];
  private readonly logger = new Logger('FileProcessor');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly reflector: Reflector,
    private readonly service: CheckpointService,
    private readonly dataSource: string | undefined,
  ) {}

  onApplicationBootstrap(): void {
    const seen = new Set<object>();
    for (const wrapper of this.discovery.getProviders()) {
      const instance = wrapper.instance as Partial<FileProcessorHandler> | undefined;
      if (!instance || typeof instance !== 'object' || !wrapper.metatype || seen.has(instance)) continue;
      const options = this.reflector.get<FileProcessorOptions | undefined>(FILE_PROCESSOR, wrapper.metatype as never);
      if (!options || options.dataSource !== this.dataSource) continue;
      seen.add(instance);
      const process = instance.process;
      if (typeof process !== 'function') {
        throw new InvalidArgumentError(`@FileProcessor ${String(wrapper.name)} has no process(file, tx) method.`);
      }
      const { dataSource: _ignored, ...work } = options;
      const manager = this.service.createManager();
      const name = String(wrapper.name);
      const onError = (error: unknown, file?: { fileUrl: string }) =>
        this.logger.error(`${name}${file ? ` failed on ${file.fileUrl}` : ''}: ${error instanceof Error ? error.message : String(error)}`);
      this.workers.push({ name, worker: manager.work((file, tx, ctx) => process.call(instance, file, tx, ctx), { ...work, onError }) });
      this.logger.log(`started ${name}`);
    }
  }

  async beforeApplicationShutdown(): Promise<void> {
    await Promise.all(
      this.workers.splice(0).map(async ({ name, worker }) => {
        const stopped = worker.stop();
        this.logger.log(`stopping ${name}`);
        const summary = await stopped;
        this.logger.log(
          `stopped ${name}: ${summary.processed} processed, ${summary.failed} failed, ${summary.cancelled} cancelled, ${summary.claimLost} claims lost`,
        );
      }),
    );
  }
}
