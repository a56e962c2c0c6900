import type { EntityManager, EntityTarget, QueryRunner } from 'typeorm';
import { isRetryable } from '../../core/database-errors';
import { DatabaseError, FingerprintMismatchError, InvalidArgumentError, InvalidInputError } from '../../core/errors';
import { progressSince, type Progress } from '../../core/progress';
import { LoopSpans } from '../../core/telemetry';
import { dataSourceOf, type Db, joinsTransaction, MAX_ATTEMPTS, retryPause, transact } from '../../core/transaction';
import { AbandonedPipeline, binaryWire, type BoundStatement, CopyBinary, CopyText, dialectOf, type RecordConflict, skipCopyRows } from '../../dialect';
import { cursorMismatch } from '../apply-chunk';
import { ChunkInFlight, type ChunkOrder } from '../chunk-in-flight';
import { beginIn, fingerprintMismatch } from '../begin';
import { DuplicateIds } from '../duplicate-ids';
import { advanceImport, lockImport, readImport } from '../import-store';
import type { ImportFormat } from '../read-rows';
import { newSourceRecord, recordedBlocks, type SourceRecord, verifiedBlocks } from '../source-blocks';
import type { StorableValues } from './column-values';
import { csvCopyGroups, readsAsBytes } from './csv-copy-rows';
import { type CsvOptions, gunzipped, readRecords, validateCsvOptions } from './record-readers';
import { type Evaluated, itemGroup, type RecordMap, RecordRows, type RowGroup } from './record-rows';
import { type TargetTable, targetTable } from './target-table';
import {
  copiesInOneRoundTrip,
  copyChunkTransaction,
  type CopiedRows,
  copyRow,
  firstExistingKey,
  type RecordRow,
  type Reject,
  type RowCopy,
  type RowWrite,
  writeRejects,
  writeRows,
} from './write-records';

/** The options of `importFile` that records mode adds. */
export interface RecordsOptions {
  /** An entity (class, schema or name) or a table name: records are written there. */
  into?: EntityTarget<unknown> | string;
  /** Records mode without `into`: the handler gets records. Implied by `into`. */
  records?: boolean;
  /** Identity fields of the row as written (after `map`); a repeated key is an invalid row. */
  key?: string | string[];
  /** Record → column values (property or column names); null skips the row. Must be pure: it runs in both passes. */
  map?: RecordMap;
  /** `into` only: a row whose key exists in the target fails its chunk, keeps the old row, or overwrites it. */
  conflict?: 'error' | 'skip' | 'update';
  /** 'reject' (default): an invalid row rejects the file before any write; 'skip': invalid rows are recorded and left out. */
  invalid?: 'reject' | 'skip';
  /** With 'skip': more invalid rows than this rejects the file before any write. */
  maxInvalid?: number;
  csv?: CsvOptions;
  /** Validate only (pass 1): nothing is written. */
  check?: boolean;
  /** Commit every chunk synchronously (PostgreSQL otherwise commits all but the last one asynchronously). */
  durable?: boolean;
}

/** One invalid row as `check` reports it. */
export interface RowError {
  index: number;
  field: string | null;
  reason: string;
}

export interface RecordsResult {
  batch: string;
  digest: string;
  nextIndex: number;
  rows: number;
  done: boolean;
  skipped: number;
  invalid: number;
  errors?: RowError[];
}

/** What importFile has settled before handing over to records mode. */
export interface RecordsCall {
  db: Db;
  batch: string;
  path: string;
  format: ImportFormat;
  gzip: boolean;
  size: number;
  handler?: (records: Record<string, unknown>[], tx: EntityManager, start: number) => unknown;
  onProgress?: (progress: Progress) => void;
  signal?: AbortSignal;
}

const MAX_ERRORS = 100;

/** Everything an import run needs, validated. */
interface Plan extends RecordsCall {
  rows: RecordRows;
  target: TargetTable | null;
  key: string[] | null;
  conflict: RecordConflict | undefined;
  /** The key a conflict is named by. */
  keyColumns: string[];
  lenient: boolean;
  maxInvalid: number | undefined;
  csv: CsvOptions;
  check: boolean;
  durable: boolean;
  storable: StorableValues;
  /** A CSV `into` a table without `map` whose records `csvCopyGroups` reads as bytes. */
  bytes: boolean;
}

