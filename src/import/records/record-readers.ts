import { Readable } from 'node:stream';
import { CsvError, Parser } from 'csv-parse';
import { InvalidArgumentError, InvalidInputError } from '../../core/errors';
import type { ImportFormat } from '../read-rows';
import type { JsonStart } from '../json-items';
import { startsWithBom, Utf8Text } from '../utf8-text';
import { jsonRecords } from './json-records';

/** One source row of a records import: its fields, or why it is not a record. */
export interface SourceItem {
  /** Position in the source, from 0 (data records only: a CSV header is not a row). */
  index: number;
  /** The row's source text (a JSON item, an NDJSON line, a CSV record). */
  raw: string;
  fields: Record<string, unknown> | null;
  /** Why the row is invalid as a record (not an object, ragged, malformed JSON), or null. */
  problem: { field: string | null; reason: string } | null;
  /** The byte offset in the file right after the row, where a reader can start for the next one. */
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
 * The source's records in groups; INVALID_INPUT for what makes the whole file unreadable. Every
 * row carries its `end` offset, and every reader can start at one (`from`: for a CSV, with the
 * header and record delimiter read from its start).
 */
export function readRecords(
  format: ImportFormat,
  blocks: AsyncIterable<Buffer>,
  csv: CsvOptions,
  nulls: NullTexts = null,
  from?: JsonStart | CsvResume,
): AsyncGenerator<SourceItem[]> {
  if (format === 'csv') return csvRecords(blocks, csv, nulls, from !== undefined && 'header' in from ? from : undefined);
  return jsonRecords(format, blocks, nulls, from);
}

/**
 * Decoded text of the blocks, BOM dropped; invalid UTF-8 makes the file INVALID_INPUT (at its byte
 * offset in the file). From `start`, the first block is the one at that offset (with no BOM to
 * look for); `onBom` is told of a BOM at the file's start.
 */
async function* utf8Texts(
  blocks: AsyncIterable<Buffer>,
  at: () => number | undefined,
  start?: number,
  onBom?: () => void,
): AsyncGenerator<string> {
  let decoder = start === undefined ? null : new Utf8Text(start);
  const invalid = (offset: number) => new InvalidInputError(`The file is not valid UTF-8 (byte ${offset}).`, at());
  for await (let block of blocks) {
    if (decoder === null) {
      const bom = startsWithBom(block);
      if (bom) {
        block = block.subarray(3);
        onBom?.();
      }
      decoder = new Utf8Text(bom ? 3 : 0);
    }
    const { text, invalidAt } = decoder.write(block);
    yield text;
    if (invalidAt >= 0) throw invalid(invalidAt);
  }
  const invalidAt = decoder?.end() ?? -1;
  if (invalidAt >= 0) throw invalid(invalidAt);
}

const GROUP = 1024;

/** Where a CSV reader takes over from another one: at a record's start, after the header (if read) and `index` rows. */
export interface CsvResume {
  header: string[] | null;
  index: number;
  /** The record delimiter found so far, else null (found from the input). */
  delimiter: '\r\n' | '\n' | '\r' | null;
  /** The byte offset in the file of the first block (a BOM at the file's start is not looked for again). */
  offset: number;
}

/**
 * csv-parse, each record with `end`: the bytes of its input up to the end of the record's
 * delimiter, as csv-parse counts them (`info.bytes`) when it hands the record over.
 */
class CountingParser extends Parser {
  override push(chunk: unknown, encoding?: BufferEncoding): boolean {
    if (chunk !== null && typeof chunk === 'object') (chunk as { end?: number }).end = this.info.bytes;
    return super.push(chunk, encoding);
  }
}

/**
 * csv-parse reading the blocks' text, with the given delimiter, quote and escape; records come with
 * their text (`raw`) and the byte offset in the file of their end (`end`, after their delimiter).
 */
function csvParser(blocks: AsyncIterable<Buffer>, csv: CsvOptions, at: () => number | undefined, resume?: CsvResume) {
  // The byte offset in the file of the parser's first input byte: after a BOM, or where it takes over.
  let base = resume?.offset ?? 0;
  const parser = new CountingParser({
    delimiter: csv.delimiter ?? ',',
    quote: csv.quote ?? '"',
    escape: csv.escape ?? csv.quote ?? '"',
    relax_column_count: true,
    skip_empty_lines: true,
    raw: true,
    ...(resume?.delimiter ? { record_delimiter: resume.delimiter } : {}),
  });
  const source = Readable.from(
    utf8Texts(blocks, at, resume?.offset, () => (base = 3)),
    { objectMode: false },
  );
  source.on('error', (error) => parser.destroy(error));
  source.pipe(parser);
  return { parser, source, base: () => base };
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
  const { parser, source, base } = csvParser(blocks, csv, () => index, resume);
  let items: SourceItem[] = [];
  try {
    for await (const { record, raw, end } of parser as AsyncIterable<{ record: (string | null)[]; raw: string; end: number }>) {
      if (header === null) {
        // The header's names are names: the null texts apply to the rows after it.
        header = csvHeader(record);
        continue;
      }
      if (nulls !== null) {
        // A null text is NULL quoted or not.
        for (let f = 0; f < record.length; f++) if (nulls.has(record[f] as string)) record[f] = null;
      } else if (record.includes('')) {
        // By default NULL is the empty field unquoted: the record's text says which fields were
        // quoted (csv-parse's `cast` hook would tell too, at eight times the cost of the whole parse).
        const quoted = quotedFields(raw, delimiter, quote, escape);
        for (let f = 0; f < record.length; f++) if (record[f] === '' && !quoted[f]) record[f] = null;
      }
      const text = raw.replace(/\r?\n$|\r$/, '');
      if (record.length !== header.length) {
        items.push({
          index: index++,
          raw: text,
          fields: null,
          problem: { field: null, reason: `the record has ${record.length} fields, the header ${header.length}` },
          end: base() + end,
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
        items.push({ index: index++, raw: text, fields, problem: null, end: base() + end });
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
