import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
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
  /** Collect the duplicates met while ids are kept exactly instead of throwing (see `everyDuplicate`). */
  collect?: boolean;
}

const ENTRY_BYTES = 16; // hash high word, hash low word, index as a double
// Entries per read of a run while merging: 4 MiB of buffers shared by the runs, 16–256 KiB each.
const READ_BUDGET = (4 << 20) / 16;
const MIN_READ_ENTRIES = 1024;
const MAX_READ_ENTRIES = 16 * 1024;
const WRITE_ENTRIES = 16 * 1024;

function mix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

// Room for the UTF-8 of most ids, so hashing a string allocates nothing.
const HASH_SCRATCH = Buffer.allocUnsafe(3 * 1024);

/**
 * Two independent 32-bit hashes of the id's UTF-8, as `utf8IdHash` (not for adversarial input:
 * collisions are checked exactly anyway; a lone surrogate reads as U+FFFD, a mere collision).
 */
export const defaultIdHash: IdHash = (id, out) => {
  const bytes = 3 * id.length <= HASH_SCRATCH.length ? HASH_SCRATCH : Buffer.allocUnsafe(3 * id.length);
  utf8IdHash(bytes, 0, bytes.write(id), out);
};

/** `defaultIdHash` of the id whose UTF-8 is `bytes[start…end)`, four bytes at a time, without making the string. */
export function utf8IdHash(bytes: Uint8Array, start: number, end: number, out: Uint32Array): void {
  let a = 0x811c9dc5;
  let b = 0x2545f491;
  let at = start;
  for (; at + 4 <= end; at += 4) {
    let k = bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24);
    b = Math.imul(b ^ k, 0x5bd1e995);
    b ^= b >>> 15;
    // MurmurHash3's block step for `a`.
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    a ^= Math.imul(k, 0x1b873593);
    a = (a << 13) | (a >>> 19);
    a = (Math.imul(a, 5) + 0xe6546b64) | 0;
  }
  if (at < end) {
    let k = 0;
    for (let shift = 0; at < end; at++, shift += 8) k |= bytes[at] << shift;
    b = Math.imul(b ^ k, 0x5bd1e995);
    b ^= b >>> 15;
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    a ^= Math.imul(k, 0x1b873593);
  }
  out[0] = mix(a ^ (end - start));
  out[1] = mix(b ^ (end - start));
}

/** Reads back one sorted run of the temp file, entry by entry (written and read by this process: native byte order). */
class RunCursor {
  hi = 0;
  lo = 0;
  index = 0;
  private buffer: Buffer = Buffer.alloc(0);
  private words = new Uint32Array(0);
  private doubles = new Float64Array(0);
  private at = 0;
  private entries = 0;
  private read = 0;

  constructor(
    private readonly file: FileHandle,
    private readonly start: number,
    private readonly length: number,
    private readonly readEntries: number,
  ) {}

  /** Moves to the next entry; false at the end of the run. Synchronous unless the buffer must be refilled. */
  next(): boolean | Promise<boolean> {
    if (this.at < this.entries) return this.take();
    if (this.read === this.length) return false;
    return this.refill().then(() => this.take());
  }

  private async refill(): Promise<void> {
    const entries = Math.min(this.readEntries, this.length - this.read);
    if (this.buffer.length === 0) {
      const memory = new ArrayBuffer(this.readEntries * ENTRY_BYTES);
      this.buffer = Buffer.from(memory);
      this.words = new Uint32Array(memory);
      this.doubles = new Float64Array(memory);
    }
    await this.file.read(this.buffer, 0, entries * ENTRY_BYTES, (this.start + this.read) * ENTRY_BYTES);
    this.read += entries;
    this.entries = entries;
    this.at = 0;
  }

  private take(): boolean {
    const at = this.at++;
    this.hi = this.words[4 * at];
    this.lo = this.words[4 * at + 1];
    this.index = this.doubles[2 * at + 1];
    return true;
  }
}