/** What pass 1 found. */
interface Scan {
  total: number;
  skipped: number;
  invalid: number;
  /** Rows whose key appeared earlier (ascending): invalid rows pass 2 must leave out. */
  duplicates: number[];
  errors: RowError[];
}

export function validateRecordsOptions(options: RecordsOptions): void {
  const { conflict, invalid, maxInvalid, key, map } = options;
  if (conflict !== undefined && !['error', 'skip', 'update'].includes(conflict)) {
    throw new InvalidArgumentError("importFile: conflict must be 'error', 'skip' or 'update'.");
  }
  if (conflict !== undefined && conflict !== 'error' && options.into === undefined) throw new InvalidArgumentError('importFile: conflict needs into.');
  if (invalid !== undefined && invalid !== 'reject' && invalid !== 'skip') throw new InvalidArgumentError("importFile: invalid must be 'reject' or 'skip'.");
  if (maxInvalid !== undefined && (typeof maxInvalid !== 'number' || !Number.isSafeInteger(maxInvalid) || maxInvalid < 0)) {
    throw new InvalidArgumentError('importFile: maxInvalid must be a non-negative integer.');
  }
  if (maxInvalid !== undefined && invalid !== 'skip') throw new InvalidArgumentError("importFile: maxInvalid needs invalid: 'skip'.");
  if (key !== undefined) {
    const fields = typeof key === 'string' ? [key] : key;
    if (!Array.isArray(fields) || fields.length === 0 || !fields.every((f) => typeof f === 'string' && f.length > 0)) {
      throw new InvalidArgumentError('importFile: key must be a field name or a non-empty array of them.');
    }
  }
  if (map !== undefined && typeof map !== 'function') throw new InvalidArgumentError('importFile: map must be a function.');
  for (const flag of ['records', 'check', 'durable'] as const) {
    if (options[flag] !== undefined && typeof options[flag] !== 'boolean') throw new InvalidArgumentError(`importFile: ${flag} must be a boolean.`);
  }
  validateCsvOptions(options.csv);
}

async function planOf(call: RecordsCall, options: RecordsOptions): Promise<Plan> {
  const key = options.key === undefined ? null : typeof options.key === 'string' ? [options.key] : options.key;
  const dialect = dialectOf(dataSourceOf(call.db));
  const target = options.into === undefined ? null : await transact(call.db, (tx) => targetTable(tx, options.into!));
  const storable = { ...dialect.storable, jsonSource: call.format !== 'csv' };
  const rows = new RecordRows(target, storable, options.map, key);
  const keyColumns = rows.keyColumnNames() ?? target?.primaryKey ?? [];
  let conflict: RecordConflict | undefined;
  if (target && options.conflict !== undefined && options.conflict !== 'error') {
    if (keyColumns.length === 0) {
      throw new InvalidArgumentError(`importFile: conflict '${options.conflict}' needs a key: "${target.table.name}" has no primary key; pass key.`);
    }
    conflict = { mode: options.conflict, keyColumns, update: [] };
  }
  return {
    ...call,
    rows,
    target,
    key,
    conflict,
    keyColumns,
    lenient: options.invalid === 'skip',
    maxInvalid: options.maxInvalid,
    csv: options.csv ?? {},
    check: options.check === true,
    durable: options.durable === true,
    storable,
    bytes: call.format === 'csv' && target !== null && options.map === undefined && readsAsBytes(options.csv ?? {}),
  };
}

/**
 * The source's rows in groups. A CSV `into` a table is read as bytes (`csvCopyGroups`), its valid
 * rows with their values only when asked for (their key's always).
 */
async function* sourceGroups(plan: Plan, blocks: AsyncIterable<Buffer>, values: boolean): AsyncGenerator<RowGroup> {
  const input = plan.gzip ? gunzipped(blocks) : blocks;
  if (plan.bytes) {
    yield* csvCopyGroups(input, plan.csv, plan.rows, plan.target!, plan.storable, values);
    return;
  }
  for await (const items of readRecords(plan.format, input, plan.csv)) yield itemGroup(items, plan.rows);
}

