import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { InvalidArgumentError, InvalidInputError } from '../core/errors';
import { progressSince, type Progress } from '../core/progress';
import { type CopyRows, dialectOf } from '../dialect';
import { dataSourceOf, type Db, joinsTransaction, MAX_ATTEMPTS, transact } from '../core/transaction';
import { traced } from '../core/telemetry';
import { storedIdClash } from './apply-chunk';
import { beginIn, heldBefore } from './begin';
import { checkCsvRows } from './csv-check';
import { DuplicateIds } from './duplicate-ids';
import { validateSize } from './import-all';
import {
  advanceImport,
  bulkInsertItems,
  checkStorableId,
  copyAdvancing,
  copyTransaction,
  lockImport,
  readImport,
  validateBatch,
} from './import-store';
import { duplicateId } from './parse-rows';
import { formatOf, type ImportFormat, isCsvLike, isTsv, readRows, type RowsFormat, separatorOf } from './read-rows';
import type { Row } from './row';
import { newSourceRecord, recordedBlocks, recordingEnded, type SourceRecord, verifiedBlocks } from './source-blocks';
import { afterPreload, idValueRows, Preload, type Preloaded, preloadedSoFar, worthPreloading } from './preload';
import { optionsHash, type ValidatedResume, validatedResume } from './resume';
import { type CsvDataStart, headerOf } from './csv-rows';
import type { JsonStart } from './json-items';
import { csvHeading } from './records/record-readers';
import type { ChunkOrder } from './chunk-in-flight';
import { ChunkRows, fillChunks, type TakenRows } from './chunk-rows';
import { decoded, GZIP } from './gunzipped';
import {
  ChunkPipeline,
  type ChunkOutcome,
  holdsConnection,
  notAtStart,
  pipelinedWrite,
  proceedAfter,
  stoppedBefore,
  unchanged,
} from './chunk-pipeline';
import { importRecords, type RecordsOptions, validateRecordsOptions } from './records/import-records';
import type { RowError, RowErrorGroup } from './records/error-summary';
import { IMPORTS } from '../control/control-store';
import { stopFor, type StopReason } from '../control/job-state';
import { type ControlOptions, LoopControl, validateControlOptions } from '../control/loop-control';

export type { Row } from './row';
export type { ImportFormat } from './read-rows';
export { replaceImport } from './replace-import';
export { fileDigest } from './source-digest';

/**
 * `R`: what a handler gets, `{ id, value }` rows or, in records mode, records (`Record<string, unknown>`).
 * `signal`, `maxRuntimeMs`, `throttle` and `whilePaused` are {@link ControlOptions}: `whilePaused`
 * applies to a call that finds its batch paused before it begins; one paused while it runs returns.
 */
export interface ImportFileOptions<R = Row> extends RecordsOptions, ControlOptions {
  /** Defaults from the file extension (.json, .ndjson/.jsonl, .csv, .tsv: CSV with a tab delimiter; a `.gz` after it is read through gunzip). */
  format?: ImportFormat;
  /** Rows per chunk (one transaction each); default 1000. In records mode, source rows (valid, invalid and skipped alike). */
  size?: number;
  /**
   * Writes a chunk to the application's own tables (in `tx`) instead of `checkpoint_import_items`:
   * `{ id, value }` rows, or records in records mode; `start` is the chunk's first source row.
   */
  handler?: (rows: R[], tx: EntityManager, start: number) => unknown;
  /** Called after each committed chunk. */
  onProgress?(progress: Progress): void;
  /**
   * Commit every chunk synchronously. By default, on PostgreSQL, an import that opens its own
   * transactions commits every chunk but the last without waiting for the WAL flush (see README).
   */
  durable?: boolean;
}

