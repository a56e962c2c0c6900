import { createHash } from 'node:crypto';
import { type Db, transact } from '../core/transaction';
import { readImport } from './import-store';
import { BLOCK_SIZE, DigestList, newSourceRecord, recordedBlocks, type SourceRecord } from './source-blocks';

/**
 * A resume that costs only what is left: a batch whose file pass 1 validated keeps the hash of
 * the options it was validated with (`validated_options`). When an import of the same file with
 * the same options resumes it, pass 1 is only the file's SHA-256 (its blocks' digests kept, so
 * pass 2 still checks every block it reads), and pass 2 goes on from the checkpoint: from its
 * byte offset (`next_offset`) where the reader can start there, else from the file's start.
 */

/** SHA-256 hex of everything in an import's options that changes validation or conversion (stable JSON). */
export function optionsHash(parts: Record<string, unknown>): string {
  return createHash('sha256').update(stableJson(parts)).digest('hex');
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.keys(value)
      .sort()
      .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
      .map((key) => `${JSON.stringify(key)}:${stableJson((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(',')}}`;
  }
  if (typeof value === 'function' || typeof value === 'bigint') return JSON.stringify(value.toString());
  return JSON.stringify(value) ?? 'null';
}

// A `text` column holds 65,535 bytes on MySQL: a longer list is not kept (a resume validates again).
const MAX_ROWS_TEXT = 60_000;

/**
 * Row indexes (ascending) as text for `repeated_rows`: the gaps between them in base 36, comma
 * separated; null when there are none, or more than the column holds.
 */
export function encodeRows(rows: number[]): string | null {
  if (rows.length === 0) return null;
  let text = '';
  let previous = 0;
  for (const row of rows) {
    text += `${text === '' ? '' : ','}${(row - previous).toString(36)}`;
    if (text.length > MAX_ROWS_TEXT) return null;
    previous = row;
  }
  return text;
}

/** The row indexes `encodeRows` wrote (none for null). */
export function decodeRows(text: string | null | undefined): number[] {
  if (!text) return [];
  let row = 0;
  return text.split(',').map((gap) => (row += parseInt(gap, 36)));
}

/** What a resume without validation starts from: the file's digest and blocks, and its row count. */
export interface ValidatedResume {
  record: SourceRecord;
  total: number;
  /** The rows pass 1 found repeating a key, which pass 2 leaves out (records mode). */
  repeated: number[];
  /** Where pass 2 may start reading: the checkpoint's row and its byte offset (blocks from there on are digested on their own); null to read from the start. */
  seek: { index: number; offset: number } | null;
}

/**
 * When `batch` is unfinished, was validated with options hashing to `hash`, and the file still
 * has the digest it was validated with: the digest pass's record and the stored row count. Null
 * when pass 1 must validate (a new batch, other options, another file, a stop during the digest).
 */
export async function validatedResume(
  db: Db,
  batch: string,
  path: string,
  hash: string,
  signal: AbortSignal | undefined,
  seekable = false,
): Promise<ValidatedResume | null> {
  const stored = await transact(db, (tx) => readImport(tx, batch));
  if (stored?.validated_options !== hash || stored.total_rows === null) return null;
  const total = Number(stored.total_rows);
  const record = newSourceRecord();
  // A reader that can start in the middle (`seekable`: a plain file read as bytes) starts at the checkpoint's offset.
  const index = Number(stored.next_index);
  const offset = stored.next_offset === null || stored.next_offset === undefined ? null : Number(stored.next_offset);
  const seek = seekable && index > 0 && offset !== null && offset > 0 ? { index, offset } : null;
  if (seek) record.seek = { from: Math.floor(seek.offset / BLOCK_SIZE), digests: new DigestList() };
  // Reads every block (the same fixed blocks as pass 2), digesting as it goes; no row is parsed.
  for await (const block of recordedBlocks(path, record, true)) {
    void block;
    if (signal?.aborted) return null;
  }
  return record.digest === stored.digest ? { record, total, seek, repeated: decodeRows(stored.repeated_rows) } : null;
}
