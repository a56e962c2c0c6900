import { InvalidInputError } from '../../core/errors';
import { binaryWire, CopyBinary, type CopyText, type RecordColumn, type WireType } from '../../dialect';
import { type CsvPosition, CsvSpans, csvSpansThen, type RecordDelimiter } from '../csv-records';
import { type ColumnValue, convertValue, type StorableValues } from './column-values';
import { type CsvOptions, csvHeader, csvRecords, type NullTexts } from './record-readers';
import { itemGroup, type RecordRows, type RowGroup } from './record-rows';
import type { TargetTable } from './target-table';
import { copyBinaryValue, copyValue, type RowCopy } from './write-records';

/** True when `csvCopyGroups` reads this CSV: the default delimiter and quote (the byte scanner's). */
export function readsAsBytes(csv: CsvOptions): boolean {
  return (csv.delimiter ?? ',') === ',' && (csv.quote ?? '"') === '"' && (csv.escape ?? csv.quote ?? '"') === '"';
}

/** Where `csvCopyGroups` starts reading in the middle of a file: the header (read before), row `index`, at `offset`. */
export interface CsvStart extends CsvPosition {
  header: string[];
  index: number;
}

/**
 * The rows of a CSV file `into` a table, read and checked as bytes: no string, object or value per
 * field for the values the fast checks below accept (an import's bulk), and a row's COPY text
 * written straight from its bytes. Any other value goes through `convertValue` on its text, and
 * from the first record holding a quote (or invalid UTF-8) on, the rest of the file is read by
 * `csvRecords` and evaluated by `RecordRows`: rows, rejects and errors are exactly those of the
 * generic path.
 */
export async function* csvCopyGroups(
  blocks: AsyncIterable<Buffer>,
  csv: CsvOptions,
  nulls: NullTexts,
  rows: RecordRows,
  target: TargetTable,
  storable: StorableValues,
  withValues = false,
  withKeys = true,
  from?: CsvStart,
): AsyncGenerator<RowGroup> {
  let header: string[] | null = csv.columns ?? from?.header ?? null;
  let index = from?.index ?? 0;
  let handedOver = false;
  let fields: CsvFieldRows | null = null;
  async function* rest(
    head: Buffer,
    iterator: AsyncIterator<Buffer> | null,
    delimiter: RecordDelimiter | null,
    offset: number,
  ): AsyncGenerator<RowGroup> {
    handedOver = true;
    async function* input(): AsyncGenerator<Buffer> {
      if (head.length > 0) yield head;
      if (iterator === null) return;
      for (let next = await iterator.next(); next.done !== true; next = await iterator.next()) yield next.value;
    }
    for await (const items of csvRecords(input(), csv, nulls, { header, index, delimiter, offset })) yield itemGroup(items, rows);
  }
  for await (const group of csvSpansThen(blocks, rest, { utf8: true, from })) {
    if (!(group instanceof CsvSpans)) {
      yield group;
      continue;
    }
    let from = 0;
    if (header === null) {
      // The header's names are names: a null text applies to the rows after it.
      header = csvHeader(group.record(0));
      from = 1;
    }
    fields ??= new CsvFieldRows(header, rows, target, storable, nulls, withValues, withKeys);
    if (from < group.count) {
      yield fields.group(group, from, index);
      index += group.count - from;
    }
  }
  if (header === null && !handedOver) throw new InvalidInputError('The CSV is empty: it needs a header row (or csv.columns).');
}

// What the byte checks know; any other kind goes through `convertValue`.
const enum Check {
  Other,
  Integer,
  Numeric,
  Text,
  Boolean,
  Date,
  Timestamp,
  Timestamptz,
  Uuid,
}

const CHECKS: Partial<Record<RecordColumn['kind'], Check>> = {
  integer: Check.Integer,
  numeric: Check.Numeric,
  text: Check.Text,
  boolean: Check.Boolean,
  date: Check.Date,
  timestamp: Check.Timestamp,
  timestamptz: Check.Timestamptz,
  uuid: Check.Uuid,
};

const NO_VALUES: ColumnValue[] = [];
const ZERO = 0x30;
const NINE = 0x39;
const MINUS = 0x2d;
const DOT = 0x2e;
const COLON = 0x3a;
const SPACE = 0x20;
const T_UPPER = 0x54;
const Z_UPPER = 0x5a;
const TRUE_BYTES = Buffer.from('t');
const FALSE_BYTES = Buffer.from('f');
const UTC = Buffer.from('+00');
const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const BOOLEANS: [string, boolean][] = [
  ['true', true],
  ['t', true],
  ['1', true],
  ['yes', true],
  ['false', false],
  ['f', false],
  ['0', false],
  ['no', false],
];

