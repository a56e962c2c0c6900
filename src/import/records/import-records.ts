import type { EntityManager, EntityTarget, QueryRunner } from 'typeorm';
import { DatabaseError, InvalidArgumentError, InvalidInputError } from '../../core/errors';
import { progressSince, type Progress } from '../../core/progress';
import { dataSourceOf, type Db, joinsTransaction, transact } from '../../core/transaction';
import {
  binaryWire,
  type BoundStatement,
  CopyBinary,
  CopyText,
  dialectOf,
  type RecordConflict,
  skipCopyRows,
  type TableRef,
} from '../../dialect';
import type { ChunkOrder } from '../chunk-in-flight';
import { beginIn, heldBefore } from '../begin';
import { stopFor, type StopReason } from '../../control/job-state';
import type { LoopControl } from '../../control/loop-control';
import { DuplicateIds } from '../duplicate-ids';
import { encodeRows, optionsHash, type ValidatedResume, validatedResume } from '../resume';
import { advanceImport, lockImport, readImport } from '../import-store';
import type { ImportFormat } from '../read-rows';
import type { JsonStart } from '../json-items';
import { newSourceRecord, recordedBlocks, recordingEnded, type SourceRecord, verifiedBlocks } from '../source-blocks';
import { afterPreload, Preload, type Preloaded, preloadedSoFar, worthPreloading } from '../preload';
import { preloadRecords } from './preload-records';
import type { StorableValues } from './column-values';
import { csvCopyGroups, type CsvStart, readsAsBytes } from './csv-copy-rows';
import {
  type CsvOptions,
  csvHeader,
  csvHeading,
  type NullTexts,
  nullTextsOf,
  readRecords,
  validateCsvOptions,
  validateNullIf,
} from './record-readers';
import { decoded } from '../gunzipped';
import {
  changedBetweenPasses,
  type ChunkOutcome,
  ChunkPipeline,
  holdsConnection,
  notAtStart,
  pipelinedWrite,
  proceedAfter,
  stoppedBefore,
  unchanged,
} from '../chunk-pipeline';
import { type Evaluated, itemGroup, type RecordMap, RecordRows, type RowGroup } from './record-rows';
import { findTargetTable, type TargetTable, tableToCreate, targetTable } from './target-table';
import { ColumnInference } from './column-inference';
import { ErrorSummary, type RowError, type RowErrorGroup } from './error-summary';
import { checkCreateKey, type Creating, createStatement } from './create-step';
import { run } from '../../core/run-statement';
import {
  copiesInOneRoundTrip,
  copyChunkTransaction,
  type ChunkRows,
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
  /**
   * Identity fields of the row as written (after `map`); a key repeated within the file is an
   * invalid row, found in pass 1 before any write. Default: with `into`, the target's primary key
   * (the key its conflicts use); without `into`, none. `false` turns the check off (CLI `--no-key`).
   */
  key?: string | string[] | false;
  /** Record → column values (property or column names); null skips the row. Must be pure: it runs in both passes. */
  map?: RecordMap;
  /** `into` only: a row whose key exists in the target fails its chunk with `INVALID_INPUT` (`'error'`, the default), keeps the old row (`'skip'`), or overwrites it (`'update'`). */
  conflict?: 'error' | 'skip' | 'update';
  /** 'reject' (default): an invalid row rejects the file before any write; 'skip': invalid rows are recorded and left out. */
  invalid?: 'reject' | 'skip';
  /** With `invalid: 'skip'`: more invalid rows than this rejects the file (`INVALID_INPUT`) before any write. Default: no limit. */
  maxInvalid?: number;
  /** How CSV files are read; ignored for JSON formats, but for `csv.null`, a synonym of `nullIf` with one text (every format). */
  csv?: CsvOptions;
  /**
   * Texts read as NULL in every format: a CSV field (quoted or not) or a JSON string field equal to
   * one of them (CLI `--null`, repeatable). Default: an empty unquoted CSV field is NULL, nothing in JSON.
   */
  nullIf?: string[];
  /** Validate only (pass 1): nothing is written, and the result reports the first invalid rows in `errors`. Default false. */
  check?: boolean;
  /**
   * `into` a table that does not exist: pass 1 infers each field's column type, and the table is
   * created in the database's own types before the first chunk (`created.ddl`; the primary key is
   * `key`). With `check`, the statement is returned and nothing is created. Default false.
   */
  create?: boolean;
  /** Commit every chunk synchronously (PostgreSQL otherwise commits all but the last one asynchronously). */
  durable?: boolean;
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
  summary?: RowErrorGroup[];
  created?: { ddl: string };
  stopped?: StopReason;
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
  /** Pause, cancel, throttle and time limit (see `LoopControl`). */
  control: LoopControl;
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
  nulls: NullTexts;
  check: boolean;
  durable: boolean;
  storable: StorableValues;
  /** A CSV `into` a table without `map` whose records `csvCopyGroups` reads as bytes. */
  bytes: boolean;
  /** `create` of a table that does not exist yet: its name, and the types pass 1 infers for it. */
  creating: Creating | null;
}

