import { startsWithBom, Utf8Text } from './utf8-text';

/** The JSON formats: a top-level array of items, or one item per line (NDJSON). */
export type JsonFormat = 'json' | 'ndjson';

/**
 * Where a JSON or NDJSON reader starts in the middle of a file: right after item `index - 1`, at
 * byte `offset` (that item's end), the blocks given from there on.
 */
export interface JsonStart {
  index: number;
  offset: number;
}

/** Items in source order and, where counted, the byte offset right after each: where a reader can start for the next. */
export interface JsonItems<T> {
  items: T[];
  ends: number[];
}

/**
 * What one import mode makes of the items the JSON readers cut out (id/value rows, or records), and
 * how it words a problem of the source around them. An array's item is handed over as its text
 * comes, so the mode reads it in the same pass as the reader (and stops at its first error).
 */
export interface JsonItemMode<T> {
  /** Item `index` of the array starts. */
  begin(index: number): void;
  /**
   * Reads the current item on from `text[from]` (its first character, the first time): the position
   * right after the item (for a scalar, where its delimiter is), or -1 when it goes on past the text.
   */
  read(text: string, from: number): number;
  /** The current item is complete: what it becomes. */
  finish(): T;
  /** The source ended inside the current item: throws, where the mode has a word for that. */
  unfinished(): void;
  /** NDJSON line `index` (not blank, without its line break and CR), handed to `push`, which comes before any error about the rest of the line. */
  line(text: string, index: number, push: (item: T) => void): void;
  errors: JsonSourceErrors;
}

/** A mode's errors for the structure and encoding of the source around its items (each is thrown by the reader). */
export interface JsonSourceErrors {
  /** The first text of a JSON source is not '['. */
  notArray(): Error;
  /** A JSON source without any text. */
  empty(): Error;
  /** ']' right after ',': item `index` is missing. */
  missingItem(index: number): Error;
  /** Neither ',' nor ']' after an item; `index`: the next item. */
  notDelimiter(index: number): Error;
  /** Text after the array's ']'. */
  afterArray(): Error;
  /** The source ends inside the array; `index`: the item it ends in, or the next one. */
  unfinished(index: number): Error;
  /** Invalid UTF-8 at byte `offset`, in item (or line) `index` or before it; `outside`: before a JSON array's '[' or after its ']'. */
  invalidUtf8(offset: number, index: number, outside: boolean): Error;
}

/** The byte offsets of positions in a source's decoded texts: a text of ASCII only by arithmetic, another counted once. */
export class ByteCounter {
  private text = '';
  /** Bytes of the source before the current text, and of the text itself. */
  private before: number;
  private size = 0;
  private ascii = true;
  /** The position up to which `bytes` counts the current text. */
  private counted = 0;
  private bytes = 0;

  constructor(start: number) {
    this.before = start;
  }

  /** Bytes of the source no text holds (a BOM). */
  skip(bytes: number): void {
    this.before += bytes;
  }

  /** The next text, `size` bytes of the source; positions are in it from now on. */
  next(text: string, size: number): void {
    this.before += this.size;
    this.size = size;
    this.text = text;
    // A character of two or more bytes is one UTF-16 unit (two for four bytes): equal lengths mean ASCII.
    this.ascii = size === text.length;
    this.counted = 0;
    this.bytes = 0;
  }

  /** The byte offset of position `at` of the current text (the positions asked for only grow). */
  offset(at: number): number {
    if (this.ascii) return this.before + at;
    this.bytes += Buffer.byteLength(this.text.slice(this.counted, at));
    this.counted = at;
    return this.before + this.bytes;
  }
}

// Where an array's reader is, between items.
const OPEN = 0; // before '['
const FIRST = 1; // right after '[': an item or ']'
const NEXT = 2; // after ',': an item
const AFTER = 3; // after an item: ',' or ']'
const CLOSED = 4; // after ']'
const IN_ITEM = 5;

const isWhitespace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
/** A blank NDJSON line: JSON whitespace only (a CR before the line break included). */
const BLANK = /^[ \t\r]*$/;

/**
 * Cuts the items of a JSON array, or the lines of NDJSON, out of the source's text as it comes, for
 * the mode to read; `index` counts the items (the non-blank lines) from 0. With a byte counter, each
 * item's end is kept in bytes: after a line's line break, right after an array item. From `start`,
 * an array's text starts right after an item, and NDJSON's at a line's start.
 */
export class JsonItemSplitter<T> {
  index: number;
  private state: number;
  private line = '';
  private lineEnd = 0;
  private items: T[] = [];
  private ends: number[] = [];
  private readonly push = (item: T) => this.add(item, this.lineEnd);

  constructor(
    private readonly format: JsonFormat,
    private readonly mode: JsonItemMode<T>,
    start?: JsonStart,
    private readonly bytes: ByteCounter | null = null,
  ) {
    this.index = start?.index ?? 0;
    this.state = start ? AFTER : OPEN;
  }

  /** Before a JSON array's '[' or after its ']'. */
  get outside(): boolean {
    return this.format === 'json' && (this.state === OPEN || this.state === CLOSED);
  }

  write(text: string): void {
    if (this.format === 'json') this.writeArray(text);
    else this.writeLines(text);
  }

