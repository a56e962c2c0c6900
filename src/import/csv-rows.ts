import { CsvError } from 'csv-parse';
import { InvalidInputError } from '../core/errors';
import { type CsvPosition, type CsvSeparator, type CsvSpans, csvSpans } from './csv-records';
import { checkId, integerFromText, type Row } from './row';
import { Utf8Text } from './utf8-text';

/** Positions of the `id` and `value` columns. */
export interface CsvHeader {
  id: number;
  value: number;
}

/** Data records `from…spans.count − 1` of a group; the first of them is row `index`. */
export interface CsvData {
  spans: CsvSpans;
  from: number;
  index: number;
  header: CsvHeader;
}

/** Where `csvData` starts in the middle of a file: the header's columns, and the data record `index` starting at `offset`. */
export interface CsvDataStart extends CsvPosition {
  header: CsvHeader;
  index: number;
}

/** The positions of `id` and `value` in a header record; INVALID_INPUT when either is missing or repeated. */
export function headerOf(record: string[]): CsvHeader {
  const position = (name: string) => {
    const found = record.flatMap((column, i) => (column === name ? [i] : []));
    if (found.length !== 1) {
      throw new InvalidInputError(
        found.length === 0
          ? `The CSV header has no column named exactly "${name}"; it needs "id" and "value".`
          : `The CSV header has ${found.length} columns named "${name}"; it needs exactly one.`,
      );
    }
    return found[0];
  };
  return { id: position('id'), value: position('value') };
}

/** Record `record` of `spans` as row `index`; INVALID_INPUT when it breaks the row rules. */
export function csvRowOf(spans: CsvSpans, record: number, header: CsvHeader, index: number): Row {
  const id = checkId(spans.text(record, header.id), index);
  const value = spans.text(record, header.value);
  if (value === undefined) throw new InvalidInputError(`Row ${index}: the record has no value column.`, index);
  return { id, value: integerFromText(value, index) };
}

/**
 * The data records of a CSV file as byte spans (RFC 4180 quoting, read as csv-parse reads it: see
 * csv-records.ts), after a header row with columns named exactly `id` and `value` (others
 * ignored), UTF-8 BOM stripped. `index` counts data records from 0. The records are not checked
 * against the row rules (`csvRowOf` does that); the file's structure and its UTF-8 are, with
 * INVALID_INPUT raised after the records that come before the problem. `separator`: a `.tsv` file's is a tab.
 */
export async function* csvData(
  blocks: AsyncIterable<Buffer>,
  start?: CsvDataStart,
  separator: CsvSeparator = ',',
): AsyncGenerator<CsvData> {
  // csv-parse would decode invalid UTF-8 leniently, so the bytes are checked first and the input
  // ends before the first invalid byte; the record cut there is the one that holds it.
  const utf8 = new Utf8Text(start?.offset);
  let invalidAt = -1;
  let endsOnNewline = true;
  async function* checked(): AsyncGenerator<Buffer> {
    for await (const block of blocks) {
      const { bytes, invalidAt: at } = utf8.check(block);
      if (bytes.length > 0) {
        endsOnNewline = bytes[bytes.length - 1] === 0x0a;
        yield bytes;
      }
      if (at >= 0) {
        invalidAt = at;
        return;
      }
    }
    invalidAt = utf8.end();
  }
  let header: CsvHeader | null = start?.header ?? null;
  let index = start?.index ?? 0;
  // The data record holding the invalid byte: the one cut short (already read), or the next one
  // when the valid bytes end on a line break.
  const invalidUtf8 = (recordInProgress: boolean) => {
    const at = header === null ? undefined : recordInProgress || endsOnNewline ? index : index - 1;
    return new InvalidInputError(
      `The CSV is not valid UTF-8 (byte ${invalidAt}${at === undefined || at < 0 ? ', in the header' : `, in row ${at}`}).`,
      at === undefined || at < 0 ? undefined : at,
    );
  };
  try {
    for await (const spans of csvSpans(checked(), start, separator)) {
      let from = 0;
      if (header === null) {
        header = headerOf(spans.record(0));
        from = 1;
      }
      if (from < spans.count) {
        yield { spans, from, index, header };
        index += spans.count - from;
      }
    }
  } catch (error) {
    if (!(error instanceof CsvError)) throw error;
    // A quote left open where the valid bytes end is the cut, not the file's own mistake.
    if (invalidAt >= 0) throw invalidUtf8(true);
    throw new InvalidInputError(
      `Invalid CSV ${header ? `in row ${index}` : 'in the header'}: ${error.message}`,
      header ? index : undefined,
      { cause: error },
    );
  }
  if (invalidAt >= 0) throw invalidUtf8(false);
  if (header === null) throw new InvalidInputError('The CSV is empty: it needs a header row with "id" and "value" columns.');
}

/**
 * Rows of a CSV file (see `csvData`), `value` matching -?[0-9]+ within ±(2^53−1), in groups;
 * INVALID_INPUT with `index` on the first bad row, after the rows before it.
 */
export async function* csvRows(blocks: AsyncIterable<Buffer>, separator: CsvSeparator = ','): AsyncGenerator<Row[]> {
  for await (const { spans, from, index, header } of csvData(blocks, undefined, separator)) {
    const rows: Row[] = [];
    try {
      for (let r = from; r < spans.count; r++) rows.push(csvRowOf(spans, r, header, index + r - from));
    } catch (error) {
      if (rows.length > 0) yield rows;
      throw error;
    }
    yield rows;
  }
}
