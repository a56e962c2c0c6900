import { Readable } from 'node:stream';
import { CsvError, Parser } from 'csv-parse';
import { InvalidArgumentError, InvalidInputError } from '../../core/errors';
import type { ImportFormat } from '../read-rows';
import { startsWithBom, Utf8Text } from '../utf8-text';
import { JsonNumber, JsonSyntaxError, parseJson } from './json-values';

/** One source row of a records import: its fields, or why it is not a record. */
export interface SourceItem {
  /** Position in the source, from 0 (data records only: a CSV header is not a row). */
  index: number;
  /** The row's source text (a JSON item, an NDJSON line, a CSV record). */
  raw: string;
  fields: Record<string, unknown> | null;
  /** Why the row is invalid as a record (not an object, ragged, malformed JSON), or null. */
  problem: { field: string | null; reason: string } | null;
  /** The byte offset in the file right after the row, where a reader can start for the next one (JSON and NDJSON readers). */
  end?: number;
}

/** How a CSV file is read (records mode); each character option is one character, not a line break. */
export interface CsvOptions {
  /** The field separator; default `,`. */
  delimiter?: string;
  /** The quote character; default `"`. */
  quote?: string;
  /** The character that escapes a quote inside a quoted field; default `"` (a doubled quote). */
  escape?: string;
  /** Column names when the file has no header row. */
  columns?: string[];
  /** The text read as NULL (default: an empty unquoted field). */
  null?: string;
}

export function validateCsvOptions(csv: unknown): CsvOptions {
  if (csv === undefined) return {};
  if (typeof csv !== 'object' || csv === null) throw new InvalidArgumentError('importFile: csv must be an object.');
  const options = csv as CsvOptions;
  for (const name of ['delimiter', 'quote', 'escape'] as const) {
    const value = options[name];
    if (value !== undefined && (typeof value !== 'string' || value.length !== 1 || value === '\n' || value === '\r')) {
      throw new InvalidArgumentError(`importFile: csv.${name} must be one character (not a line break).`);
    }
  }
  if (options.null !== undefined && typeof options.null !== 'string')
    throw new InvalidArgumentError('importFile: csv.null must be a string.');
  if (options.columns !== undefined) {
    if (!Array.isArray(options.columns) || options.columns.length === 0 || !options.columns.every((c) => typeof c === 'string')) {
      throw new InvalidArgumentError('importFile: csv.columns must be a non-empty array of names.');
    }
    checkHeader(options.columns, (message) => new InvalidArgumentError(`importFile: csv.columns ${message}`));
  }
  return options;
}

function checkHeader(names: unknown[], error: (message: string) => Error): string[] {
  const seen = new Set<string>();
  for (const name of names) {
    if (typeof name !== 'string' || name.length === 0) throw error('has an empty column name.');
    if (seen.has(name)) throw error(`names column "${name}" twice.`);
    seen.add(name);
  }
  return names as string[];
}

/**
 * The texts read as NULL: `nullIf` and `csv.null` together, in a CSV field quoted or not and in a
 * JSON record's string fields; null for the default (an empty unquoted CSV field, nothing in JSON).
 */
export type NullTexts = ReadonlySet<string> | null;

export function validateNullIf(nullIf: unknown): void {
  if (nullIf !== undefined && (!Array.isArray(nullIf) || !nullIf.every((text) => typeof text === 'string'))) {
    throw new InvalidArgumentError('importFile: nullIf must be an array of strings.');
  }
}

export function nullTextsOf(nullIf: string[] | undefined, csv: CsvOptions): NullTexts {
  if (nullIf === undefined && csv.null === undefined) return null;
  return new Set([...(nullIf ?? []), ...(csv.null === undefined ? [] : [csv.null])]);
}

/**
 * Where a JSON or NDJSON reader starts in the middle of a file: right after row `index - 1`, at
 * byte `offset` (a row's `end`), the blocks given from there on.
 */
export interface JsonStart {
  index: number;
  offset: number;
}

/**
 * The source's records in groups; INVALID_INPUT for what makes the whole file unreadable. JSON
 * and NDJSON rows carry their `end` offset, and those readers can start at one (`from`).
 */