function rowError(error: RowError): InvalidInputError {
  return new InvalidInputError(`Row ${error.index}${error.field === null ? '' : `, field "${error.field}"`}: ${error.reason}.`, error.index, {
    ...(error.field === null ? {} : { field: error.field }),
  });
}

function duplicateError(plan: Plan, index: number): RowError {
  return { index, field: plan.key?.[0] ?? null, reason: `the key (${plan.key?.join(', ')}) repeats an earlier row's` };
}

/** Records mode of importFile (see `importFile`): pass 1 validates, pass 2 writes chunk by chunk with the checkpoint. */
export async function importRecords(call: RecordsCall, options: RecordsOptions): Promise<RecordsResult> {
  const plan = await planOf(call, options);
  const record = newSourceRecord();
  const empty = { batch: plan.batch, digest: '', nextIndex: 0, rows: 0, done: false, skipped: 0, invalid: 0 };
  if (plan.signal?.aborted && !plan.check) return storedState(plan);
  const scan = await scanSource(plan, record);
  if (scan === null) return storedState(plan);
  if (plan.check) {
    const { total, skipped, invalid, errors } = scan;
    return { ...empty, digest: record.digest, rows: total - skipped - invalid, skipped, invalid, errors };
  }
  return writeSource(plan, record, scan);
}

/** What is committed for the batch, for a call stopped before it wrote anything. */
async function storedState(plan: Plan): Promise<RecordsResult> {
  const row = await transact(plan.db, (tx) => readImport(tx, plan.batch));
  const nextIndex = row ? Number(row.next_index) : 0;
  const total = row?.total_rows === null || row === undefined ? null : Number(row.total_rows);
  return { batch: plan.batch, digest: row?.digest ?? '', nextIndex, rows: 0, done: total !== null && nextIndex >= total, skipped: 0, invalid: 0 };
}

/** Pass 1: digest, read and evaluate every row; the first invalid row rejects the file unless invalid rows are skipped. */
async function scanSource(plan: Plan, record: SourceRecord): Promise<Scan | null> {
  const duplicates = plan.key ? new DuplicateIds({ collect: true }) : null;
  const lenient = plan.lenient || plan.check;
  const keep = plan.check ? MAX_ERRORS : plan.lenient ? (plan.maxInvalid ?? -1) + 1 : 1;
  const found: RowError[] = [];
  let total = 0;
  let skipped = 0;
  let invalid = 0;
  try {
    scanning: for await (const group of sourceGroups(plan, recordedBlocks(plan.path, record), false)) {
      for (let r = 0; r < group.length; r++) {
        const evaluated = group.evaluate(r, null);
        total++;
        if (evaluated.kind === 'skipped') {
          skipped++;
        } else if (evaluated.kind === 'invalid') {
          invalid++;
          if (found.length < keep) found.push({ index: evaluated.index, field: evaluated.field, reason: evaluated.reason });
          if (!lenient) break scanning;
        } else if (duplicates && evaluated.key !== null) {
          const spilling = duplicates.add(evaluated.key, evaluated.index);
          if (spilling) await spilling;
        }
      }
      if (plan.signal?.aborted && !plan.check) return null;
    }
    const lookup = (indexes: number[]) => keysAt(plan, record, indexes);
    let repeated: number[] = [];
    if (duplicates && !lenient) {
      const candidates = [duplicates.firstCollected, (await duplicates.firstDuplicate(lookup))?.index].filter((i) => i !== undefined);
      const first = candidates.length > 0 ? Math.min(...candidates) : undefined;
      if (first !== undefined && (found.length === 0 || first < found[0].index)) throw rowError(duplicateError(plan, first));
    } else if (duplicates) {
      repeated = await duplicates.everyDuplicate(lookup);
    }
    if (!lenient && found.length > 0) throw rowError(found[0]);
    const errors = mergeErrors(plan, found, repeated, Math.max(keep, MAX_ERRORS));
    const allInvalid = invalid + repeated.length;
    if (plan.lenient && !plan.check && plan.maxInvalid !== undefined && allInvalid > plan.maxInvalid) {
      const past = errors[plan.maxInvalid];
      throw new InvalidInputError(
        `The file has more than ${plan.maxInvalid} invalid rows (maxInvalid); row ${past.index} is one too many: ${past.reason}. Nothing was written.`,
        past.index,
        past.field === null ? {} : { field: past.field },
      );
    }
    return { total, skipped, invalid: allInvalid, duplicates: repeated, errors: errors.slice(0, MAX_ERRORS) };
  } finally {
    await duplicates?.close();
  }
}