/** The boolean of `true/false/t/f/1/0/yes/no` in any case (ASCII letters only, as `toLowerCase` reads them), else undefined. */
function booleanBytes(bytes: Buffer, start: number, end: number): boolean | undefined {
  const length = end - start;
  outer: for (const [text, value] of BOOLEANS) {
    if (text.length !== length) continue;
    for (let i = 0; i < length; i++) {
      const byte = bytes[start + i];
      // Lower case of an ASCII letter; a digit stays as it is.
      if ((byte >= 0x41 && byte <= 0x5a ? byte | 0x20 : byte) !== text.charCodeAt(i)) continue outer;
    }
    return value;
  }
  return undefined;
}

const isDigit = (byte: number) => byte >= ZERO && byte <= NINE;

/** The number of two or four digits at `at` (NaN when a byte is not a digit). */
function digits(bytes: Buffer, at: number, count: number): number {
  let n = 0;
  for (let i = at; i < at + count; i++) {
    const byte = bytes[i];
    if (byte < ZERO || byte > NINE) return NaN;
    n = n * 10 + byte - ZERO;
  }
  return n;
}

/** A real calendar date `YYYY-MM-DD` at `at` (10 bytes). */
function calendarDate(bytes: Buffer, at: number): boolean {
  if (bytes[at + 4] !== MINUS || bytes[at + 7] !== MINUS) return false;
  const year = digits(bytes, at, 4);
  const month = digits(bytes, at + 5, 2);
  const day = digits(bytes, at + 8, 2);
  if (!(year >= 1 && month >= 1 && month <= 12 && day >= 1)) return false;
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  return day <= (month === 2 && leap ? 29 : DAYS[month - 1]);
}

/** The fields of one table column's worth of checks, fixed by the header. */
interface FieldPlan {
  /** Position of the field in the record. */
  position: number;
  /** Position of the column in the table. */
  at: number;
  name: string;
  column: RecordColumn;
  check: Check;
  min: number;
  max: number;
  /** The value is kept for the key or for naming a row whose key exists. */
  keyed: boolean;
  /** The column's binary COPY type, if it has one. */
  wire: WireType | null;
}

/**
 * Evaluates CSV records given as byte spans as `RecordRows.evaluate` does their fields: the fields
 * matched to columns in the order a record object lists them, the first invalid one named, then a
 * NOT NULL column no field fills. The match is the header's, so the same for every record.
 */
class CsvFieldRows {
  private readonly plans: FieldPlan[] = [];
  private readonly columns: number[] = [];
  private readonly missing: RecordColumn | undefined;
  /** Rows have a key (`key`), made of kept values. */
  private readonly hasKey: boolean;
  /** Without `withValues`: the one array each row's key values are read into (only the key leaves the row). */
  private readonly keyValues: ColumnValue[];
  /** The null texts as bytes; null for the default, the empty field. */
  private readonly nullBytes: Buffer[] | null;
  /** Every column the fields fill has a binary COPY form. */
  readonly binary: boolean;
  /** What the last accepted value read: an integer's number, a boolean, where a numeric's or timestamp's canonical text ends. */
  private integerRead = 0;
  private booleanRead = false;
  private endRead = 0;

  constructor(
    private readonly header: string[],
    private readonly rows: RecordRows,
    private readonly target: TargetTable,
    private readonly storable: StorableValues,
    nulls: NullTexts,
    /** Valid rows get their values too (to bind, where there is no COPY). */
    private readonly withValues: boolean,
    /** Valid rows get their key (pass 1 checks it; pass 2 leaves out the repeats pass 1 found, by index). */
    withKeys: boolean,
  ) {
    // The byte path reads unquoted fields only (a quote hands the rest over to `csvRecords`).
    this.nullBytes = nulls === null ? null : [...nulls].map((text) => Buffer.from(text));
    const kept = new Set([...(rows.keyColumnNames() ?? []), ...target.primaryKey]);
    // A record object lists integer-like names first: its key order, built the same way.
    const record: Record<string, number> = {};
    header.forEach((name, position) =>
      Object.defineProperty(record, name, { value: position, enumerable: true, writable: true, configurable: true }),
    );
    for (const name of Object.keys(record)) {
      const at = target.fieldColumns.get(name);
      if (at === undefined || this.columns.includes(at)) continue;
      const column = target.columns[at];
      this.columns.push(at);
      this.plans.push({
        position: record[name],
        at,
        name,
        column,
        check: CHECKS[column.kind] ?? Check.Other,
        min: column.min === undefined ? -Infinity : Number(column.min),
        max: column.max === undefined ? Infinity : Number(column.max),
        keyed: kept.has(column.name),
        wire: binaryWire(column),
      });
    }
    this.binary = this.plans.every((plan) => plan.wire !== null);
    this.hasKey = withKeys && rows.keyColumnNames() !== null;
    this.keyValues = this.hasKey && !withValues ? new Array<ColumnValue>(target.columns.length) : NO_VALUES;
    this.missing = target.columns.find((column, at) => !this.columns.includes(at) && !column.nullable && !column.hasDefault);
  }

