import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BitAdd, IntegerBits } from './integer-bits';
import { duplicateId } from './parse-rows';

/** 64-bit hash of an id as two 32-bit halves, written to `out`. */
export type IdHash = (id: string, out: Uint32Array) => void;

const NUMBER_BITS = new Float64Array(1);
const NUMBER_WORDS = new Uint32Array(NUMBER_BITS.buffer);

/**
 * The hash of a number id, from its float64 bits (0 and −0 alike, as a Map sees them). Each half
 * mixes both words: an integer below 2^21 has a zero low word, and the high half picks the bucket.
 */
export function numberHash(id: number, out: Uint32Array): void {
  NUMBER_BITS[0] = id === 0 ? 0 : id;
  const low = NUMBER_WORDS[0];
  const high = NUMBER_WORDS[1];
  out[0] = mix(high ^ Math.imul(low ^ 0x9e3779b9, 0x85ebca6b));
  out[1] = mix(low ^ Math.imul(high ^ 0x7f4a7c15, 0xc2b2ae35));
}

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
// Each run is written grouped by the top BUCKET_BITS of the high hash word: equal hashes share a
// bucket, so the runs are searched for them one range of buckets at a time, in memory.
const BUCKET_BITS = 12;
const BUCKETS = 1 << BUCKET_BITS;
// Entries of all runs searched together (16 bytes each, plus a hash table of 8 bytes per entry).
const SEARCH_ENTRIES = 256 * 1024;
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

/**
 * Positions 0…count−1 grouped by the top BUCKET_BITS of `keys`, in the order added within a
 * bucket (a counting sort), into `grouped`; `offsets` gets each bucket's start (BUCKETS + 1 entries).
 */
function groupPositions(keys: Uint32Array, count: number, grouped: Uint32Array, offsets: Int32Array): void {
  const shift = 32 - BUCKET_BITS;
  offsets.fill(0);
  for (let i = 0; i < count; i++) offsets[(keys[i] >>> shift) + 1]++;
  for (let b = 0; b < BUCKETS; b++) offsets[b + 1] += offsets[b];
  const next = offsets.slice(0, BUCKETS);
  for (let i = 0; i < count; i++) grouped[next[keys[i] >>> shift]++] = i;
}

/**
 * Duplicate-id detection in bounded memory for the streaming import. Ids are first kept exactly
 * (a duplicate is reported at once); past a memory budget, only 64-bit hashes are kept, in runs
 * spilled to a temp file grouped by hash bucket, and searched bucket range by bucket range at
 * the end. Equal hashes are only candidates: the caller
 * looks their ids up again (`firstDuplicate`'s `lookup`) so a hash collision never rejects a file.
 */
export class DuplicateIds {
  private exact: Map<string | number, number> | null = new Map();
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
  private grouped: Uint32Array | null = null;
  // Each spilled run: its first entry in the temp file, and where each hash bucket starts in it.
  private runs: { start: number; offsets: Int32Array }[] = [];
  private spilled = 0;
  private dir: string | null = null;
  private file: FileHandle | null = null;
  private readonly collected: number[] | null;
  // Safe integer ids, exactly, in at most 8 MiB (a dense primary key of 67M rows); `full` once one did not fit.
  private readonly integers = new IntegerBits(1024);
  private full = false;

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
   * while ids are still kept exactly; returns a promise to await when a run is being spilled. A
   * number id is another id than any string (the caller never gives one value both ways); the
   * `lookup` of `firstDuplicate` gives it as `String(id)`.
   */
  add(id: string | number, index: number): Promise<void> | undefined {
    if (typeof id === 'number') {
      // Integers as bits while they fit the budget; past it, those are still looked up there.
      if (Number.isSafeInteger(id)) {
        const found = this.full ? (this.integers.has(id) ? BitAdd.Seen : BitAdd.Full) : this.integers.add(id);
        if (found === BitAdd.Seen) return this.repeated(id, index);
        if (found === BitAdd.Added) return undefined;
        this.full = true;
      }
      // Collected number ids go to hashes from the first: hashing a number's bits costs less than a map entry.
      if (this.exact !== null && this.collected !== null && this.exact.size === 0) this.exact = null;
    }
    if (this.exact) {
      if (this.exact.has(id)) return this.repeated(id, index);
      this.exact.set(id, index);
      // Rough V8 cost of a map entry holding a short string (a number: the entry alone).
      this.exactBytes += typeof id === 'number' ? 48 : 2 * id.length + 64;
      return this.exactBytes > this.exactLimit ? this.leaveExactPhase() : undefined;
    }
    this.hashOf(id);
    this.push(this.hashOut[0], this.hashOut[1], index);
    return this.count === this.runEntries ? this.spill() : undefined;
  }

  /** A repeat found exactly: INVALID_INPUT at once, or collected. */
  private repeated(id: string | number, index: number): undefined {
    if (!this.collected) throw duplicateId(String(id), index);
    this.collected.push(index);
    return undefined;
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
    const groups = await this.hashGroups();
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
      const groups = await this.hashGroups(Infinity);
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
    this.grouped = null;
    if (this.file) await this.file.close();
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
    this.file = null;
    this.dir = null;
  }

  private async leaveExactPhase(): Promise<void> {
    const exact = this.exact as Map<string, number>;
    this.exact = null;
    for (const [id, index] of exact) {
      this.hashOf(id);
      this.push(this.hashOut[0], this.hashOut[1], index);
      if (this.count === this.runEntries) await this.spill();
    }
  }

