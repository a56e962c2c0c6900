import { isUtf8 } from 'node:buffer';
import { Readable } from 'node:stream';
import { Parser } from 'csv-parse';

const QUOTE = 0x22;
const COMMA = 0x2c;
const CR = 0x0d;
const LF = 0x0a;
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const RECORDS_PER_YIELD = 1024;
// A record still unfinished after this many bytes goes to csv-parse, which reads it incrementally
// (here an unfinished record is read again from its start with every block).
const LONG_RECORD = 1 << 20;

export type RecordDelimiter = '\r\n' | '\n' | '\r';

/**
 * Records as byte spans, not strings: field `f` spans bytes `starts[f]…ends[f]` of `bytes`, and
 * record `r` holds fields `fieldsAt[r]…fieldsAt[r + 1] − 1`. The arrays are reused: a consumer is
 * done with one group before it asks for the next.
 */
export class CsvSpans {
  bytes: Buffer = Buffer.alloc(0);
  count = 0;
  fieldsAt = new Int32Array(1024);
  starts = new Int32Array(4096);
  ends = new Int32Array(4096);
  /** Fields stored, those of an unfinished record included. */
  fields = 0;
  /** Where record `r` ends in `bytes`, its line break included: the next record's start. */
  recordEnds = new Int32Array(1024);
  /** The input's byte offset of `bytes[0]` (a BOM counted); −1 where it is not known. */
  base = -1;

  reset(bytes: Buffer, base = -1): void {
    this.bytes = bytes;
    this.count = 0;
    this.fields = 0;
    this.base = base;
  }

  /** The input's byte offset where the record after `record` starts, or null where not known. */
  endOffset(record: number): number | null {
    return this.base < 0 ? null : this.base + this.recordEnds[record];
  }

  addField(start: number, end: number): void {
    if (this.fields === this.starts.length) {
      this.starts = grown(this.starts);
      this.ends = grown(this.ends);
    }
    this.starts[this.fields] = start;
    this.ends[this.fields++] = end;
  }

  /** Ends the record whose fields were added since the last one ended, its line break ending before `end`. */
  endRecord(end = 0): void {
    if (this.count + 2 > this.fieldsAt.length) {
      this.fieldsAt = grown(this.fieldsAt);
      this.recordEnds = grown(this.recordEnds);
    }
    this.recordEnds[this.count] = end;
    this.fieldsAt[++this.count] = this.fields;
  }

  /** Drops the fields of an unfinished record. */
  dropUnfinished(): void {
    this.fields = this.fieldsAt[this.count];
  }

  fieldCount(record: number): number {
    return this.fieldsAt[record + 1] - this.fieldsAt[record];
  }

  /** Field `column` of `record` as text, or undefined when the record is shorter. */
  text(record: number, column: number): string | undefined {
    if (column >= this.fieldCount(record)) return undefined;
    const f = this.fieldsAt[record] + column;
    return this.bytes.toString('utf8', this.starts[f], this.ends[f]);
  }

  record(record: number): string[] {
    const fields: string[] = [];
    for (let f = this.fieldsAt[record]; f < this.fieldsAt[record + 1]; f++)
      fields.push(this.bytes.toString('utf8', this.starts[f], this.ends[f]));
    return fields;
  }

  /** Spans over the UTF-8 of records given as strings (those csv-parse gives). */
  static of(records: string[][]): CsvSpans {
    const spans = new CsvSpans();
    const parts = records.flat();
    const bytes = Buffer.from(parts.join(''));
    spans.reset(bytes);
    let at = 0;
    for (const record of records) {
      for (const field of record) {
        const end = at + Buffer.byteLength(field);
        spans.addField(at, end);
        at = end;
      }
      spans.endRecord();
    }
    return spans;
  }
}

function grown(array: Int32Array<ArrayBuffer>): Int32Array<ArrayBuffer> {
  const bigger = new Int32Array(array.length * 2);
  bigger.set(array);
  return bigger;
}

/**
 * The records of a CSV byte stream exactly as csv-parse gives them with `bom`,
 * `relax_column_count` and `skip_empty_lines`, in groups of strings. See `csvSpans`.
 */
export async function* csvRecords(blocks: AsyncIterable<Buffer>): AsyncGenerator<string[][]> {
  for await (const spans of csvSpans(blocks)) {
    const records: string[][] = [];
    for (let r = 0; r < spans.count; r++) records.push(spans.record(r));
    yield records;
  }
}

