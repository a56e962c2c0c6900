import { daysFromCivil } from '../core/civil-date';
import { CopyRowWriter } from './copy-text';

/**
 * The PostgreSQL types whose binary COPY form `CopyBinary` writes: each column of a binary COPY
 * must be one of these (see `RecordColumn.wire`).
 */
export type WireType = 'int2' | 'int4' | 'int8' | 'numeric' | 'bool' | 'date' | 'timestamp' | 'timestamptz' | 'uuid' | 'text';

/** A binary COPY's header (signature, flags, no extension) and trailer: around each COPY's rows. */
export const BINARY_HEADER = Buffer.from([0x50, 0x47, 0x43, 0x4f, 0x50, 0x59, 0x0a, 0xff, 0x0d, 0x0a, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]);
export const BINARY_TRAILER = Buffer.from([0xff, 0xff]);

const ZERO = 0x30;
const MINUS = 0x2d;
const DOT = 0x2e;
const TWO_32 = 4294967296;
// Days from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
const PG_EPOCH_DAYS = 10957;
// 86,400,000,000 µs a day = 20 · 2^32 + 500,654,080: a day count times it, split in 32-bit halves, stays exact.
const DAY_HIGH = 20;
const DAY_LOW = 500654080;

/** The number of `count` digits at `at`. */
function digitsAt(bytes: Uint8Array, at: number, count: number): number {
  let n = 0;
  for (let i = at; i < at + count; i++) n = n * 10 + bytes[i] - ZERO;
  return n;
}

/**
 * Writes rows in PostgreSQL's binary COPY format, in place, from values already checked (a
 * record's canonical text or bytes): no text input function runs on the server (a timestamp's or
 * numeric's text parsing is most of a text COPY's cost there). The rows of each COPY statement
 * go between `BINARY_HEADER` and `BINARY_TRAILER`.
 */
export class CopyBinary extends CopyRowWriter {
  /** Starts a row of `fields` fields. */
  beginRow(fields: number): void {
    this.reserve(2);
    put16(this.buffer, this.length, fields);
    this.length += 2;
  }

  endRow(): void {
    this.rowEnded();
  }

  null(): void {
    this.reserve(4);
    put32(this.buffer, this.length, -1);
    this.length += 4;
  }

  /** An integer within the type's range (int8 beyond 2^53 as its decimal text). */
  integer(value: number | string, wire: WireType): void {
    this.reserve(12);
    const buffer = this.buffer;
    let at = this.length;
    if (wire === 'int2') {
      put32(buffer, at, 2);
      put16(buffer, at + 4, value as number);
      at += 6;
    } else if (wire === 'int4') {
      put32(buffer, at, 4);
      put32(buffer, at + 4, value as number);
      at += 8;
    } else {
      put32(buffer, at, 8);
      if (typeof value === 'string') buffer.writeBigInt64BE(BigInt(value), at + 4);
      else {
        const high = Math.floor(value / TWO_32);
        put32(buffer, at + 4, high);
        put32(buffer, at + 8, value - high * TWO_32);
      }
      at += 12;
    }
    this.length = at;
  }

  boolean(value: boolean): void {
    this.reserve(5);
    put32(this.buffer, this.length, 1);
    this.buffer[this.length + 4] = value ? 1 : 0;
    this.length += 5;
  }

  /** Text (or an enum's label) as its UTF-8 bytes. */
  text(bytes: Uint8Array, start = 0, end = bytes.length): void {
    const size = end - start;
    this.reserve(4 + size);
    const buffer = this.buffer;
    put32(buffer, this.length, size);
    let at = this.length + 4;
    if (size > 32) {
      buffer.set(bytes.subarray(start, end), at);
      at += size;
    } else {
      for (let i = start; i < end; i++) buffer[at++] = bytes[i];
    }
    this.length = at;
  }

  /** A real calendar date `YYYY-MM-DD` at `at`. */
  date(bytes: Uint8Array, at: number): void {
    this.reserve(8);
    const days = daysFromCivil(digitsAt(bytes, at, 4), digitsAt(bytes, at + 5, 2), digitsAt(bytes, at + 8, 2)) - PG_EPOCH_DAYS;
    put32(this.buffer, this.length, 4);
    put32(this.buffer, this.length + 4, days);
    this.length += 8;
  }