export function readRecords(
  format: ImportFormat,
  blocks: AsyncIterable<Buffer>,
  csv: CsvOptions,
  nulls: NullTexts = null,
  from?: JsonStart,
): AsyncGenerator<SourceItem[]> {
  switch (format) {
    case 'json':
      return jsonArrayRecords(blocks, nulls, from);
    case 'ndjson':
      return ndjsonRecords(blocks, nulls, from);
    case 'csv':
      return csvRecords(blocks, csv, nulls);
  }
}

/**
 * Decoded text of the blocks, BOM dropped; invalid UTF-8 makes the file INVALID_INPUT. `origin`
 * is the byte offset of the first text: `start`, the offset of the first block (which then has no
 * BOM to look for), or 3 after a BOM.
 */
async function* utf8Texts(
  blocks: AsyncIterable<Buffer>,
  at: () => number | undefined,
  start?: number,
  origin: { bytes: number } = { bytes: 0 },
): AsyncGenerator<string> {
  const decoder = new Utf8Text(start);
  let first = start === undefined;
  origin.bytes = start ?? 0;
  const invalid = (offset: number) => new InvalidInputError(`The file is not valid UTF-8 (byte ${offset}).`, at());
  for await (let block of blocks) {
    if (first && startsWithBom(block)) {
      block = block.subarray(3);
      origin.bytes = 3;
    }
    first = false;
    const { text, invalidAt } = decoder.write(block);
    yield text;
    if (invalidAt >= 0) throw invalid(invalidAt);
  }
  const invalidAt = decoder.end();
  if (invalidAt >= 0) throw invalid(invalidAt);
}

/** A JSON item or NDJSON line as a record; its string fields equal to a null text are NULL. */
function jsonItem(index: number, raw: string, nulls: NullTexts): SourceItem {
  let value: unknown;
  try {
    value = parseJson(raw);
  } catch (error) {
    if (!(error instanceof JsonSyntaxError)) throw error;
    return { index, raw, fields: null, problem: { field: null, reason: error.message } };
  }
  // A number is parsed as a `JsonNumber` object, which is no record either.
  if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof JsonNumber) {
    return { index, raw, fields: null, problem: { field: null, reason: 'the row must be a JSON object' } };
  }
  const fields = value as Record<string, unknown>;
  if (nulls !== null) {
    for (const name of Object.keys(fields)) {
      const field = fields[name];
      if (typeof field === 'string' && nulls.has(field)) fields[name] = null;
    }
  }
  return { index, raw, fields, problem: null };
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Counts the bytes of a stream's text up to a position, one block's text at a time, each character once. */
class ByteCounter {
  private text = '';
  private counted = 0;

  constructor(private bytes: number) {}

  /** The next block's text; `offset` of positions in it from now on. */
  next(text: string): void {
    this.bytes += Buffer.byteLength(this.text.slice(this.counted));
    this.text = text;
    this.counted = 0;
  }

  /** The byte offset of position `at` of the current text (positions asked for only grow). */
  offset(at: number): number {
    this.bytes += Buffer.byteLength(this.text.slice(this.counted, at));
    this.counted = at;
    return this.bytes;
  }
}

/**
 * The items of a top-level JSON array, each cut out by bracket depth and parsed on its own, so a
 * malformed item is an invalid row while the array around it stays readable. From `from`, the
 * reader starts right after an item, inside the array.
 */