/** Invalid rows and repeated keys, in row order, `limit` at most. */
function mergeErrors(plan: Plan, found: RowError[], repeated: number[], limit: number): RowError[] {
  const merged: RowError[] = [];
  let f = 0;
  let r = 0;
  while (merged.length < limit && (f < found.length || r < repeated.length)) {
    if (r >= repeated.length || (f < found.length && found[f].index < repeated[r])) merged.push(found[f++]);
    else merged.push(duplicateError(plan, repeated[r++]));
  }
  return merged;
}

/** The keys of the given rows (ascending indexes), read again: duplicate detection's second look. */
async function keysAt(plan: Plan, record: SourceRecord, indexes: number[]): Promise<Map<number, string>> {
  const wanted = new Set(indexes);
  const last = indexes[indexes.length - 1];
  const keys = new Map<number, string>();
  for await (const group of sourceGroups(plan, verifiedBlocks(plan.path, record, plan.batch, { recordedOnly: true }), false)) {
    for (let r = 0; r < group.length; r++) {
      const index = group.index(r);
      if (!wanted.has(index)) continue;
      const evaluated = group.evaluate(r, null);
      if (evaluated.kind === 'row' && evaluated.key !== null) keys.set(index, evaluated.key);
    }
    if (group.length > 0 && group.index(group.length - 1) >= last) break;
  }
  return keys;
}

/**
 * The rows with their values: rows written as COPY as they were read have none (`csvCopyGroups`),
 * so the source is read again up to them (only for naming a row whose key the table holds).
 */
async function valuesOf(plan: Plan, record: SourceRecord, rows: RecordRow[]): Promise<RecordRow[]> {
  if (rows.length === 0 || rows.every((row) => row.values.length > 0)) return rows;
  const wanted = new Set(rows.map((row) => row.index));
  const last = rows[rows.length - 1].index;
  const valued: RecordRow[] = [];
  for await (const group of sourceGroups(plan, verifiedBlocks(plan.path, record, plan.batch, { recordedOnly: true }), true)) {
    for (let r = 0; r < group.length; r++) {
      if (!wanted.has(group.index(r))) continue;
      const evaluated = group.evaluate(r, null);
      if (evaluated.kind === 'row') valued.push(evaluated);
    }
    if (group.length > 0 && group.index(group.length - 1) >= last) break;
  }
  return valued;
}

/** The rows of one chunk as pass 2 gathers them. */
interface Chunk {
  start: number;
  count: number;
  rows: RecordRow[];
  rejects: Reject[];
  /** Rows `map` skipped. */
  skipped: number[];
  /** The rows as COPY text, written as they were read (`csvCopyGroups`). */
  copied: CopiedRows | null;
}

