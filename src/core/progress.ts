/** Emitted after each committed batch or chunk. `rate` is items per second for this call. */
export interface Progress {
  name: string;
  batches: number;
  items: number;
  total?: number;
  bytes?: number;
  totalBytes?: number;
  elapsedMs: number;
  rate: number;
}

/** Builds a Progress from this call's counters and its start time. */
export function progressSince(
  startedAt: number,
  fields: Omit<Progress, 'elapsedMs' | 'rate'>,
): Progress {
  const elapsedMs = Date.now() - startedAt;
  return { ...fields, elapsedMs, rate: elapsedMs > 0 ? (fields.items * 1000) / elapsedMs : 0 };
}
