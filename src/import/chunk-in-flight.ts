/** What a chunk's commit learns about the chunk before it. */
export interface ChunkOrder {
  /** Settles once the chunk before has finished: true when it committed (or had nothing to do), false when it failed. */
  previous: Promise<boolean>;
  /** To call once the chunk's statements are on their way: the next chunk is only sent after that. */
  sent(): void;
}

interface Committing {
  done: Promise<boolean>;
  sent: Promise<void>;
  failure: { error: unknown } | null;
}

/**
 * Chunks commit while the next ones are read and converted, so the database and the reader work
 * side by side. With `depth` 2, a chunk is sent while the one before is still committing (a
 * pipelined connection commits it only once the one before has: see `CopyAround.proceed`). Chunks
 * settle in order, and the first failed chunk's error is the one raised, whatever failed after it.
 */
export class ChunkInFlight<T> {
  private readonly committing: Committing[] = [];

  constructor(
    private readonly commit: (chunk: T, order: ChunkOrder) => Promise<void>,
    private readonly depth = 1,
  ) {}

  /** Waits until another chunk may start (the last one sent, fewer than `depth` in flight); throws a failed chunk's error. */
  async ready(): Promise<void> {
    await this.committing[this.committing.length - 1]?.sent;
    while (this.committing.length >= this.depth) await this.settleFirst();
  }

  /** Waits for every chunk in flight; throws the first failed one's error. */
  async settle(): Promise<void> {
    while (this.committing.length > 0) await this.settleFirst();
  }

  /** Starts committing `chunk`: call it once `ready` has returned. */
  start(chunk: T): void {
    const previous = this.committing[this.committing.length - 1]?.done ?? Promise.resolve(true);
    let sent!: () => void;
    const entry: Committing = { done: Promise.resolve(true), sent: new Promise<void>((resolve) => (sent = resolve)), failure: null };
    entry.done = this.commit(chunk, { previous, sent }).then(
      () => true,
      (error: unknown) => {
        entry.failure = { error };
        return false;
      },
    );
    void entry.done.then(sent);
    this.committing.push(entry);
  }

  private async settleFirst(): Promise<void> {
    const first = this.committing[0];
    await first.done;
    this.committing.shift();
    if (first.failure) {
      // The chunks after it end too (abandoned, or failing for its sake): theirs are not the error.
      const rest = this.committing.splice(0);
      await Promise.all(rest.map((entry) => entry.done));
      throw first.failure.error;
    }
  }
}