/** Pass 2: begin or resume the import, then commit the rows from the checkpoint on, chunk by chunk. */
async function writeSource(plan: Plan, record: SourceRecord, scan: Scan): Promise<RecordsResult> {
  const { db, batch, size, signal, onProgress } = plan;
  const total = scan.total;
  const started = await transact(db, (tx) => beginIn(tx, batch, record.digest, total));
  const result: RecordsResult = { batch, digest: record.digest, nextIndex: Number(started.next_index), rows: 0, done: false, skipped: 0, invalid: 0 };
  if (result.nextIndex >= total) return { ...result, done: true };
  if (signal?.aborted) return result;
  // Chunks but the last commit asynchronously where the import owns its transactions (see README).
  const setting = plan.durable || joinsTransaction(db) ? undefined : dialectOf(dataSourceOf(db)).asynchronousCommit;
  const asynchronous: BoundStatement | undefined = setting === undefined ? undefined : { sql: setting, parameters: [] };
  // A plain COPY into the target goes as one round trip per chunk on a connection held for the
  // import, where it opens its own transactions (a configured isolation level is TypeORM's to apply).
  const dataSource = dataSourceOf(db);
  const isolation = (dataSource.options as { isolationLevel?: string }).isolationLevel;
  let runner: QueryRunner | null = null;
  const held =
    plan.target && !plan.conflict && dialectOf(dataSource).copyRows && !joinsTransaction(db) && isolation === undefined
      ? () => (runner ??= dataSource.createQueryRunner())
      : null;
  // A CSV whose rows go by COPY on the held connection is written as COPY text as it is read.
  // On the held connection, a chunk is sent while the one before commits (`CopyAround.proceed`).
  const depth = held ? 2 : 1;
  const copies = held !== null && plan.bytes;
  // In PostgreSQL's binary format when every column the records fill has one (no text parsed on
  // the server: a binary COPY of the bench's typed rows costs it 40 % less CPU than COPY text);
  // decided by the header, i.e. at the first group.
  let copying: RowCopy | null = null;
  const wires = plan.target ? plan.target.columns.map(binaryWire) : [];
  let copyColumns: number[] | null = null;
  const startedAt = Date.now();
  let bytes = 0;
  let chunks = 0;
  let chunk = emptyChunk(result.nextIndex);
  let duplicate = 0;
  const spans = new LoopSpans();
  const commit = async (taken: Chunk, order: ChunkOrder) => {
    const last = taken.start + taken.count >= total;
    // The same span and metrics as a chunk of the lab shape; rows `map` skipped and invalid rows as attributes.
    const outcome = await spans.traced('import.chunk', { job: batch, index: taken.start }, async (span) => {
      const committed = await commitChunk(plan, record, taken, last ? undefined : asynchronous, held, order);
      if (committed?.advanced) span.set({ skipped: taken.skipped.length, invalid: taken.rejects.length });
      span.committed(committed?.advanced ? taken.rows.length : 0, committed?.advanced ?? false);
      return committed;
    });
    // Results are taken in chunk order; an abandoned chunk (null) changed nothing.
    await order.previous;
    if (outcome === null) return;
    result.nextIndex = outcome.next;
    if (!outcome.advanced) return;
    result.rows += taken.rows.length;
    result.skipped += taken.skipped.length;
    result.invalid += taken.rejects.length;
    chunks++;
    onProgress?.(progressSince(startedAt, { name: batch, batches: chunks, items: result.rows, total, bytes, totalBytes: record.bytes }));
  };
  const inFlight = new ChunkInFlight(commit, depth);
  /** Waits until another chunk may go (`depth` in flight), then sends this one; false when the import is to stop instead. */
  const submit = async (): Promise<boolean> => {
    await inFlight.ready();
    if (result.nextIndex >= total || signal?.aborted) {
      // Never return with a chunk in flight: its connection goes back to the pool after the import.
      await inFlight.settle();
      return false;
    }
    // At most `depth` chunks are in flight: the COPY text taken before them can be reused (`CopyText.take`).
    if (copying) chunk.copied = { rows: copying.take(), columns: copyColumns ?? chunk.rows[0]?.columns ?? [], binary: copying instanceof CopyBinary };
    // Another runner of this import may have committed some of these rows already.
    const taken = rowsFrom(chunk, result.nextIndex);
    chunk = emptyChunk(taken.start + taken.count);
    if (taken.count > 0) inFlight.start(taken);
    return true;
  };
  const stopped = () => ({ ...result, done: result.nextIndex >= total });
  try {
    const blocks = verifiedBlocks(plan.path, record, batch, { onBytes: (read) => (bytes = read) });
    for await (const group of unchanged(sourceGroups(plan, blocks, !copies), batch, record)) {
      if (copies) copying ??= group.binary === true ? new CopyBinary(depth) : new CopyText(depth);
      for (let r = 0; r < group.length; r++) {
        const index = group.index(r);
        // Rows committed before this call are behind the checkpoint.
        if (index < chunk.start) continue;
        while (duplicate < scan.duplicates.length && scan.duplicates[duplicate] < index) duplicate++;
        const repeated = scan.duplicates[duplicate] === index;
        let evaluated: Evaluated = group.evaluate(r, repeated ? null : copying);
        if (evaluated.kind === 'row' && repeated) evaluated = { kind: 'invalid', ...duplicateError(plan, index) };
        chunk.count++;
        if (evaluated.kind === 'row') {
          chunk.rows.push(evaluated);
          // Rows read after `csvCopyGroups` handed the rest of the file over are written here, in the same column order.
          if (copying && group.copies) copyColumns = evaluated.columns;
          else if (copying) copyRow(copying, evaluated.values, (copyColumns ??= evaluated.columns), wires);
        } else if (evaluated.kind === 'skipped') chunk.skipped.push(index);
        else if (plan.lenient) chunk.rejects.push({ index, reason: rejectReason(evaluated), raw: group.raw(r) });
        else throw changedBetweenPasses(batch, record);
        // The chunk that ends the file waits for the end of the file: only then is all of it verified.
        if (chunk.count === size && index + 1 < total && !(await submit())) return stopped();
      }
    }
    if (chunk.count > 0) await submit();
    await inFlight.settle();
    return stopped();
  } catch (error) {
    // Never return while a chunk is still committing; the error that stopped the import wins.
    await inFlight.settle().catch(() => undefined);
    throw error;
  } finally {
    spans.flush();
    await (runner as QueryRunner | null)?.release();
  }
}

