/** Rows in PostgreSQL's COPY text format; `ends[i]` is the byte offset after row `i`. */
export interface CopyRows {
  bytes: Buffer;
  rows: number;
  ends: Int32Array;
}

/** The rows after the first `skip`. */
export function skipCopyRows(rows: CopyRows, skip: number): CopyRows {
  if (skip <= 0) return rows;
  const offset = rows.ends[skip - 1];
  return {
    bytes: rows.bytes.subarray(offset),
    rows: rows.rows - skip,
    ends: rows.ends.subarray(skip, rows.rows).map((end) => end - offset),
  };
}

const BACKSLASH = 0x5c;
const TAB = 0x09;
const NEWLINE = 0x0a;
const RETURN = 0x0d;
const COPY_ESCAPED = { [BACKSLASH]: BACKSLASH, [TAB]: 0x74, [NEWLINE]: 0x6e, [RETURN]: 0x72 } as Record<number, number>;

/**
 * The buffer both COPY writers write rows into, in place: the bytes, each row's end offset, and the
 * memory of taken chunks reused once `inFlight` more takes followed (see `take`).
 */
export abstract class CopyRowWriter {
  protected buffer: Buffer = Buffer.allocUnsafe(1 << 16);
  protected length = 0;
  private rows = 0;
  private ends: Int32Array = new Int32Array(1024);
  // What the last takes handed over, oldest first: reused once `inFlight` more takes followed (see `take`).
  private readonly taken: { buffer: Buffer; ends: Int32Array }[] = [];

  /** `inFlight`: how many taken chunks may still be in use (sent, or retried) while the next one is written. */
  constructor(private readonly inFlight = 1) {}

  get rowCount(): number {
    return this.rows;
  }

  /** Bytes written so far: a mark to `truncate` to. */
  get byteLength(): number {
    return this.length;
  }

  /** Drops what was written after `mark` (a row not ended yet). */
  truncate(mark: number): void {
    this.length = Math.min(this.length, mark);
  }

  /**
   * The rows written so far; the writer starts again empty. What is taken stays valid for `inFlight`
   * more takes; the one after those reuses its memory (chunks are sent while the next one is written).
   */
  take(): CopyRows {
    const taken = { bytes: this.buffer.subarray(0, this.length), rows: this.rows, ends: this.ends };
    this.taken.push({ buffer: this.buffer, ends: this.ends });
    const spare = this.taken.length > this.inFlight ? this.taken.shift() : undefined;
    this.buffer = spare?.buffer ?? Buffer.allocUnsafe(this.buffer.length);
    this.ends = spare?.ends ?? new Int32Array(this.ends.length);
    this.length = 0;
    this.rows = 0;
    return taken;
  }

  /** Records that a row ends at the current length. */
  protected rowEnded(): void {
    if (this.rows === this.ends.length) {
      const grown = new Int32Array(2 * this.ends.length);
      grown.set(this.ends);
      this.ends = grown;
    }
    this.ends[this.rows++] = this.length;
  }

  protected reserve(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(2 * this.buffer.length, this.length + bytes));
    this.buffer.copy(grown, 0, 0, this.length);
    this.buffer = grown;
  }
}

/**
 * Writes rows in COPY's text format, in place: fields separated by tabs, rows ended by a line
 * break, and backslash, tab and line breaks in text escaped. Values go in column order.
 */
export class CopyText extends CopyRowWriter {
  raw(bytes: Uint8Array, start = 0, end = bytes.length): void {
    this.reserve(end - start);
    const buffer = this.buffer;
    let at = this.length;
    for (let i = start; i < end; i++) buffer[at++] = bytes[i];
    this.length = at;
  }

  /** A text value given as its well-formed UTF-8 bytes (without U+0000, which text cannot hold). */
  utf8(bytes: Uint8Array, start = 0, end = bytes.length): void {
    this.reserve(2 * (end - start));
    const buffer = this.buffer;
    let at = this.length;
    for (let i = start; i < end; i++) {
      const byte = bytes[i];
      if (byte === BACKSLASH || (byte <= RETURN && (byte === TAB || byte === NEWLINE || byte === RETURN))) {
        buffer[at++] = BACKSLASH;
        buffer[at++] = COPY_ESCAPED[byte];
      } else {
        buffer[at++] = byte;
      }
    }
    this.length = at;
  }

  text(value: string): void {
    this.utf8(Buffer.from(value));
  }

  integer(value: number): void {
    this.raw(Buffer.from(String(value), 'latin1'));
  }

  /** Ends a field. */
  tab(): void {
    this.reserve(1);
    this.buffer[this.length++] = TAB;
  }

  endRow(): void {
    this.reserve(1);
    this.buffer[this.length++] = NEWLINE;
    this.rowEnded();
  }
}
