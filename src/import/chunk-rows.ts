import { CopyBinary, type CopyRows, skipCopyRows } from '../dialect';
import type { CsvSpans } from './csv-records';
import { type CsvData, csvData, type CsvDataStart, type CsvHeader, csvRowOf } from './csv-rows';
import type { JsonStart } from './json-items';
import { jsonRows } from './json-rows';
import { isCsvLike, type RowsFormat, separatorOf } from './read-rows';
import type { Row } from './row';

/** A chunk as `ChunkRows.take` hands it over: Row objects, or COPY text. */
export interface TakenRows {
  start: number;
  rows: Row[];
  copy: CopyRows | null;
  /** The byte offset of the source row after the chunk. */
  nextOffset: number | null;
}

const MINUS = 0x2d;
const ZERO = 0x30;

/** The integer written `-?[0-9]+` at `bytes[start…end)`, one pass 1 checked (within ±(2^53−1)). */
function validatedInteger(bytes: Uint8Array, start: number, end: number): number {
  const negative = bytes[start] === MINUS;
  let value = 0;
  for (let at = negative ? start + 1 : start; at < end; at++) value = value * 10 + (bytes[at] - ZERO);
  return negative ? -value : value;
}

/**
 * The rows of the chunk being read: Row objects, or, for the bulk path, rows in PostgreSQL's binary
 * COPY format (`batch` is the first field of each): the server parses no text, and an id's bytes go
 * as they are, unescaped (pass 1 checked they are well-formed UTF-8 without U+0000).
 */
export class ChunkRows {
  start = 0;
  count = 0;
  /** The byte offset of the source row after the chunk's last, where the reader knows it. */
  nextOffset: number | null = null;
  private rows: Row[] = [];
  private readonly binary: CopyBinary | null;

  constructor(
    private readonly batch: Buffer | null,
    inFlight: number,
  ) {
    this.binary = batch ? new CopyBinary(inFlight) : null;
  }

  get copying(): boolean {
    return this.binary !== null;
  }

  /** Bytes of COPY rows held (bulk path). */
  get byteLength(): number {
    return this.binary?.byteLength ?? 0;
  }

  add(row: Row, at: number): void {
    if (this.count++ === 0) this.start = at;
    if (!this.binary) {
      this.rows.push(row);
      return;
    }
    this.binary.beginRow(3);
    this.binary.text(this.batch as Buffer);
    this.binary.text(Buffer.from(row.id));
    this.binary.integer(row.value, 'int8');
    this.binary.endRow();
  }

  /** A CSV record pass 1 validated: its id's bytes as they are, its value read from its digits (bulk path only). */
  addCsv(spans: CsvSpans, r: number, header: CsvHeader, at: number): void {
    const first = spans.fieldsAt[r];
    const fields = spans.fieldsAt[r + 1] - first;
    if (header.id >= fields || header.value >= fields) {
      // Not a record pass 1 accepted: csvRowOf says what is wrong with it.
      this.add(csvRowOf(spans, r, header, at), at);
      return;
    }
    if (this.count++ === 0) this.start = at;
    const binary = this.binary as CopyBinary;
    const id = first + header.id;
    const value = first + header.value;
    binary.beginRow(3);
    binary.text(this.batch as Buffer);
    binary.text(spans.bytes, spans.starts[id], spans.ends[id]);
    binary.integer(validatedInteger(spans.bytes, spans.starts[value], spans.ends[value]), 'int8');
    binary.endRow();
  }

  /** The chunk's rows from `from` on (those before are committed already), or null when none; starts a new chunk. */
  take(from: number): TakenRows | null {
    const skip = Math.min(this.count, Math.max(0, from - this.start));
    const start = this.start + skip;
    const rows = this.rows.slice(skip);
    const copy = this.binary ? skipCopyRows(this.binary.take(), skip) : null;
    const count = this.count - skip;
    const nextOffset = this.nextOffset;
    this.rows = [];
    this.count = 0;
    this.nextOffset = null;
    return count > 0 ? { start, rows, copy, nextOffset } : null;
  }
}

/** How `fillChunks` reads: where, and what happens at each chunk's end. */
export interface ChunkReading {
  /** The first row to keep (those before are committed already), asked again at each row. */
  from: () => number;
  /** True when the chunk ends at row `at`. */
  chunkEnds: (at: number) => boolean;
  /** Called at each chunk's end: whether to read on. */
  chunkEnded: () => Promise<boolean>;
  /** Wraps the reader (pass 2: a row error there means the file changed). */
  checked?: <T>(items: AsyncGenerator<T>) => AsyncGenerator<T>;
  /** Where the blocks start in the file, when not at its start (a resume at a checkpoint's byte offset). */
  start?: CsvDataStart | JsonStart;
}

/**
 * Reads the source's rows into `chunk` — CSV records straight to COPY rows when it copies — the
 * rows before `from()` skipped. After each row `at` for which `chunkEnds(at)` holds, `chunkEnded()`
 * says whether to read on. False when it stopped the reading, true at the end of the source.
 * Each chunk keeps the byte offset of the row after it.
 */
export async function fillChunks(
  format: RowsFormat,
  blocks: AsyncGenerator<Buffer>,
  chunk: ChunkRows,
  { from, chunkEnds, chunkEnded, checked = (items) => items, start }: ChunkReading,
): Promise<boolean> {
  if (isCsvLike(format)) {
    const csvStart = start !== undefined && 'header' in start ? start : undefined;
    const data = csvData(blocks, csvStart, separatorOf(format));
    const groups = chunk.copying ? data : csvRowGroups(data);
    for await (const group of checked<CsvData & { rows?: Row[] }>(groups)) {
      const { spans, from: first, index, header, rows } = group;
      for (let r = first; r < spans.count; r++) {
        const at = index + r - first;
        if (at < from()) continue;
        if (rows) chunk.add(rows[r - first], at);
        else chunk.addCsv(spans, r, header, at);
        if (chunkEnds(at)) {
          chunk.nextOffset = spans.endOffset(r);
          if (!(await chunkEnded())) return false;
        }
      }
    }
    return true;
  }
  let at = start?.index ?? 0;
  for await (const { items: rows, ends } of checked(jsonRows(format, blocks, { start, offsets: true }))) {
    for (let r = 0; r < rows.length; r++) {
      if (at >= from()) {
        chunk.add(rows[r], at);
        if (chunkEnds(at)) {
          chunk.nextOffset = ends[r];
          if (!(await chunkEnded())) return false;
        }
      }
      at++;
    }
  }
  return true;
}

/** The groups of `csvData` with their records as rows (INVALID_INPUT on the first bad one, as `csvRows`). */
async function* csvRowGroups(groups: AsyncGenerator<CsvData>): AsyncGenerator<CsvData & { rows: Row[] }> {
  for await (const group of groups) {
    const rows: Row[] = [];
    for (let r = group.from; r < group.spans.count; r++) rows.push(csvRowOf(group.spans, r, group.header, group.index + r - group.from));
    yield { ...group, rows };
  }
}
