import { stat } from 'node:fs/promises';
import type { DataSource, QueryRunner } from 'typeorm';
import { FingerprintMismatchError } from '../core/errors';
import type { Progress } from '../core/progress';
import { traced } from '../core/telemetry';
import { dialectOf } from '../dialect';
import { beginIn } from './begin';
import { stopFor } from '../control/job-state';
import type { CopyRows } from '../dialect';
import { ChunkRows, fillChunks } from './chunk-rows';
import { advanceImport, ITEM_COLUMNS, ITEMS, readImport, rollbackQuietly } from './import-store';
import type { RowsFormat } from './read-rows';
import { gunzipped } from './gunzipped';
import { recordingEnd, type SourceRecord, verifiedBlocks } from './source-blocks';

/**
 * Below this size pass 1 takes a few milliseconds: there is nothing to load beside it.
 */
export const PRELOAD_MIN_BYTES = 4 * 1024 * 1024;

/**
 * Rows per COPY statement while preloading (whole chunks): the statements' own costs paid rarely.
 * A group is sent early once its rows reach `GROUP_BYTES` (long ids), to keep memory bounded.
 */
const GROUP_ROWS = 16_000;
const GROUP_BYTES = 4 * 1024 * 1024;

/**
 * What the preload committed: rows from `from` to `next`, in `chunks` chunks, read from the file's
 * first `bytes`; `nextOffset`, the byte offset of row `next`, where known (its checkpoint keeps it).
 */
export interface Preloaded {
  from: number;
  next: number;
  chunks: number;
  bytes: number;
  nextOffset: number | null;
}

/** Where pass 2 reads on after a preload: at the byte offset of the preload's next row, when known. */
export function afterPreload(preloaded: Preloaded | null): { index: number; offset: number } | null {
  return preloaded?.nextOffset ? { index: preloaded.next, offset: preloaded.nextOffset } : null;
}

/**
 * What the preload committed, as the chunk pipeline's `already`, and a progress report for each of
 * its chunks (they committed together; each is reported, as the pipeline reports every chunk it
 * commits, `items` and `batches` counting this call's rows and chunks; the bytes read shared out).
 */
export function preloadedSoFar(
  preloaded: Preloaded,
  batch: string,
  total: number,
  totalBytes: number,
  size: number,
): { already: { rows: number; chunks: number }; progress: Omit<Progress, 'elapsedMs' | 'rate'>[] } {
  const already = { rows: preloaded.next - preloaded.from, chunks: preloaded.chunks };
  const progress = Array.from({ length: already.chunks }, (_, i) => {
    const batches = i + 1;
    const last = batches === already.chunks;
    return {
      name: batch,
      batches,
      items: last ? already.rows : batches * size,
      total,
      bytes: last ? preloaded.bytes : Math.round((preloaded.bytes * batches) / already.chunks),
      totalBytes,
    };
  });
  return { already, progress };
}

/** Whether the file is large enough for a preload to gain anything. */
export async function worthPreloading(path: string): Promise<boolean> {
  try {
    return (await stat(path)).size >= PRELOAD_MIN_BYTES;
  } catch {
    return false; // pass 1 reports an unreadable file
  }
}

/**
 * What a preload reads and where it copies it: the id/value rows into the built-in table
 * (`idValueRows`), or records into their target (records mode).
 */
export interface PreloadRows {
  /**
   * Reads the rows from row `from` on out of `blocks` as COPY rows; after each chunk of `size` rows,
   * `chunkEnded()` says whether to read on. False when reading stopped before the file's end (or a
   * row pass 1 will reject), true at the end of the file.
   */
  read(blocks: AsyncGenerator<Buffer>, from: number, chunkEnded: () => Promise<boolean>): Promise<boolean>;
  /** Rows read and not taken yet. */
  readonly count: number;
  /** Their bytes. */
  readonly byteLength: number;
  /**
   * The rows read since the last take, and the byte offset of the source row after them where the
   * reader knows it (taken at a chunk's end).
   */
  take(): { rows: CopyRows; nextOffset: number | null };
  /** Copies `rows` in one statement on the preload's connection, in its transaction. */
  copy(runner: QueryRunner, rows: CopyRows): Promise<void>;
}

