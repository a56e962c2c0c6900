import { InvalidInputError } from '../core/errors';
import { JsonRowScanner } from './json-row-scanner';
import type { Row } from './row';
import { startsWithBom, Utf8Text } from './utf8-text';

/** The raw input as bytes: a string is taken as its UTF-8 encoding. */
export function sourceBytes(raw: Uint8Array | string): Uint8Array {
  if (typeof raw === 'string') return Buffer.from(raw, 'utf8');
  if (raw instanceof Uint8Array) return raw;
  throw new InvalidInputError('The input must be a Uint8Array (bytes) or a string.');
}

/** Feeds bytes of a JSON document to the scanner, failing with the item index where the UTF-8 breaks. */
export function scanJsonBytes(scanner: JsonRowScanner, decoder: Utf8Text, bytes: Uint8Array): void {
  const { text, invalidAt } = decoder.write(bytes);
  scanner.write(text);
  if (invalidAt >= 0) throw invalidUtf8(scanner, invalidAt);
}

export function endJsonBytes(scanner: JsonRowScanner, decoder: Utf8Text): void {
  const invalidAt = decoder.end();
  if (invalidAt >= 0) throw invalidUtf8(scanner, invalidAt);
  scanner.end();
}

function invalidUtf8(scanner: JsonRowScanner, offset: number): InvalidInputError {
  const index = scanner.errorIndex();
  return new InvalidInputError(`The input is not valid UTF-8 (byte ${offset}${index === undefined ? '' : `, in item ${index}`}).`, index);
}

/**
 * Reads a JSON array of rows: each item an object with a non-empty string `id` and an integer
 * `value` (written as an integer, within ±(2^53−1)); no id twice; other keys are dropped. Anything
 * else throws INVALID_INPUT with the offending item's `index` where there is one.
 */
export function parseRows(raw: Uint8Array | string): Row[] {
  let bytes = sourceBytes(raw);
  // Accepted as Python's json.loads accepts it for bytes; the digest still covers it.
  if (startsWithBom(bytes)) bytes = bytes.subarray(3);
  const scanner = new JsonRowScanner('array');
  const decoder = new Utf8Text();
  let failure: unknown = null;
  try {
    scanJsonBytes(scanner, decoder, bytes);
    endJsonBytes(scanner, decoder);
  } catch (error) {
    failure = error;
  }
  // The rows read before a failure all come before it: a duplicate among them is the first problem.
  const rows = scanner.takeRows();
  const seen = new Set<string>();
  rows.forEach((row, index) => {
    if (seen.has(row.id)) throw duplicateId(row.id, index);
    seen.add(row.id);
  });
  if (failure !== null) throw failure;
  return rows;
}

export function duplicateId(id: string, index: number): InvalidInputError {
  return new InvalidInputError(`Row ${index}: id ${JSON.stringify(id)} appears more than once; ids must be unique.`, index);
}
