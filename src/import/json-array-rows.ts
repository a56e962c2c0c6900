import { JsonRowScanner } from './json-row-scanner';
import { endJsonBytes, scanJsonBytes } from './parse-rows';
import type { Row } from './row';
import { startsWithBom, Utf8Text } from './utf8-text';

/** Rows of a JSON array read block by block, under parseRows' rules. */
export async function* jsonArrayRows(blocks: AsyncIterable<Buffer>): AsyncGenerator<Row[]> {
  const scanner = new JsonRowScanner('array');
  const decoder = new Utf8Text();
  let first = true;
  for await (let block of blocks) {
    if (first && startsWithBom(block)) block = block.subarray(3);
    first = false;
    try {
      scanJsonBytes(scanner, decoder, block);
    } catch (error) {
      // The rows completed before the error come first: a duplicate among them is the earlier problem.
      yield scanner.takeRows();
      throw error;
    }
    yield scanner.takeRows();
  }
  endJsonBytes(scanner, decoder);
  yield scanner.takeRows();
}
