/**
 * The column types of a table to create, inferred in pass 1 from every value of a file, in memory
 * that grows with the fields, never with the rows. What each type accepts is exactly what
 * `convertValue` accepts for the column the catalogue reports once the table exists, so the import
 * into it never rejects a value the inference saw.
 *
 * Preference, for the values of one field (NULL and absent values aside):
 * - integer: all `-?[0-9]+` within int4; bigint within int8; beyond int8, numeric(digits, 0).
 *   Leading zeros too, as convertValue reads them: `007` is the integer 7.
 * - numeric(p, s): integers and plain decimals (`-?[0-9]+\.[0-9]+`); s is the most fraction digits
 *   written (trailing zeros kept: `12.50` asks for 2), p the most integer digits (leading zeros not
 *   counted) plus s: `12.50` and `3.125` make numeric(5, 3). Up to (65, 30), what MySQL/MariaDB's
 *   DECIMAL holds, so the kind is the same on every database.
 * - double: any of those beyond (65, 30), or a number with an exponent (`1e3`), or `.5` / `5.`; not
 *   when a value overflows a double or underflows to 0 (then text).
 * - boolean: `true/false/t/f/yes/no` in any case, JSON booleans, and `1`/`0` beside them (alone,
 *   `1`/`0` are integers).
 * - date: `YYYY-MM-DD`, a real calendar date.
 * - timestamp: ISO 8601 date and time without a zone; timestamptz when any value gives one (a value
 *   without is then read as UTC, as a timestamptz column reads it).
 * - json: JSON objects and arrays, and anything mixed with them or with a JSON boolean that no type
 *   above holds (a text column takes neither).
 * - text: everything else, and any mix of the above: a date beside a timestamp (a timestamp column
 *   takes no bare date), a number beside a date, `yes` beside `2`.
 *
 * Beyond the invariant: a text with U+0000 (PostgreSQL) or a lone surrogate is invalid in any text
 * column, so its rows stay invalid. A JSON boolean, object or array in a CSV import can only come
 * from a caller's `map` (CSV fields are text); beside a text that is not JSON text it makes a json
 * column that refuses that text (from a JSON file such a column takes any value).
 */
import type { InferredColumn, InferredKind } from '../../dialect';
import { JsonNumber } from './json-values';

export type { InferredColumn, InferredKind } from '../../dialect';

// What one field's values were, as bits: a few integer operations a value, no allocation.
const INT4 = 1;
const INT8 = 1 << 1;
/** Integers beyond int8. */
const WIDE_INT = 1 << 2;
/** Integers other than exactly `0` and `1` (those also fill a boolean). */
const NOT_BINARY = 1 << 3;
const DECIMAL = 1 << 4;
/** Numbers only a double takes: an exponent, `.5`, `5.`. */
const FLOAT = 1 << 5;
/** A number a double cannot hold (overflow, or underflow to 0). */
const NOT_DOUBLE = 1 << 6;
const BOOLEAN_TEXT = 1 << 7;
const BOOLEAN_VALUE = 1 << 8;
const DATE = 1 << 9;
const TIMESTAMP = 1 << 10;
const ZONED = 1 << 11;
/** JSON objects and arrays (and what else a `map` returns that has no text form). */
const OBJECT = 1 << 12;
/** Text that is none of the above: the column is text or json whatever comes next. */
const TEXT = 1 << 13;

const NUMBERS = INT4 | INT8 | WIDE_INT | NOT_BINARY | DECIMAL | FLOAT | NOT_DOUBLE;
const INTEGERS = INT4 | INT8 | NOT_BINARY;
const EXACT_NUMBERS = INTEGERS | WIDE_INT | DECIMAL;
const BOOLEANS = BOOLEAN_TEXT | BOOLEAN_VALUE | INT4;
const TIMESTAMPS = TIMESTAMP | ZONED;

/** MySQL/MariaDB's DECIMAL(65, 30), the narrowest of the databases'. */
const MAX_PRECISION = 65;
const MAX_SCALE = 30;
const INT4_MAX = 2147483647;
const INT8_MAX = '9223372036854775807';
const INT8_MIN = '9223372036854775808';