  /**
   * `YYYY-MM-DD?HH:MM:SS[.f…]` from `start` to `end` (the zone, if any, after `end`): the UTC wall
   * time, as microseconds since 2000-01-01 (timestamp and timestamptz alike). Fraction digits past
   * the sixth are zeros (checked before).
   */
  timestamp(bytes: Uint8Array, start: number, end: number): void {
    this.reserve(12);
    const days = daysFromCivil(digitsAt(bytes, start, 4), digitsAt(bytes, start + 5, 2), digitsAt(bytes, start + 8, 2)) - PG_EPOCH_DAYS;
    let micros = (digitsAt(bytes, start + 11, 2) * 3600 + digitsAt(bytes, start + 14, 2) * 60 + digitsAt(bytes, start + 17, 2)) * 1e6;
    if (end > start + 20 && bytes[start + 19] === DOT) {
      let scale = 100000;
      for (let i = start + 20; i < end && scale >= 1; i++, scale /= 10) micros += (bytes[i] - ZERO) * scale;
    }
    // days · 86,400,000,000 + micros as high · 2^32 + low, every part exact in a double.
    let high = days * DAY_HIGH;
    let low = days * DAY_LOW + micros;
    const carry = Math.floor(low / TWO_32);
    high += carry;
    low -= carry * TWO_32;
    const buffer = this.buffer;
    put32(buffer, this.length, 8);
    put32(buffer, this.length + 4, high);
    put32(buffer, this.length + 8, low);
    this.length += 12;
  }

  /** Canonical 8-4-4-4-12 hex digits (either case). */
  uuid(bytes: Uint8Array, start: number): void {
    this.reserve(20);
    const buffer = this.buffer;
    put32(buffer, this.length, 16);
    let at = this.length + 4;
    for (let i = start; i < start + 36; i++) {
      if (bytes[i] === MINUS) continue;
      buffer[at++] = (hexValue(bytes[i]) << 4) | hexValue(bytes[++i]);
    }
    this.length = at;
  }

  /**
   * A decimal `-?[0-9]+(\.[0-9]+)?` from `start` to `end`: base-10000 digits around the point,
   * `dscale` the fraction's digits as given (the column's typmod then applies, as to text).
   */
  numeric(bytes: Uint8Array, start: number, end: number): void {
    let at = start;
    let sign = 0;
    if (bytes[at] === MINUS) {
      sign = 0x4000;
      at++;
    }
    let point = at;
    while (point < end && bytes[point] !== DOT) point++;
    while (at < point && bytes[at] === ZERO) at++;
    const fraction = point < end ? point + 1 : end;
    const whole = point - at;
    const dscale = end - fraction;
    this.reserve(12 + 2 * (Math.ceil(whole / 4) + Math.ceil(dscale / 4)));
    const buffer = this.buffer;
    const head = this.length;
    // The groups go after the 12 bytes of length and header, which follow once they are known.
    let out = head + 12;
    // The whole part's first group takes what is left over from groups of four.
    for (let k = at, take = whole % 4 || 4; k < point; take = 4) {
      let value = 0;
      for (const stop = k + take; k < stop; k++) value = value * 10 + bytes[k] - ZERO;
      buffer[out++] = value >> 8;
      buffer[out++] = value & 0xff;
    }
    for (let k = fraction; k < end;) {
      let value = 0;
      for (let n = 0; n < 4; n++) value = value * 10 + (k < end ? bytes[k++] - ZERO : 0);
      buffer[out++] = value >> 8;
      buffer[out++] = value & 0xff;
    }
    let weight = Math.ceil(whole / 4) - 1;
    let first = head + 12;
    // Zero groups are left out: those leading a fraction below 1, those ending a whole number.
    while (first < out && buffer[first] === 0 && buffer[first + 1] === 0) {
      first += 2;
      weight--;
    }
    while (out > first && buffer[out - 2] === 0 && buffer[out - 1] === 0) out -= 2;
    if (first > head + 12) {
      buffer.copyWithin(head + 12, first, out);
      out -= first - head - 12;
    }
    const ndigits = (out - head - 12) / 2;
    if (ndigits === 0) {
      weight = 0;
      sign = 0;
    }
    put32(buffer, head, 8 + 2 * ndigits);
    put16(buffer, head + 4, ndigits);
    put16(buffer, head + 6, weight);
    put16(buffer, head + 8, sign);
    put16(buffer, head + 10, dscale);
    this.length = out;
  }
}

/** A big-endian 32-bit integer (signed or not: the low 32 bits). */
function put32(buffer: Buffer, at: number, value: number): void {
  buffer[at] = value >>> 24;
  buffer[at + 1] = value >>> 16;
  buffer[at + 2] = value >>> 8;
  buffer[at + 3] = value;
}

function put16(buffer: Buffer, at: number, value: number): void {
  buffer[at] = value >>> 8;
  buffer[at + 1] = value;
}

function hexValue(byte: number): number {
  return byte <= 0x39 ? byte - ZERO : (byte | 0x20) - 0x57;
}