/** The id/value rows of a file in `format`, as binary COPY rows of the built-in table. */
export function idValueRows(dataSource: DataSource, batch: string, format: RowsFormat, size: number): PreloadRows {
  const chunk = new ChunkRows(Buffer.from(batch), 2);
  return {
    read: (blocks, from, chunkEnded) =>
      fillChunks(format, blocks, chunk, { from: () => from, chunkEnds: (at) => (at + 1 - from) % size === 0, chunkEnded }),
    get count() {
      return chunk.count;
    },
    get byteLength() {
      return chunk.byteLength;
    },
    take: () => {
      const taken = chunk.take(chunk.start)!;
      return { rows: taken.copy!, nextOffset: taken.nextOffset };
    },
    copy: (runner, rows) => dialectOf(dataSource).copyRows!(runner, ITEMS, ITEM_COLUMNS, rows, { binary: true, statementRows: rows.rows }),
  };
}

/**
 * Pass 2 begun during pass 1, on PostgreSQL's bulk path when the import opens its own
 * transactions: the id/value rows into the built-in table, or records into their target (what to
 * read: `PreloadRows`). Pass 1 (one Node thread) is several times faster than the server inserts
 * rows, so the server would idle through it: instead, the rows pass 1 has read are copied into
 * `checkpoint_import_items` (or the target) in ONE transaction, held open — nothing committed, nothing
 * visible — until pass 1 has validated the whole file. Then, with the checkpoint advanced over
 * them, that transaction commits (`commit`): the preloaded chunks commit together, with their
 * checkpoint, exactly once. An invalid file, a stop, an error of the preload's own (a row the
 * database refuses, a file changed under it) or another runner's progress roll it back, and the
 * import goes on as without it: nothing is ever committed before the file is validated.
 */
export class Preload {
  /** Rows sent so far (whole chunks, and the file's last rows). */
  private sent = 0;
  /** How far into the file (bytes read) the rows sent reach, about. */
  private bytes = 0;
  private read = 0;
  /** The byte offset of the source row after the rows sent, when known (not through gunzip). */
  private nextOffset: number | null = null;
  private gzip = false;
  private chunks = 0;
  private stopping = false;
  private failed = false;
  private readonly copies: Promise<void>[] = [];
  private loading: Promise<void> = Promise.resolve();

  private constructor(
    private readonly dataSource: DataSource,
    private readonly runner: QueryRunner,
    private readonly batch: string,
    private readonly from: number,
    private readonly size: number,
    private readonly rows: PreloadRows,
  ) {}

  /**
   * Opens the preload's transaction, from the committed checkpoint on. Null when the import is
   * complete, or when the database cannot be reached now: the import goes on without a preload,
   * and its own statements report the problem.
   */
  static async open(dataSource: DataSource, batch: string, size: number, rows: PreloadRows): Promise<Preload | null> {
    const runner = dataSource.createQueryRunner();
    try {
      const stored = await readImport(runner.manager, batch);
      const from = stored ? Number(stored.next_index) : 0;
      if ((!stored || stored.total_rows === null || from < Number(stored.total_rows)) && !(stored && stopFor(stored))) {
        await runner.query('BEGIN');
        return new Preload(dataSource, runner, batch, from, size, rows);
      }
    } catch {
      // As without a preload (see above).
    }
    await runner.release();
    return null;
  }

  /** Starts reading the file beside pass 1 (each block once pass 1 has read it) and copying its rows. */
  start(path: string, record: SourceRecord, reading: { gzip: boolean; reuseBuffer: boolean }): void {
    this.gzip = reading.gzip;
    this.loading = this.load(path, record, reading).catch(() => {
      // A row the database refused, a file changed under it…: the import goes on without the
      // preload, and pass 2 meets (and reports) the same problem.
      this.failed = true;
    });
  }

  /** `reuseBuffer`: the reader copies what it keeps of a block, so the blocks can share two buffers. */
  private async load(path: string, record: SourceRecord, { gzip, reuseBuffer }: { gzip: boolean; reuseBuffer: boolean }): Promise<void> {
    const onBytes = (read: number) => (this.read = read);
    const raw = verifiedBlocks(path, record, this.batch, { follow: true, reuseBuffer, onBytes });
    const blocks = gzip ? gunzipped(raw) : raw;
    const group = this.size * Math.max(1, Math.floor(GROUP_ROWS / this.size));
    const rows = this.rows;
    // At a chunk's end: sends the group when it is full or the preload is to stop; false to stop reading.
    const chunkEnded = async (): Promise<boolean> => {
      if (rows.count < group && rows.byteLength < GROUP_BYTES && !this.stopping) return !this.failed;
      await this.send();
      return !this.stopping && !this.failed;
    };
    if (!(await rows.read(blocks, this.from, chunkEnded))) {
      // Stopped, or at a row pass 1 rejects: whatever was read after the last chunk stays out.
      if (!this.stopping) this.failed = true;
      return;
    }
    // The end of the file before pass 1's: once pass 1 has accepted all of it (or not), its last rows too.
    await recordingEnd(record);
    await this.send(true);
  }

