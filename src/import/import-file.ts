import type { EntityManager } from 'typeorm';
import { FingerprintMismatchError, InvalidArgumentError, InvalidInputError } from '../errors';
import { progressSince, type Progress } from '../progress';
import { type Db, transact } from '../transaction';
import { cursorMismatch, storedIdClash } from './apply-chunk';
import { beginIn, fingerprintMismatch } from './begin';
import { DuplicateIds } from './duplicate-ids';
import { validateSize } from './import-all';
import { advanceImport, bulkInsertItems, checkStorableId, lockImport, readImport, validateBatch } from './import-store';
import { duplicateId } from './parse-rows';
import { formatOf, type ImportFormat, readRows } from './read-rows';
import type { Row } from './row';
import { newSourceRecord, recordedBlocks, type SourceRecord, verifiedBlocks } from './source-blocks';

export type { Row } from './row';
export type { ImportFormat } from './read-rows';
export { replaceImport } from './replace-import';
export { fileDigest } from './source-digest';

export interface ImportFileOptions {
  /** Defaults from the file extension: .json, .ndjson/.jsonl, .csv. */
  format?: ImportFormat;
  /** Rows per chunk (one transaction each); default 1000. */
  size?: number;
  /** Writes a chunk to the application's own tables (in `tx`) instead of `checkpoint_import_items`. */
  handler?: (rows: Row[], tx: EntityManager, start: number) => unknown;
  /** Called after each committed chunk. */
  onProgress?(progress: Progress): void;
  /** Stops cleanly after the current chunk commits. */
  signal?: AbortSignal;
}

/** `rows` counts the rows written by this call; `nextIndex` is the committed checkpoint. */
export interface ImportFileResult {
  batch: string;
  digest: string;
  nextIndex: number;
  rows: number;
  done: boolean;
}

const DEFAULT_SIZE = 1000;

function validateOptions(options: ImportFileOptions): void {
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('importFile: options must be an object.');
  if (options.handler !== undefined && typeof options.handler !== 'function') {
    throw new InvalidArgumentError('importFile: handler must be a function.');
  }
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') {
    throw new InvalidArgumentError('importFile: onProgress must be a function.');
  }
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw new InvalidArgumentError('importFile: signal must be an AbortSignal.');
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
 * before anything of it is committed.
 */
export async function importFile(db: Db, batch: string, path: string, options: ImportFileOptions = {}): Promise<ImportFileResult> {
  validateBatch(batch);
  if (typeof path !== 'string' || path.length === 0) throw new InvalidArgumentError('importFile: path must be a non-empty string.');
  validateOptions(options);
  const format = formatOf(path, options.format);
  const size = options.size ?? DEFAULT_SIZE;
  validateSize(size, 'importFile');
  const { handler, onProgress, signal } = options;

  const record = newSourceRecord();
  const total = signal?.aborted ? null : await validateSource(path, format, record, batch, !handler, signal);
  if (total === null) return storedState(db, batch);

  const started = await transact(db, (tx) => beginIn(tx, batch, record.digest, total));
  const result: ImportFileResult = { batch, digest: record.digest, nextIndex: Number(started.next_index), rows: 0, done: false };
  if (result.nextIndex >= total) return { ...result, done: true };
  if (signal?.aborted) return result;

  const startedAt = Date.now();
  let bytes = 0;
  let batches = 0;
  let chunk: Row[] = [];
  let chunkStart = result.nextIndex;
  let index = 0;
  const commit = async (rows: Row[], start: number) => {
    const outcome = await commitChunk(db, batch, record.digest, start, rows, handler);
    result.nextIndex = outcome.next;
    if (outcome.written === 0) return;
    result.rows += outcome.written;
    batches++;
    onProgress?.(
      progressSince(startedAt, { name: batch, batches, items: result.rows, total, bytes, totalBytes: record.bytes }),
    );
  };
  // One chunk commits while the next one is read and parsed, so the database and the parser work
  // side by side; chunks still commit one after the other, in order.
  let committing: Promise<void> | null = null;
  let failure: { error: unknown } | null = null;
  const settle = async () => {
    await committing;
    committing = null;
    if (failure) throw failure.error;
  };
  /** Waits for the chunk in flight, then sends this one; false when the import is to stop instead. */
  const submit = async (): Promise<boolean> => {
    await settle();
    // An abort during the chunk in flight stops before the next one, the file's last chunk included.
    if (result.nextIndex >= total || signal?.aborted) return false;
    // Another runner of this import may have committed some of these rows already.
    const skip = Math.min(chunk.length, Math.max(0, result.nextIndex - chunkStart));
    const rows = chunk.slice(skip);
    chunk = [];
    if (rows.length > 0) committing = commit(rows, chunkStart + skip).catch((error: unknown) => void (failure = { error }));
    return true;
  };

  try {
    const blocks = verifiedBlocks(path, record, batch, { onBytes: (read) => (bytes = read) });
    for await (const rows of unchanged(readRows(format, blocks), batch, record)) {
      for (const row of rows) {
        const at = index++;
        if (at < result.nextIndex) continue;
        if (chunk.length === 0) chunkStart = at;
        chunk.push(row);
        // The chunk that ends the file waits for the end of the file: only then is all of it verified.
        if (chunk.length === size && index < total && !(await submit())) return { ...result, done: result.nextIndex >= total };
      }
    }
    if (chunk.length > 0) await submit();
    await settle();
  } catch (error) {
    // Never return while a chunk is still committing; the error that stopped the import wins.
    await settle().catch(() => undefined);
    throw error;
  }
  return { ...result, done: result.nextIndex >= total };
}