/** What pass 1 found. */
interface Scan {
  total: number;
  skipped: number;
  invalid: number;
  /** Rows whose key appeared earlier (ascending): invalid rows pass 2 must leave out. */
  duplicates: number[];
  errors: RowError[];
  /** With `check`: every invalid row, grouped by field and reason. */
  summary: RowErrorGroup[];
}

export function validateRecordsOptions(options: RecordsOptions): void {
  const { conflict, invalid, maxInvalid, key, map } = options;
  if (conflict !== undefined && !['error', 'skip', 'update'].includes(conflict)) {
    throw new InvalidArgumentError("importFile: conflict must be 'error', 'skip' or 'update'.");
  }
  if (conflict !== undefined && conflict !== 'error' && options.into === undefined)
    throw new InvalidArgumentError('importFile: conflict needs into.');
  if (invalid !== undefined && invalid !== 'reject' && invalid !== 'skip')
    throw new InvalidArgumentError("importFile: invalid must be 'reject' or 'skip'.");
  if (maxInvalid !== undefined && (typeof maxInvalid !== 'number' || !Number.isSafeInteger(maxInvalid) || maxInvalid < 0)) {
    throw new InvalidArgumentError('importFile: maxInvalid must be a non-negative integer.');
  }
  if (maxInvalid !== undefined && invalid !== 'skip') throw new InvalidArgumentError("importFile: maxInvalid needs invalid: 'skip'.");
  if (key !== undefined && key !== false) {
    const fields = typeof key === 'string' ? [key] : key;
    if (!Array.isArray(fields) || fields.length === 0 || !fields.every((f) => typeof f === 'string' && f.length > 0)) {
      throw new InvalidArgumentError('importFile: key must be a field name or a non-empty array of them.');
    }
  }
  if (map !== undefined && typeof map !== 'function') throw new InvalidArgumentError('importFile: map must be a function.');
  if (options.create !== undefined && options.into === undefined) throw new InvalidArgumentError('importFile: create needs into.');
  for (const flag of ['records', 'check', 'durable', 'create'] as const) {
    if (options[flag] !== undefined && typeof options[flag] !== 'boolean')
      throw new InvalidArgumentError(`importFile: ${flag} must be a boolean.`);
  }
  validateCsvOptions(options.csv);
  validateNullIf(options.nullIf);
}

/**
 * The key's fields: `key` as given; by default, `into` a table, its primary key (the key its
 * conflicts use), so a key repeated within the file is found in pass 1; none with `key: false`.
 */
function keyOf(key: RecordsOptions['key'], target: TargetTable | null): string[] | null {
  if (key === false) return null;
  if (key !== undefined) return typeof key === 'string' ? [key] : key;
  return target && target.primaryKey.length > 0 ? target.primaryKey : null;
}