async function* jsonArrayRecords(blocks: AsyncIterable<Buffer>, nulls: NullTexts, from?: JsonStart): AsyncGenerator<SourceItem[]> {
  let index = from?.index ?? 0;
  let started = from !== undefined;
  let ended = false;
  let expectItem = false;
  let inItem = false;
  let container = false;
  let depth = 0;
  let inString = false;
  let escaped = false;
  let partial = '';
  const fail = (what: string): never => {
    throw new InvalidInputError(`Invalid JSON: ${what}.`, started && !ended ? index : undefined);
  };
  const origin = { bytes: 0 };
  let bytes: ByteCounter | null = null;
  for await (const text of utf8Texts(blocks, () => index, from?.offset, origin)) {
    bytes ??= new ByteCounter(origin.bytes);
    bytes.next(text);
    const items: SourceItem[] = [];
    let itemStart = 0;
    const endItem = (end: number) => {
      const item = jsonItem(index++, (partial + text.slice(itemStart, end)).trim(), nulls);
      item.end = bytes!.offset(end);
      items.push(item);
      partial = '';
      inItem = false;
      expectItem = false;
    };
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (inItem) {
        if (inString) {
          if (escaped) escaped = false;
          else if (c === BACKSLASH) escaped = true;
          else if (c === QUOTE) inString = false;
          continue;
        }
        if (c === QUOTE) {
          inString = true;
        } else if (c === 0x7b || c === 0x5b) {
          depth++;
        } else if (c === 0x7d || c === 0x5d) {
          if (depth > 0) {
            if (--depth === 0 && container) endItem(i + 1);
            continue;
          }
          endItem(i);
          i--; // the ']' closes the array
        } else if (depth === 0 && (c === 0x2c || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09)) {
          endItem(i);
          i--;
        }
        continue;
      }
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
      if (!started) {
        if (c !== 0x5b) fail('the top level must be a JSON array of records');
        started = true;
        expectItem = true;
        continue;
      }
      if (ended) fail('text after the end of the array');
      if (c === 0x5d) {
        if (expectItem && index > 0) fail("expected a record after ','");
        ended = true;
        continue;
      }
      if (expectItem) {
        inItem = true;
        itemStart = i;
        container = c === 0x7b || c === 0x5b;
        depth = container ? 1 : 0;
        inString = c === QUOTE;
        continue;
      }
      if (c === 0x2c) expectItem = true;
      else fail("expected ',' or ']' after a record");
    }
    if (inItem) partial += text.slice(itemStart);
    yield items;
  }
  if (!started) fail('the input is empty; it must be a JSON array of records');
  if (!ended) fail('the input ends before the array is complete');
}

/**
 * One JSON object per line; blank lines are ignored, CRLF accepted, `index` counts non-blank
 * lines. A row ends after its line break; from `from`, the reader starts at a line's start.
 */
async function* ndjsonRecords(blocks: AsyncIterable<Buffer>, nulls: NullTexts, start?: JsonStart): AsyncGenerator<SourceItem[]> {
  let index = start?.index ?? 0;
  let partial = '';
  const origin = { bytes: 0 };
  let bytes: ByteCounter | null = null;
  const line = (items: SourceItem[], text: string, end: number) => {
    const raw = text.endsWith('\r') ? text.slice(0, -1) : text;
    if (raw.trim().length === 0) return;
    const item = jsonItem(index++, raw, nulls);
    item.end = bytes!.offset(end);
    items.push(item);
  };
  for await (const text of utf8Texts(blocks, () => index, start?.offset, origin)) {
    bytes ??= new ByteCounter(origin.bytes);
    bytes.next(text);
    const items: SourceItem[] = [];
    let from = 0;
    for (let newline = text.indexOf('\n'); newline >= 0; newline = text.indexOf('\n', from)) {
      line(items, partial + text.slice(from, newline), newline + 1);
      partial = '';
      from = newline + 1;
    }
    partial += text.slice(from);
    yield items;
  }
  const items: SourceItem[] = [];
  bytes ??= new ByteCounter(origin.bytes);
  bytes.next('');
  line(items, partial, 0);
  yield items;
}

const GROUP = 1024;

/** Where a CSV reader takes over from another one: at a record's start, after the header (if read) and `index` rows. */
export interface CsvResume {
  header: string[] | null;
  index: number;
  /** The record delimiter found so far, else null (found from the input). */
  delimiter: '\r\n' | '\n' | '\r' | null;
  /** Bytes of the input before the first block (after a BOM, which is not looked for again). */
  offset: number;
}

/** csv-parse reading the blocks' text, with the given delimiter, quote and escape; records come with their text (`raw`). */
function csvParser(blocks: AsyncIterable<Buffer>, csv: CsvOptions, at: () => number | undefined, resume?: CsvResume) {
  const parser = new Parser({
    delimiter: csv.delimiter ?? ',',
    quote: csv.quote ?? '"',
    escape: csv.escape ?? csv.quote ?? '"',
    relax_column_count: true,
    skip_empty_lines: true,
    raw: true,
    ...(resume?.delimiter ? { record_delimiter: resume.delimiter } : {}),
  });
  const source = Readable.from(utf8Texts(blocks, at, resume?.offset), { objectMode: false });
  source.on('error', (error) => parser.destroy(error));
  source.pipe(parser);
  return { parser, source };
}

/**
 * What a reader starting in the middle of a CSV needs from its start: the first record (the
 * header, unless `csv.columns` names the fields) and the record delimiter, which ends it.
 */