function emptyChunk(start: number): Chunk {
  return { start, count: 0, rows: [], rejects: [], skipped: [], copied: null };
}

/** The chunk's rows from source row `from` on (those before are committed already). */
function rowsFrom(chunk: Chunk, from: number): Chunk {
  if (from <= chunk.start) return chunk;
  const end = chunk.start + chunk.count;
  const rows = chunk.rows.filter((row) => row.index >= from);
  const copied = chunk.copied && { ...chunk.copied, rows: skipCopyRows(chunk.copied.rows, chunk.rows.length - rows.length) };
  return {
    start: Math.min(from, end),
    count: Math.max(0, end - from),
    rows,
    rejects: chunk.rejects.filter((reject) => reject.index >= from),
    skipped: chunk.skipped.filter((index) => index >= from),
    copied,
  };
}

function rejectReason(invalid: Extract<Evaluated, { kind: 'invalid' }>): string {
  return invalid.field === null ? invalid.reason : `${invalid.field}: ${invalid.reason}`;
}

function changedBetweenPasses(batch: string, record: SourceRecord): FingerprintMismatchError {
  return new FingerprintMismatchError(
    `The file of import "${batch}" (or what map makes of it) changed while it was being imported (digest ${record.digest} when validated).`,
  );
}

/** In pass 2 the bytes are those pass 1 validated, so an unreadable file can only mean it changed. */
async function* unchanged<T>(items: AsyncGenerator<T>, batch: string, record: SourceRecord): AsyncGenerator<T> {
  try {
    yield* items;
  } catch (error) {
    if (error instanceof InvalidInputError) throw changedBetweenPasses(batch, record);
    throw error;
  }
}

/**
 * Commits one chunk as applyChunk does: the checkpoint advance, the chunk's rejects and its rows in
 * one transaction. When another runner already went past `start`, nothing is written and its
 * checkpoint is returned (`advanced: false`), so the caller skips ahead instead of writing twice.
 */
