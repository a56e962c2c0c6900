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

type RecordDelimiter = '\r\n' | '\n' | '\r';

/**
 * The records of a CSV byte stream exactly as csv-parse gives them with `bom`,
 * `relax_column_count` and `skip_empty_lines`, in groups. A record without a quote character is
 * split here, in one pass over the bytes (csv-parse looks at each byte through a dozen option
 * checks, the bulk of an import's time); from the first record holding a quote on, the rest of
 * the input goes through csv-parse itself, so quoting and its errors (CsvError) are csv-parse's.
 * Like csv-parse, the record delimiter is the first of \r\n, \n or \r met. A very long record
 * also goes to csv-parse, which reads it incrementally.
 */
export async function* csvRecords(blocks: AsyncIterable<Buffer>): AsyncGenerator<string[][]> {
  const iterator = blocks[Symbol.asyncIterator]();
  try {
    yield* scan(iterator);
  } finally {
    // However the reading ends, the source is closed (its file handle released).
    await iterator.return?.();
  }
}

async function* scan(iterator: AsyncIterator<Buffer>): AsyncGenerator<string[][]> {
  let delimiter: RecordDelimiter | null = null;
  let pending: Buffer = Buffer.alloc(0);
  let bomChecked = false;
  let records: string[][] = [];

  for (;;) {
    const next = await iterator.next();
    const end = next.done === true;
    let buffer: Buffer = end ? pending : pending.length > 0 ? Buffer.concat([pending, next.value]) : next.value;
    if (!bomChecked) {
      // As csv-parse: wait for three bytes (or the end) before deciding on a BOM.
      if (buffer.length < BOM.length && !end) {
        pending = buffer;
        continue;
      }
      if (buffer.subarray(0, BOM.length).equals(BOM)) buffer = buffer.subarray(BOM.length);
      bomChecked = true;
    }

    let start = 0; // first byte of the record being read
    let field = 0; // first byte of the field being read
    let fields: string[] = [];
    let quoted = false;
    const length = buffer.length;
    for (let at = 0; at < length; at++) {
      const byte = buffer[at];
      if (byte === COMMA) {
        fields.push(buffer.toString('utf8', field, at));
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
        fields.push(buffer.toString('utf8', field, at));
        records.push(fields);
        if (records.length === RECORDS_PER_YIELD) {
          yield records;
          records = [];
        }
      } // else: an empty line, skipped
      fields = [];
      at += width - 1;
      start = at + 1;
      field = start;
    }

    if (quoted || length - start > LONG_RECORD) {
      if (records.length > 0) yield records;
      yield* parsedByCsvParse(buffer.subarray(start), end ? null : iterator, delimiter);
      return;
    }
    if (end) {
      // The last record needs no line break after it.
      if (length > start) {
        fields.push(buffer.toString('utf8', field, length));
        records.push(fields);
      }
      if (records.length > 0) yield records;
      return;
    }
    if (records.length >= RECORDS_PER_YIELD / 2) {
      yield records;
      records = [];
    }
    pending = buffer.subarray(start);
  }
}

/** The rest of the input, from the start of a record, through csv-parse (with the delimiter already found). */
async function* parsedByCsvParse(
  head: Buffer,
  rest: AsyncIterator<Buffer> | null,
  delimiter: RecordDelimiter | null,
): AsyncGenerator<string[][]> {
  async function* input(): AsyncGenerator<Buffer> {
    if (head.length > 0) yield head;
    if (rest === null) return;
    for (let next = await rest.next(); next.done !== true; next = await rest.next()) yield next.value;
  }
  const parser = new Parser({
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