export async function csvHeading(
  blocks: AsyncIterable<Buffer>,
  csv: CsvOptions,
): Promise<{ record: string[]; delimiter: '\r\n' | '\n' | '\r' | null }> {
  const { parser, source } = csvParser(blocks, csv, () => 0);
  try {
    for await (const { record } of parser as AsyncIterable<{ record: string[] }>) {
      // The delimiter csv-parse found (its `raw` text would not tell \r\n from \r).
      const found = (parser.options as { record_delimiter?: Buffer[] }).record_delimiter?.[0]?.toString();
      const delimiter = found === '\r\n' || found === '\n' || found === '\r' ? found : null;
      return { record, delimiter };
    }
  } finally {
    source.destroy();
    parser.destroy();
  }
  throw new InvalidInputError('The CSV is empty: it needs a header row (or csv.columns).');
}

/** CSV records (RFC 4180 as csv-parse reads it, with the given delimiter, quote and escape) mapped to the header's names. */
export async function* csvRecords(
  blocks: AsyncIterable<Buffer>,
  csv: CsvOptions,
  nulls: NullTexts,
  resume?: CsvResume,
): AsyncGenerator<SourceItem[]> {
  let index = resume?.index ?? 0;
  let header: string[] | null = csv.columns ?? resume?.header ?? null;
  const delimiter = csv.delimiter ?? ',';
  const quote = csv.quote ?? '"';
  const escape = csv.escape ?? quote;
  const { parser, source } = csvParser(blocks, csv, () => index, resume);
  let items: SourceItem[] = [];
  try {
    for await (const { record, raw } of parser as AsyncIterable<{ record: (string | null)[]; raw: string }>) {
      if (nulls !== null) {
        // A null text is NULL quoted or not.
        for (let f = 0; f < record.length; f++) if (nulls.has(record[f] as string)) record[f] = null;
      } else if (record.includes('')) {
        // By default NULL is the empty field unquoted: the record's text says which fields were
        // quoted (csv-parse's `cast` hook would tell too, at eight times the cost of the whole parse).
        const quoted = quotedFields(raw, delimiter, quote, escape);
        for (let f = 0; f < record.length; f++) if (record[f] === '' && !quoted[f]) record[f] = null;
      }
      if (header === null) {
        header = csvHeader(record);
        continue;
      }
      const text = raw.replace(/\r?\n$|\r$/, '');
      if (record.length !== header.length) {
        items.push({
          index: index++,
          raw: text,
          fields: null,
          problem: { field: null, reason: `the record has ${record.length} fields, the header ${header.length}` },
        });
      } else {
        const fields: Record<string, unknown> = {};
        for (let f = 0; f < header.length; f++) {
          const name = header[f];
          // `__proto__` as a column name is a field like any other, not the object's prototype.
          if (name === '__proto__')
            Object.defineProperty(fields, name, { value: record[f], enumerable: true, writable: true, configurable: true });
          else fields[name] = record[f];
        }
        items.push({ index: index++, raw: text, fields, problem: null });
      }
      if (items.length === GROUP) {
        yield items;
        items = [];
      }
    }
  } catch (error) {
    if (items.length > 0) yield items;
    if (error instanceof CsvError) {
      throw new InvalidInputError(`Invalid CSV in row ${index}: ${error.message}`, index, { cause: error });
    }
    throw error;
  } finally {
    source.destroy();
  }
  if (items.length > 0) yield items;
  if (header === null) throw new InvalidInputError('The CSV is empty: it needs a header row (or csv.columns).');
}

/** The header record's names; INVALID_INPUT for an empty or repeated one. */
export function csvHeader(record: unknown[]): string[] {
  return checkHeader(record, (message) => new InvalidInputError(`The CSV header ${message}`));
}

/** Which fields of one CSV record's text were quoted (the text as csv-parse read it). */
export function quotedFields(raw: string, delimiter: string, quote: string, escape: string): boolean[] {
  const quoted: boolean[] = [];
  let at = 0;
  for (;;) {
    if (raw[at] === quote) {
      quoted.push(true);
      at++;
      while (at < raw.length) {
        const c = raw[at];
        if (c === escape && raw[at + 1] === quote) {
          at += 2;
          continue;
        }
        if (c === quote) {
          at++;
          break;
        }
        at++;
      }
    } else {
      quoted.push(false);
    }
    const next = raw.indexOf(delimiter, at);
    if (next < 0) return quoted;
    at = next + delimiter.length;
  }
}