  group(spans: CsvSpans, from: number, index: number): RowGroup {
    return {
      length: spans.count - from,
      index: (r) => index + r,
      raw: (r) => {
        const first = spans.fieldsAt[from + r];
        return spans.bytes.toString('utf8', spans.starts[first], spans.ends[spans.fieldsAt[from + r + 1] - 1]);
      },
      evaluate: (r, copy) => this.evaluate(spans, from + r, index + r, copy),
      end: (r) => spans.endOffset(from + r),
      copies: true,
      binary: this.binary,
    };
  }

  private evaluate(spans: CsvSpans, record: number, index: number, copy: RowCopy | null) {
    const count = spans.fieldCount(record);
    if (count !== this.header.length) {
      return { kind: 'invalid' as const, index, field: null, reason: `the record has ${count} fields, the header ${this.header.length}` };
    }
    const base = spans.fieldsAt[record];
    const { bytes, starts, ends } = spans;
    const mark = copy === null ? 0 : copy.byteLength;
    // Values are kept to bind them and for the key; a COPY chunk's rows go without (`valuesOf` reads
    // them again for naming a row whose key exists: no array per row of the bulk).
    // Every valid row writes its key columns' slots, so the shared array never lends a key from the row before.
    const values = this.withValues ? new Array<ColumnValue>(this.target.columns.length) : this.keyValues;
    const plans = this.plans;
    // The text checks write COPY text; binary fields are written after them, from what they read.
    const binary = copy instanceof CopyBinary ? copy : null;
    const text = binary === null ? (copy as CopyText | null) : null;
    binary?.beginRow(plans.length);
    for (let i = 0; i < plans.length; i++) {
      const plan = plans[i];
      const f = base + plan.position;
      if (text !== null && i > 0) text.tab();
      const reason = this.field(plan, bytes, starts[f], ends[f], text, binary, values);
      if (reason !== null) {
        copy?.truncate(mark);
        return { kind: 'invalid' as const, index, field: plan.name, reason };
      }
    }
    if (this.missing) {
      copy?.truncate(mark);
      return {
        kind: 'invalid' as const,
        index,
        field: this.missing.name,
        reason: `no field fills the NOT NULL column "${this.missing.name}"`,
      };
    }
    copy?.endRow();
    return { kind: 'row' as const, index, values, columns: this.columns, record: null, key: this.hasKey ? this.rows.keyOf(values) : null };
  }

  /** Checks one field (and writes it to `copy`): null when it is valid, else why not. */
  private field(
    plan: FieldPlan,
    bytes: Buffer,
    start: number,
    end: number,
    copy: CopyText | null,
    binary: CopyBinary | null,
    values: ColumnValue[],
  ): string | null {
    if (this.nullBytes === null ? start === end : isNullText(this.nullBytes, bytes, start, end)) {
      return this.converted(plan, null, copy, binary, values);
    }
    if (this.accepted(plan, bytes, start, end, copy)) {
      if (values !== NO_VALUES && (this.withValues || plan.keyed)) values[plan.at] = this.valueOf(plan, bytes, start, end);
      if (binary !== null) this.binaryField(plan, bytes, start, end, binary);
      return null;
    }
    return this.converted(plan, bytes.toString('utf8', start, end), copy, binary, values);
  }

  /** The generic conversion of one field's text (or NULL). */
  private converted(
    plan: FieldPlan,
    text: string | null,
    copy: CopyText | null,
    binary: CopyBinary | null,
    values: ColumnValue[],
  ): string | null {
    const converted = convertValue(text, plan.column, this.storable);
    if ('reason' in converted) return converted.reason;
    if (values !== NO_VALUES && (this.withValues || plan.keyed)) values[plan.at] = converted.value;
    if (copy !== null) copyValue(copy, converted.value);
    if (binary !== null) copyBinaryValue(binary, converted.value, plan.wire!);
    return null;
  }