/** Pass 1: digest and validate the whole file; the number of rows, or null when `signal` stopped it. */
async function validateSource(
  path: string,
  format: ImportFormat,
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
      for await (const rows of readRows(format, recordedBlocks(path, record))) {
        for (const row of rows) {
          if (builtInTable) checkStorableId(row.id, index);
          const spilling = duplicates.add(row.id, index);
          if (spilling) await spilling;
          index++;
        }
        if (signal?.aborted) return null;
      }
    } catch (error) {
      if (!(error instanceof InvalidInputError)) throw error;
      failure = error;
    }
    // Rows before a failure come first: a duplicate among them is the earlier problem.
    const duplicate = await duplicates.firstDuplicate((indexes) => idsAt(path, format, record, batch, indexes));
    if (duplicate) throw duplicateId(duplicate.id, duplicate.index);
    if (failure) throw failure;
    return index;
  } finally {
    await duplicates.close();
  }
}

/** The second look behind duplicate detection: the ids of the given rows (ascending indexes), read again. */
async function idsAt(path: string, format: ImportFormat, record: SourceRecord, batch: string, indexes: number[]): Promise<Map<number, string>> {
  const wanted = new Set(indexes);
  const last = indexes[indexes.length - 1];
  const ids = new Map<number, string>();
  let index = 0;
  for await (const rows of readRows(format, verifiedBlocks(path, record, batch, { recordedOnly: true }))) {
    for (const row of rows) {
      if (wanted.has(index)) ids.set(index, row.id);
      index++;
    }
    if (index > last) break;
  }
  return ids;
}

/** In pass 2 the bytes are those pass 1 validated, so a row error can only mean the file changed. */
async function* unchanged(rows: AsyncGenerator<Row[]>, batch: string, record: SourceRecord): AsyncGenerator<Row[]> {
  try {
    yield* rows;
  } catch (error) {
    if (error instanceof InvalidInputError) {
      throw new FingerprintMismatchError(`The file of import "${batch}" changed while it was being imported (digest ${record.digest} when validated).`);
    }
    throw error;
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
): Promise<{ next: number; written: number }> {
  let inserting = false;
  try {
    return await transact(db, async (tx) => {
      // The usual case in one statement: the checkpoint is at `start`, so advance it (and hold its lock).
      if (!(await advanceImport(tx, batch, digest, start, start + rows.length))) {
        const stored = await lockImport(tx, batch);
        if (stored === undefined) throw cursorMismatch(batch, stored, start);
        if (stored.digest !== digest) throw fingerprintMismatch(batch, stored.digest, digest);
        const next = Number(stored.next_index);
        if (next > start) return { next, written: 0 };
        throw cursorMismatch(batch, stored, start);
      }
      if (handler) {
        await handler(rows, tx, start);
      } else {
        inserting = true;
        await bulkInsertItems(tx, batch, rows, start);
        inserting = false;
      }
      return { next: start + rows.length, written: rows.length };
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

/** What is committed for `batch`, for a call stopped before it wrote anything. */
async function storedState(db: Db, batch: string): Promise<ImportFileResult> {
  const row = await transact(db, (tx) => readImport(tx, batch));
  const nextIndex = row ? Number(row.next_index) : 0;
  const total = row?.total_rows === null || row === undefined ? null : Number(row.total_rows);
  return { batch, digest: row?.digest ?? '', nextIndex, rows: 0, done: total !== null && nextIndex >= total };
}
