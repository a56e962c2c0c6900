import { csvData, type CsvHeader, csvRowOf } from './csv-rows';
import type { CsvSeparator, CsvSpans } from './csv-records';
import type { DuplicateIds } from './duplicate-ids';
import { checkStorableId, MAX_ID_LENGTH } from './import-store';

const MINUS = 0x2d;
const ZERO = 0x30;

/**
 * Pass 1 over a CSV source: every data row checked as `csvRowOf` (and, for the built-in table,
 * `checkStorableId`) would check it, and its id handed to `duplicates`, reading the bytes in
 * place; only a row that fails a check is made into strings, for the error the slow path gives.
 * Resolves to the number of rows, or null when `signal` stopped it; INVALID_INPUT on the first
 * bad row, after the rows before it.
 */
export async function checkCsvRows(
  blocks: AsyncIterable<Buffer>,
  duplicates: DuplicateIds,
  storable: boolean,
  signal: AbortSignal | undefined,
  separator: CsvSeparator = ',',
): Promise<number | null> {
  let rows = 0;
  for await (const { spans, from, index, header } of csvData(blocks, undefined, separator)) {
    // U+0000 is rare: the rows of a group without one need no look for it.
    const noNul = !storable || spans.bytes.indexOf(0) < 0;
    for (let r = from; r < spans.count; r++) {
      const spilling = checkRecord(spans, r, header, index + r - from, duplicates, storable, noNul);
      if (spilling) await spilling;
    }
    rows = index + spans.count - from;
    if (signal?.aborted) return null;
  }
  return rows;
}

function checkRecord(
  spans: CsvSpans,
  r: number,
  header: CsvHeader,
  index: number,
  duplicates: DuplicateIds,
  storable: boolean,
  noNul: boolean,
): Promise<void> | undefined {
  const first = spans.fieldsAt[r];
  const fields = spans.fieldsAt[r + 1] - first;
  if (header.id < fields && header.value < fields) {
    const bytes = spans.bytes;
    const idStart = spans.starts[first + header.id];
    const idEnd = spans.ends[first + header.id];
    const valueEnd = spans.ends[first + header.value];
    let at = spans.starts[first + header.value];
    if (bytes[at] === MINUS) at++;
    let value = at < valueEnd ? 0 : -1;
    for (; at < valueEnd && value >= 0; at++) {
      const digit = bytes[at] - ZERO;
      value = digit >= 0 && digit <= 9 ? value * 10 + digit : -1;
    }
    const plainId = idEnd > idStart && (!storable || (idEnd - idStart <= MAX_ID_LENGTH && (noNul || !hasNul(bytes, idStart, idEnd))));
    if (plainId && value >= 0 && value <= Number.MAX_SAFE_INTEGER) return duplicates.addBytes(bytes, idStart, idEnd, index);
  }
  // The slow path raises the error the row deserves (or, for a long id within the limit, passes).
  const row = csvRowOf(spans, r, header, index);
  if (storable) checkStorableId(row.id, index);
  return duplicates.add(row.id, index);
}

function hasNul(bytes: Buffer, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (bytes[i] === 0) return true;
  return false;
}