  /** The source is complete: its last line, or the check that the array is. */
  end(): void {
    if (this.format === 'ndjson') {
      this.readLine(this.line, 0);
      return;
    }
    const { errors } = this.mode;
    if (this.state === IN_ITEM) this.mode.unfinished();
    if (this.state === OPEN) throw errors.empty();
    if (this.state !== CLOSED) throw errors.unfinished(this.index);
  }

  /** Hands over the items completed so far. */
  take(): JsonItems<T> {
    const taken = { items: this.items, ends: this.ends };
    this.items = [];
    this.ends = [];
    return taken;
  }

  private add(item: T, at: number): void {
    this.items.push(item);
    if (this.bytes) this.ends.push(this.bytes.offset(at));
  }

  private writeArray(text: string): void {
    const { errors } = this.mode;
    let i = this.state === IN_ITEM ? this.readItem(text, 0) : 0;
    while (i >= 0 && i < text.length) {
      const c = text.charCodeAt(i);
      if (isWhitespace(c)) {
        i++;
        continue;
      }
      switch (this.state) {
        case OPEN:
          if (c !== 0x5b) throw errors.notArray();
          this.state = FIRST;
          i++;
          break;
        case FIRST:
        case NEXT:
          if (c === 0x5d) {
            if (this.state === NEXT) throw errors.missingItem(this.index);
            this.state = CLOSED;
            i++;
            break;
          }
          this.mode.begin(this.index);
          i = this.readItem(text, i);
          break;
        case AFTER:
          if (c === 0x2c) this.state = NEXT;
          else if (c === 0x5d) this.state = CLOSED;
          else throw errors.notDelimiter(this.index);
          i++;
          break;
        default:
          throw errors.afterArray();
      }
    }
  }

  /** Reads the current item on from `from`: the position after it, or -1 when it goes on past the text. */
  private readItem(text: string, from: number): number {
    const end = this.mode.read(text, from);
    if (end < 0) {
      this.state = IN_ITEM;
      return -1;
    }
    this.add(this.mode.finish(), end);
    this.index++;
    this.state = AFTER;
    return end;
  }

  private writeLines(text: string): void {
    let from = 0;
    for (let newline = text.indexOf('\n'); newline >= 0; newline = text.indexOf('\n', from)) {
      this.readLine(this.line + text.slice(from, newline), newline + 1);
      this.line = '';
      from = newline + 1;
    }
    this.line += text.slice(from);
  }

  /** A line ending at position `end` of the current text (after its line break). */
  private readLine(line: string, end: number): void {
    if (line.length === 0 || BLANK.test(line)) return;
    this.lineEnd = end;
    this.mode.line(line.endsWith('\r') ? line.slice(0, -1) : line, this.index, this.push);
    this.index++;
  }
}

/**
 * The items of a JSON array or NDJSON read from its bytes, block by block: strict UTF-8 (an invalid
 * byte is the mode's error, after the items before it), a leading BOM dropped, and with `offsets`
 * each item's end offset in the file. From `start`, the blocks are the file's from that offset on.
 */
export class JsonItemReader<T> {
  private readonly splitter: JsonItemSplitter<T>;
  private readonly decoder: Utf8Text;
  private readonly bytes: ByteCounter | null;
  private first: boolean;

  constructor(
    format: JsonFormat,
    private readonly mode: JsonItemMode<T>,
    options: { start?: JsonStart; offsets?: boolean } = {},
  ) {
    const { start } = options;
    this.bytes = options.offsets ? new ByteCounter(start?.offset ?? 0) : null;
    this.splitter = new JsonItemSplitter(format, mode, start, this.bytes);
    this.decoder = new Utf8Text(start?.offset);
    this.first = start === undefined;
  }

  write(block: Uint8Array): void {
    if (this.first && startsWithBom(block)) {
      block = block.subarray(3);
      this.bytes?.skip(3);
    }
    this.first = false;
    const { text, bytes, invalidAt } = this.decoder.write(block);
    this.bytes?.next(text, bytes);
    this.splitter.write(text);
    if (invalidAt >= 0) throw this.invalidUtf8(invalidAt);
  }

  end(): void {
    const invalidAt = this.decoder.end();
    if (invalidAt >= 0) throw this.invalidUtf8(invalidAt);
    this.bytes?.next('', 0);
    this.splitter.end();
  }

  take(): JsonItems<T> {
    return this.splitter.take();
  }

  private invalidUtf8(offset: number): Error {
    return this.mode.errors.invalidUtf8(offset, this.splitter.index, this.splitter.outside);
  }
}

/**
 * `JsonItemReader` over a stream of blocks: the items in a group per block. An error in a block
 * comes after the items before it; one at the end of the source comes alone (an NDJSON row whose
 * last line goes on after its object is not handed over, as the id/value reader always did).
 */
export async function* jsonItems<T>(
  format: JsonFormat,
  blocks: AsyncIterable<Buffer>,
  mode: JsonItemMode<T>,
  options: { start?: JsonStart; offsets?: boolean } = {},
): AsyncGenerator<JsonItems<T>> {
  const reader = new JsonItemReader(format, mode, options);
  try {
    for await (const block of blocks) {
      reader.write(block);
      yield reader.take();
    }
  } catch (error) {
    // The items completed before the error come first: a duplicate among them is the earlier problem.
    const before = reader.take();
    if (before.items.length > 0) yield before;
    throw error;
  }
  reader.end();
  yield reader.take();
}
