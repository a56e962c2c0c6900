import { createInterface } from 'node:readline';
import type { OnApplicationShutdown } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
// In an application: from 'typeorm-checkpoint' and 'typeorm-checkpoint/nestjs'.
import type { FileCheckpoint } from '../../src';
import { FileProcessor, type FileProcessorHandler } from '../../src/nestjs';
import { ProcessedFile } from './processed-file';

export const log = (event: Record<string, unknown>) => console.log(JSON.stringify(event));

// A file whose URL ends in `.hold` waits until a line arrives on stdin: it lets the end-to-end
// test keep files in flight while the application shuts down.
const released = new Promise<void>((resolve) => createInterface({ input: process.stdin }).once('line', () => resolve()));

/** Processes every queued `report` file: one `processed_files` row each, in the file's transaction. */
@FileProcessor({ fileType: 'report', concurrency: 2, batchSize: 10, pollMs: 500 })
export class ReportProcessor implements FileProcessorHandler, OnApplicationShutdown {
  async process(file: FileCheckpoint, tx: EntityManager | undefined) {
    log({ event: 'processing', url: file.fileUrl });
    if (file.fileUrl.endsWith('.hold')) await released;
    const lines = file.fileUrl.length;
    await tx!.getRepository(ProcessedFile).insert({ fileUrl: file.fileUrl, lines });
    log({ event: 'processed', url: file.fileUrl });
    return { totalRows: lines, filteredRows: 0, persistedRows: lines };
  }

  /** After the worker has stopped (CheckpointModule stops it before application shutdown). */
  onApplicationShutdown(signal?: string) {
    log({ event: 'shutdown', signal });
  }
}