  /** A field `accepted` took, in its binary form, from what the check read. */
  private binaryField(plan: FieldPlan, bytes: Buffer, start: number, end: number, binary: CopyBinary): void {
    switch (plan.check) {
      case Check.Integer:
        return binary.integer(this.integerRead, plan.wire!);
      case Check.Boolean:
        return binary.boolean(this.booleanRead);
      case Check.Numeric:
        return binary.numeric(bytes, start, this.endRead);
      case Check.Date:
        return binary.date(bytes, start);
      case Check.Timestamp:
      case Check.Timestamptz:
        return binary.timestamp(bytes, start, this.endRead);
      case Check.Uuid:
        return binary.uuid(bytes, start);
      default:
        return binary.text(bytes, start, end);
    }
  }

  /** The value `convertValue` gives for bytes `accepted` took. */
  private valueOf(plan: FieldPlan, bytes: Buffer, start: number, end: number): ColumnValue {
    switch (plan.check) {
      case Check.Integer:
        return this.integerRead;
      case Check.Boolean:
        return this.booleanRead;
      case Check.Numeric:
        return bytes.toString('latin1', start, this.endRead);
      case Check.Timestamp:
      case Check.Timestamptz: {
        const wall = `${bytes.toString('latin1', start, start + 10)} ${bytes.toString('latin1', start + 11, this.endRead)}`;
        return plan.check === Check.Timestamptz ? `${wall}+00` : wall;
      }
      default:
        return bytes.toString('utf8', start, end);
    }
  }

  /**
   * True when the bytes are a value the byte checks accept whose canonical text `convertValue`
   * would give is the bytes themselves (or a simple rewrite of them), written to `copy`; false
   * leaves the field to `convertValue` (and nothing written).
   */
  private accepted(plan: FieldPlan, bytes: Buffer, start: number, end: number, copy: CopyText | null): boolean {
    switch (plan.check) {
      case Check.Integer:
        return this.integer(plan, bytes, start, end, copy);
      case Check.Numeric:
        return this.numeric(plan.column, bytes, start, end, copy);
      case Check.Text:
        return this.text(plan.column, bytes, start, end, copy);
      case Check.Boolean: {
        const value = booleanBytes(bytes, start, end);
        if (value === undefined) return false;
        this.booleanRead = value;
        copy?.raw(value ? TRUE_BYTES : FALSE_BYTES);
        return true;
      }
      case Check.Date:
        if (end - start !== 10 || !calendarDate(bytes, start)) return false;
        copy?.raw(bytes, start, end);
        return true;
      case Check.Timestamp:
      case Check.Timestamptz:
        return this.timestamp(plan, bytes, start, end, copy);
      case Check.Uuid:
        return this.uuid(bytes, start, end, copy);
      default:
        return false;
    }
  }

  /** `-?[1-9][0-9]*` or `0`, up to 15 digits (a double holds it exactly), within the column's range. */
  private integer(plan: FieldPlan, bytes: Buffer, start: number, end: number, copy: CopyText | null): boolean {
    let at = start;
    const negative = bytes[at] === MINUS;
    if (negative) at++;
    const length = end - at;
    if (length === 0 || length > 15 || (bytes[at] === ZERO && (length > 1 || negative))) return false;
    let n = 0;
    for (let i = at; i < end; i++) {
      const byte = bytes[i];
      if (byte < ZERO || byte > NINE) return false;
      n = n * 10 + byte - ZERO;
    }
    if (negative) n = -n;
    if (n < plan.min || n > plan.max) return false;
    this.integerRead = n;
    copy?.raw(bytes, start, end);
    return true;
  }

