import { AbandonedPipeline, type PipelineGate } from '../dialect';

/** What a chunk's commit learns about the chunk before it. */
export interface ChunkOrder {
  /** Settles once the chunk before has finished: true when it committed (or had nothing to do), false when it failed. */
  previous: Promise<boolean>;
  /**
   * Settles once the chunk before has made its first attempt: true when that one committed. A chunk
   * sent on another connection than the one before commits only then (see `attempted`).
   */
  previousAttempt: Promise<boolean>;
  /** To call once the chunk's first attempt has ended; else the chunk's end counts as its first attempt. */
  attempted(committed: boolean): void;
  /** To call once the chunk's statements are on their way: the next chunk is only sent after that. */
  sent(): void;
}

interface Committing {
  done: Promise<boolean>;
  attempt: Promise<boolean>;
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
    const last = this.committing[this.committing.length - 1];
    const previous = last?.done ?? Promise.resolve(true);
    const previousAttempt = last?.attempt ?? Promise.resolve(true);
    let sent!: () => void;
    let attempted!: (committed: boolean) => void;
    const entry: Committing = {
      done: Promise.resolve(true),
      attempt: new Promise<boolean>((resolve) => (attempted = resolve)),
      sent: new Promise<void>((resolve) => (sent = resolve)),
      failure: null,
    };
    entry.done = this.commit(chunk, { previous, previousAttempt, attempted, sent }).then(
      () => true,
      (error: unknown) => {
        entry.failure = { error };
        return false;
      },
    );
    void entry.done.then((committed) => {
      sent();
      attempted(committed);
    });
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

/**
 * A chunk's attempt beside the chunk before it, which runs on another connection: `attempt` sends
 * the chunk at once and commits it only if that one's attempt committed (`gate`, with `eager`).
 * If that one did not, this one goes again once it has ended, beside nothing — or not at all, when
 * it failed or `stopped()`. True: committed. False: failed on its own (the chunk after it has let
 * go of what it wrote); the caller runs it again as it would alone. Null: not to be written.
 */
export async function commitBeside(
  order: ChunkOrder,
  stopped: () => boolean,
  attempt: (gate: Required<PipelineGate>) => Promise<boolean>,
): Promise<boolean | null> {
  // Once that one committed, its end follows without waiting for the database (its progress is
  // reported then: a stop it brings about is seen here, as on one connection).
  const ended = () => order.previous.then((committed) => committed && !stopped());
  let proceed = order.previousAttempt.then((committed) => committed && ended());
  for (;;) {
    let abandoned = false;
    const committed = await attempt({ proceed, onSent: order.sent, eager: true }).catch((error: unknown) => {
      abandoned = error instanceof AbandonedPipeline;
      return false;
    });
    if (committed || !abandoned) {
      order.attempted(committed);
      return committed;
    }
    if (!(await order.previous) || stopped()) {
      order.attempted(false);
      return null;
    }
    proceed = Promise.resolve(true);
  }
}
