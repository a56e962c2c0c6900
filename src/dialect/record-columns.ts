/** Column facts records mode converts values by (`Dialect.recordColumns`), and what the dialects share to find them. */
import type { WireType } from './copy-binary';

export type RecordKind =
  'integer' | 'numeric' | 'float' | 'boolean' | 'date' | 'timestamp' | 'timestamptz' | 'uuid' | 'json' | 'text' | 'enum' | 'other';

export interface RecordColumn {
  name: string;
  kind: RecordKind;
  /** integer: the type's range. */
  min?: bigint;
  max?: bigint;
  /** numeric: digits in all and after the point (null: unconstrained). */
  precision?: number | null;
  scale?: number | null;
  /** float: a 4-byte (single precision) type. */
  single?: boolean;
  /** text: characters at most (null: unlimited). */
  length?: number | null;
  /** text: bytes of UTF-8 at most (MySQL's TEXT types; null or absent: no byte limit). */
  bytes?: number | null;
  /** timestamp: fraction digits the column keeps. */
  fractionDigits?: number | null;
  /** enum: the allowed values. */
  values?: string[];
  nullable: boolean;
  /** The database fills the column when no value is given (a default, identity, auto increment, rowid). */
  hasDefault: boolean;
  /** Position in the primary key from 1, 0 when not part of it. */
  primary: number;
  /** PostgreSQL: the column's type, when `CopyBinary` writes its binary form. */
  wire?: WireType;
}

const WIRE_KINDS: Record<WireType, RecordKind[]> = {
  int2: ['integer'],
  int4: ['integer'],
  int8: ['integer'],
  numeric: ['numeric'],
  bool: ['boolean'],
  date: ['date'],
  timestamp: ['timestamp'],
  timestamptz: ['timestamptz'],
  uuid: ['uuid'],
  text: ['text', 'enum'],
};

/**
 * The column's binary COPY type, when its values (converted for its kind) can be sent in that
 * form: an entity may give a column another kind than its type's (a boolean property on an
 * integer column), and then only text says what is meant.
 */
export function binaryWire(column: RecordColumn): WireType | null {
  return column.wire !== undefined && WIRE_KINDS[column.wire].includes(column.kind) ? column.wire : null;
}

/** Signed ranges by byte width; unsigned MySQL types double the top. */
export function integerRange(bytes: 1 | 2 | 3 | 4 | 8, unsigned = false): { min: bigint; max: bigint } {
  const bits = BigInt(bytes * 8);
  if (unsigned) return { min: 0n, max: (1n << bits) - 1n };
  return { min: -(1n << (bits - 1n)), max: (1n << (bits - 1n)) - 1n };
}

/** The numbers in a declared type's parentheses: `decimal(10, 2)` → [10, 2]. */
export function typeArguments(declared: string): number[] {
  const inside = /\(([^)]*)\)/.exec(declared)?.[1];
  return inside === undefined ? [] : inside.split(',').map((part) => Number(part.trim()));
}
