import { CsvError } from 'csv-parse';
import { InvalidInputError } from '../errors';
import { csvRecords } from './csv-records';
import { checkId, integerFromText, type Row } from './row';
import { Utf8Text } from './utf8-text';

const ROWS_PER_YIELD = 1024;

interface Header {
  id: number;
  value: number;
}

function headerOf(record: string[]): Header {
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

function rowOf(record: string[], header: Header, index: number): Row {
  const id = checkId(record[header.id], index);
  const value = record[header.value];
  if (value === undefined) throw new InvalidInputError(`Row ${index}: the record has no value column.`, index);
  return { id, value: integerFromText(value, index) };
}

/**
 * Rows of a CSV file (RFC 4180 quoting, read as csv-parse reads it: see csv-records.ts): a header
 * row with columns named exactly `id` and `value` (others ignored), UTF-8 BOM stripped, `value`
 * matching -?[0-9]+ within ±(2^53−1). `index` counts data records from 0.
 */
export async function* csvRows(blocks: AsyncIterable<Buffer>): AsyncGenerator<Row[]> {
  // csv-parse would decode invalid UTF-8 leniently, so the bytes are checked first and the input
  // ends before the first invalid byte; the record cut there is the one that holds it.
  const utf8 = new Utf8Text();
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
  let header: Header | null = null;
  let index = 0;
  let rows: Row[] = [];
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
    for await (const records of csvRecords(checked())) {
      for (const record of records) {
        if (header === null) {
          header = headerOf(record);
          continue;
        }
        rows.push(rowOf(record, header, index));
        index++;
        if (rows.length === ROWS_PER_YIELD) {
          yield rows;
          rows = [];
        }
      }
    }
  } catch (error) {
    if (rows.length > 0) yield rows;
    if (!(error instanceof CsvError)) throw error;
    // A quote left open where the valid bytes end is the cut, not the file's own mistake.
    if (invalidAt >= 0) throw invalidUtf8(true);
    throw new InvalidInputError(
      `Invalid CSV ${header ? `in row ${index}` : 'in the header'}: ${error.message}`,
      header ? index : undefined,
      { cause: error },
    );
  }
  if (rows.length > 0) yield rows;
  if (invalidAt >= 0) throw invalidUtf8(false);
  if (header === null) throw new InvalidInputError('The CSV is empty: it needs a header row with "id" and "value" columns.');
}
