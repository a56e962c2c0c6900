import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { endianness, tmpdir } from 'node:os';
import { join } from 'node:path';
import { duplicateId } from './parse-rows';

/** 64-bit hash of an id as two 32-bit halves, written to `out`. */
export type IdHash = (id: string, out: Uint32Array) => void;

export interface DuplicateIdsOptions {
  /** Estimated bytes of ids kept exactly in memory before switching to hashes (default 4 MiB). */
  exactBytes?: number;
  /** Hashes per sorted run spilled to the temp file (default 256 Ki). */
  runEntries?: number;
  /** Colliding groups checked exactly at most (default 100 Ki indexes). */
  maxCandidates?: number;
  hash?: IdHash;
  tempDir?: string;
}

const ENTRY_BYTES = 16; // hash high word, hash low word, index as a double
// Entries per read of a run while merging: a buffer of 16 KiB per run.
const READ_ENTRIES = 1024;
const WRITE_ENTRIES = 16 * 1024;
const LITTLE_ENDIAN = endianness() === 'LE';

function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Two independent 32-bit multiplicative hashes of the UTF-16 code units (not for adversarial input: collisions are checked exactly anyway). */
export const defaultIdHash: IdHash = (id, out) => {
  let a = 0x811c9dc5 ^ id.length;
  let b = 0x2545f491;
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 13;
  }
  out[0] = mix(a);
  out[1] = mix(b ^ id.length);
};

/** Reads back one sorted run of the temp file, entry by entry. */
class RunCursor {
  hi = 0;
  lo = 0;
  index = 0;
  private buffer = Buffer.alloc(0);
  private at = 0;
  private read = 0;

  constructor(private readonly file: FileHandle, private readonly start: number, private readonly length: number) {}

  /** Moves to the next entry; false at the end of the run. Synchronous unless the buffer must be refilled. */
  next(): boolean | Promise<boolean> {
    if (this.at * ENTRY_BYTES < this.buffer.length) return this.take();
    if (this.read === this.length) return false;
    return this.refill().then(() => this.take());
  }

  private async refill(): Promise<void> {
    const entries = Math.min(READ_ENTRIES, this.length - this.read);
    if (this.buffer.length !== entries * ENTRY_BYTES) this.buffer = Buffer.alloc(entries * ENTRY_BYTES);
    await this.file.read(this.buffer, 0, this.buffer.length, (this.start + this.read) * ENTRY_BYTES);
    this.read += entries;
    this.at = 0;
  }

  private take(): boolean {
    const offset = this.at++ * ENTRY_BYTES;
    this.hi = this.buffer.readUInt32LE(offset);
    this.lo = this.buffer.readUInt32LE(offset + 4);
    this.index = this.buffer.readDoubleLE(offset + 8);
    return true;
  }
}

function before(a: RunCursor, b: RunCursor): boolean {
  return a.hi !== b.hi ? a.hi < b.hi : a.index < b.index;
}

/**
 * Duplicate-id detection in bounded memory for the streaming import. Ids are first kept exactly
 * (a duplicate is reported at once); past a memory budget, only 64-bit hashes are kept, sorted in
 * runs spilled to a temp file and merged at the end. Equal hashes are only candidates: the caller
 * looks their ids up again (`firstDuplicate`'s `lookup`) so a hash collision never rejects a file.
 */
export class DuplicateIds {
  private exact: Map<string, number> | null = new Map();
  private exactBytes = 0;
  private readonly exactLimit: number;
  private readonly runEntries: number;
  private readonly maxCandidates: number;
  private readonly hash: IdHash;
  private readonly tempRoot: string;
  private readonly hashOut = new Uint32Array(2);
  // Current run: sort keys (hash high word above the entry's position) and the entries themselves.
  private keys: BigUint64Array | null = null;
  private keyWords: Uint32Array | null = null;
  private lows: Uint32Array | null = null;
  private indexes: Float64Array | null = null;
  private count = 0;
  private runs: { start: number; length: number }[] = [];
  private spilled = 0;
  private dir: string | null = null;
  private file: FileHandle | null = null;

