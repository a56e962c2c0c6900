import { isUtf8 } from 'node:buffer';

/** A chunk decoded by `Utf8Text`: its complete characters, the bytes they were, and the absolute offset of the first invalid byte or -1. */
export interface DecodedChunk {
  text: string;
  bytes: number;
  invalidAt: number;
}

const BOM = [0xef, 0xbb, 0xbf];

/** True when the bytes start with the UTF-8 byte order mark. */
export function startsWithBom(bytes: Uint8Array): boolean {
  return bytes.length >= 3 && bytes[0] === BOM[0] && bytes[1] === BOM[1] && bytes[2] === BOM[2];
}

/**
 * Strict UTF-8 decoding, chunk by chunk: a sequence split across chunks is carried over, and
 * invalid bytes are reported by their offset (Buffer#toString would silently replace them
 * with U+FFFD), so a reader can say which row holds them.
 */
export class Utf8Text {
  private pending: Buffer | null = null;
  /** Bytes before the start of `pending` (or of the next chunk). */
  private offset: number;

  /** `offset`: bytes of the input before the first chunk (a decoder taking over from another reader). */
  constructor(offset = 0) {
    this.offset = offset;
  }

  /** Decodes the complete characters of the chunk; on invalid bytes, only those before the first one. */
  write(chunk: Uint8Array): DecodedChunk {
    const complete = this.take(chunk);
    const start = this.offset;
    this.offset += complete.length;
    if (isUtf8(complete)) return { text: complete.toString('utf8'), bytes: complete.length, invalidAt: -1 };
    const bad = firstInvalidByte(complete);
    return { text: complete.toString('utf8', 0, bad), bytes: bad, invalidAt: start + bad };
  }

  /**
   * Like `write` without decoding: the bytes of complete characters (only those before the first
   * invalid byte, if any) and the absolute offset of that byte or -1.
   */
  check(chunk: Uint8Array): { bytes: Buffer; invalidAt: number } {
    const complete = this.take(chunk);
    const start = this.offset;
    this.offset += complete.length;
    if (isUtf8(complete)) return { bytes: complete, invalidAt: -1 };
    const bad = firstInvalidByte(complete);
    return { bytes: complete.subarray(0, bad), invalidAt: start + bad };
  }

  /** At the end of the input: the offset of a truncated last sequence, or -1. */
  end(): number {
    return this.pending === null ? -1 : this.offset;
  }

  /** The chunk's bytes up to the last complete sequence; an unfinished one waits for the next chunk. */
  private take(chunk: Uint8Array): Buffer {
    const bytes = this.pending ? Buffer.concat([this.pending, chunk]) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length);
    const cut = completeLength(bytes);
    this.pending = cut < bytes.length ? Buffer.from(bytes.subarray(cut)) : null;
    return bytes.subarray(0, cut);
  }
}

function sequenceLength(lead: number): number {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

/** Length of the prefix that ends on a sequence boundary (an invalid tail is left for validation to find). */
function completeLength(bytes: Uint8Array): number {
  const n = bytes.length;
  for (let i = n - 1; i >= 0 && i >= n - 4; i--) {
    if ((bytes[i] & 0xc0) !== 0x80) {
      const length = sequenceLength(bytes[i]);
      return length > 0 && i + length > n ? i : n;
    }
  }
  return n;
}

/** Offset of the first byte that does not start a well-formed UTF-8 sequence (RFC 3629), or -1. */
export function firstInvalidByte(bytes: Uint8Array): number {
  const n = bytes.length;
  let i = 0;
  while (i < n) {
    const b = bytes[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    const length = sequenceLength(b);
    if (length === 0 || i + length > n) return i;
    // The second byte's range excludes overlong forms, surrogates and code points above U+10FFFF.
    const second = bytes[i + 1];
    const low = b === 0xe0 ? 0xa0 : b === 0xf0 ? 0x90 : 0x80;
    const high = b === 0xed ? 0x9f : b === 0xf4 ? 0x8f : 0xbf;
    if (second < low || second > high) return i;
    for (let k = 2; k < length; k++) if ((bytes[i + k] & 0xc0) !== 0x80) return i;
    i += length;
  }
  return -1;
}