/**
 * The records of a CSV byte stream exactly as csv-parse gives them with `bom`,
 * `relax_column_count` and `skip_empty_lines`, in groups of byte spans. A record without a quote
 * character is split here, in one pass over the bytes and without making strings (csv-parse
 * looks at each byte through a dozen option checks, the bulk of an import's time); from the first
 * record holding a quote on, the rest of the input goes through csv-parse itself, so quoting and
 * its errors (CsvError) are csv-parse's. Like csv-parse, the record delimiter is the first of
 * \r\n, \n or \r met. A very long record also goes to csv-parse, which reads it incrementally.
 */
export function csvSpans(blocks: AsyncIterable<Buffer>, from?: CsvPosition, separator: CsvSeparator = ','): AsyncGenerator<CsvSpans> {
  const rest: CsvRest<CsvSpans> = async function* (head, rest, delimiter) {
    for await (const records of parsedByCsvParse(head, rest, delimiter, separator)) yield CsvSpans.of(records);
  };
  return csvSpansThen(blocks, rest, { from, separator });
}

/** The field separator of the CSV a byte reader splits: a comma, or a tab (a `.tsv` file). */
export type CsvSeparator = ',' | '\t';

/**
 * What reads the input from the start of a record on, once `csvSpansThen` hands it over: `head`
 * (the bytes from that record on that arrived already, a copy) and the rest of the input (null at
 * its end), with the record delimiter found so far and the byte offset of `head` in the file.
 */
export type CsvRest<T> = (
  head: Buffer,
  rest: AsyncIterator<Buffer> | null,
  delimiter: RecordDelimiter | null,
  offset: number,
) => AsyncGenerator<T>;

/**
 * `csvSpans` with another reader for the rest of the input from the first record holding a quote
 * on (or a very long one). With `utf8`, invalid UTF-8 hands over too, from the first record of the
 * block that holds it: the spans yielded are always valid UTF-8.
 */
export async function* csvSpansThen<T>(
  blocks: AsyncIterable<Buffer>,
  rest: CsvRest<T>,
  options: { utf8?: boolean; from?: CsvPosition; separator?: CsvSeparator } = {},
): AsyncGenerator<CsvSpans | T> {
  const iterator = blocks[Symbol.asyncIterator]();
  try {
    yield* scan(iterator, rest, options.utf8 === true, options.from, (options.separator ?? ',').charCodeAt(0));
  } finally {
    // However the reading ends, the source is closed (its file handle released).
    await iterator.return?.();
  }
}

/** Where a reader starts in the middle of a CSV input: the byte offset of a record's start, and the record delimiter. */
export interface CsvPosition {
  offset: number;
  delimiter: RecordDelimiter | null;
}

async function* scan<T>(
  iterator: AsyncIterator<Buffer>,
  rest: CsvRest<T>,
  utf8: boolean,
  from: CsvPosition | undefined,
  separator: number,
): AsyncGenerator<CsvSpans | T> {
  let delimiter: RecordDelimiter | null = from?.delimiter ?? null;
  // The unfinished record and the block after it, copied into a buffer of our own: the source may
  // refill its block buffer once asked for the next one.
  let work = Buffer.allocUnsafe(0);
  let pending = 0;
  // Bytes of the input (after a BOM) before the work buffer's first one.
  let passed = from?.offset ?? 0;
  let bom = 0;
  let bomChecked = from !== undefined;
  const spans = new CsvSpans();

  for (;;) {
    const next = await iterator.next();
    const end = next.done === true;
    if (!end) {
      if (pending + next.value.length > work.length) {
        const grown = Buffer.allocUnsafe(Math.max(2 * work.length, pending + next.value.length));
        work.copy(grown, 0, 0, pending);
        work = grown;
      }
      next.value.copy(work, pending);
    }
    let buffer: Buffer = work.subarray(0, end ? pending : pending + next.value.length);
    if (!bomChecked) {
      // As csv-parse: wait for three bytes (or the end) before deciding on a BOM.
      if (buffer.length < BOM.length && !end) {
        pending = buffer.length;
        continue;
      }
      if (buffer.subarray(0, BOM.length).equals(BOM)) {
        buffer = buffer.subarray(BOM.length);
        bom = BOM.length;
      }
      bomChecked = true;
    }

    const split = splitRecords(buffer, spans, end, delimiter, bom + passed, separator);
    const { start, field, quoted } = split;
    delimiter = split.delimiter;
    const length = buffer.length;

    // The records read are valid UTF-8 when the bytes up to the last complete one are (it ends on a line break).
    const invalid = utf8 && !isUtf8(buffer.subarray(0, end ? length : start));
    if (invalid || quoted || length - start > LONG_RECORD) {
      spans.dropUnfinished();
      if (!invalid && spans.count > 0) yield spans;
      // The other reader keeps what it is given: copies, not the buffers that are refilled.
      const head = Buffer.from(buffer.subarray(invalid ? 0 : start));
      yield* rest(head, end ? null : iterator, delimiter, bom + passed + (invalid ? 0 : start));
      return;
    }
    if (end) {
      // The last record needs no line break after it.
      if (length > start) {
        spans.addField(field, length);
        spans.endRecord(length);
      }
      if (spans.count > 0) yield spans;
      return;
    }
    spans.dropUnfinished();
    if (spans.count > 0) yield spans;
    // The unfinished record moves to the front of the work buffer (the bytes before it are done).
    const offset = buffer.byteOffset - work.byteOffset;
    work.copy(work, 0, offset + start, offset + length);
    pending = length - start;
    passed += start;
  }
}

