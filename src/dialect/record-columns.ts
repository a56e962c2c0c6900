/** Column facts records mode converts values by (`Dialect.recordColumns`), and what the dialects share to find them. */

export type RecordKind = 'integer' | 'numeric' | 'float' | 'boolean' | 'date' | 'timestamp' | 'timestamptz' | 'uuid' | 'json' | 'text' | 'enum' | 'other';

export interface RecordColumn {
  name: string;
  kind: RecordKind;
  /** integer: the type's range. */
  min?: bigint;
  max?: bigint;
  /** numeric: digits in all and after the point (null: unconstrained). */
  precision?: number | null;
  scale?: number | null;
  /** text: characters at most (null: unlimited). */
  length?: number | null;
  /** timestamp: fraction digits the column keeps. */
  fractionDigits?: number | null;
  /** enum: the allowed values. */
  values?: string[];
  nullable: boolean;
  /** The database fills the column when no value is given (a default, identity, auto increment, rowid). */
  hasDefault: boolean;
  /** Position in the primary key from 1, 0 when not part of it. */
  primary: number;
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
