import { InvalidInputError } from '../core/errors';
import { JsonItemReader } from './json-items';
import { RowItems } from './json-rows';
import type { Row } from './row';

/** The raw input as bytes: a string is taken as its UTF-8 encoding. */
export function sourceBytes(raw: Uint8Array | string): Uint8Array {
  if (typeof raw === 'string') return Buffer.from(raw, 'utf8');
  if (raw instanceof Uint8Array) return raw;
  throw new InvalidInputError('The input must be a Uint8Array (bytes) or a string.');
}

/**
 * Reads a JSON array of rows: each item an object with a non-empty string `id` and an integer
 * `value` (written as an integer, within ±(2^53−1)); no id twice; other keys are dropped. Anything
 * else throws INVALID_INPUT with the offending item's `index` where there is one.
 */
export function parseRows(raw: Uint8Array | string): Row[] {
  const bytes = sourceBytes(raw);
  // A leading BOM is accepted, as Python's json.loads accepts it for bytes; the digest still covers it.
  const reader = new JsonItemReader('json', new RowItems('json'));
  let failure: unknown = null;
  try {
    reader.write(bytes);
    reader.end();
  } catch (error) {
    failure = error;
  }
  // The rows read before a failure all come before it: a duplicate among them is the first problem.
  const rows = reader.take().items;
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