async function commitChunk(
  plan: Plan,
  record: SourceRecord,
  chunk: Chunk,
  asynchronous: BoundStatement | undefined,
  held: (() => QueryRunner) | null,
  order: ChunkOrder,
): Promise<{ next: number; advanced: boolean } | null> {
  const { batch } = plan;
  const { digest } = record;
  const { start, count, rows, rejects } = chunk;
  const write: RowWrite | null = plan.target
    ? { target: plan.target, conflict: plan.conflict, keyColumns: plan.keyColumns, before: asynchronous ? [asynchronous] : [] }
    : null;
  if (held && write && (chunk.copied || copiesInOneRoundTrip(held().manager, rows, write))) return commitHeld(plan, record, chunk, write, held(), order);
  // Not pipelined: this chunk's transaction starts once the one before has ended (nothing, if it failed).
  if (!(await order.previous)) return null;
  let writing = false;
  try {
    return await transact(plan.db, async (tx) => {
      // The usual case in one statement: the checkpoint is at `start`, so advance it (and hold its lock).
      if (!(await advanceImport(tx, batch, digest, start, start + count, { rows: rows.length, skipped: chunk.skipped.length }))) {
        const stored = await lockImport(tx, batch);
        if (stored === undefined) throw cursorMismatch(batch, stored, start);
        if (stored.digest !== digest) throw fingerprintMismatch(batch, stored.digest, digest);
        const next = Number(stored.next_index);
        if (next > start) return { next, advanced: false };
        throw cursorMismatch(batch, stored, start);
      }
      if (rejects.length > 0) await writeRejects(tx, batch, rejects);
      if (write && rows.length > 0) {
        writing = true;
        await writeRows(tx, rows, write);
        writing = false;
      } else {
        if (asynchronous) await tx.query(asynchronous.sql, asynchronous.parameters);
        if (plan.handler) await plan.handler(rows.map((row) => row.record as Record<string, unknown>), tx, start);
      }
      return { next: start + count, advanced: true };
    });
  } catch (error) {
    // A key the table holds already: named once the chunk rolled back (PostgreSQL refuses any
    // statement in a failed transaction). If the lookup fails too, the insert's own error stands.
    // TypeORM 0.3's sqlite3 driver reports a duplicate key as a plain constraint error, so a
    // DATABASE_ERROR is looked into too: an existing key makes it the input error it is.
    if (!writing || !write || write.conflict || !(error instanceof InvalidInputError || error instanceof DatabaseError)) throw error;
    const named = await transact(plan.db, (tx) => firstExistingKey(tx, rows, write)).catch(() => null);
    throw named ?? error;
  }
}

/**
 * `commitChunk` on the held connection: the whole chunk in one round trip (`copyChunkTransaction`),
 * sent while the chunk before commits; null, nothing kept, when that one failed or the import stopped.
 */
async function commitHeld(
  plan: Plan,
  record: SourceRecord,
  chunk: Chunk,
  write: RowWrite,
  runner: QueryRunner,
  order: ChunkOrder,
): Promise<{ next: number; advanced: boolean } | null> {
  const { batch } = plan;
  const { digest } = record;
  const { start, count, rows, rejects } = chunk;
  // Committed only after the chunk before it, and not once the import is stopped.
  const proceed = order.previous.then((committed) => committed && !plan.signal?.aborted);
  const pipelined = { proceed, onSent: order.sent };
  for (let attempt = 1; ; attempt++) {
    try {
      if (await copyChunkTransaction(runner, batch, digest, start, count, rows, rejects, write, chunk.copied, pipelined)) return { next: start + count, advanced: true };
      break;
    } catch (error) {
      if (error instanceof AbandonedPipeline) {
        // Sent behind a chunk that did not commit: once that one has settled, this one goes again, or not at all.
        if (!(await order.previous) || plan.signal?.aborted) return null;
        attempt--;
        continue;
      }
      if (error instanceof InvalidInputError) {
        const named = await valuesOf(plan, record, rows)
          .then((valued) => firstExistingKey(runner.manager, valued, write))
          .catch(() => null);
        throw named ?? error;
      }
      if (attempt >= MAX_ATTEMPTS || !isRetryable(error)) throw error;
    }
    await retryPause(attempt);
  }
  // Not at `start`: the committed state says why (read in autocommit on the same connection).
  const stored = await readImport(runner.manager, batch);
  if (stored === undefined) throw cursorMismatch(batch, stored, start);
  if (stored.digest !== digest) throw fingerprintMismatch(batch, stored.digest, digest);
  const next = Number(stored.next_index);
  if (next > start) return { next, advanced: false };
  throw cursorMismatch(batch, stored, start);
}