  constructor(options: DuplicateIdsOptions = {}) {
    this.exactLimit = options.exactBytes ?? 4 * 1024 * 1024;
    this.runEntries = options.runEntries ?? 256 * 1024;
    this.maxCandidates = options.maxCandidates ?? 100 * 1024;
    this.hash = options.hash ?? defaultIdHash;
    this.tempRoot = options.tempDir ?? tmpdir();
  }

  /**
   * Records the id of row `index` (indexes increase). Throws INVALID_INPUT for a duplicate seen
   * while ids are still kept exactly; returns a promise to await when a run is being spilled.
   */
  add(id: string, index: number): Promise<void> | undefined {
    if (this.exact) {
      if (this.exact.has(id)) throw duplicateId(id, index);
      this.exact.set(id, index);
      // Rough V8 cost of a map entry holding a short string.
      this.exactBytes += 2 * id.length + 64;
      return this.exactBytes > this.exactLimit ? this.leaveExactPhase() : undefined;
    }
    this.push(id, index);
    return this.count === this.runEntries ? this.spill() : undefined;
  }

  /**
   * The smallest index of a row whose id appeared earlier, or undefined. `lookup` returns the ids
   * of the given rows (a second look at the source), to tell real duplicates from hash collisions.
   */
  async firstDuplicate(lookup: (indexes: number[]) => Promise<Map<number, string>>): Promise<{ index: number; id: string } | undefined> {
    if (this.exact) return undefined;
    if (this.count > 0) await this.spill();
    const groups = await this.collisionGroups();
    if (groups.length === 0) return undefined;
    const wanted = [...new Set(groups.flat())].sort((a, b) => a - b);
    const ids = await lookup(wanted);
    let first: { index: number; id: string } | undefined;
    for (const group of groups) {
      const seen = new Set<string>();
      for (const index of group) {
        const id = ids.get(index) as string;
        if (seen.has(id)) {
          if (first === undefined || index < first.index) first = { index, id };
          break;
        }
        seen.add(id);
      }
    }
    return first;
  }

  async close(): Promise<void> {
    this.exact = null;
    this.keys = this.keyWords = this.lows = this.indexes = null;
    if (this.file) await this.file.close();
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
    this.file = null;
    this.dir = null;
  }

  private async leaveExactPhase(): Promise<void> {
    const exact = this.exact as Map<string, number>;
    this.exact = null;
    for (const [id, index] of exact) {
      this.push(id, index);
      if (this.count === this.runEntries) await this.spill();
    }
  }

  private push(id: string, index: number): void {
    if (!this.keys) {
      this.keys = new BigUint64Array(this.runEntries);
      this.keyWords = new Uint32Array(this.keys.buffer);
      this.lows = new Uint32Array(this.runEntries);
      this.indexes = new Float64Array(this.runEntries);
    }
    this.hash(id, this.hashOut);
    const words = this.keyWords as Uint32Array;
    // Key = high hash word × 2^32 + position: a native numeric sort orders the run by hash,
    // and by position (hence index) among equal hashes.
    words[2 * this.count + (LITTLE_ENDIAN ? 1 : 0)] = this.hashOut[0];
    words[2 * this.count + (LITTLE_ENDIAN ? 0 : 1)] = this.count;
    (this.lows as Uint32Array)[this.count] = this.hashOut[1];
    (this.indexes as Float64Array)[this.count] = index;
    this.count++;
  }

