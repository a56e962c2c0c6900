/**
 * One chunk commits while the next one is read and converted, so the database and the reader work
 * side by side; chunks still commit one after the other, in order. The first error of a commit is
 * raised by the next `settle`.
 */
export class ChunkInFlight<T> {
  private committing: Promise<void> | null = null;
  private failure: { error: unknown } | null = null;

  constructor(private readonly commit: (chunk: T) => Promise<void>) {}

  /** Waits for the chunk in flight; throws its error, if it failed. */
  async settle(): Promise<void> {
    await this.committing;
    this.committing = null;
    if (this.failure) throw this.failure.error;
  }

  /** Starts committing `chunk`: call it once `settle` has returned. */
  start(chunk: T): void {
    this.committing = this.commit(chunk).catch((error: unknown) => void (this.failure ??= { error }));
  }
}