/** `rows` counts the rows written by this call; `nextIndex` is the committed checkpoint. */
export interface ImportFileResult {
  /** The import batch id. */
  batch: string;
  /** SHA-256 hex of the file's bytes as stored (compressed, for `.gz`). */
  digest: string;
  /** The committed checkpoint: the first source row not yet imported. */
  nextIndex: number;
  /** Rows written by this call. */
  rows: number;
  /** True once every row of the file is committed; false after the call stopped before the end. */
  done: boolean;
  /** Why the call returned before the file's end (a pause, a cancel, `maxRuntimeMs`, `signal`); absent when it ran to the end. */
  stopped?: StopReason;
  /**
   * Set, to 0, when the call returned at once because the batch was paused or cancelled before it
   * began (as `eachBatch` returns such a call): it committed no chunk.
   */
  batches?: number;
  /** Set with `batches`, to 0: no row. */
  items?: number;
  /** Records mode (and `check`): rows `map` skipped, this call. */
  skipped?: number;
  /** Records mode (and `check`): invalid rows recorded as rejects (invalid: 'skip'), this call; with `check`, all of the file's. */
  invalid?: number;
  /** With `check`: the first invalid rows (at most 100). */
  errors?: RowError[];
  /** With `check`: every invalid row of the file, grouped by field and reason, most rows first. */
  summary?: RowErrorGroup[];
  /** With `create`: the table this call created (with `check`: would create). */
  created?: {
    /** The CREATE TABLE statement, in the database's own types. */
    ddl: string;
  };
}

const RECORDS_ONLY = ['key', 'map', 'conflict', 'invalid', 'maxInvalid', 'csv', 'nullIf', 'create'] as const;
const DEFAULT_SIZE = 1000;

/** True when the built-in table has a bulk path on `db`'s dialect (COPY on PostgreSQL). */
function bulkPathOf(db: Db): boolean {
  return dialectOf(dataSourceOf(db)).copyRows !== undefined;
}

function validateOptions<R>(options: ImportFileOptions<R>): void {
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('importFile: options must be an object.');
  if (options.handler !== undefined && typeof options.handler !== 'function') {
    throw new InvalidArgumentError('importFile: handler must be a function.');
  }
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') {
    throw new InvalidArgumentError('importFile: onProgress must be a function.');
  }
  validateControlOptions(options, 'importFile');
  if (options.durable !== undefined && typeof options.durable !== 'boolean') {
    throw new InvalidArgumentError('importFile: durable must be a boolean.');
  }
}

/**
 * Imports a JSON-array, NDJSON or CSV file in chunks of `size` rows, each committed with the
 * checkpoint in one transaction, bound to the SHA-256 of the file's bytes; memory stays bounded
 * whatever the file size. Pass 1 streams the file once to digest it and validate every row
 * (including duplicate ids), so an invalid file is rejected before any row is written. Then the
 * import is begun or resumed (another file under the same batch: FINGERPRINT_MISMATCH), and pass 2
 * streams the file again from its start, committing the rows from the checkpoint on; every block
 * it reads must hash as in pass 1, so a file changed under the import is FINGERPRINT_MISMATCH
 * before anything of it is committed. An invalid file throws `INVALID_INPUT` (with `index`, and
 * `field` in records mode); bad options throw `INVALID_ARGUMENT`.
 */