  private async spill(): Promise<void> {
    if (!this.file) {
      this.dir = await mkdtemp(join(this.tempRoot, 'checkpoint-ids-'));
      this.file = await open(join(this.dir, 'runs'), 'w+');
    }
    const keys = (this.keys as BigUint64Array).subarray(0, this.count).sort();
    const words = new Uint32Array(keys.buffer, keys.byteOffset, this.count * 2);
    const lows = this.lows as Uint32Array;
    const indexes = this.indexes as Float64Array;
    const out = Buffer.alloc(Math.min(this.count, WRITE_ENTRIES) * ENTRY_BYTES);
    for (let from = 0; from < this.count; from += WRITE_ENTRIES) {
      const to = Math.min(this.count, from + WRITE_ENTRIES);
      for (let k = from; k < to; k++) {
        const hi = words[2 * k + (LITTLE_ENDIAN ? 1 : 0)];
        const position = words[2 * k + (LITTLE_ENDIAN ? 0 : 1)];
        const offset = (k - from) * ENTRY_BYTES;
        out.writeUInt32LE(hi, offset);
        out.writeUInt32LE(lows[position], offset + 4);
        out.writeDoubleLE(indexes[position], offset + 8);
      }
      await this.file.write(out, 0, (to - from) * ENTRY_BYTES, (this.spilled + from) * ENTRY_BYTES);
    }
    this.runs.push({ start: this.spilled, length: this.count });
    this.spilled += this.count;
    this.count = 0;
  }

  /**
   * Merges the runs and returns the groups of row indexes (ascending) that share a 64-bit hash.
   * Past `maxCandidates` indexes, only the groups that could hold the earliest duplicate are kept.
   */
  private async collisionGroups(): Promise<number[][]> {
    const heap: RunCursor[] = [];
    for (const run of this.runs) {
      const cursor = new RunCursor(this.file as FileHandle, run.start, run.length);
      if (await cursor.next()) heapPush(heap, cursor);
    }
    let groups: number[][] = [];
    let kept = 0;
    let limit = Infinity; // groups whose second index is beyond this cannot hold the earliest duplicate
    // The entries sharing the current high word, in index order.
    const lows: number[] = [];
    const indexes: number[] = [];
    let currentHi = -1;
    const flush = () => {
      if (lows.length < 2) return;
      const byLow = new Map<number, number[]>();
      for (let k = 0; k < lows.length; k++) {
        const list = byLow.get(lows[k]);
        if (list) list.push(indexes[k]);
        else byLow.set(lows[k], [indexes[k]]);
      }
      for (const group of byLow.values()) {
        if (group.length < 2 || group[1] > limit) continue;
        groups.push(group);
        kept += group.length;
        if (kept > this.maxCandidates) {
          groups.sort((a, b) => a[1] - b[1]);
          groups = groups.slice(0, Math.max(1, Math.floor(groups.length / 2)));
          kept = groups.reduce((sum, g) => sum + g.length, 0);
          limit = groups[groups.length - 1][1];
        }
      }
    };
    while (heap.length > 0) {
      const top = heap[0];
      if (top.hi !== currentHi) {
        flush();
        lows.length = 0;
        indexes.length = 0;
        currentHi = top.hi;
      }
      lows.push(top.lo);
      indexes.push(top.index);
      let more = top.next();
      if (typeof more !== 'boolean') more = await more;
      if (more) heapFix(heap);
      else heapPop(heap);
    }
    flush();
    return groups;
  }
}

function heapPush(heap: RunCursor[], cursor: RunCursor): void {
  heap.push(cursor);
  let i = heap.length - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!before(heap[i], heap[parent])) break;
    [heap[i], heap[parent]] = [heap[parent], heap[i]];
    i = parent;
  }
}

/** Restores the heap after the top cursor advanced. */
function heapFix(heap: RunCursor[]): void {
  let i = 0;
  for (;;) {
    const left = 2 * i + 1;
    const right = left + 1;
    let smallest = i;
    if (left < heap.length && before(heap[left], heap[smallest])) smallest = left;
    if (right < heap.length && before(heap[right], heap[smallest])) smallest = right;
    if (smallest === i) return;
    [heap[i], heap[smallest]] = [heap[smallest], heap[i]];
    i = smallest;
  }
}

function heapPop(heap: RunCursor[]): void {
  const last = heap.pop() as RunCursor;
  if (heap.length === 0) return;
  heap[0] = last;
  heapFix(heap);
}