async function planOf(call: RecordsCall, options: RecordsOptions): Promise<Plan> {
  const dialect = dialectOf(dataSourceOf(call.db));
  const { into } = options;
  // With `create`, a view of that name is no table to use: a plain CREATE TABLE is tried, and the database's refusal is DATABASE_ERROR.
  let overView = false;
  const target =
    into === undefined
      ? null
      : await transact(call.db, async (tx) => {
          if (options.create !== true) return targetTable(tx, into);
          const found = await findTargetTable(tx, into);
          overView = found !== null && (await dialect.isView(tx, found.table));
          return overView ? null : found;
        });
  const key = keyOf(options.key, target);
  const storable = { ...dialect.storable, jsonSource: call.format !== 'csv' };
  const creating =
    into !== undefined && target === null
      ? {
          table: await transact(call.db, async (tx) => tableToCreate(tx, into)),
          inference: new ColumnInference({ jsonSource: storable.jsonSource }),
          overView,
        }
      : null;
  // The default key is the table's own: a row it leaves NULL (a generated id) repeats nothing, as in the index.
  const observe = creating ? (record: Record<string, unknown>) => creating.inference.add(record) : undefined;
  const rows = new RecordRows(target, storable, options.map, key, options.key === undefined, observe);
  const keyColumns = rows.keyColumnNames() ?? target?.primaryKey ?? [];
  let conflict: RecordConflict | undefined;
  if (target && options.conflict !== undefined && options.conflict !== 'error') {
    if (keyColumns.length === 0) {
      throw new InvalidArgumentError(
        `importFile: conflict '${options.conflict}' needs a key: "${target.table.name}" has no primary key; pass key.`,
      );
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
    nulls: nullTextsOf(options.nullIf, options.csv ?? {}),
    check: options.check === true,
    durable: options.durable === true,
    storable,
    bytes: call.format === 'csv' && target !== null && options.map === undefined && readsAsBytes(options.csv ?? {}),
    creating,
  };
}

/**
 * The source's rows in groups. A CSV `into` a table is read as bytes (`csvCopyGroups`), its valid
 * rows with their values only when asked for (their key's always).
 */
async function* sourceGroups(
  plan: Plan,
  blocks: AsyncIterable<Buffer>,
  values: boolean,
  keys = true,
  from?: SourceStart,
): AsyncGenerator<RowGroup> {
  const input = decoded(blocks, plan.gzip);
  if (plan.bytes) {
    const csvFrom = from !== undefined && 'header' in from ? from : undefined;
    yield* csvCopyGroups(input, plan.csv, plan.nulls, plan.rows, plan.target!, plan.storable, values, keys, csvFrom);
    return;
  }
  for await (const items of readRecords(plan.format, input, plan.csv, plan.nulls, from)) yield itemGroup(items, plan.rows);
}

/** Where pass 2 starts in the middle of a file: a CSV needs its header and record delimiter, JSON and NDJSON only the place. */
type SourceStart = CsvStart | JsonStart;

/** True when pass 2 can start at a checkpoint's byte offset: a file not gzipped (every reader counts bytes). */
function seekable(plan: Plan): boolean {
  return !plan.gzip;
}

function rowError(error: RowError): InvalidInputError {
  return new InvalidInputError(
    `Row ${error.index}${error.field === null ? '' : `, field "${error.field}"`}: ${error.reason}.`,
    error.index,
    {
      ...(error.field === null ? {} : { field: error.field }),
    },
  );
}

function duplicateError(plan: Plan, index: number): RowError {
  return { index, field: plan.key?.[0] ?? null, reason: `the key (${plan.key?.join(', ')}) repeats an earlier row's` };
}

/** Records mode of importFile (see `importFile`): pass 1 validates, pass 2 writes chunk by chunk with the checkpoint. */
export async function importRecords(call: RecordsCall, options: RecordsOptions): Promise<RecordsResult> {
  let plan = await planOf(call, options);
  const record = newSourceRecord();
  const empty = { batch: plan.batch, digest: '', nextIndex: 0, rows: 0, done: false, skipped: 0, invalid: 0 };
  if (plan.signal?.aborted && !plan.check) return stoppedState(plan, 'signal');
  // A paused or cancelled batch: the file is not read (with whilePaused 'wait', once it is resumed).
  const held = plan.check ? undefined : await heldBefore(plan.db, plan.batch, plan.control);
  if (held) return stoppedState(plan, held);
  // A resume of a batch validated with the same options and file: pass 1 is only the digest.
  const hash = recordsOptionsHash(plan, options);
  const resumed = plan.check ? null : await validatedResume(plan.db, plan.batch, plan.path, hash, plan.signal, seekable(plan));
  // Rows loaded beside pass 1 (Preload), committed with their checkpoint once it accepted the file.
  const preload = resumed ? null : await preloadFor(plan, record);
  let scan: Scan | null;
  let preloaded: Preloaded | null = null;
  if (resumed) scan = validatedScan(resumed.total, resumed.repeated);
  else {
    try {
      scan = await scanSource(plan, record);
    } catch (error) {
      recordingEnded(record);
      await preload?.abandon();
      throw error;
    }
    // However pass 1 ended, a preload following it stops waiting for its blocks.
    recordingEnded(record);
    // A row the preload could not copy (one pass 1 rejects or `map` skips) already failed it: its commit rolls back.
    if (preload && scan === null) await preload.abandon();
    else if (preload) preloaded = await preload.committed(record.digest, scan!.total, plan.durable, hash);
  }
  if (scan === null) return stoppedState(plan, 'signal');
  const ddl = plan.creating ? await createStatement(plan.db, plan.creating, plan.key) : null;
  const created = ddl === null ? {} : { created: { ddl } };
  if (plan.check) {
    const { total, skipped, invalid, errors, summary } = scan;
    return { ...empty, digest: record.digest, rows: total - skipped - invalid, skipped, invalid, errors, summary, ...created };
  }
  let validated = hash;
  if (ddl !== null) {
    // Created before the first chunk; pass 2 converts each row for the table as the catalogue now has it.
    await transact(plan.db, (tx) => run(tx, ddl, [], `creating the table "${plan.creating!.table.name}"`));
    plan = await planOf(call, options);
    validated = recordsOptionsHash(plan, options);
  }
  // Pass 2 leaves out the repeats of a key pass 1 found, kept with the options hash for a resume
  // (one that cannot keep them all validates again).
  const repeated = encodeRows(scan.duplicates);
  const written = await writeSource(
    plan,
    resumed?.record ?? record,
    scan,
    scan.duplicates.length === 0 || repeated !== null ? { hash: validated, repeated } : { hash: null, repeated: null },
    resumed?.seek,
    preloaded,
  );
  return { ...written, ...created };
}

/**
 * A preload for pass 1 (see `Preload`): a plain CSV read as bytes `into` a table by COPY on a
 * connection the import holds, whose pass 1 accepts the file whole or not at all (no invalid rows
 * to skip, no `map`), larger than `PRELOAD_MIN_BYTES`; null otherwise.
 */
async function preloadFor(plan: Plan, record: SourceRecord): Promise<Preload | null> {
  const dataSource = dataSourceOf(plan.db);
  const fits = copiesOnHeldConnection(plan) && plan.bytes && !plan.gzip && !plan.check && !plan.lenient && !plan.creating;
  if (!fits || !(await worthPreloading(plan.path))) return null;
  const rows = preloadRecords(dataSource, plan.target!, (blocks) => sourceGroups(plan, blocks, false, false), plan.size);
  const preload = await Preload.open(dataSource, plan.batch, plan.size, rows);
  preload?.start(plan.path, record, { gzip: false, reuseBuffer: false });
  return preload;
}

/** True when pass 2 writes its chunks by COPY into the target on a connection the import holds (no conflict mode). */
function copiesOnHeldConnection(plan: Plan): boolean {
  return plan.target !== null && !plan.conflict && dialectOf(dataSourceOf(plan.db)).copyRows !== undefined && holdsConnection(plan.db);
}

/** Everything in the options that changes what pass 1 accepts or how pass 2 converts a row. */
function recordsOptionsHash(plan: Plan, options: RecordsOptions): string {
  const { format, gzip, csv, nulls, key, lenient, maxInvalid, storable, target } = plan;
  return optionsHash({
    rows: 'records',
    format,
    gzip,
    csv,
    nulls: nulls && [...nulls].sort(),
    key,
    lenient,
    maxInvalid,
    storable,
    target: target && { table: target.table, columns: target.columns, fields: [...target.fieldColumns] },
    map: options.map,
    handler: plan.handler !== undefined,
  });
}

/** Pass 1's findings for a batch validated before: its row count, and no repeated key to leave out. */
function validatedScan(total: number, duplicates: number[]): Scan {
  return { total, skipped: 0, invalid: 0, duplicates, errors: [], summary: [] };
}

/** What is committed for the batch, for a call stopped before it wrote anything. */
async function stoppedState(plan: Plan, stopped: StopReason): Promise<RecordsResult> {
  return { ...(await stoppedBefore(plan.db, plan.batch, stopped)), skipped: 0, invalid: 0 };
}

/** Pass 1: digest, read and evaluate every row; the first invalid row rejects the file unless invalid rows are skipped. */
async function scanSource(plan: Plan, record: SourceRecord): Promise<Scan | null> {
  const duplicates = plan.key ? new DuplicateIds({ collect: true }) : null;
  const lenient = plan.lenient || plan.check;
  const keep = plan.check ? MAX_ERRORS : plan.lenient ? (plan.maxInvalid ?? -1) + 1 : 1;
  const found: RowError[] = [];
  const summary = new ErrorSummary();
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
          if (plan.check) summary.add(evaluated);
          if (found.length < keep) found.push({ index: evaluated.index, field: evaluated.field, reason: evaluated.reason });
          if (!lenient) break scanning;
        } else if (duplicates && evaluated.key !== null) {
          const spilling = duplicates.add(evaluated.key, evaluated.index);
          if (spilling) await spilling;
        }
      }
      if (plan.signal?.aborted && !plan.check) return null;
    }
    // A key naming no field of the file is the options' fault (INVALID_ARGUMENT), not the rows'.
    if (plan.creating) checkCreateKey(plan.creating.inference, plan.key);
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
    if (plan.check) for (const index of repeated) summary.add(duplicateError(plan, index));
    return { total, skipped, invalid: allInvalid, duplicates: repeated, errors: errors.slice(0, MAX_ERRORS), summary: summary.groups() };
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
      if (evaluated.kind === 'row' && evaluated.key !== null) keys.set(index, String(evaluated.key));
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
interface Chunk extends ChunkRows {
  /** Rows `map` skipped. */
  skipped: number[];
}

