import { extname } from 'node:path';
import { InvalidArgumentError } from '../core/errors';
import { csvRows } from './csv-rows';
import { jsonRows } from './json-rows';
import type { Row } from './row';

/** A source file's format: a JSON array, newline-delimited JSON, or CSV with a header row. */
export type ImportFormat = 'json' | 'ndjson' | 'csv';

const FORMATS: readonly ImportFormat[] = ['json', 'ndjson', 'csv'];
const EXTENSIONS: Record<string, ImportFormat> = {
  '.json': 'json',
  '.ndjson': 'ndjson',
  '.jsonl': 'ndjson',
  '.csv': 'csv',
  '.tsv': 'csv',
};

/** The formats of `{ id, value }` rows as read: CSV, or a `.tsv` file's CSV with a tab delimiter. */
export type RowsFormat = ImportFormat | 'tsv';

/** The field separator of a CSV-like format of rows. */
export function separatorOf(format: 'csv' | 'tsv'): ',' | '\t' {
  return format === 'tsv' ? '\t' : ',';
}

/** True for CSV and a `.tsv` file's CSV. */
export function isCsvLike(format: RowsFormat): format is 'csv' | 'tsv' {
  return format === 'csv' || format === 'tsv';
}

/** A `.tsv` file (before any `.gz`) is CSV with a tab delimiter. */
export function isTsv(path: string): boolean {
  return extname(path).toLowerCase() === '.tsv';
}

/** The given format, or the one the file extension names (.json, .ndjson/.jsonl, .csv, .tsv). */
export function formatOf(path: string, format: unknown): ImportFormat {
  if (format !== undefined) {
    if (!FORMATS.includes(format as ImportFormat)) {
      throw new InvalidArgumentError(`format must be one of ${FORMATS.join(', ')}, got ${JSON.stringify(format)}.`);
    }
    return format as ImportFormat;
  }
  const fromExtension = EXTENSIONS[extname(path).toLowerCase()];
  if (!fromExtension) {
    throw new InvalidArgumentError(`Cannot tell the format of ${path} from its extension: pass format 'json', 'ndjson' or 'csv'.`);
  }
  return fromExtension;
}

/** The rows of a source in the given format, in groups as they are read; INVALID_INPUT with `index` on the first bad row. */
export function readRows(format: RowsFormat, blocks: AsyncIterable<Buffer>): AsyncGenerator<Row[]> {
  return isCsvLike(format) ? csvRows(blocks, separatorOf(format)) : rowsOf(jsonRows(format, blocks));
}

async function* rowsOf(groups: AsyncGenerator<{ items: Row[] }>): AsyncGenerator<Row[]> {
  for await (const { items } of groups) yield items;
}