export async function importFile<R = Row>(
  db: Db,
  batch: string,
  path: string,
  options: ImportFileOptions<R> = {},
): Promise<ImportFileResult> {
  validateBatch(batch);
  if (typeof path !== 'string' || path.length === 0) throw new InvalidArgumentError('importFile: path must be a non-empty string.');
  validateOptions(options);
  const gzip = GZIP.test(path);
  const format = formatOf(path.replace(GZIP, ''), options.format);
  // A .tsv file is CSV with a tab delimiter, unless the options say otherwise.
  const tsv = format === 'csv' && isTsv(path.replace(GZIP, ''));
  const size = options.size ?? DEFAULT_SIZE;
  validateSize(size, 'importFile');
  const { handler, onProgress, signal } = options;
  if (options.into !== undefined || options.records === true) {
    if (options.into !== undefined && handler) throw new InvalidArgumentError('importFile: pass into or handler, not both.');
    if (options.into === undefined && !handler && options.check !== true) {
      throw new InvalidArgumentError('importFile: records: true needs a handler to write the records (or into, or check: true).');
    }
    validateRecordsOptions(options);
    const records = handler as ((records: Record<string, unknown>[], tx: EntityManager, start: number) => unknown) | undefined;
    const control = new LoopControl(db, IMPORTS, batch, options);
    const read = tsv && options.csv?.delimiter === undefined ? { ...options, csv: { ...options.csv, delimiter: '\t' } } : options;
    return importRecords({ db, batch, path, format, gzip, size, handler: records, onProgress, signal, control }, read);
  }
  for (const name of RECORDS_ONLY) {
    if (options[name] !== undefined)
      throw new InvalidArgumentError(`importFile: ${name} is an option of records mode (into or records: true).`);
  }
  validateRecordsOptions(options);
  // A .tsv file's rows are CSV with a tab delimiter.
  const rows: RowsFormat = tsv ? 'tsv' : format;

  if (options.check) return checkSource(path, rows, gzip, newSourceRecord(), batch, !handler);
  const rowHandler = handler as ImportFileOptions['handler'];
  if (signal?.aborted) return stoppedBefore(db, batch, 'signal');
  const control = new LoopControl(db, IMPORTS, batch, options);
  // A paused or cancelled batch: the file is not read (with whilePaused 'wait', once it is resumed).
  const held = await heldBefore(db, batch, control);
  if (held) return stoppedBefore(db, batch, held);
  const bulk = !handler && bulkPathOf(db);
  const hash = optionsHash({ rows: 'id/value', format: rows, gzip, builtInTable: !handler });
  // A file read as it is stored (not gunzipped) can start at the checkpoint's byte offset.
  const seekable = !gzip;
  const pass1: { record: SourceRecord; total: number; preloaded?: Preloaded | null; seek?: ValidatedResume['seek'] } | null =
    (await validatedResume(db, batch, path, hash, signal, seekable)) ??
    (await validateWithPreload(db, batch, path, rows, gzip, size, bulk, options));
  if (pass1 === null) return stoppedBefore(db, batch, 'signal');
  const { record, total, preloaded = null } = pass1;
  // Pass 2 reads on from the checkpoint's byte offset: a validated resume's, or the preload's.
  const seek = pass1.seek ?? afterPreload(preloaded);
  const fileRows = total;
  const startedAt = Date.now();

  const started = await transact(db, (tx) => beginIn(tx, batch, record.digest, fileRows, hash));
  const nextIndex = Number(started.next_index);
  const soFar = preloaded && preloadedSoFar(preloaded, batch, total, record.bytes, size);
  const already = soFar?.already;
  const result: ImportFileResult = { batch, digest: record.digest, nextIndex, rows: already?.rows ?? 0, done: false };
  // Paused or cancelled during pass 1: no chunk goes.
  const stop = stopFor(started);
  if (stop && nextIndex < total) return { ...result, stopped: stop };
  for (const progress of soFar?.progress ?? []) onProgress?.(progressSince(startedAt, progress));
  if (nextIndex >= total) return { ...result, done: true };
  if (signal?.aborted) return result;
  const committer = bulk ? bulkCommitter(db, batch, record.digest, options.durable ? null : total, signal) : null;
  // A pipelined committer has two chunks in flight: the COPY rows stay valid until two more chunks are taken.
  const depth = committer?.pipelined ? 2 : 1;
  const chunk = new ChunkRows(bulk ? Buffer.from(batch) : null, depth);
  const pipeline = new ChunkPipeline<TakenRows>({
    db,
    batch,
    record,
    total,
    nextIndex,
    depth,
    control,
    signal,
    onProgress,
    already,
    commit: (taken, order) =>
      taken.copy
        ? commitCopy(
            committer!,
            batch,
            record.digest,
            taken.start,
            taken.copy,
            order,
            () => rowsAt(path, rows, gzip, record, batch, taken.start, taken.copy!.rows),
            gzip ? null : taken.nextOffset,
          )
        : commitChunk(db, batch, record.digest, taken.start, taken.rows, rowHandler, gzip ? null : taken.nextOffset),
  });
  const submit = () => pipeline.submit((from) => chunk.take(from));
  const full = (at: number) => chunk.count === size && pipeline.endsBefore(at);
  return pipeline.run(
    async () => {
      // The CSV reader copies what it keeps of a block, so every block can be the same buffer.
      const onBytes = (read: number) => (pipeline.bytes = read);
      // A resume of a validated file starts at the checkpoint's byte offset, where the digest pass recorded it.
      const start = seek !== null && seek.index === nextIndex ? await dataStart(path, rows, record, batch, seek) : undefined;
      const reading = { onBytes, reuseBuffer: isCsvLike(rows) && !gzip, ...(start ? { at: start.offset } : {}) };
      const blocks = decoded(verifiedBlocks(path, record, batch, reading), gzip);
      const changed = <T>(items: AsyncGenerator<T>) => unchanged(items, batch, record);
      if (
        !(await fillChunks(rows, blocks, chunk, {
          from: () => pipeline.next,
          chunkEnds: full,
          chunkEnded: submit,
          checked: changed,
          start,
        }))
      ) {
        return false;
      }
      if (chunk.count > 0) await submit();
      return true;
    },
    committer ? () => committer.close() : undefined,
  );
}