/** Pass 2: begin or resume the import, then commit the rows from the checkpoint on, chunk by chunk. */
async function writeSource(
  plan: Plan,
  record: SourceRecord,
  scan: Scan,
  validated: { hash: string | null; repeated: string | null },
  seek: ValidatedResume['seek'] = null,
  preloaded: Preloaded | null = null,
): Promise<RecordsResult> {
  const { db, batch, size, signal } = plan;
  const total = scan.total;
  // Pass 2 reads on from the checkpoint's byte offset: a validated resume's, or the preload's.
  seek ??= afterPreload(preloaded);
  const started = await transact(db, (tx) => beginIn(tx, batch, record.digest, total, validated.hash, validated.repeated));
  const nextIndex = Number(started.next_index);
  const soFar = preloaded && preloadedSoFar(preloaded, batch, total, record.bytes, size);
  const already = soFar?.already;
  const result: RecordsResult = { batch, digest: record.digest, nextIndex, rows: already?.rows ?? 0, done: false, skipped: 0, invalid: 0 };
  for (const progress of soFar?.progress ?? []) plan.onProgress?.(progressSince(plan.control.startedAt, progress));
  if (nextIndex >= total) return { ...result, done: true };
  if (signal?.aborted) return { ...result, stopped: 'signal' };
  // Paused or cancelled during pass 1: no chunk goes.
  const stop = stopFor(started);
  if (stop) return { ...result, stopped: stop };
  // Chunks but the last commit asynchronously where the import owns its transactions (see README).
  const setting = plan.durable || joinsTransaction(db) ? undefined : dialectOf(dataSourceOf(db)).asynchronousCommit;
  const asynchronous: BoundStatement | undefined = setting === undefined ? undefined : { sql: setting, parameters: [] };
  // A plain COPY into the target goes as one round trip per chunk on a connection held for the
  // import, where it opens its own transactions (a configured isolation level is TypeORM's to apply).
  const dataSource = dataSourceOf(db);
  let runner: QueryRunner | null = null;
  const held = copiesOnHeldConnection(plan) ? () => (runner ??= dataSource.createQueryRunner()) : null;
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
  const pipeline = new ChunkPipeline<Chunk>({
    db,
    batch,
    record,
    total,
    nextIndex,
    depth,
    control: plan.control,
    signal,
    onProgress: plan.onProgress,
    already,
    async commit(taken, order, span) {
      const last = taken.start + taken.count >= total;
      const committed = await commitChunk(plan, record, taken, last ? undefined : asynchronous, held, order);
      // Rows `map` skipped and invalid rows as attributes of the chunk's span.
      if (committed?.advanced) span.set({ skipped: taken.skipped.length, invalid: taken.rejects.length });
      return committed;
    },
    counted(taken) {
      result.skipped += taken.skipped.length;
      result.invalid += taken.rejects.length;
    },
  });
  let chunk = emptyChunk(nextIndex);
  const take = (from: number): Chunk | null => {
    // At most `depth` chunks are in flight: the COPY text taken before them can be reused (`CopyText.take`).
    if (copying)
      chunk.copied = { rows: copying.take(), columns: copyColumns ?? chunk.rows[0]?.columns ?? [], binary: copying instanceof CopyBinary };
    const taken = rowsFrom(chunk, from);
    chunk = emptyChunk(taken.start + taken.count);
    return taken.count > 0 ? taken : null;
  };
  let duplicate = 0;
  const ended = await pipeline.run(
    async () => {
      // A resume of a validated file starts at the checkpoint's byte offset, where the digest pass recorded it.
      const from = seek !== null && seek.index === nextIndex ? await startOf(plan, record, seek) : undefined;
      const onBytes = (read: number) => (pipeline.bytes = read);
      const blocks = verifiedBlocks(plan.path, record, batch, { onBytes, ...(from ? { at: from.offset } : {}) });
      // Pass 1 found the repeated keys: pass 2 needs no key of its own.
      for await (const group of unchanged(sourceGroups(plan, blocks, !copies, false, from), batch, record)) {
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
          if (chunk.count === size && pipeline.endsBefore(index)) {
            chunk.nextOffset = plan.gzip ? null : (group.end?.(r) ?? null);
            if (!(await pipeline.submit(take))) return false;
          }
        }
      }
      if (chunk.count > 0) await pipeline.submit(take);
      return true;
    },
    async () => {
      await (runner as QueryRunner | null)?.release();
    },
  );
  return { ...ended, skipped: result.skipped, invalid: result.invalid };
}

