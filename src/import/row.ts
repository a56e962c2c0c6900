import { InvalidInputError } from '../core/errors';

/** One imported row: a non-empty string id and an integer value within ±(2^53−1). */
export interface Row {
  /** Non-empty; unique within an import batch. */
  id: string;
  /** An integer within ±(2^53−1). */
  value: number;
}

// Integer digits only: `1.0` and `1e3` are floats in the source, even though they equal integers.
const INTEGER_TEXT = /^-?[0-9]+$/;

/** The id rule shared by every reader: a non-empty string. */
export function checkId(id: unknown, index: number): string {
  if (typeof id !== 'string') {
    throw new InvalidInputError(`Row ${index}: id must be a string, got ${id === undefined ? 'no id' : describeValue(id)}.`, index);
  }
  if (id.length === 0) throw new InvalidInputError(`Row ${index}: id must not be empty.`, index);
  return id;
}

/** The value rule for a number as written in the source (JSON number text or a CSV field). */
export function integerFromText(text: string, index: number): number {
  if (!INTEGER_TEXT.test(text)) {
    throw new InvalidInputError(`Row ${index}: value must be written as an integer (like 42), not ${JSON.stringify(text)}.`, index);
  }
  return safeInteger(Number(text), text, index);
}

/** The value rule for a JavaScript value handed to applyChunk. */
export function integerFromValue(value: unknown, index: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new InvalidInputError(
      `Row ${index}: value must be an integer, got ${value === undefined ? 'no value' : describeValue(value)}.`,
      index,
    );
  }
  return safeInteger(value, String(value), index);
}

function safeInteger(value: number, text: string, index: number): number {
  if (!Number.isSafeInteger(value)) {
    throw new InvalidInputError(`Row ${index}: value ${text} is beyond ±(2^53−1), which JavaScript cannot hold exactly.`, index);
  }
  // JSON has -0; a stored integer has no sign on zero.
  return value + 0;
}

/** Checks one row given as a JavaScript object (applyChunk); other keys are dropped. */
export function rowFromObject(row: unknown, index: number): Row {
  if (typeof row !== 'object' || row === null || Array.isArray(row)) {
    throw new InvalidInputError(`Row ${index} must be an object with id and value, got ${describeValue(row)}.`, index);
  }
  const { id, value } = row as { id?: unknown; value?: unknown };
  return { id: checkId(id, index), value: integerFromValue(value, index) };
}

export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${String(value)}`;
}
