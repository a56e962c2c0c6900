import { createHash, type Hash } from 'node:crypto';
import { type FileHandle, open } from 'node:fs/promises';
import { FingerprintMismatchError, InvalidArgumentError } from '../core/errors';

/** Blocks are read at fixed offsets, so every pass over an unchanged file sees the same blocks. */
export const BLOCK_SIZE = 64 * 1024;

const DIGEST_BYTES = 32;

/** SHA-256 digests in one growing buffer: 32 bytes each, not an object per block. */
export class DigestList {
  private buffer = Buffer.alloc(DIGEST_BYTES * 64);
  length = 0;

  push(digest: Buffer): void {
    if ((this.length + 1) * DIGEST_BYTES > this.buffer.length) {
      const grown = Buffer.alloc(this.buffer.length * 2);
      this.buffer.copy(grown);
      this.buffer = grown;
    }
    digest.copy(this.buffer, this.length++ * DIGEST_BYTES);
  }

  equals(index: number, digest: Buffer): boolean {
    return index < this.length && this.buffer.subarray(index * DIGEST_BYTES, (index + 1) * DIGEST_BYTES).equals(digest);
  }
}

/** What pass 1 learnt about the file's bytes: the running SHA-256 after each block, and the total. */
export interface SourceRecord {
  blockDigests: DigestList;
  /**
   * For a pass 2 that starts in the middle of the file: each block's own SHA-256 from block `from`
   * on (a running digest cannot be checked from the middle). Null when pass 2 reads from the start.
   */
  seek: { from: number; digests: DigestList } | null;
  digest: string;
  bytes: number;
  /** Set once pass 1 stopped reading (at the end of the file, or earlier on an error or a stop). */
  ended: boolean;
  /** Readers following pass 1 (`verifiedBlocks` with `follow`), woken at each block it records and when it ends. */
  waiters: (() => void)[];
}

function wake(record: SourceRecord): void {
  const waiters = record.waiters.splice(0);
  for (const waiter of waiters) waiter();
}

/** Pass 1 stopped reading, however it ended: readers following it stop waiting. */
export function recordingEnded(record: SourceRecord): void {
  record.ended = true;
  wake(record);
}

/** Resolves once pass 1 stopped reading. */
export async function recordingEnd(record: SourceRecord): Promise<void> {
  await blockRecorded(record, Number.POSITIVE_INFINITY);
}

/** True once pass 1 has recorded block `index`; false when it ended before reading it. */
async function blockRecorded(record: SourceRecord, index: number): Promise<boolean> {
  while (record.blockDigests.length <= index && !record.ended) await new Promise<void>((resolve) => record.waiters.push(resolve));
  return record.blockDigests.length > index;
}

/** A file that cannot be opened or read: INVALID_ARGUMENT, the path's fault. */
function unreadable(path: string, error: unknown): InvalidArgumentError {
  return new InvalidArgumentError(`Cannot read the file ${path}: ${(error as Error).message}`, { cause: error });
}

/**
 * Reads a file in fixed-size blocks, the next block's read under way while the consumer works on
 * the current one. With `reuseBuffer`, for a consumer done with a block before it asks for the
 * next (a hash), two buffers take turns: no allocation per block.
 */