/** Where pass 2 starts reading in the middle of the file; a CSV's header and delimiter come from its first record. */
async function startOf(plan: Plan, record: SourceRecord, seek: { index: number; offset: number }): Promise<SourceStart> {
  if (plan.format !== 'csv') return seek;
  const first = decoded(verifiedBlocks(plan.path, record, plan.batch, { recordedOnly: true }), plan.gzip);
  const { record: names, delimiter } = await csvHeading(first, plan.csv);
  return { header: plan.csv.columns ?? csvHeader(names), delimiter, index: seek.index, offset: seek.offset };
}

function emptyChunk(start: number): Chunk {
  return { start, count: 0, rows: [], rejects: [], skipped: [], copied: null, nextOffset: null };
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
    nextOffset: chunk.nextOffset,
  };
}

function rejectReason(invalid: Extract<Evaluated, { kind: 'invalid' }>): string {
  return invalid.field === null ? invalid.reason : `${invalid.field}: ${invalid.reason}`;
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
): Promise<ChunkOutcome | null> {
  const { batch } = plan;
  const { digest } = record;
  const { start, count, rows, rejects } = chunk;
  const write: RowWrite | null = plan.target
    ? { target: plan.target, conflict: plan.conflict, keyColumns: plan.keyColumns, before: asynchronous ? [asynchronous] : [] }
    : null;
  if (held && write && (chunk.copied || copiesInOneRoundTrip(held().manager, rows, write)))
    return commitHeld(plan, record, chunk, write, held(), order);
  // Not pipelined: this chunk's transaction starts once the one before has ended (nothing, if it failed).
  if (!(await order.previous)) return null;
  let writing = false;
  try {
    return await transact(plan.db, async (tx): Promise<ChunkOutcome> => {
      // The usual case in one statement: the checkpoint is at `start`, so advance it (and hold its lock).
      const counts = { rows: rows.length, skipped: chunk.skipped.length, nextOffset: chunk.nextOffset };
      if (!(await advanceImport(tx, batch, digest, start, start + count, counts))) {
        return notAtStart(batch, digest, start, await lockImport(tx, batch));
      }
      if (rejects.length > 0) await writeRejects(tx, batch, rejects);
      if (write && rows.length > 0) {
        writing = true;
        await writeRows(tx, rows, write);
        writing = false;
      } else {
        if (asynchronous) await tx.query(asynchronous.sql, asynchronous.parameters);
        if (plan.handler)
          await plan.handler(
            rows.map((row) => row.record as Record<string, unknown>),
            tx,
            start,
          );
      }
      return { next: start + count, written: rows.length, advanced: true };
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
): Promise<ChunkOutcome | null> {
  const { batch } = plan;
  const { digest } = record;
  const { start, count, rows, rejects } = chunk;
  const pipelined = { proceed: proceedAfter(order, plan.signal), onSent: order.sent };
  let copied: boolean | null;
  try {
    copied = await pipelinedWrite(order, plan.signal, () => copyChunkTransaction(runner, batch, digest, chunk, write, pipelined));
  } catch (error) {
    if (!(error instanceof InvalidInputError)) throw error;
    const named = await valuesOf(plan, record, rows)
      .then((valued) => firstExistingKey(runner.manager, valued, write))
      .catch(() => null);
    throw named ?? error;
  }
  if (copied === null) return null;
  if (copied) return { next: start + count, written: rows.length, advanced: true };
  // Not at `start`: the committed state says why (read in autocommit on the same connection).
  return notAtStart(batch, digest, start, await readImport(runner.manager, batch));
}