  private hashOf(id: string | number): void {
    if (typeof id === 'number') numberHash(id, this.hashOut);
    else this.hash(id, this.hashOut);
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

  /** Writes the current run to the temp file grouped by hash bucket, in order added within a bucket. */
  private async spill(): Promise<void> {
    if (!this.file) {
      this.dir = await mkdtemp(join(this.tempRoot, 'checkpoint-ids-'));
      this.file = await open(join(this.dir, 'runs'), 'w+');
    }
    this.grouped ??= new Uint32Array(this.runEntries);
    const order = this.grouped;
    const offsets = new Int32Array(BUCKETS + 1);
    groupPositions(this.highs as Uint32Array, this.count, order, offsets);
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
    this.runs.push({ start: this.spilled, offsets });
    this.spilled += this.count;
    this.count = 0;
  }

  /** The groups of row indexes that share a 64-bit hash: in memory while no run was spilled, else from the runs. */
  private async hashGroups(maxCandidates = this.maxCandidates): Promise<number[][]> {
    if (this.runs.length > 0 || this.highs === null) {
      if (this.count > 0) await this.spill();
      return this.collisionGroups(maxCandidates);
    }
    const memory = new ArrayBuffer(this.count * ENTRY_BYTES);
    const words = new Uint32Array(memory);
    const doubles = new Float64Array(memory);
    for (let i = 0; i < this.count; i++) {
      words[4 * i] = this.highs[i];
      words[4 * i + 1] = (this.lows as Uint32Array)[i];
      doubles[2 * i + 1] = (this.indexes as Float64Array)[i];
    }
    return equalHashes(words, doubles, this.count, new Int32Array(tableSize(this.count)));
  }

  /**
   * Returns the groups of row indexes (ascending) that share a 64-bit hash: the runs' buckets are
   * read a range at a time (about SEARCH_ENTRIES entries of all runs) and searched with a hash
   * table. Past `maxCandidates` indexes, only the groups that could hold the earliest duplicate are kept.
   */
  private async collisionGroups(maxCandidates = this.maxCandidates): Promise<number[][]> {
    let groups: number[][] = [];
    let kept = 0;
    let limit = Infinity; // groups whose second index is beyond this cannot hold the earliest duplicate
    const keep = (group: number[]) => {
      if (group[1] > limit) return;
      groups.push(group);
      kept += group.length;
      if (kept > maxCandidates) {
        groups.sort((a, b) => a[1] - b[1]);
        groups = groups.slice(0, Math.max(1, Math.floor(groups.length / 2)));
        kept = groups.reduce((sum, g) => sum + g.length, 0);
        limit = groups[groups.length - 1][1];
      }
    };
    let memory = new ArrayBuffer(0);
    let table = new Int32Array(0);
    for (let first = 0; first < BUCKETS;) {
      // The bucket range [first, last): at least one bucket, then as many as fit the budget.
      let last = first;
      let entries = 0;
      while (last < BUCKETS) {
        let more = 0;
        for (const run of this.runs) more += run.offsets[last + 1] - run.offsets[last];
        if (last > first && entries + more > SEARCH_ENTRIES) break;
        entries += more;
        last++;
      }
      if (entries > 0) {
        if (memory.byteLength < entries * ENTRY_BYTES) {
          memory = new ArrayBuffer(Math.max(entries, SEARCH_ENTRIES) * ENTRY_BYTES);
          table = new Int32Array(tableSize(memory.byteLength / ENTRY_BYTES));
        }
        // The runs' entries in run order; within a run, a bucket keeps the order added: for equal
        // hashes, ascending row indexes.
        const buffer = Buffer.from(memory);
        let filled = 0;
        for (const run of this.runs) {
          const from = run.offsets[first];
          const count = run.offsets[last] - from;
          if (count === 0) continue;
          await (this.file as FileHandle).read(buffer, filled * ENTRY_BYTES, count * ENTRY_BYTES, (run.start + from) * ENTRY_BYTES);
          filled += count;
        }
        for (const group of equalHashes(new Uint32Array(memory), new Float64Array(memory), entries, table)) keep(group);
      }
      first = last;
    }
    return groups;
  }
}

/** A power of two at least twice `entries`: the hash table's load stays at most one half. */
function tableSize(entries: number): number {
  let size = 1024;
  while (size < 2 * entries) size *= 2;
  return size;
}

/**
 * The groups of `count` entries (words: high, low; doubles: index at 2·i + 1) that share both hash
 * words, each with the indexes in the entries' order; `table` (a power of two, at least 2 · count
 * slots) is the scratch hash table, keyed by the low word.
 */
function equalHashes(words: Uint32Array, doubles: Float64Array, count: number, table: Int32Array): number[][] {
  const mask = table.length - 1;
  table.fill(-1);
  let groups: Map<number, number[]> | null = null;
  for (let i = 0; i < count; i++) {
    const high = words[4 * i];
    const low = words[4 * i + 1];
    let slot = (low ^ Math.imul(high, 0x9e3779b1)) & mask;
    for (;;) {
      const held = table[slot];
      if (held < 0) {
        table[slot] = i;
        break;
      }
      if (words[4 * held] === high && words[4 * held + 1] === low) {
        groups ??= new Map();
        const group = groups.get(held);
        if (group) group.push(doubles[2 * i + 1]);
        else groups.set(held, [doubles[2 * held + 1], doubles[2 * i + 1]]);
        break;
      }
      slot = (slot + 1) & mask;
    }
  }
  return groups ? [...groups.values()] : [];
}