/**
 * Where pass 2 starts reading in the middle of a file of id/value rows: the checkpoint, and for a
 * CSV the header and delimiter from its first record.
 */
async function dataStart(
  path: string,
  format: RowsFormat,
  record: SourceRecord,
  batch: string,
  seek: JsonStart,
): Promise<CsvDataStart | JsonStart> {
  if (!isCsvLike(format)) return seek;
  const first = verifiedBlocks(path, record, batch, { recordedOnly: true });
  const { record: names, delimiter } = await csvHeading(first, { delimiter: separatorOf(format) });
  return { header: headerOf(names), delimiter, index: seek.index, offset: seek.offset };
}

/**
 * Pass 1 of a batch that must be validated: the file's digest and row count, and, for the built-in
 * table on a connection of the import's own, what pass 2 loaded beside it (Preload, straight to
 * binary COPY where the dialect has a bulk path); null when `signal` stopped it.
 */
async function validateWithPreload(
  db: Db,
  batch: string,
  path: string,
  format: RowsFormat,
  gzip: boolean,
  size: number,
  bulk: boolean,
  options: { handler?: unknown; signal?: AbortSignal; durable?: boolean },
): Promise<{ record: SourceRecord; total: number; preloaded?: Preloaded | null } | null> {
  const record = newSourceRecord();
  const dataSource = dataSourceOf(db);
  const preload =
    bulk && holdsConnection(db) && (await worthPreloading(path))
      ? await Preload.open(dataSource, batch, size, idValueRows(dataSource, batch, format, size))
      : null;
  preload?.start(path, record, { gzip, reuseBuffer: isCsvLike(format) && !gzip });
  let total: number | null;
  try {
    total = await validateSource(path, format, gzip, record, batch, !options.handler, options.signal);
  } catch (error) {
    recordingEnded(record);
    await preload?.abandon();
    throw error;
  }
  // However pass 1 ended, a preload following it stops waiting for its blocks.
  recordingEnded(record);
  if (total === null) {
    await preload?.abandon();
    return null;
  }
  const preloaded = preload ? await preload.committed(record.digest, total, options.durable === true) : null;
  return { record, total, preloaded };
}

/** Pass 1: digest and validate the whole file; the number of rows, or null when `signal` stopped it. */
async function validateSource(
  path: string,
  format: RowsFormat,
  gzip: boolean,
  record: SourceRecord,
  batch: string,
  builtInTable: boolean,
  signal: AbortSignal | undefined,
): Promise<number | null> {
  const duplicates = new DuplicateIds();
  try {
    let index = 0;
    let failure: InvalidInputError | null = null;
    try {
      if (isCsvLike(format)) {
        const blocks = decoded(recordedBlocks(path, record, !gzip), gzip);
        const rows = await checkCsvRows(blocks, duplicates, builtInTable, signal, separatorOf(format));
        if (rows === null) return null;
        index = rows;
      } else {
        for await (const rows of readRows(format, decoded(recordedBlocks(path, record), gzip))) {
          for (const row of rows) {
            if (builtInTable) checkStorableId(row.id, index);
            const spilling = duplicates.add(row.id, index);
            if (spilling) await spilling;
            index++;
          }
          if (signal?.aborted) return null;
        }
      }
    } catch (error) {
      if (!(error instanceof InvalidInputError)) throw error;
      failure = error;
    }
    // Rows before a failure come first: a duplicate among them is the earlier problem.
    const duplicate = await duplicates.firstDuplicate((indexes) => idsAt(path, format, gzip, record, batch, indexes));
    if (duplicate) throw duplicateId(duplicate.id, duplicate.index);
    if (failure) throw failure;
    return index;
  } finally {
    await duplicates.close();
  }
}

/** The second look behind duplicate detection: the ids of the given rows (ascending indexes), read again. */
async function idsAt(
  path: string,
  format: RowsFormat,
  gzip: boolean,
  record: SourceRecord,
  batch: string,
  indexes: number[],
): Promise<Map<number, string>> {
  const wanted = new Set(indexes);
  const last = indexes[indexes.length - 1];
  const ids = new Map<number, string>();
  let index = 0;
  for await (const rows of readRows(format, decoded(verifiedBlocks(path, record, batch, { recordedOnly: true }), gzip))) {
    for (const row of rows) {
      if (wanted.has(index)) ids.set(index, row.id);
      index++;
    }
    if (index > last) break;
  }
  return ids;
}