const RADIX = 1 << 16;

/**
 * Positions 0…count−1 ordered by `keys`, stably: a two-pass LSD radix sort on 16-bit digits,
 * into `sorted` (through `scratch`); `counts` holds RADIX entries.
 */
function sortPositions(keys: Uint32Array, count: number, sorted: Uint32Array, scratch: Uint32Array, counts: Uint32Array): void {
  counts.fill(0);
  for (let i = 0; i < count; i++) counts[keys[i] & 0xffff]++;
  for (let i = 0, sum = 0; i < RADIX; i++) {
    const c = counts[i];
    counts[i] = sum;
    sum += c;
  }
  for (let i = 0; i < count; i++) scratch[counts[keys[i] & 0xffff]++] = i;
  counts.fill(0);
  for (let i = 0; i < count; i++) counts[keys[i] >>> 16]++;
  for (let i = 0, sum = 0; i < RADIX; i++) {
    const c = counts[i];
    counts[i] = sum;
    sum += c;
  }
  for (let i = 0; i < count; i++) {
    const position = scratch[i];
    sorted[counts[keys[position] >>> 16]++] = position;
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
  // Current run: the hash words and row index of each entry, in the order added.
  private highs: Uint32Array | null = null;
  private lows: Uint32Array | null = null;
  private indexes: Float64Array | null = null;
  private count = 0;
  private sorting: { sorted: Uint32Array; scratch: Uint32Array; counts: Uint32Array } | null = null;
  private runs: { start: number; length: number }[] = [];
  private spilled = 0;
  private dir: string | null = null;
  private file: FileHandle | null = null;
  private readonly collected: number[] | null;

  constructor(options: DuplicateIdsOptions = {}) {
    this.collected = options.collect ? [] : null;
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
      if (this.exact.has(id)) {
        if (!this.collected) throw duplicateId(id, index);
        this.collected.push(index);
        return undefined;
      }
      this.exact.set(id, index);
      // Rough V8 cost of a map entry holding a short string.
      this.exactBytes += 2 * id.length + 64;
      return this.exactBytes > this.exactLimit ? this.leaveExactPhase() : undefined;
    }
    this.hash(id, this.hashOut);
    this.push(this.hashOut[0], this.hashOut[1], index);
    return this.count === this.runEntries ? this.spill() : undefined;
  }

  /** `add` for the id whose well-formed UTF-8 is `bytes[start…end)`: past the exact phase, hashed without making the string. */
  addBytes(bytes: Buffer, start: number, end: number, index: number): Promise<void> | undefined {
    if (this.exact || this.hash !== defaultIdHash) return this.add(bytes.toString('utf8', start, end), index);
    utf8IdHash(bytes, start, end, this.hashOut);
    this.push(this.hashOut[0], this.hashOut[1], index);
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

  /**
   * With `collect`: the indexes (ascending) of every row whose id appeared earlier, the later
   * occurrences only; `lookup` as for `firstDuplicate`. Memory grows with the duplicates (and
   * hash collisions) only.
   */
  async everyDuplicate(lookup: (indexes: number[]) => Promise<Map<number, string>>): Promise<number[]> {
    const found = new Set(this.collected ?? []);
    if (!this.exact) {
      if (this.count > 0) await this.spill();
      const groups = await this.collisionGroups(Infinity);
      if (groups.length > 0) {
        const ids = await lookup([...new Set(groups.flat())].sort((a, b) => a - b));
        for (const group of groups) {
          const seen = new Set<string>();
          for (const index of group) {
            const id = ids.get(index) as string;
            if (seen.has(id)) found.add(index);
            seen.add(id);
          }
        }
      }
    }
    return [...found].sort((a, b) => a - b);
  }

  /** With `collect`: the first duplicate met while ids were kept exactly. */
  get firstCollected(): number | undefined {
    return this.collected?.[0];
  }

  async close(): Promise<void> {
    this.exact = null;
    this.highs = this.lows = this.indexes = null;
    this.sorting = null;
    if (this.file) await this.file.close();
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
    this.file = null;
    this.dir = null;
  }

  private async leaveExactPhase(): Promise<void> {
    const exact = this.exact as Map<string, number>;
    this.exact = null;
    for (const [id, index] of exact) {
      this.hash(id, this.hashOut);
      this.push(this.hashOut[0], this.hashOut[1], index);
      if (this.count === this.runEntries) await this.spill();
    }
  }

  private push(high: number, low: number, index: number): void {
    if (!this.highs) {
      this.highs = new Uint32Array(this.runEntries);
      this.lows = new Uint32Array(this.runEntries);
      this.indexes = new Float64Array(this.runEntries);
    }
    this.highs[this.count] = high;
    (this.lows as Uint32Array)[this.count] = low;
    (this.indexes as Float64Array)[this.count] = index;
    this.count++;
  }

  /** Writes the current run to the temp file sorted by high hash word, in order added among equal words. */
  private async spill(): Promise<void> {
    if (!this.file) {
      this.dir = await mkdtemp(join(this.tempRoot, 'checkpoint-ids-'));
      this.file = await open(join(this.dir, 'runs'), 'w+');
    }
    this.sorting ??= { sorted: new Uint32Array(this.runEntries), scratch: new Uint32Array(this.runEntries), counts: new Uint32Array(RADIX) };
    const order = this.sorting.sorted;
    sortPositions(this.highs as Uint32Array, this.count, order, this.sorting.scratch, this.sorting.counts);
    const highs = this.highs as Uint32Array;
    const lows = this.lows as Uint32Array;
    const indexes = this.indexes as Float64Array;
    const entries = Math.min(this.count, WRITE_ENTRIES);
    const memory = new ArrayBuffer(entries * ENTRY_BYTES);
    const out = Buffer.from(memory);
    const words = new Uint32Array(memory);
    const doubles = new Float64Array(memory);
    for (let from = 0; from < this.count; from += WRITE_ENTRIES) {
      const to = Math.min(this.count, from + WRITE_ENTRIES);
      for (let k = from; k < to; k++) {
        const position = order[k];
        const at = k - from;
        words[4 * at] = highs[position];
        words[4 * at + 1] = lows[position];
        doubles[2 * at + 1] = indexes[position];
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
  private async collisionGroups(maxCandidates = this.maxCandidates): Promise<number[][]> {
    const heap: RunCursor[] = [];
    const readEntries = Math.max(MIN_READ_ENTRIES, Math.min(MAX_READ_ENTRIES, Math.floor(READ_BUDGET / Math.max(1, this.runs.length))));
    for (const run of this.runs) {
      const cursor = new RunCursor(this.file as FileHandle, run.start, run.length, readEntries);
      if (await cursor.next()) heapPush(heap, cursor);
    }
    let groups: number[][] = [];
    let kept = 0;
    let limit = Infinity; // groups whose second index is beyond this cannot hold the earliest duplicate
    // The entries sharing the current high word, in index order: `sharing` of them, listed in
    // `lows`/`indexes` only once there are two (most high words are unique).
    const lows: number[] = [];
    const indexes: number[] = [];
    let currentHi = -1;
    let sharing = 0;
    let firstLo = 0;
    let firstIndex = 0;
    const flush = () => {
      if (sharing < 2) return;
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
        if (kept > maxCandidates) {
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
        currentHi = top.hi;
        sharing = 1;
        firstLo = top.lo;
        firstIndex = top.index;
      } else {
        if (sharing === 1) {
          lows.length = 0;
          indexes.length = 0;
          lows.push(firstLo);
          indexes.push(firstIndex);
        }
        lows.push(top.lo);
        indexes.push(top.index);
        sharing++;
      }
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
