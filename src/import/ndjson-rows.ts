import { InvalidInputError } from '../core/errors';
import { JsonRowScanner } from './json-row-scanner';
import type { Row } from './row';
import { startsWithBom, Utf8Text } from './utf8-text';

const BLANK = /^[ \t\r]*$/;

/**
 * Rows of NDJSON: one JSON object per line under parseRows' item rules; blank lines are ignored,
 * CRLF is accepted, and `index` counts the non-blank lines from 0.
 */
export async function* ndjsonRows(blocks: AsyncIterable<Buffer>): AsyncGenerator<Row[]> {
  const scanner = new JsonRowScanner('object');
  const decoder = new Utf8Text();
  let partial = '';
  let first = true;
  const readLine = (line: string) => {
    if (line.length === 0 || BLANK.test(line)) return;
    scanner.reset();
    scanner.write(line.endsWith('\r') ? line.slice(0, -1) : line);
    scanner.end();
  };
  const invalidUtf8 = (offset: number) =>
    new InvalidInputError(`Line ${scanner.index} (byte ${offset}) is not valid UTF-8.`, scanner.index);
  for await (let block of blocks) {
    if (first && startsWithBom(block)) block = block.subarray(3);
    first = false;
    const { text, invalidAt } = decoder.write(block);
    try {
      let from = 0;
      for (let newline = text.indexOf('\n'); newline >= 0; newline = text.indexOf('\n', from)) {
        readLine(partial + text.slice(from, newline));
        partial = '';
        from = newline + 1;
      }
      partial += text.slice(from);
      if (invalidAt >= 0) throw invalidUtf8(invalidAt);
    } catch (error) {
      yield scanner.takeRows();
      throw error;
    }
    yield scanner.takeRows();
  }
  const invalidAt = decoder.end();
  if (invalidAt >= 0) throw invalidUtf8(invalidAt);
  readLine(partial);
  yield scanner.takeRows();
}
