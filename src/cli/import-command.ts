import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import type { DataSource } from 'typeorm';
import { CancelledError, CheckpointError, InvalidArgumentError, InvalidInputError, PausedError } from '../core/errors';
import { fileDigest, type ImportFileResult, type ImportFormat, importFile, replaceImport } from '../import/import-file';
import { formatOf } from '../import/read-rows';
import type { RecordsOptions } from '../import/records/import-records';
import type { CsvOptions } from '../import/records/record-readers';
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
  /** Records mode: the table (or entity name) to import into, columns from the catalogue. */
  into?: string;
  key?: string[] | false;
  conflict?: 'error' | 'skip' | 'update';
  skipInvalid?: boolean;
  maxInvalid?: number;
  delimiter?: string;
  columns?: string[];
  null?: string[];
  create?: boolean;
  check?: boolean;
}

/** The records-mode options of importFile the command line asks for. */
function recordsOptions(options: ImportCommandOptions): RecordsOptions {
  if (options.maxInvalid !== undefined && !options.skipInvalid) throw new InvalidArgumentError('--max-invalid needs --skip-invalid.');
  const csv: CsvOptions = {
    ...(options.delimiter === undefined ? {} : { delimiter: options.delimiter }),
    ...(options.columns === undefined ? {} : { columns: options.columns }),
  };
  const records: RecordsOptions = {
    ...(options.key === undefined ? {} : { key: options.key }),
    ...(options.conflict === undefined ? {} : { conflict: options.conflict }),
    ...(options.skipInvalid ? { invalid: 'skip' as const } : {}),
    ...(options.maxInvalid === undefined ? {} : { maxInvalid: options.maxInvalid }),
    ...(Object.keys(csv).length > 0 ? { csv } : {}),
    ...(options.null === undefined || options.null.length === 0 ? {} : { nullIf: options.null }),
    ...(options.create ? { create: true } : {}),
  };
  if (options.into === undefined) {
    if (Object.keys(records).length > 0)
      throw new InvalidArgumentError('--key, --conflict, --skip-invalid, --delimiter, --columns, --null and --create need --into.');
    return {};
  }
  return { into: options.into, ...records };
}

/** `import --check`: pass 1 only, nothing written; the first invalid rows listed. */
async function checkCommand(db: DataSource, path: string, format: ImportFormat, options: ImportCommandOptions): Promise<Outcome> {
  const result = await importFile(db, options.batch, path, { format, size: options.size, check: true, ...recordsOptions(options) });
  const errors = result.errors ?? [];
  const summary = result.summary ?? [];
  const json = {
    command: 'import',
    check: true,
    file: path,
    format,
    rows: result.rows,
    skipped: result.skipped ?? 0,
    invalid: result.invalid ?? 0,
    summary,
    errors,
    ...(result.created ? { created: result.created } : {}),
  };
  // Grouped by field and reason: `population: "" is not an integer — 341 rows, first 899`.
  const lines = [
    `Checked ${basename(path)}: ${result.rows} valid rows, ${result.skipped ?? 0} skipped, ${result.invalid ?? 0} invalid. Nothing was written.`,
    ...(result.created ? [`It would create the table:`, result.created.ddl] : []),
    ...summary.map(
      (group) =>
        `  ${group.field === null ? '' : `${group.field}: `}${group.reason} — ${group.rows} row${group.rows === 1 ? '' : 's'}, first ${group.firstIndex}`,
    ),
  ];
  return success(json, lines);
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
 * same `--replace` command after Ctrl-C resumes instead of starting over. The new file is checked
 * first (pass 1 alone, as `--check` runs it): a file the import would refuse replaces nothing, and
 * the batch keeps the previous file's rows.
 */
async function replaceIfChanged(
  db: DataSource,
  path: string,
  format: ImportFormat,
  options: ImportCommandOptions,
  records: RecordsOptions,
): Promise<boolean> {
  const { batch } = options;
  const stored = await importBatchStatus(db, batch);
  if (stored === null) return false;
  const digest = await fileDigest(path);
  if (stored.digest === digest) return false;
  const checked = await importFile(db, batch, path, { format, size: options.size, check: true, ...records });
  const invalid = checked.invalid ?? 0;
  const allowed = records.invalid === 'skip' ? (records.maxInvalid ?? Infinity) : 0;
  if (invalid > allowed) {
    const first = checked.errors?.[0];
    throw new InvalidInputError(
      `${basename(path)} has ${invalid} invalid row${invalid === 1 ? '' : 's'}${first ? ` (the first: row ${first.index}, ${first.field === null ? '' : `${first.field}: `}${first.reason})` : ''}; ` +
        `batch "${batch}" was not replaced and keeps the previous file's rows. Run import --check to list them.`,
      first?.index,
      first?.field === null || first === undefined ? {} : { field: first.field },
    );
  }
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
    format = formatOf(path.replace(/\.gz$/i, ''), options.format);
  } catch (error) {
    return failure(error, FORMAT_HINT, { command: 'import', batch });
  }
  await assertFile(path);
  const records = recordsOptions(options);
  if (options.check) return checkCommand(db, path, format, options);
  const replaced = options.replace === true ? await replaceIfChanged(db, path, format, options, records) : false;
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
          ...records,
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
  const counts = records.into === undefined ? '' : `, ${result.skipped ?? 0} skipped, ${result.invalid ?? 0} invalid`;
  if (!result.done) {
    const of = totalRows === null ? '' : ` of ${totalRows}`;
    if (result.stopped === 'paused' || result.stopped === 'cancelled') {
      const where = `Import batch "${batch}" is ${result.stopped}; stopped at row ${result.nextIndex}${of} (${result.rows} rows committed by this run${counts}).`;
      const error = result.stopped === 'paused' ? new PausedError(where) : new CancelledError(where);
      const hint =
        result.stopped === 'paused'
          ? `Run \`typeorm-checkpoint resume ${batch}\`, then rerun the same command to go on.`
          : 'A cancelled batch does not run again; `reset` it to start over with this file (--replace starts it over only with another file).';
      return failure(error, hint, json);
    }
    return interrupted(
      `Stopped at row ${result.nextIndex}${of} in batch "${batch}" (${result.rows} rows committed by this run${counts}). ` +
        'Rerun the same command to resume.',
      json,
    );
  }
  const lines = [
    ...(result.created ? ['Created the table:', result.created.ddl] : []),
    `Imported ${basename(path)} into ${records.into === undefined ? '' : `"${records.into}", `}batch "${batch}": ${result.rows} rows this run${counts}, ${result.nextIndex} source rows in total` +
      `${replaced ? ' (replaced the previous file)' : ''}.`,
    `digest ${result.digest}`,
  ];
  return success(json, lines);
}