  /**
   * Copies the rows read in one statement, queued behind the one before (one in flight while the
   * next is read); `atEnd`: they reach the end of the file.
   */
  private async send(atEnd = false): Promise<void> {
    if (this.copies.length >= 2) await this.copies.shift();
    if (this.failed || this.rows.count === 0) return;
    const { rows, nextOffset } = this.rows.take();
    const copy = this.rows.copy(this.runner, rows);
    this.copies.push(
      copy.catch(() => {
        this.failed = true;
      }),
    );
    this.sent += rows.rows;
    this.chunks += Math.ceil(rows.rows / this.size);
    this.bytes = this.read;
    // A resume reads on from here (SPEC: each checkpoint stores the next row's byte offset); the
    // rows at the end of the file end no chunk, and the import is complete with them.
    this.nextOffset = atEnd || this.gzip ? null : nextOffset;
  }

  /** Stops reading and waits for the rows sent; true when all of them are in the open transaction. */
  private async settle(): Promise<boolean> {
    this.stopping = true;
    await this.loading;
    await Promise.all(this.copies);
    return !this.failed;
  }

  /**
   * Pass 1 accepted the file (`digest`, `total` rows): begins or resumes the import in the
   * preload's transaction, advances the checkpoint over the preloaded rows and commits them
   * (asynchronously when they do not end the file, unless `durable`). Null, nothing committed,
   * when there was nothing to commit or the preload must give way (see the class), or the batch was
   * paused or cancelled meanwhile; the stored import of another file is FINGERPRINT_MISMATCH, as
   * `beginIn` says, with nothing committed. `validated`: the options hash pass 1 validated with.
   */
  async commit(digest: string, total: number, durable: boolean, validated?: string | null): Promise<Preloaded | null> {
    try {
      if (!(await this.settle()) || this.sent === 0) return await this.rollback();
      const tx = this.runner.manager;
      const row = await beginIn(tx, this.batch, digest, total, validated);
      const next = this.from + this.sent;
      if (
        Number(row.next_index) !== this.from ||
        stopFor(row) !== undefined ||
        !(await advanceImport(tx, this.batch, digest, this.from, next, {
          rows: this.sent,
          skipped: 0,
          chunks: this.chunks,
          nextOffset: this.nextOffset,
        }))
      ) {
        return await this.rollback();
      }
      const asynchronous = dialectOf(this.dataSource).asynchronousCommit;
      if (!durable && next < total && asynchronous !== undefined) await this.runner.query(asynchronous);
      await this.runner.query('COMMIT');
      return { from: this.from, next, chunks: this.chunks, bytes: this.bytes, nextOffset: this.nextOffset };
    } catch (error) {
      await this.rollback();
      if (error instanceof FingerprintMismatchError) throw error;
      return null;
    } finally {
      await this.runner.release();
    }
  }

  /** `commit` as one `checkpoint.import.chunk` span (when anything was committed). */
  committed(digest: string, total: number, durable: boolean, validated?: string | null): Promise<Preloaded | null> {
    return traced('import.chunk', { job: this.batch }, async (span) => {
      const preloaded = await this.commit(digest, total, durable, validated);
      if (preloaded) {
        span.set({ index: preloaded.from });
        span.committed(preloaded.next - preloaded.from, true);
      }
      return preloaded;
    });
  }

  /** Pass 1 rejected the file or was stopped: nothing of the preload stays. */
  async abandon(): Promise<void> {
    try {
      this.failed = true; // nothing more is sent
      await this.settle();
      await this.rollback();
    } finally {
      await this.runner.release();
    }
  }

  private async rollback(): Promise<null> {
    await rollbackQuietly(this.runner);
    return null;
  }
}
