// The bench's side of a worker process: commands arrive one per line on stdin, results leave one
// per line on stdout, so the parent can start every worker at once and time the round itself.
import { createInterface } from 'node:readline';

/** Every line written to stdin, as they arrive. */
export function commands(): AsyncIterable<string> {
  return createInterface({ input: process.stdin });
}

let pending: string[] = [];

/** Queues one line for stdout; `flush` writes the queue in one write. */
export function emit(line: string): void {
  pending.push(line);
  if (pending.length >= 256) flush();
}

export function flush(): void {
  if (pending.length === 0) return;
  process.stdout.write(`${pending.join('\n')}\n`);
  pending = [];
}

const FLUSH_SOON_MS = 5;
let flushTimer: NodeJS.Timeout | undefined;

/**
 * Flushes within `FLUSH_SOON_MS`: a worker with no round to end (graphile-worker's run()) reports
 * progress without one pipe write per job, as the round-based workers do.
 */
export function flushSoon(): void {
  flushTimer ??= setTimeout(() => {
    flushTimer = undefined;
    flush();
  }, FLUSH_SOON_MS);
}

/** The URL of file `i` of the bench's queue (the same list in every worker). */
export function fileUrl(i: number): string {
  return `s3://bench-bucket/incoming/file-${String(i).padStart(6, '0')}.csv`;
}

export const FILE_TYPE = 'csv';
export const FILE_TIMESTAMP = new Date('2026-01-01T00:00:00Z');

/** The work done per file, the same in every mode: nothing but the stats it reports. */
export function processStats(i: number): { totalRows: number; filteredRows: number; persistedRows: number; durationMs: number } {
  return { totalRows: 100 + (i % 7), filteredRows: i % 7, persistedRows: 100, durationMs: 1 };
}