/** Where `splitRecords` stopped: the unfinished record and its last field, whether at a quote, and the record delimiter. */
interface Split {
  start: number;
  /** The start of the last field read. */
  field: number;
  quoted: boolean;
  delimiter: RecordDelimiter | null;
}

/**
 * The complete records of `buffer` up to the first quote, added to `spans` (reset to it). A plain
 * function, not part of the generator: V8 optimises its loop over the bytes far better there.
 */
function splitRecords(
  buffer: Buffer,
  spans: CsvSpans,
  end: boolean,
  found: RecordDelimiter | null,
  base: number,
  separator: number,
): Split {
  let delimiter = found;
  spans.reset(buffer, base);
  let start = 0; // first byte of the record being read
  let field = 0; // first byte of the field being read
  let quoted = false;
  const length = buffer.length;
  for (let at = 0; at < length; at++) {
    const byte = buffer[at];
    // Every byte that matters (the separator, a comma or a tab, the quote, CR, LF) is at most a comma.
    if (byte > COMMA) continue;
    if (byte === separator) {
      spans.addField(field, at);
      field = at + 1;
      continue;
    }
    if (byte === QUOTE) {
      quoted = true;
      break;
    }
    if (byte !== LF && byte !== CR) continue;
    let width = 0;
    if (delimiter === null) {
      // A CR at the end of what has arrived may be the first half of CRLF: decide with more bytes.
      if (byte === CR && at + 1 === length && !end) break;
      delimiter = byte === LF ? '\n' : buffer[at + 1] === LF ? '\r\n' : '\r';
    }
    if (delimiter === '\n') width = byte === LF ? 1 : 0;
    else if (delimiter === '\r') width = byte === CR ? 1 : 0;
    else if (byte === CR) {
      if (at + 1 === length && !end) break;
      width = buffer[at + 1] === LF ? 2 : 0;
    }
    if (width === 0) continue; // a line break that is not the record delimiter is data
    if (at > start) {
      spans.addField(field, at);
      spans.endRecord(at + width);
    } // else: an empty line, skipped
    at += width - 1;
    start = at + 1;
    field = start;
  }
  return { start, field, quoted, delimiter };
}

/** The rest of the input, from the start of a record, through csv-parse (with the delimiter already found). */
async function* parsedByCsvParse(
  head: Buffer,
  rest: AsyncIterator<Buffer> | null,
  delimiter: RecordDelimiter | null,
  separator: CsvSeparator,
): AsyncGenerator<string[][]> {
  async function* input(): AsyncGenerator<Buffer> {
    if (head.length > 0) yield head;
    if (rest === null) return;
    for (let next = await rest.next(); next.done !== true; next = await rest.next()) yield Buffer.from(next.value);
  }
  const parser = new Parser({
    delimiter: separator,
    relax_column_count: true,
    skip_empty_lines: true,
    ...(delimiter === null ? {} : { record_delimiter: delimiter }),
  });
  const source = Readable.from(input(), { objectMode: false });
  source.on('error', (error) => parser.destroy(error));
  source.pipe(parser);
  let records: string[][] = [];
  try {
    for await (const record of parser as AsyncIterable<string[]>) {
      records.push(record);
      if (records.length === RECORDS_PER_YIELD) {
        yield records;
        records = [];
      }
    }
  } catch (error) {
    // Records before a malformed one come first, as they would from csv-parse alone.
    if (records.length > 0) yield records;
    throw error;
  } finally {
    source.destroy();
  }
  if (records.length > 0) yield records;
}