export async function* fileBlocks(path: string, blockSize = BLOCK_SIZE, reuseBuffer = false, start = 0): AsyncGenerator<Buffer> {
  let handle: FileHandle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    throw unreadable(path, error);
  }
  const buffers = reuseBuffer ? [Buffer.allocUnsafe(blockSize), Buffer.allocUnsafe(blockSize)] : null;
  /** Fills `block` from `position`; the bytes read (fewer than a block only at the end of the file). */
  const fill = (block: Buffer, position: number): Promise<number> => {
    const read = (async () => {
      let filled = 0;
      while (filled < blockSize) {
        const { bytesRead } = await handle.read(block, filled, blockSize - filled, position + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return filled;
    })();
    // Its failure is raised where the block is awaited, not as an unhandled rejection before that.
    read.catch(() => undefined);
    return read;
  };
  let turn = 0;
  let block = buffers ? buffers[0] : Buffer.allocUnsafe(blockSize);
  let reading: Promise<number> | null = fill(block, start);
  try {
    for (let position = start; reading;) {
      let filled: number;
      try {
        filled = await reading;
      } catch (error) {
        // A directory, an I/O error: the path's fault, as a file that cannot be opened.
        throw unreadable(path, error);
      }
      const current = block;
      position += filled;
      reading = null;
      if (filled === blockSize) {
        block = buffers ? buffers[++turn % 2] : Buffer.allocUnsafe(blockSize);
        reading = fill(block, position);
      }
      if (filled > 0) yield filled < blockSize ? current.subarray(0, filled) : current;
    }
  } finally {
    // A read still under way must end before the file is closed.
    await reading?.catch(() => undefined);
    await handle.close();
  }
}

/**
 * Pass 1: yields the file's blocks while recording the running digest after each one. With
 * `reuseBuffer`, for a consumer done with a block before it asks for the next, every block is
 * the same buffer.
 */
export async function* recordedBlocks(path: string, record: SourceRecord, reuseBuffer = false): AsyncGenerator<Buffer> {
  const hash = createHash('sha256');
  const seek = record.seek;
  try {
    for await (const block of fileBlocks(path, BLOCK_SIZE, reuseBuffer)) {
      hash.update(block);
      if (seek !== null && record.blockDigests.length >= seek.from) seek.digests.push(createHash('sha256').update(block).digest());
      record.blockDigests.push(hash.copy().digest());
      record.bytes += block.length;
      if (record.waiters.length > 0) wake(record);
      yield block;
    }
    record.digest = hash.digest('hex');
  } finally {
    recordingEnded(record);
  }
}

/**
 * Later passes: yields a block only once the running digest up to its end equals pass 1's, so
 * every row read from it is a row pass 1 validated; a changed file is FINGERPRINT_MISMATCH
 * before any row of the changed block is used. With `follow`, it reads beside pass 1, each block
 * once pass 1 has recorded it, and ends where pass 1 stopped. With `at`, it yields the file's
 * bytes from that offset on.
 */
export async function* verifiedBlocks(
  path: string,
  record: SourceRecord,
  batch: string,
  options: { onBytes?: (bytes: number) => void; recordedOnly?: boolean; reuseBuffer?: boolean; follow?: boolean; at?: number } = {},
): AsyncGenerator<Buffer> {
  if (options.at !== undefined && record.seek !== null) {
    yield* blocksFrom(path, record, batch, options.at, options);
    return;
  }
  // From byte `at` without block digests of their own (pass 1 read the whole file in this call):
  // every block from the start is checked, and only the bytes from `at` on are yielded.
  const at = options.at ?? 0;
  const hash: Hash = createHash('sha256');
  let count = 0;
  let bytes = 0;
  for await (const block of fileBlocks(path, BLOCK_SIZE, options.reuseBuffer)) {
    // A second look at a source whose pass 1 stopped early ends where pass 1 ended.
    if (options.recordedOnly && count === record.blockDigests.length) return;
    if (options.follow && !(await blockRecorded(record, count))) return;
    hash.update(block);
    if (!record.blockDigests.equals(count++, hash.copy().digest())) throw changedDuringImport(batch, record);
    bytes += block.length;
    options.onBytes?.(bytes);
    const skip = at - (bytes - block.length);
    if (skip <= 0) yield block;
    else if (skip < block.length) yield block.subarray(skip);
  }
  if (count !== record.blockDigests.length) throw changedDuringImport(batch, record);
}

/**
 * `verifiedBlocks` from byte `at` on (in a block whose own digest pass 1 recorded, see
 * `SourceRecord.seek`): each block is checked against its own digest, and `onBytes` gets the
 * offset reached in the file.
 */
async function* blocksFrom(
  path: string,
  record: SourceRecord,
  batch: string,
  at: number,
  options: { onBytes?: (bytes: number) => void; reuseBuffer?: boolean },
): AsyncGenerator<Buffer> {
  const seek = record.seek;
  const first = Math.floor(at / BLOCK_SIZE);
  if (seek === null || seek.from !== first) throw new Error(`No block digests recorded from block ${first}.`);
  let count = 0;
  let position = first * BLOCK_SIZE;
  for await (const block of fileBlocks(path, BLOCK_SIZE, options.reuseBuffer, position)) {
    if (!seek.digests.equals(count++, createHash('sha256').update(block).digest())) throw changedDuringImport(batch, record);
    const skip = Math.max(0, at - position);
    position += block.length;
    options.onBytes?.(position);
    if (skip < block.length) yield skip === 0 ? block : block.subarray(skip);
  }
  if (count !== seek.digests.length) throw changedDuringImport(batch, record);
}

function changedDuringImport(batch: string, record: SourceRecord): FingerprintMismatchError {
  return new FingerprintMismatchError(
    `The file of import "${batch}" changed while it was being imported (it had digest ${record.digest} when validated); ` +
      'nothing of the affected chunk was committed. Run the import again once the file is stable.',
  );
}

export function newSourceRecord(): SourceRecord {
  return { blockDigests: new DigestList(), seek: null, digest: '', bytes: 0, ended: false, waiters: [] };
}
