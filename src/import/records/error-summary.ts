/** Invalid rows of one kind as `check` counts them: the same field and reason. */
export interface RowErrorGroup {
  /** The field at fault, or null when the whole row is. */
  field: string | null;
  /** What is wrong, in words (the same for every row of the group). */
  reason: string;
  /** How many rows of the file have it. */
  rows: number;
  /** The first of them. */
  firstIndex: number;
}

/** One invalid row as `check` reports it. */
export interface RowError {
  /** The row's position in the source, from 0. */
  index: number;
  /** The field at fault, or null when the whole row is (not an object, a wrong field count, …). */
  field: string | null;
  /** What is wrong, in words. */
  reason: string;
}

/** Groups kept at most; rows of further kinds count in one "other reasons" group per field. */
const MAX_GROUPS = 1000;

/** `check`'s summary: invalid rows counted by field and reason, in bounded memory. */
export class ErrorSummary {
  private readonly byKind = new Map<string, RowErrorGroup>();

  add(error: RowError): void {
    let kind = JSON.stringify([error.field, error.reason]);
    let group = this.byKind.get(kind);
    if (group === undefined && this.byKind.size >= MAX_GROUPS) {
      kind = JSON.stringify([error.field, null]);
      group = this.byKind.get(kind);
      if (group === undefined) {
        group = { field: error.field, reason: 'other reasons', rows: 0, firstIndex: error.index };
        this.byKind.set(kind, group);
      }
    }
    if (group === undefined) {
      group = { field: error.field, reason: error.reason, rows: 0, firstIndex: error.index };
      this.byKind.set(kind, group);
    }
    group.rows++;
    if (error.index < group.firstIndex) group.firstIndex = error.index;
  }

  /** The groups, most rows first (then by first row). */
  groups(): RowErrorGroup[] {
    return [...this.byKind.values()].sort((a, b) => b.rows - a.rows || a.firstIndex - b.firstIndex);
  }
}