const C_0 = 48;
const C_9 = 57;
const C_MINUS = 45;
const C_PLUS = 43;
const C_DOT = 46;
const C_COLON = 58;

/** One field's facts so far. */
class FieldFacts {
  seen = 0;
  /** Records in which the field had a value (not NULL). */
  values = 0;
  /** Most integer digits (leading zeros aside) and fraction digits of the exact numbers. */
  integerDigits = 0;
  scale = 0;
  maxLength = 0;

  constructor(readonly name: string) {}
}

const isDigit = (c: number) => c >= C_0 && c <= C_9;

/** The two-digit number at `at`, or -1. */
function twoDigits(s: string, at: number): number {
  const a = s.charCodeAt(at);
  const b = s.charCodeAt(at + 1);
  return isDigit(a) && isDigit(b) ? (a - C_0) * 10 + (b - C_0) : -1;
}

/** Characters (code points) of `s`: its UTF-16 length less its surrogate pairs. */
function characters(s: string): number {
  let count = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        count--;
        i++;
      }
    }
  }
  return count;
}

function realDate(year: number, month: number, day: number): boolean {
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  if (month === 2) return day <= ((year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28);
  return day <= (month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31);
}

const BOOLEAN_WORDS = ['t', 'f', 'no', 'yes', 'true', 'false'];

/** `true/false/t/f/yes/no` in any case: ASCII letters only, the ones convertValue's lower-casing matches. */
function isBooleanWord(s: string, n: number): boolean {
  search: for (const word of BOOLEAN_WORDS) {
    if (word.length !== n) continue;
    // `| 32` lower-cases an ASCII letter and maps no other character onto one.
    for (let i = 0; i < n; i++) if ((s.charCodeAt(i) | 32) !== word.charCodeAt(i)) continue search;
    return true;
  }
  return false;
}

/**
 * A date (`YYYY-MM-DD`) or timestamp (`T`, `t` or space, `HH:MM[:SS[.f{1,6}]]`, then `Z` or
 * `±HH[[:]MM]` or nothing), checked as convertValue checks it; TEXT for anything else.
 * The caller saw a digit first and `-` at 4.
 */
function temporal(s: string, n: number): number {
  if (s.charCodeAt(7) !== C_MINUS) return TEXT;
  const century = twoDigits(s, 0);
  const yy = twoDigits(s, 2);
  const month = twoDigits(s, 5);
  const day = twoDigits(s, 8);
  if (century < 0 || yy < 0 || month < 0 || day < 0) return TEXT;
  const year = century * 100 + yy;
  if (!realDate(year, month, day)) return TEXT;
  if (n === 10) return DATE;
  const separator = s.charCodeAt(10);
  if ((separator !== 84 && separator !== 116 && separator !== 32) || n < 16 || s.charCodeAt(13) !== C_COLON) return TEXT;
  const hour = twoDigits(s, 11);
  const minute = twoDigits(s, 14);
  if (hour < 0 || hour > 23 || minute < 0 || minute > 59) return TEXT;
  let at = 16;
  if (at < n && s.charCodeAt(at) === C_COLON) {
    const second = twoDigits(s, at + 1);
    if (second < 0 || second > 59) return TEXT;
    at += 3;
    if (at < n && s.charCodeAt(at) === C_DOT) {
      const start = ++at;
      while (at < n && isDigit(s.charCodeAt(at))) at++;
      if (at === start || at - start > 6) return TEXT;
    }
  }
  if (at === n) return TIMESTAMP;
  const zone = s.charCodeAt(at);
  if (zone === 90 || zone === 122) return at + 1 === n ? ZONED : TEXT;
  if (zone !== C_PLUS && zone !== C_MINUS) return TEXT;
  const zoneHours = twoDigits(s, at + 1);
  if (zoneHours < 0) return TEXT;
  at += 3;
  let zoneMinutes = 0;
  if (at < n) {
    if (s.charCodeAt(at) === C_COLON) at++;
    zoneMinutes = twoDigits(s, at);
    if (zoneMinutes < 0 || at + 2 !== n) return TEXT;
  }
  const offset = zoneHours * 60 + zoneMinutes;
  if (offset >= 24 * 60) return TEXT;
  // convertValue refuses a value whose UTC wall time leaves years 1 to 9999.
  const minutes = hour * 60 + minute + (zone === C_MINUS ? offset : -offset);
  if (minutes < 0 && year === 1 && month === 1 && day === 1) return TEXT;
  if (minutes >= 24 * 60 && year === 9999 && month === 12 && day === 31) return TEXT;
  return ZONED;
}

/** Whether a double holds the number (Number(s) finite, and not 0 for non-zero digits), as convertValue checks it. */
function fitsDouble(s: string): boolean {
  const n = Number(s);
  if (!Number.isFinite(n)) return false;
  if (n !== 0) return true;
  const e = s.search(/[eE]/);
  return !/[1-9]/.test(e < 0 ? s : s.slice(0, e));
}

/**
 * Column types inferred from every value of a file, fed one record at a time in pass 1;
 * `columns()` then gives each field's type. See the module's comment for the rules.
 */
export class ColumnInference {
  private readonly fields = new Map<string, FieldFacts>();
  /** The facts in the order of the last record's fields: records of a file mostly share their order. */
  private readonly order: FieldFacts[] = [];
  private records = 0;

  /**
   * @param options.jsonSource the records come from JSON, as `StorableValues.jsonSource` says for
   *   conversion. The rules come out the same either way: a CSV reader gives text and NULL only, so
   *   there a JSON boolean, object or array can only come from a `map` (see the module's comment).
   */
  constructor(readonly options: { jsonSource: boolean }) {}

  /** Takes one record's fields, as the readers give them (JSON values, or CSV text and NULL). */
  add(fields: Record<string, unknown>): void {
    this.records++;
    const order = this.order;
    let i = 0;
    for (const name in fields) {
      let facts: FieldFacts | undefined = order[i];
      if (facts === undefined || facts.name !== name) {
        facts = this.fields.get(name) ?? this.newField(name);
        order[i] = facts;
      }
      i++;
      const value = fields[name];
      if (value === null || value === undefined) continue;
      facts.values++;
      if (typeof value === 'string') this.text(facts, value);
      else if (value instanceof JsonNumber) this.text(facts, value.text);
      else this.other(facts, value);
    }
  }

  /** The inferred columns, in the order their fields were first seen. */
  columns(): InferredColumn[] {
    return [...this.fields.values()].map((facts) => {
      const column: InferredColumn = {
        name: facts.name,
        kind: 'text',
        nullable: facts.values < this.records,
        maxLength: facts.maxLength,
      };
      const kind = kindOf(facts);
      if (kind === 'numeric') {
        column.precision = Math.max(1, facts.integerDigits + facts.scale);
        column.scale = facts.scale;
      }
      column.kind = kind;
      return column;
    });
  }

  private newField(name: string): FieldFacts {
    const facts = new FieldFacts(name);
    this.fields.set(name, facts);
    return facts;
  }

  /** A text value (a string, or a number's source text). */
  private text(facts: FieldFacts, s: string): void {
    const n = s.length;
    if (n > facts.maxLength) facts.maxLength = Math.max(facts.maxLength, characters(s));
    // Text already: whatever comes next, the column is text (or json).
    if (facts.seen & TEXT) return;
    if (n === 0) {
      facts.seen |= TEXT;
      return;
    }
    const c = s.charCodeAt(0);
    if (isDigit(c)) facts.seen |= n >= 10 && s.charCodeAt(4) === C_MINUS ? temporal(s, n) : this.number(facts, s, n);
    else if (c === C_MINUS || c === C_DOT) facts.seen |= this.number(facts, s, n);
    else facts.seen |= n <= 5 && isBooleanWord(s, n) ? BOOLEAN_TEXT : TEXT;
  }

  /** What a `map` may return besides the readers' values: JavaScript numbers, bigints, booleans, objects. */
  private other(facts: FieldFacts, value: unknown): void {
    if (typeof value === 'boolean') facts.seen |= BOOLEAN_VALUE;
    else if ((typeof value === 'number' && Number.isFinite(value)) || typeof value === 'bigint') this.text(facts, String(value));
    else facts.seen |= OBJECT;
  }

  /**
   * An integer, decimal or float text by convertValue's grammars (INTEGER, DECIMAL, FLOAT), its
   * digits counted for numeric; TEXT for anything else.
   */
  private number(facts: FieldFacts, s: string, n: number): number {
    let i = s.charCodeAt(0) === C_MINUS ? 1 : 0;
    const start = i;
    let firstNonZero = -1;
    let c = 0;
    for (; i < n; i++) {
      c = s.charCodeAt(i);
      if (!isDigit(c)) break;
      if (firstNonZero < 0 && c !== C_0) firstNonZero = i;
    }
    const integerLength = i - start;
    const significant = firstNonZero < 0 ? 0 : i - firstNonZero;
    if (i === n) return integerLength === 0 ? TEXT : this.integer(facts, s, n, significant);
    let fractionLength = -1;
    if (c === C_DOT) {
      const fractionStart = ++i;
      while (i < n && isDigit(s.charCodeAt(i))) i++;
      fractionLength = i - fractionStart;
    }
    if (integerLength === 0 && fractionLength <= 0) return TEXT;
    if (i < n) {
      c = s.charCodeAt(i);
      if (c !== 101 && c !== 69) return TEXT;
      i++;
      c = s.charCodeAt(i);
      if (c === C_PLUS || c === C_MINUS) i++;
      const exponentStart = i;
      while (i < n && isDigit(s.charCodeAt(i))) i++;
      if (i === exponentStart || i !== n) return TEXT;
      // Up to 99 as exponent and 200 digits a double holds any such value, zero or not.
      return i - exponentStart > 2 || n > 200 ? (fitsDouble(s) ? FLOAT : FLOAT | NOT_DOUBLE) : FLOAT;
    }
    const tooWide = significant > 300 || fractionLength > 300;
    if (integerLength === 0 || fractionLength === 0) return tooWide && !fitsDouble(s) ? FLOAT | NOT_DOUBLE : FLOAT;
    if (significant > facts.integerDigits) facts.integerDigits = significant;
    if (fractionLength > facts.scale) facts.scale = fractionLength;
    return tooWide && !fitsDouble(s) ? DECIMAL | NOT_DOUBLE : DECIMAL;
  }

  private integer(facts: FieldFacts, s: string, n: number, significant: number): number {
    if (significant > facts.integerDigits) facts.integerDigits = significant;
    const binary = n === 1 && s.charCodeAt(0) <= 49 ? 0 : NOT_BINARY;
    if (significant < 10) return INT4 | binary;
    if (significant === 10) return Math.abs(Number(s)) <= INT4_MAX || Number(s) === -INT4_MAX - 1 ? INT4 | binary : INT8 | binary;
    if (significant < 19) return INT8 | binary;
    if (significant === 19) {
      const digits = s.slice(n - 19);
      return digits <= (s.charCodeAt(0) === C_MINUS ? INT8_MIN : INT8_MAX) ? INT8 | binary : WIDE_INT | binary;
    }
    return significant > 300 && !fitsDouble(s) ? WIDE_INT | NOT_BINARY | NOT_DOUBLE : WIDE_INT | NOT_BINARY;
  }
}

/** The first type, in order of preference, whose conversion takes every kind of value seen. */
function kindOf(facts: FieldFacts): InferredKind {
  const seen = facts.seen;
  if (seen === 0) return 'text';
  if (seen & OBJECT) return 'json';
  if ((seen & ~NUMBERS) === 0) {
    if ((seen & ~INTEGERS) === 0) return seen & INT8 ? 'bigint' : 'integer';
    if ((seen & ~EXACT_NUMBERS) === 0 && facts.scale <= MAX_SCALE && facts.integerDigits + facts.scale <= MAX_PRECISION) return 'numeric';
    return seen & NOT_DOUBLE ? 'text' : 'double';
  }
  if ((seen & ~BOOLEANS) === 0 && (seen & NOT_BINARY) === 0) return 'boolean';
  if (seen === DATE) return 'date';
  if ((seen & ~TIMESTAMPS) === 0) return seen & ZONED ? 'timestamptz' : 'timestamp';
  // A mix: text, unless a JSON boolean is among it (a text column takes none).
  return seen & BOOLEAN_VALUE ? 'json' : 'text';
}
