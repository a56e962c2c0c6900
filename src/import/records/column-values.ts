import { civilFromDays, daysFromCivil } from '../../core/civil-date';
import type { RecordColumn } from '../../dialect';
import { JsonNumber, JsonSyntaxError, jsonText, parseJson } from './json-values';

/** What a database can store beyond the common ground: checked in pass 1, so refused the same way everywhere. */
export interface StorableValues {
  /** Floats may be NaN / ±Infinity (PostgreSQL). */
  floatSpecials: boolean;
  /** Text may hold U+0000 (not PostgreSQL). */
  textHoldsNul: boolean;
  /** The source is JSON: a string for a json column is a JSON string value, not JSON text to parse. */
  jsonSource?: boolean;
}

/** A value ready to bind: canonical text for exact types, a number, a boolean or NULL. */
export type ColumnValue = string | number | boolean | null;

/** A converted value, or why the value cannot go into the column. */
export type Converted = { value: ColumnValue } | { reason: string };

const INTEGER = /^-?[0-9]+$/;
const DECIMAL = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/;
const FLOAT = /^-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;
const DATE = /^([0-9]{4})-([0-9]{2})-([0-9]{2})$/;
const TIMESTAMP =
  /^([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,6}))?)?(Z|[+-][0-9]{2}(?::?[0-9]{2})?)?$/i;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const TRUE = new Set(['true', 't', '1', 'yes']);
const FALSE = new Set(['false', 'f', '0', 'no']);
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * The value as text the way a CSV field holds it: a string as it is, a JSON number as written; a
 * boolean or a nested value has no text form (null).
 */
function textOf(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (value instanceof JsonNumber) return value.text;
  // What a `map` returns: JavaScript numbers as they print.
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value === 'bigint') return value.toString();
  return null;
}

function quoted(value: unknown): string {
  const text = typeof value === 'string' ? value : value instanceof JsonNumber ? value.text : jsonText(value);
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
}

/** Why a NULL cannot fill a NOT NULL column (a key column of a table `create` makes, too). */
export const NOT_NULL_REASON = 'NULL in a NOT NULL column';

/** Converts a record's value for `column` by the type table of records mode; never through a JS Date or float. */
export function convertValue(value: unknown, column: RecordColumn, storable: StorableValues): Converted {
  if (value === null || value === undefined) {
    return column.nullable ? { value: null } : { reason: NOT_NULL_REASON };
  }
  switch (column.kind) {
    case 'integer':
      return integerValue(value, column);
    case 'numeric':
      return numericValue(value, column);
    case 'float':
      return floatValue(value, storable, column);
    case 'boolean':
      return booleanValue(value);
    case 'date':
      return dateValue(value);
    case 'timestamp':
    case 'timestamptz':
      return timestampValue(value, column);
    case 'uuid': {
      const text = textOf(value);
      return text !== null && UUID.test(text) ? { value: text } : { reason: `${quoted(value)} is not a UUID (8-4-4-4-12 hex digits)` };
    }
    case 'json':
      return storable.jsonSource ? { value: jsonText(value) } : jsonValue(value);
    case 'text':
      return textValue(value, column, storable);
    case 'enum': {
      const text = textOf(value);
      return text !== null && column.values?.includes(text)
        ? { value: text }
        : { reason: `${quoted(value)} is not one of ${(column.values ?? []).map((v) => JSON.stringify(v)).join(', ')}` };
    }
    default: {
      // The database decides: passed as text.
      const text = textOf(value);
      if (text !== null) return { value: text };
      return { value: typeof value === 'boolean' ? String(value) : jsonText(value) };
    }
  }
}

function integerValue(value: unknown, column: RecordColumn): Converted {
  const text = textOf(value);
  if (text === null || !INTEGER.test(text)) return { reason: `${quoted(value)} is not an integer` };
  // Up to 15 digits a double holds the value exactly: no BigInt needed (the usual case).
  if (text.length <= 15) {
    const small = Number(text);
    if ((column.min === undefined || small >= Number(column.min)) && (column.max === undefined || small <= Number(column.max)))
      return { value: small + 0 };
  }
  const n = BigInt(text);
  if ((column.min !== undefined && n < column.min) || (column.max !== undefined && n > column.max)) {
    return { reason: `${text} is out of the column's range (${String(column.min)} to ${String(column.max)})` };
  }
  return { value: n <= MAX_SAFE && n >= -MAX_SAFE ? Number(n) : n.toString() };
}