/** Rows `start…start + count − 1` of the source, read again (to name a row the database refused). */
async function rowsAt(
  path: string,
  format: RowsFormat,
  gzip: boolean,
  record: SourceRecord,
  batch: string,
  start: number,
  count: number,
): Promise<Row[]> {
  const found: Row[] = [];
  let index = 0;
  for await (const rows of readRows(format, decoded(verifiedBlocks(path, record, batch, { recordedOnly: true }), gzip))) {
    for (const row of rows) {
      if (index >= start && index < start + count) found.push(row);
      index++;
    }
    if (index >= start + count) break;
  }
  return found;
}

/**
 * Whether a chunk ending before `asynchronousBefore` (the file's row count; null: never) may
 * commit asynchronously: every chunk but the last, so `done` is only returned after a durable commit.
 */
const mayCommitAsynchronously = (start: number, rows: CopyRows, asynchronousBefore: number | null) =>
  asynchronousBefore !== null && start + rows.rows < asynchronousBefore;

/** How bulk chunks commit: each in a transaction of its own, or the caller's savepoint. */
interface BulkCommitter {
  /** True when a chunk is sent while the one before is still committing (`ChunkInFlight` depth 2). */
  pipelined: boolean;
  /**
   * Commits the chunk with the checkpoint advance; false, nothing kept, when the import is not at
   * `start`; null, nothing kept, when the chunk before it failed or the import was stopped.
   */
  write(start: number, rows: CopyRows, order: ChunkOrder, nextOffset: number | null): Promise<boolean | null>;
  /** Runs a read of committed state. */
  read<T>(fn: (manager: EntityManager) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** Rolls back a bulk chunk the checkpoint did not advance for. */
class NotAtStart extends Error {}

/**
 * Through `transact`: joins the caller's transaction (a savepoint per chunk, whose commit is the
 * caller's) or opens one per chunk.
 */
function sharedCommitter(db: Db, batch: string, digest: string, asynchronousBefore: number | null): BulkCommitter {
  const owned = !joinsTransaction(db);
  return {
    pipelined: false,
    async write(start, rows, _order, nextOffset) {
      const asynchronous = owned && mayCommitAsynchronously(start, rows, asynchronousBefore);
      try {
        await transact(db, async (tx) => {
          if (!(await copyAdvancing(tx, batch, digest, start, rows, asynchronous, true, nextOffset))) throw new NotAtStart();
        });
        return true;
      } catch (error) {
        if (error instanceof NotAtStart) return false;
        throw error;
      }
    },
    read: (fn) => transact(db, fn),
    close: async () => undefined,
  };
}

/**
 * On a connection the import holds for all of pass 2 (it opens its own transactions): per chunk,
 * BEGIN, the advance, the COPY and COMMIT in one round trip — no pool checkout, no separate round
 * trip to begin — pipelined: a chunk is sent while the one before commits, and commits only after
 * it. Serialization failures and deadlocks are retried as `transact` retries them.
 */
function heldCommitter(
  dataSource: DataSource,
  batch: string,
  digest: string,
  asynchronousBefore: number | null,
  signal: AbortSignal | undefined,
): BulkCommitter {
  let runner: QueryRunner | null = null;
  const connection = () => (runner ??= dataSource.createQueryRunner());
  return {
    pipelined: true,
    async write(start, rows, order, nextOffset) {
      const asynchronous = mayCommitAsynchronously(start, rows, asynchronousBefore);
      const proceed = proceedAfter(order, signal);
      const pipelined = { proceed, onSent: order.sent, binary: true };
      return pipelinedWrite(order, signal, () =>
        copyTransaction(connection(), batch, digest, start, rows, asynchronous, pipelined, nextOffset),
      );
    },
    // Reads in autocommit on the same connection: a pool of one connection cannot starve them.
    read: (fn) => fn(connection().manager),
    async close() {
      const held = runner;
      runner = null;
      await held?.release();
    },
  };
}

/**
 * The committer for an import on `db`: a held connection where the import opens its own
 * transactions. Chunks that end before row `asynchronousBefore` commit asynchronously where the
 * import owns their transaction.
 */
function bulkCommitter(
  db: Db,
  batch: string,
  digest: string,
  asynchronousBefore: number | null,
  signal: AbortSignal | undefined,
): BulkCommitter {
  if (!holdsConnection(db)) return sharedCommitter(db, batch, digest, asynchronousBefore);
  return heldCommitter(dataSourceOf(db), batch, digest, asynchronousBefore, signal);
}

/**
 * The bulk path of `commitChunk` for the built-in table: the checkpoint advance and the chunk's
 * COPY in one transaction. When the checkpoint is not at `start`, the chunk rolls back and the
 * committed state says why: another runner went past `start` (skip ahead, as commitChunk does),
 * or CURSOR_MISMATCH / FINGERPRINT_MISMATCH.
 */
async function commitCopy(
  committer: BulkCommitter,
  batch: string,
  digest: string,
  start: number,
  rows: CopyRows,
  order: ChunkOrder,
  reread: () => Promise<Row[]>,
  nextOffset: number | null = null,
): Promise<ChunkOutcome | null> {
  for (let attempt = 1; ; attempt++) {
    try {
      const written = await committer.write(start, rows, order, nextOffset);
      if (written === null) return null;
      if (written) return { next: start + rows.rows, written: rows.rows, advanced: true };
    } catch (error) {
      // Pass 1 rejected duplicates within the file, so the insert can only clash with rows stored
      // another way (applyChunk): looked up only now, once the chunk rolled back, to name the row.
      if (!(error instanceof InvalidInputError)) throw error;
      const clash = await reread()
        .then((found) => committer.read((manager) => storedIdClash(manager, batch, start, found)))
        .catch(() => null);
      throw clash ?? error;
    }
    const stored = await committer.read((manager) => readImport(manager, batch));
    // At `start` again by now (a racing runner rolled back): try once more.
    if (stored?.digest === digest && Number(stored.next_index) === start && !stopFor(stored) && attempt < MAX_ATTEMPTS) continue;
    return notAtStart(batch, digest, start, stored);
  }
}

/**
 * Commits one chunk with the checkpoint, as applyChunk does (or through `handler`). When another
 * runner of the same import already went past `start`, nothing is written and its checkpoint is
 * returned, so the caller skips ahead instead of applying rows twice.
 */
async function commitChunk(
  db: Db,
  batch: string,
  digest: string,
  start: number,
  rows: Row[],
  handler: ImportFileOptions['handler'],
  nextOffset: number | null,
): Promise<ChunkOutcome> {
  let inserting = false;
  try {
    return await transact(db, async (tx): Promise<ChunkOutcome> => {
      // The usual case in one statement: the checkpoint is at `start`, so advance it (and hold its lock).
      const counts = { rows: rows.length, skipped: 0, nextOffset };
      if (!(await advanceImport(tx, batch, digest, start, start + rows.length, counts))) {
        return notAtStart(batch, digest, start, await lockImport(tx, batch));
      }
      if (handler) {
        await handler(rows, tx, start);
      } else {
        inserting = true;
        await bulkInsertItems(tx, batch, rows, start);
        inserting = false;
      }
      return { next: start + rows.length, written: rows.length, advanced: true };
    });
  } catch (error) {
    // Pass 1 rejected duplicates within the file, so the insert can only clash with rows stored
    // another way (applyChunk): looked up only now, once the chunk rolled back, to name the row.
    // If that lookup fails too (the connection is gone), the insert's own error is the one to raise.
    if (!inserting) throw error;
    const clash = await transact(db, (tx) => storedIdClash(tx, batch, start, rows)).catch(() => null);
    throw clash ?? error;
  }
}

/** `check` for the id/value rows: pass 1 alone; its rules stop at the first invalid row, so that is the one reported. */
async function checkSource(
  path: string,
  format: RowsFormat,
  gzip: boolean,
  record: SourceRecord,
  batch: string,
  builtInTable: boolean,
): Promise<ImportFileResult> {
  const result: ImportFileResult = {
    batch,
    digest: '',
    nextIndex: 0,
    rows: 0,
    done: false,
    skipped: 0,
    invalid: 0,
    errors: [],
    summary: [],
  };
  try {
    result.rows = (await validateSource(path, format, gzip, record, batch, builtInTable, undefined)) ?? 0;
    result.digest = record.digest;
  } catch (error) {
    if (!(error instanceof InvalidInputError) || error.index === undefined) throw error;
    result.invalid = 1;
    result.rows = error.index;
    result.errors = [{ index: error.index, field: null, reason: error.message }];
    result.summary = [{ field: null, reason: error.message, rows: 1, firstIndex: error.index }];
  }
  return result;
}
