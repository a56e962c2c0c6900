/** Emitted after each committed batch or chunk. `rate` is items per second for this call. */
export interface Progress {
  /** The job, import batch or worker id the progress is about. */
  name: string;
  /** Batches (or import chunks, or worker rounds) committed by this call so far. */
  batches: number;
  /** Items (rows, or files for a worker) committed by this call so far. */
  items: number;
  /** Rows in the whole source, when known: an import's rows; a batch or partitioned job's `total` (an estimate, see `status()`). */
  total?: number;
  /** Source file bytes read so far (`importFile`). */
  bytes?: number;
  /** The source file's size in bytes (`importFile`). */
  totalBytes?: number;
  /** Milliseconds since this call started. */
  elapsedMs: number;
  /** `items` per second over `elapsedMs` (0 before the first millisecond). */
  rate: number;
}

/** Builds a Progress from this call's counters and its start time. */
export function progressSince(startedAt: number, fields: Omit<Progress, 'elapsedMs' | 'rate'>): Progress {
  const elapsedMs = Date.now() - startedAt;
  return { ...fields, elapsedMs, rate: elapsedMs > 0 ? (fields.items * 1000) / elapsedMs : 0 };
}