function numericValue(value: unknown, column: RecordColumn): Converted {
  const text = textOf(value);
  const match = text === null ? null : DECIMAL.exec(text);
  if (!match) return { reason: `${quoted(value)} is not a decimal number` };
  const [, sign, whole, fraction = '', exponent = '0'] = match;
  // Shift the decimal point by the exponent, in text: every digit is kept, nothing rounded.
  const digits = whole + fraction;
  const shift = Number(exponent);
  if (!Number.isSafeInteger(shift) || Math.abs(shift) > 10000) return { reason: `${quoted(value)} has an exponent out of range` };
  let point = whole.length + shift;
  let all = digits;
  if (point < 0) {
    all = '0'.repeat(-point) + all;
    point = 0;
  } else if (point > all.length) {
    all = all + '0'.repeat(point - all.length);
  }
  const integerPart = all.slice(0, point).replace(/^0+/, '') || '0';
  const given = all.slice(point);
  // The digits that count: trailing zeros add none (`12.50` fits numeric(4, 1) unrounded).
  const significant = given.replace(/0+$/, '');
  const { precision, scale } = column;
  const scaled = scale !== undefined && scale !== null;
  if (scaled && significant.length > scale) {
    return { reason: `${text} has more than ${scale} digits after the decimal point` };
  }
  if (precision !== undefined && precision !== null) {
    const integerDigits = integerPart === '0' ? 0 : integerPart.length;
    if (integerDigits > precision - (scale ?? 0))
      return { reason: `${text} has more digits than numeric(${precision}, ${scale ?? 0}) holds` };
  }
  // The source's own fraction digits, its trailing zeros included (`12.50` stays `12.50` where
  // the column keeps what it is given), up to the column's scale where it has one.
  const fractionPart = scaled ? given.slice(0, Math.max(significant.length, Math.min(given.length, scale))) : given;
  const negative = sign === '-' && (integerPart !== '0' || significant.length > 0);
  return { value: `${negative ? '-' : ''}${integerPart}${fractionPart ? `.${fractionPart}` : ''}` };
}

function floatValue(value: unknown, storable: StorableValues, column: RecordColumn): Converted {
  const text = textOf(value);
  if (text === null) return { reason: `${quoted(value)} is not a number` };
  if (FLOAT.test(text)) {
    const n = Number(text);
    // Out of range is refused here, in pass 1, rather than by the database in the middle of the import.
    const type = column.single ? 'a real (4 bytes)' : 'a double';
    const stored = column.single ? Math.fround(n) : n;
    if (!Number.isFinite(stored)) return { reason: `${text} is beyond the range of ${type}` };
    // A non-zero value that would be stored as 0 (the databases refuse such an underflow).
    if (stored === 0 && /[1-9]/.test(text.split(/[eE]/)[0])) return { reason: `${text} is too close to 0 for ${type}` };
    return { value: storable.floatSpecials ? text : n };
  }
  if (storable.floatSpecials && /^(NaN|[+-]?Infinity)$/.test(text)) return { value: text };
  return { reason: `${quoted(value)} is not a number` };
}

function booleanValue(value: unknown): Converted {
  if (typeof value === 'boolean') return { value };
  const text = textOf(value)?.toLowerCase();
  if (text !== undefined && TRUE.has(text)) return { value: true };
  if (text !== undefined && FALSE.has(text)) return { value: false };
  return { reason: `${quoted(value)} is not a boolean (true/false, t/f, 1/0, yes/no)` };
}

