import { InvalidInputError } from '../../core/errors';
import { type JsonFormat, type JsonItemMode, jsonItems, type JsonSourceErrors, type JsonStart } from '../json-items';
import { JsonNumber, JsonSyntaxError, parseJson } from './json-values';
import type { NullTexts, SourceItem } from './record-readers';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

const invalidJson = (what: string, index?: number) => new InvalidInputError(`Invalid JSON: ${what}.`, index);

/** Records mode's words for a problem that makes the whole file unreadable. */
const RECORD_SOURCE_ERRORS: JsonSourceErrors = {
  notArray: () => invalidJson('the top level must be a JSON array of records'),
  empty: () => invalidJson('the input is empty; it must be a JSON array of records'),
  missingItem: (index) => invalidJson("expected a record after ','", index),
  notDelimiter: (index) => invalidJson("expected ',' or ']' after a record", index),
  afterArray: () => invalidJson('text after the end of the array'),
  unfinished: (index) => invalidJson('the input ends before the array is complete', index),
  invalidUtf8: (offset, index) => new InvalidInputError(`The file is not valid UTF-8 (byte ${offset}).`, index),
};

/** A JSON item or NDJSON line as a record; its string fields equal to a null text are NULL. */
function jsonItem(index: number, raw: string, nulls: NullTexts): SourceItem {
  let value: unknown;
  try {
    value = parseJson(raw);
  } catch (error) {
    if (!(error instanceof JsonSyntaxError)) throw error;
    return { index, raw, fields: null, problem: { field: null, reason: error.message } };
  }
  // A number is parsed as a `JsonNumber` object, which is no record either.
  if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof JsonNumber) {
    return { index, raw, fields: null, problem: { field: null, reason: 'the row must be a JSON object' } };
  }
  const fields = value as Record<string, unknown>;
  if (nulls !== null) {
    for (const name of Object.keys(fields)) {
      const field = fields[name];
      if (typeof field === 'string' && nulls.has(field)) fields[name] = null;
    }
  }
  return { index, raw, fields, problem: null };
}

/**
 * Records mode of the JSON readers: an array's item is cut out by bracket depth and parsed on its
 * own (as an NDJSON line is), so a malformed item is an invalid row while the file around it stays
 * readable.
 */
class RecordItems implements JsonItemMode<SourceItem> {
  readonly errors = RECORD_SOURCE_ERRORS;
  private index = 0;
  private raw = '';
  private started = false;
  private container = false;
  private depth = 0;
  private inString = false;
  private escaped = false;

  constructor(private readonly nulls: NullTexts) {}

  begin(index: number): void {
    this.index = index;
    this.raw = '';
    this.started = false;
  }

  read(text: string, from: number): number {
    let i = from;
    if (!this.started) {
      // The first character says whether the item is a container (it ends with its bracket) or a scalar.
      const c = text.charCodeAt(i++);
      this.started = true;
      this.container = c === 0x7b || c === 0x5b;
      this.depth = this.container ? 1 : 0;
      this.inString = c === QUOTE;
      this.escaped = false;
    }
    for (; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === BACKSLASH) this.escaped = true;
        else if (c === QUOTE) this.inString = false;
        continue;
      }
      if (c === QUOTE) {
        this.inString = true;
      } else if (c === 0x7b || c === 0x5b) {
        this.depth++;
      } else if (c === 0x7d || c === 0x5d) {
        if (this.depth === 0) return this.cut(text, from, i); // the array's ']' (or a stray '}') after a scalar
        if (--this.depth === 0 && this.container) return this.cut(text, from, i + 1);
      } else if (this.depth === 0 && (c === 0x2c || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09)) {
        return this.cut(text, from, i);
      }
    }
    this.raw += text.slice(from);
    return -1;
  }

  finish(): SourceItem {
    return jsonItem(this.index, this.raw.trim(), this.nulls);
  }

  unfinished(): void {
    // The reader's own error: the array is incomplete.
  }

  line(text: string, index: number, push: (item: SourceItem) => void): void {
    push(jsonItem(index, text, this.nulls));
  }

  private cut(text: string, from: number, end: number): number {
    this.raw += text.slice(from, end);
    return end;
  }
}

/**
 * The records of a JSON array or NDJSON, each with its `end` offset; from `start`, the blocks are
 * the file's from that offset on. INVALID_INPUT for what makes the whole file unreadable.
 */
export async function* jsonRecords(
  format: JsonFormat,
  blocks: AsyncIterable<Buffer>,
  nulls: NullTexts,
  start?: JsonStart,
): AsyncGenerator<SourceItem[]> {
  for await (const { items, ends } of jsonItems(format, blocks, new RecordItems(nulls), { start, offsets: true })) {
    for (let k = 0; k < items.length; k++) items[k].end = ends[k];
    yield items;
  }
}