  /**
   * `-?([1-9][0-9]*|0)(\.[0-9]+)?` within the precision and scale: its text is the bytes as given,
   * less the fraction's trailing zeros beyond the column's scale (and a point left bare). A
   * negative zero goes the generic way.
   */
  private numeric(column: RecordColumn, bytes: Buffer, start: number, end: number, copy: CopyText | null): boolean {
    let at = start;
    const negative = bytes[at] === MINUS;
    if (negative) at++;
    const wholeStart = at;
    while (at < end && isDigit(bytes[at])) at++;
    const whole = at - wholeStart;
    if (whole === 0 || (whole > 1 && bytes[wholeStart] === ZERO)) return false;
    let cut = at;
    let fraction = 0;
    if (at < end) {
      if (bytes[at] !== DOT || at + 1 === end) return false;
      for (let i = at + 1; i < end; i++) {
        const byte = bytes[i];
        if (byte < ZERO || byte > NINE) return false;
        if (byte !== ZERO) {
          cut = i + 1;
          fraction = i - at;
        }
      }
    }
    const zeroWhole = whole === 1 && bytes[wholeStart] === ZERO;
    if (negative && zeroWhole) return false;
    const { precision, scale } = column;
    const scaled = scale !== undefined && scale !== null;
    if (scaled && fraction > scale) return false;
    if (precision !== undefined && precision !== null && (zeroWhole ? 0 : whole) > precision - (scale ?? 0)) return false;
    // The fraction as given, trailing zeros included, up to the column's scale where it has one
    // (numericValue's digits: the generic path writes the same value); `at` is still the point.
    if (end > cut) cut = scaled ? Math.max(cut, Math.min(end, at + 1 + scale)) : end;
    if (cut === at + 1) cut--; // a point with no digit after it kept
    this.endRead = cut;
    copy?.raw(bytes, start, cut);
    return true;
  }

  /** Any UTF-8 text within the column's length, without U+0000 where the database cannot store it. */
  private text(column: RecordColumn, bytes: Buffer, start: number, end: number, copy: CopyText | null): boolean {
    if (!this.storable.textHoldsNul) {
      for (let i = start; i < end; i++) if (bytes[i] === 0) return false;
    }
    if (column.length !== undefined && column.length !== null && end - start > column.length) {
      let characters = 0;
      for (let i = start; i < end; i++) if ((bytes[i] & 0xc0) !== 0x80) characters++;
      if (characters > column.length) return false;
    }
    copy?.utf8(bytes, start, end);
    return true;
  }

  /**
   * `YYYY-MM-DD[T ]HH:MM:SS[.f…]` (fraction up to the digits the column keeps), no zone or `Z`: its
   * canonical text is the bytes with a space between date and time (and `+00` for timestamptz).
   */
  private timestamp(plan: FieldPlan, bytes: Buffer, start: number, end: number, copy: CopyText | null): boolean {
    let last = end;
    const zulu = (bytes[last - 1] | 0x20) === (Z_UPPER | 0x20);
    if (zulu) last--;
    const length = last - start;
    if (length < 19 || !calendarDate(bytes, start)) return false;
    const separator = bytes[start + 10];
    if (separator !== SPACE && separator !== T_UPPER && separator !== (T_UPPER | 0x20)) return false;
    if (bytes[start + 13] !== COLON || bytes[start + 16] !== COLON) return false;
    const hour = digits(bytes, start + 11, 2);
    const minute = digits(bytes, start + 14, 2);
    const second = digits(bytes, start + 17, 2);
    if (!(hour <= 23 && minute <= 59 && second <= 59)) return false;
    if (length > 19) {
      const fraction = length - 20;
      if (bytes[start + 19] !== DOT || fraction < 1 || fraction > 6) return false;
      for (let i = start + 20; i < last; i++) if (!isDigit(bytes[i])) return false;
    }
    this.endRead = last;
    if (copy !== null) {
      copy.raw(bytes, start, start + 10);
      copy.raw(SPACE_BYTES);
      copy.raw(bytes, start + 11, last);
      if (plan.check === Check.Timestamptz) copy.raw(UTC);
    }
    return true;
  }

  /** Canonical 8-4-4-4-12 hex digits, either case (kept as given). */
  private uuid(bytes: Buffer, start: number, end: number, copy: CopyText | null): boolean {
    if (end - start !== 36) return false;
    for (let i = 0; i < 36; i++) {
      const byte = bytes[start + i];
      if (i === 8 || i === 13 || i === 18 || i === 23) {
        if (byte !== MINUS) return false;
      } else if (!isDigit(byte) && !((byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x66)) {
        return false;
      }
    }
    copy?.raw(bytes, start, end);
    return true;
  }
}

const SPACE_BYTES = Buffer.from(' ');

/** Whether `bytes[start…end)` is one of the null texts. */
function isNullText(texts: Buffer[], bytes: Buffer, start: number, end: number): boolean {
  for (const text of texts) if (end - start === text.length && text.equals(bytes.subarray(start, end))) return true;
  return false;
}
