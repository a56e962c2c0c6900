import { InvalidArgumentError } from '../../core/errors';
import type { CopyBinary, CopyText } from '../../dialect';
import { type ColumnValue, convertValue, NOT_NULL_REASON, type StorableValues } from './column-values';
import { jsonText, plainJson } from './json-values';
import type { SourceItem } from './record-readers';
import type { TargetTable } from './target-table';

/**
 * Turns a source record (and its row index) into the field values to write, or null to skip the row.
 * @inline
 */
export type RecordMap = (record: Record<string, unknown>, index: number) => Record<string, unknown> | null;

/**
 * A row's key as duplicate detection compares it: a one-column key's finite number as itself (no
 * string per row: the bulk of an import with an integer primary key), else canonical JSON text.
 * One column's values always convert to the same kind, so a number never meets a text of the same value.
 */
export type RowKey = string | number;

/** What one source row becomes: a row to write, a row `map` skipped, or an invalid row. */
export type Evaluated =
  | { kind: 'row'; index: number; values: ColumnValue[]; columns: number[]; record: Record<string, unknown> | null; key: RowKey | null }
  | { kind: 'skipped'; index: number }
  | { kind: 'invalid'; index: number; field: string | null; reason: string };

/** One group of source rows as the passes read them, however the source was read. */
export interface RowGroup {
  readonly length: number;
  /** Source position of row `r` of the group. */
  index(r: number): number;
  /** The row's source text. */
  raw(r: number): string;
  /**
   * Row `r` evaluated. With `copy`, a reader that writes COPY text (`csvCopyGroups`) appends a
   * valid row there, its values left out of the result; others ignore it.
   */
  evaluate(r: number, copy: CopyText | CopyBinary | null): Evaluated;
  /** True when `evaluate` appends valid rows to `copy`. */
  readonly copies: boolean;
  /** True when `evaluate` can write the binary format (every column it fills has one). */
  readonly binary?: boolean;
  /** The byte offset in the input where the row after row `r` starts; absent or null where the reader does not know it. */
  end?(r: number): number | null;
}

/** Source items as a row group, evaluated by `rows`. */
export function itemGroup(items: SourceItem[], rows: RecordRows): RowGroup {
  return {
    length: items.length,
    index: (r) => items[r].index,
    raw: (r) => items[r].raw,
    evaluate: (r) => rows.evaluate(items[r]),
    copies: false,
    end: (r) => items[r].end ?? null,
  };
}

/**
 * Turns source rows into rows to write, the same way in both passes (so `map` must be pure):
 * `map` first, then, `into` a table, each field converted for its column; the key, when asked
 * for, as canonical text of the key fields' values.
 */
export class RecordRows {
  private readonly keyColumns: number[] | null;

  constructor(
    private readonly target: TargetTable | null,
    private readonly storable: StorableValues,
    private readonly map: RecordMap | undefined,
    private readonly key: string[] | null,
    /** As a unique index counts them: a key with a NULL part (a generated key the file leaves out) repeats nothing. */
    private readonly nullsDistinct = false,
    /** Without a target: sees each valid record (after `map`, JSON numbers as written) — `create` infers the columns from them. */
    private readonly observe?: (record: Record<string, unknown>) => void,
  ) {
    if (key && target) {
      this.keyColumns = key.map((field) => {
        const at = target.fieldColumns.get(field);
        if (at === undefined) throw new InvalidArgumentError(`importFile: key field "${field}" is not a column of "${target.table.name}".`);
        return at;
      });
    } else {
      this.keyColumns = null;
    }
  }

  /** The key's column names, `into` a table with `key`. */
  keyColumnNames(): string[] | null {
    return this.keyColumns && this.target ? this.keyColumns.map((at) => this.target!.columns[at].name) : null;
  }

  evaluate(item: SourceItem): Evaluated {
    const index = item.index;
    if (item.problem) return { kind: 'invalid', index, ...item.problem };
    let record = item.fields as Record<string, unknown>;
    if (this.map) {
      const mapped = this.map(plainJson(record) as Record<string, unknown>, index);
      if (mapped === null) return { kind: 'skipped', index };
      if (typeof mapped !== 'object' || Array.isArray(mapped)) {
        throw new InvalidArgumentError(`importFile: map must return an object or null, got ${typeof mapped} for row ${index}.`);
      }
      record = mapped;
    }
    if (!this.target) return this.plainRow(index, record);
    const { columns, fieldColumns } = this.target;
    const values: ColumnValue[] = new Array<ColumnValue>(columns.length);
    const filled: number[] = [];
    for (const field of Object.keys(record)) {
      const at = fieldColumns.get(field);
      // A field `map` set to undefined fills nothing, as if it were absent.
      if (at === undefined || values[at] !== undefined || record[field] === undefined) continue;
      const converted = convertValue(record[field], columns[at], this.storable);
      if ('reason' in converted) return { kind: 'invalid', index, field, reason: converted.reason };
      values[at] = converted.value;
      filled.push(at);
    }
    for (let at = 0; at < columns.length; at++) {
      const column = columns[at];
      if (values[at] === undefined && !column.nullable && !column.hasDefault) {
        return { kind: 'invalid', index, field: column.name, reason: `no field fills the NOT NULL column "${column.name}"` };
      }
    }
    filled.sort((a, b) => a - b);
    return { kind: 'row', index, values, columns: filled, record: null, key: this.keyOf(values) };
  }

  /** The key of a row's converted values (null without `key`). */
  keyOf(values: ColumnValue[]): RowKey | null {
    const keyColumns = this.keyColumns;
    if (!keyColumns) return null;
    if (keyColumns.length === 1) {
      // Without an array per row: the number itself, or the same text as below (a string's JSON in brackets).
      const value = values[keyColumns[0]];
      if (value === undefined || value === null) return this.nullsDistinct ? null : '[null]';
      if (typeof value === 'number' && Number.isFinite(value)) return value;
      if (typeof value === 'string') return `[${JSON.stringify(value)}]`;
    }
    if (this.nullsDistinct && keyColumns.some((at) => values[at] === undefined || values[at] === null)) return null;
    return JSON.stringify(keyColumns.map((at) => values[at] ?? null));
  }

  /**
   * Records mode without a target table: the record as the handler gets it (numbers as JavaScript
   * numbers), or, with `create`, as the table to create is inferred from it. That table's primary key
   * is `key` (SPEC), NOT NULL: a NULL in a key field makes the row invalid in pass 1, for the reason
   * pass 2 gives once the table exists.
   */
  private plainRow(index: number, record: Record<string, unknown>): Evaluated {
    const plain = (this.map ? record : plainJson(record)) as Record<string, unknown>;
    let key: string | null = null;
    if (this.key) {
      const parts: string[] = [];
      for (const field of this.key) {
        if (!(field in record)) return { kind: 'invalid', index, field, reason: `the row has no key field "${field}"` };
        const value = record[field];
        if (this.observe && (value === null || value === undefined)) {
          return { kind: 'invalid', index, field, reason: NOT_NULL_REASON };
        }
        parts.push(jsonText(value));
      }
      key = `[${parts.join(',')}]`;
    }
    // Only rows that will be written shape the table.
    this.observe?.(record);
    return { kind: 'row', index, values: [], columns: [], record: plain, key };
  }
}
