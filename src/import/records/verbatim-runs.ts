/**
 * Which runs of `size` source rows (rows `k·size … (k+1)·size − 1`) pass 1 found verbatim
 * throughout (`Evaluated.verbatim`): one byte per run, so bounded memory for any file.
 */
export class VerbatimRuns {
  private flags = new Uint8Array(1024).fill(1);

  constructor(private readonly size: number) {}

  /** Row `index` is not verbatim (invalid, skipped, a repeated key, or a value PostgreSQL would read otherwise). */
  clear(index: number): void {
    const run = Math.floor(index / this.size);
    if (run >= this.flags.length) {
      const grown = new Uint8Array(Math.max(2 * this.flags.length, run + 1)).fill(1);
      grown.set(this.flags);
      this.flags = grown;
    }
    this.flags[run] = 0;
  }

  /** True when every row from `start` to `end` (exclusive; rows pass 1 read) is verbatim. */
  all(start: number, end: number): boolean {
    const last = Math.min(Math.floor((end - 1) / this.size), this.flags.length - 1);
    for (let run = Math.floor(start / this.size); run <= last; run++) if (this.flags[run] === 0) return false;
    return true;
  }
}
