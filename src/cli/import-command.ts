import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import type { DataSource } from 'typeorm';
import { CheckpointError, InvalidArgumentError } from '../core/errors';
import { fileDigest, type ImportFileResult, type ImportFormat, importFile, replaceImport } from '../import/import-file';
import { formatOf } from '../import/read-rows';
import type { Progress } from '../core/progress';
import { importBatchStatus } from './import-batches';
import { stopOnInterrupt } from './interrupt';
import { failure, interrupted, type Outcome, success } from './outcome';
import { createProgressReporter, type ProgressMode } from './progress-reporter';

export interface ImportCommandOptions {
  batch: string;
  format?: ImportFormat;
  size?: number;
  replace?: boolean;
}

const MISMATCH_HINT =
  "Rerun with --replace to delete this batch's imported rows and import this file from the start, or use another --batch id.";
const FORMAT_HINT = 'Pass --format json, ndjson or csv.';
const CHANGED_HINT = 'The file changed while it was being imported; rerun once it no longer changes.';

async function assertFile(path: string): Promise<void> {
  let isFile: boolean;
  try {
    isFile = (await stat(path)).isFile();
  } catch {
    throw new InvalidArgumentError(`Cannot read "${path}": no such file.`);
  }
  if (!isFile) throw new InvalidArgumentError(`"${path}" is not a file.`);
}

/**
 * `--replace` restarts the batch on this file only when its stored digest differs, so rerunning the
 * same `--replace` command after Ctrl-C resumes instead of starting over.
 */
async function replaceIfChanged(db: DataSource, batch: string, path: string): Promise<boolean> {
  const stored = await importBatchStatus(db, batch);
  if (stored === null) return false;
  const digest = await fileDigest(path);
  if (stored.digest === digest) return false;
  await replaceImport(db, batch, digest);
  return true;
}

/** `import <file> --batch <id>`: a digest-guarded, resumable import into `checkpoint_import_items`. */
export async function importCommand(
  db: DataSource,
  path: string,
  options: ImportCommandOptions,
  progressMode: ProgressMode,
): Promise<Outcome> {
  const { batch } = options;
  let format: ImportFormat;
  try {
    format = formatOf(path, options.format);
  } catch (error) {
    return failure(error, FORMAT_HINT, { command: 'import', batch });
  }
  await assertFile(path);
  const replaced = options.replace === true ? await replaceIfChanged(db, batch, path) : false;
  // Progress counts this run's rows; the bar shows the batch's position, resumed rows included.
  const start = (await importBatchStatus(db, batch))?.nextIndex ?? 0;
  const reporter = createProgressReporter(progressMode, `import ${batch}`, process.stderr);
  const controller = new AbortController();
  let last: Progress | undefined;
  let result: ImportFileResult;
  try {
    result = await stopOnInterrupt(
      controller,
      (message) => process.stderr.write(`\n${message}\n`),
      () =>
        importFile(db, batch, path, {
          format,
          size: options.size,
          signal: controller.signal,
          onProgress(progress) {
            last = progress;
            reporter.update(start + progress.items, progress);
          },
        }),
    );
  } catch (error) {
    if (error instanceof CheckpointError && error.code === 'FINGERPRINT_MISMATCH') {
      return failure(error, options.replace === true ? CHANGED_HINT : MISMATCH_HINT, { command: 'import', batch });
    }
    throw error;
  } finally {
    reporter.stop();
  }
  const totalRows = last?.total ?? (await importBatchStatus(db, batch))?.totalRows ?? null;
  const json = { command: 'import', file: path, format, ...result, totalRows, replaced };
  if (!result.done) {
    const of = totalRows === null ? '' : ` of ${totalRows}`;
    return interrupted(
      `Stopped at row ${result.nextIndex}${of} in batch "${batch}" (${result.rows} rows committed by this run). ` +
        'Rerun the same command to resume.',
      json,
    );
  }
  const lines = [
    `Imported ${basename(path)} into batch "${batch}": ${result.rows} rows this run, ${result.nextIndex} in total` +
      `${replaced ? ' (replaced the previous file)' : ''}.`,
    `digest ${result.digest}`,
  ];
  return success(json, lines);
}