function isLeap(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

function daysIn(year: number, month: number): number {
  return month === 2 ? (isLeap(year) ? 29 : 28) : [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
}

function realDate(year: number, month: number, day: number): boolean {
  return year >= 1 && month >= 1 && month <= 12 && day >= 1 && day <= daysIn(year, month);
}

function dateValue(value: unknown): Converted {
  const text = textOf(value);
  const match = text === null ? null : DATE.exec(text);
  if (!match || !realDate(Number(match[1]), Number(match[2]), Number(match[3]))) {
    return { reason: `${quoted(value)} is not a calendar date (YYYY-MM-DD)` };
  }
  return { value: text };
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

function timestampValue(value: unknown, column: RecordColumn): Converted {
  const text = textOf(value);
  const match = text === null ? null : TIMESTAMP.exec(text);
  const invalid = (): Converted => ({ reason: `${quoted(value)} is not an ISO 8601 timestamp (YYYY-MM-DD HH:MM:SS[.ffffff][Z|±HH:MM])` });
  if (!match) return invalid();
  let [year, month, day, hour, minute] = [1, 2, 3, 4, 5].map((i) => Number(match[i]));
  const second = Number(match[6] ?? '0');
  const fraction = match[7] ?? '';
  const zone = match[8];
  if (!realDate(year, month, day) || hour > 23 || minute > 59 || second > 59) return invalid();
  // Up to 6 fraction digits are accepted whatever the column keeps: the database rounds to its precision, as it does for its own input.
  if (!zone || zone.toUpperCase() === 'Z') {
    // UTC already: the digits as given, with a space between date and time.
    const wall = `${match[1]}-${match[2]}-${match[3]} ${match[4]}:${match[5]}:${match[6] ?? '00'}${fraction ? `.${fraction}` : ''}`;
    return { value: column.kind === 'timestamptz' ? `${wall}+00` : wall };
  }
  // The UTC wall time: minutes shifted by the offset, the date carried in day numbers.
  const sign = zone[0] === '-' ? -1 : 1;
  const digits = zone.slice(1).replace(':', '');
  const offset = sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2) || '0'));
  if (Math.abs(offset) >= 24 * 60) return invalid();
  let minutes = daysFromCivil(year, month, day) * 1440 + hour * 60 + minute - offset;
  const days = Math.floor(minutes / 1440);
  minutes -= days * 1440;
  [year, month, day] = civilFromDays(days);
  hour = Math.floor(minutes / 60);
  minute = minutes % 60;
  if (year < 1 || year > 9999) return invalid();
  const wall = `${pad(year, 4)}-${pad(month)}-${pad(day)} ${pad(hour)}:${pad(minute)}:${pad(second)}${fraction ? `.${fraction}` : ''}`;
  return { value: column.kind === 'timestamptz' ? `${wall}+00` : wall };
}

function jsonValue(value: unknown): Converted {
  if (typeof value !== 'string') return { value: jsonText(value) };
  try {
    parseJson(value);
  } catch (error) {
    if (!(error instanceof JsonSyntaxError)) throw error;
    return { reason: `${quoted(value)} is not JSON (${error.message})` };
  }
  return { value };
}

function textValue(value: unknown, column: RecordColumn, storable: StorableValues): Converted {
  const text = textOf(value);
  if (text === null) return { reason: `${quoted(value)} is not text` };
  if (column.length !== undefined && column.length !== null && text.length > column.length) {
    const characters = [...text].length;
    if (characters > column.length) return { reason: `the text has ${characters} characters, the column holds ${column.length}` };
  }
  // UTF-8 takes at most 3 bytes per UTF-16 unit: only a text that might be too long is measured.
  if (column.bytes !== undefined && column.bytes !== null && 3 * text.length > column.bytes) {
    const bytes = Buffer.byteLength(text);
    if (bytes > column.bytes) return { reason: `the text has ${bytes} bytes of UTF-8, the column holds ${column.bytes}` };
  }
  if (!storable.textHoldsNul && text.includes('\u0000')) return { reason: 'the text contains U+0000, which the database cannot store' };
  if (LONE_SURROGATE.test(text)) return { reason: 'the text contains a lone surrogate, which is not Unicode text' };
  return { value: text };
}
