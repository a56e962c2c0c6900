import { InvalidInputError } from '../core/errors';
import { type JsonFormat, type JsonItemMode, type JsonItems, jsonItems, type JsonSourceErrors, type JsonStart } from './json-items';
import { invalidJson, JsonRowScanner, notAnObject } from './json-row-scanner';
import type { Row } from './row';

/** parseRows' words for a problem around the rows (those within a row are the scanner's). */
function rowSourceErrors(format: JsonFormat): JsonSourceErrors {
  return {
    notArray: () => new InvalidInputError('The top level of the input must be a JSON array of rows.'),
    empty: () => invalidJson('the input is empty'),
    missingItem: notAnObject,
    notDelimiter: (index) => invalidJson("expected ',' or ']'", index),
    afterArray: () => invalidJson('unexpected text after the end of the JSON'),
    unfinished: (index) => invalidJson('the input ends before the JSON is complete', index),
    invalidUtf8(offset, index, outside) {
      if (format === 'ndjson') return new InvalidInputError(`Line ${index} (byte ${offset}) is not valid UTF-8.`, index);
      const at = outside ? undefined : index;
      return new InvalidInputError(`The input is not valid UTF-8 (byte ${offset}${at === undefined ? '' : `, in item ${at}`}).`, at);
    },
  };
}

/**
 * The id/value mode of the JSON readers: each array item or NDJSON line read by a `JsonRowScanner`
 * as its text comes, under parseRows' rules; the first bad row is INVALID_INPUT with its `index`.
 */
export class RowItems implements JsonItemMode<Row> {
  readonly errors: JsonSourceErrors;
  private readonly scanner = new JsonRowScanner();

  constructor(format: JsonFormat) {
    this.errors = rowSourceErrors(format);
  }

  begin(index: number): void {
    this.scanner.begin(index);
  }

  read(text: string, from: number): number {
    return this.scanner.write(text, from);
  }

  finish(): Row {
    return this.scanner.row();
  }

  unfinished(): void {
    this.scanner.end();
  }

  line(text: string, index: number, push: (row: Row) => void): void {
    const scanner = this.scanner;
    scanner.begin(index);
    const end = scanner.write(text);
    if (end < 0) scanner.end();
    // Text after the object makes the line invalid JSON: an error of this line's index (SPEC: NDJSON's
    // `index` counts its non-blank lines).
    else scanner.write(text, end);
    push(scanner.row());
  }
}

/**
 * The id/value rows of a JSON array or NDJSON, in a group per block; with `offsets`, each row's end
 * offset in the file (from `start`, the blocks are the file's from that offset on).
 */
export function jsonRows(
  format: JsonFormat,
  blocks: AsyncIterable<Buffer>,
  options: { start?: JsonStart; offsets?: boolean } = {},
): AsyncGenerator<JsonItems<Row>> {
  return jsonItems(format, blocks, new RowItems(format), options);
}
