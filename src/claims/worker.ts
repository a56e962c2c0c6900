import type { EntityManager } from 'typeorm';
import type { FileCheckpoint } from '../../entities/FileCheckpoint';
import { ClaimLostError, InvalidArgumentError } from '../core/errors';
import { type Progress, progressSince } from '../core/progress';
import { recordThrottleWait, recording, type SpanScope, traced } from '../core/telemetry';
import { askThrottle, type Throttle } from '../control/throttle';
import { TransactionLane } from '../core/transaction-lane';
import { checkCount, checkFileType, checkStats } from './claim-arguments';
import type { Claimant, ClaimStore, HeldClaim, NextClaim, ProcessingStats, Subscription } from './claim-store';

/** What a handler returns; without `durationMs` the measured duration is stored. */
export type HandlerStats = Omit<ProcessingStats, 'durationMs'> & {
  /** Processing time in milliseconds; default: the time the handler took. */
  durationMs?: number;
};

/** What a {@link FileHandler} gets besides the file and its transaction. */
export interface FileHandlerContext {
  /**
   * Aborts when the file is cancelled (`CheckpointManager.cancel`) while the handler runs, as soon
   * as the worker learns of it — at the latest at its next heartbeat. The completion is then
   * refused and the handler's writes roll back, whether it returns or throws.
   */
  signal: AbortSignal;
}

/** Processes one claimed file; writes through `tx` commit with the file's fenced completion. */
export type FileHandler = (
  file: FileCheckpoint,
  tx: EntityManager | undefined,
  ctx: FileHandlerContext,
) => Promise<HandlerStats> | HandlerStats;

/** Options of {@link CheckpointManager.work}. */
export interface WorkOptions {
  /** Files in flight in this process (default 1). */
  concurrency?: number;
  /** Files claimed per `claimNext` (default 10). */
  batchSize?: number;
  /** Files committed per transaction (default 1): see "Chunked commits" in the README. */
  commitEvery?: number;
  /** Only files of this type. Default: any type. */
  fileType?: string;
  /** Idle poll interval (default 1000 ms), jittered by ±20 % so idle workers do not poll in step. */
  pollMs?: number;
  /** Stop when nothing is claimable and nothing is in flight (default false: keep polling). */
  drain?: boolean;
  /** Aborting it is `worker.stop()`. */
  signal?: AbortSignal;
  /** Hears every failure: a handler's error, a lost claim, a failing claim or heartbeat statement. */
  onError?(error: unknown, file?: FileCheckpoint): void;
  /** After each committed file or chunk; `items` is the files processed so far. */
  onProgress?(progress: Progress): void;
  /**
   * Asked before each claim: the milliseconds to wait first (0: go on), outside any transaction;
   * `name` is the file type claimed (`*` for any), `batches` the claims so far, `items` the files
   * processed so far. The wait ends early on `stop()` or `signal`. A throttle that throws, or
   * returns anything but a finite number ≥ 0 (`INVALID_ARGUMENT`), stops the worker; `onError`
   * hears why. See {@link rowsPerSecond}.
   */
  throttle?: Throttle;
}

/** What a {@link Worker} did, from its start until it stopped. */
export interface WorkerSummary {
  /** Files completed by this worker. */
  processed: number;
  /** Failed attempts (the handler threw). */
  failed: number;
  /** Files cancelled (`CheckpointManager.cancel`) while this worker ran them: their completion was refused. */
  cancelled: number;
  /** Completions refused with CLAIM_LOST (other than cancelled files). */
  claimLost: number;
  /** Milliseconds from the worker's start until it stopped. */
  elapsedMs: number;
}

/** A running claim loop, as {@link CheckpointManager.work} returns it. */
export interface Worker {
  /** Claims nothing more, finishes the files in flight, gives the unstarted ones back. */
  stop(): Promise<WorkerSummary>;
  /** Settles when the worker has stopped (stop(), signal or drain). */
  readonly done: Promise<WorkerSummary>;
  /** Handlers in flight now. */
  readonly running: number;
}

/** What the worker needs from its manager: the store for each call and the claimant's terms. */
export interface WorkerHost {
  claimant: Claimant;
  store(): ClaimStore;
}

export const DEFAULT_POLL_MS = 1000;
const DEFAULT_BATCH_SIZE = 10;

/** A file this worker holds: claimed, then waiting its turn or running. */
interface Held extends HeldClaim {
  file: FileCheckpoint;
  /** Set when a heartbeat found the claim gone (or cancelled): a waiting file is then dropped unstarted. */
  lost: boolean;
  /** Set when a heartbeat found the file cancelled; its handler's signal aborts with it. */
  cancelled: boolean;
  readonly context: FileContext;
}

/**
 * A file's handler context. Its signal's AbortController is made when the handler first reads it:
 * one made for every file was the largest single cost `work()` added to a file's Node CPU (about
 * 5 µs of 290; AbortController and its signal are EventTargets).
 */
class FileContext implements FileHandlerContext {
  private controller: AbortController | undefined;
  private cancelled = false;

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.cancelled) this.controller.abort();
    }
    return this.controller.signal;
  }

  /** Aborts the signal: now, or as the handler first reads it. */
  cancel(): void {
    this.cancelled = true;
    this.controller?.abort();
  }
}

function storableMessage(message: string): string {
  return message.replace(/\0/g, '\uFFFD');
}

function checkOptions(options: WorkOptions): Required<Pick<WorkOptions, 'concurrency' | 'batchSize' | 'commitEvery' | 'pollMs' | 'drain'>> {
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('work: options must be an object.');
  const concurrency = options.concurrency ?? 1;
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
  const commitEvery = options.commitEvery ?? 1;
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS;
  checkCount(concurrency, 'work: concurrency', { min: 1 });
  checkCount(batchSize, 'work: batchSize', { min: 1 });
  checkCount(commitEvery, 'work: commitEvery', { min: 1 });
  checkCount(pollMs, 'work: pollMs', { min: 0 });
  if (options.fileType !== undefined) checkFileType(options.fileType);
  if (options.drain !== undefined && typeof options.drain !== 'boolean') throw new InvalidArgumentError('work: drain must be a boolean.');
  for (const name of ['onError', 'onProgress', 'throttle'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function')
      throw new InvalidArgumentError(`work: ${name} must be a function.`);
  }
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw new InvalidArgumentError('work: signal must be an AbortSignal.');
  }
  return { concurrency, batchSize, commitEvery, pollMs, drain: options.drain ?? false };
}

/**
 * The claim loop every user would otherwise write: claim `batchSize` files, run `concurrency`
 * tasks (one file, or a chunk of `commitEvery` files, per transaction), heartbeat every held file,
 * sleep `pollMs` (or until a wake-up) when idle, and stop gracefully.
 */
export function startWorker(host: WorkerHost, handler: FileHandler, options: WorkOptions = {}): Worker {
  if (typeof handler !== 'function') throw new InvalidArgumentError('work: handler must be a function.');
  const settings = checkOptions(options);
  return new FileWorker(host, handler, options, settings);
}

class FileWorker implements Worker {
  readonly done: Promise<WorkerSummary>;
  private readonly startedAt = Date.now();
  private readonly summary: WorkerSummary = { processed: 0, failed: 0, cancelled: 0, claimLost: 0, elapsedMs: 0 };
  private batches = 0;
  private stopping = false;
  /** Claimed, not started, in claim order. */
  private readonly waiting: Held[] = [];
  /** Every file held: waiting or running. */
  private readonly held = new Map<string, Held>();
  private readonly tasks = new Set<Promise<void>>();
  /**
   * Lanes of finished tasks, for the next ones: one kept runner per slot while files follow one
   * another, closed whenever the loop waits for anything else (a claim, a wake-up, the end).
   */
  private readonly freeLanes: TransactionLane[] = [];
  private runningFiles = 0;
  /** Ends the current idle wait (a wake-up, a finished task, stop()). */
  private nudge: (() => void) | undefined;
  /** A wake-up that came while not idle: claim again before sleeping. */
  private woken = false;
  private heartbeating = false;
  /** The store claims the next files with a finishing task's commit (see `next`), so a busy loop need not claim. */
  private claimsWithCommit = false;
  /** The loop's own claim is in flight: finishing tasks claim nothing meanwhile. */
  private claiming = false;
  /** A failed heartbeat is retried after `pollMs`, not only at the next regular beat. */
  private heartbeatRetry: NodeJS.Timeout | undefined;
  /** Ends a throttle's wait (stop()). */
  private stopWaits: (() => void) | undefined;
  /** Claims made so far (the throttle's `batches`). */
  private claims = 0;
  private ended = false;

  constructor(
    private readonly host: WorkerHost,
    private readonly handler: FileHandler,
    private readonly options: WorkOptions,
    private readonly settings: ReturnType<typeof checkOptions>,
  ) {
    this.next = {
      // With a throttle every claim goes through the loop, which asks it first.
      limit: () => (this.stopping || this.claiming || this.waiting.length > 0 || options.throttle ? 0 : this.settings.batchSize),
      fileType: options.fileType,
      get claimant() {
        return host.claimant;
      },
      claimed: (files) => this.hold(files),
      failed: (error) => this.report(error),
    };
    this.done = this.run();
  }

  get running(): number {
    return this.runningFiles;
  }

  stop(): Promise<WorkerSummary> {
    this.stopping = true;
    this.stopWaits?.();
    this.wake();
    return this.done;
  }

  private wake(): void {
    this.woken = true;
    const nudge = this.nudge;
    this.nudge = undefined;
    nudge?.();
  }

  private report(error: unknown, file?: FileCheckpoint): void {
    try {
      this.options.onError?.(error, file);
    } catch {
      // A throwing onError must not end the worker: the loop outlives its observers' bugs.
    }
  }

  /** Waits until `ms` pass or something wakes the worker. */
  private idle(ms: number): Promise<void> {
    if (this.stopping) return Promise.resolve();
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = ms === Infinity ? undefined : setTimeout(() => this.wake(), ms);
      this.nudge = () => {
        if (timer) clearTimeout(timer);
        this.woken = false;
        resolve();
      };
    });
  }

  /** Asks the throttle before a claim and waits what it says (until `stop()` ends the wait). */
  private async throttled(throttle: Throttle): Promise<void> {
    const ms = await askThrottle(
      throttle,
      { name: this.options.fileType ?? '*', batches: this.claims, items: this.summary.processed },
      'work()',
    );
    if (ms === 0 || this.stopping) return;
    const began = Date.now();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.stopWaits = done;
    });
    this.stopWaits = undefined;
    recordThrottleWait(Date.now() - began, this.options.fileType ?? '*');
  }

  private jittered(): number {
    return this.settings.pollMs * (0.8 + 0.4 * Math.random());
  }

  private async run(): Promise<WorkerSummary> {
    const { signal } = this.options;
    const onAbort = () => void this.stop();
    if (signal?.aborted) this.stopping = true;
    signal?.addEventListener('abort', onAbort);
    let subscription: Subscription | undefined;
    try {
      const store = this.host.store();
      this.claimsWithCommit = this.options.throttle === undefined && (store.claimsWithCommit?.() ?? false);
      subscription = store.subscribe?.(
        () => this.wake(),
        (error) => this.report(error),
      );
    } catch (error) {
      this.report(error);
    }
    const heartbeats = setInterval(() => void this.heartbeat(), Math.max(1, Math.floor(this.host.claimant.leaseMs / 3)));
    try {
      await this.loop();
    } finally {
      this.ended = true;
      clearInterval(heartbeats);
      clearTimeout(this.heartbeatRetry);
      signal?.removeEventListener('abort', onAbort);
      await subscription?.close();
    }
    this.summary.elapsedMs = Date.now() - this.startedAt;
    return { ...this.summary };
  }

  private async loop(): Promise<void> {
    const { concurrency, commitEvery, drain } = this.settings;
    while (!this.stopping) {
      const full = this.tasks.size >= concurrency;
      if (this.waiting.length > 0) {
        if (full) await this.idle(Infinity);
        else this.start(this.waiting.splice(0, commitEvery));
        continue;
      }
      // Nothing waiting. Where the store claims with a finishing task's commit, every slot being busy,
      // that commit brings the next batch in its own round trip: wait for it. Otherwise claim the
      // next batch now, even while every slot is busy, so the claim's round trip overlaps the files
      // in flight instead of leaving a slot idle. Idle slots hold no connection meanwhile: the claim
      // may need one from the same pool.
      if (full && this.claimsWithCommit) {
        await this.idle(Infinity);
        continue;
      }
      await this.closeLanes();
      if (this.options.throttle) {
        try {
          await this.throttled(this.options.throttle);
        } catch (error) {
          // A throttle that throws or says something else than a wait stops the worker (onError hears why).
          this.report(error);
          this.stopping = true;
        }
        if (this.stopping) break;
      }
      let claimed: FileCheckpoint[];
      this.claiming = true;
      try {
        this.woken = false;
        claimed = await this.host.store().claimNext(this.settings.batchSize, this.options.fileType, this.host.claimant, Date.now());
        this.claims++;
      } catch (error) {
        this.report(error);
        await this.idle(this.jittered());
        continue;
      } finally {
        this.claiming = false;
      }
      this.hold(claimed);
      // A finishing task's commit may have claimed files meanwhile (see `next`): they are this worker's too.
      if (claimed.length > 0 || this.waiting.length > 0 || this.stopping) continue;
      // Nothing claimable: a draining worker ends once its own files are settled (a failed one may
      // be claimable again); otherwise sleep until the poll interval, a wake-up or a finished task.
      if (drain && this.tasks.size === 0) break;
      await this.idle(drain ? Infinity : this.jittered());
    }
    await this.giveBack();
    await Promise.all(this.tasks);
    // Files the commit of a task still in flight claimed.
    await this.giveBack();
    await this.closeLanes();
  }

  /** Holds claimed files, to be started in claim order. */
  private hold(claimed: FileCheckpoint[]): void {
    for (const file of claimed) {
      const held: Held = {
        fileUrl: file.fileUrl,
        token: file.claimToken,
        file,
        lost: false,
        cancelled: false,
        context: new FileContext(),
      };
      this.held.set(file.fileUrl, held);
      this.waiting.push(held);
    }
  }

  /**
   * The next batch's claim a finishing task sends with its commit where the store can: only when
   * nothing waits, the loop is not claiming itself and the worker is not stopping.
   */
  private readonly next: NextClaim;

  private async closeLanes(): Promise<void> {
    await Promise.all(this.freeLanes.map((lane) => lane.close()));
  }

  /** Whether a file waits to be started now: then a finishing transaction opens the next one with its COMMIT. */
  private readonly followsAtOnce = (): boolean => this.waiting.length > 0 && !this.stopping;

  /** Returns the claimed, unstarted files to the queue (a failure leaves them to their leases). */
  private async giveBack(): Promise<void> {
    const unstarted = this.waiting.splice(0).filter((held) => !held.lost);
    for (const held of unstarted) this.held.delete(held.fileUrl);
    if (unstarted.length === 0) return;
    try {
      await this.host.store().release(unstarted.map(({ fileUrl, token }) => ({ fileUrl, token })));
    } catch (error) {
      this.report(error);
    }
  }

  private start(files: Held[]): void {
    const live = files.filter((held) => {
      if (held.lost) this.held.delete(held.fileUrl);
      return !held.lost;
    });
    if (live.length === 0) return;
    // Commits that do not wait for their WAL flush: a database crash can lose the last of them only
    // whole (the handler's writes with the completion), and those files run again (README, Guarantees).
    const lane = this.freeLanes.pop() ?? new TransactionLane(this.followsAtOnce, { asynchronousCommit: true });
    const task = (live.length === 1 ? this.runOne(live[0], lane) : this.runChunk(live, lane)).finally(async () => {
      if (!this.followsAtOnce()) await lane.close();
      this.freeLanes.push(lane);
      this.tasks.delete(task);
      this.wake();
    });
    this.tasks.add(task);
  }

  private progress(files: number): void {
    this.summary.processed += files;
    this.batches += 1;
    if (!this.options.onProgress) return;
    try {
      this.options.onProgress(
        progressSince(this.startedAt, { name: this.host.claimant.workerId, batches: this.batches, items: this.summary.processed }),
      );
    } catch (error) {
      this.report(error);
    }
  }

  /** One file in its own transaction, under processFile's rules. */
  private async runOne(held: Held, lane: TransactionLane): Promise<void> {
    if (held.cancelled) {
      // Cancelled while its chunk ran (which then rolled back): it does not run again.
      this.summary.cancelled += 1;
      this.held.delete(held.fileUrl);
      return;
    }
    let store: ClaimStore;
    try {
      store = this.host.store();
    } catch (error) {
      // No store to run it against (a getter failing): its lease frees the file for another worker.
      this.held.delete(held.fileUrl);
      this.report(error, held.file);
      return;
    }
    this.runningFiles += 1;
    try {
      await traced('file', this.fileAttributes(held), async (span) => {
        fileCommitted(span, await store.completeWith(held.fileUrl, held.token, (tx) => this.handle(held, tx), lane, this.next));
      });
      this.progress(1);
    } catch (error) {
      await this.settleRefused(store, held, error);
    } finally {
      this.runningFiles -= 1;
      this.held.delete(held.fileUrl);
    }
  }

  /**
   * Several files in one transaction, completed by one fenced statement. Any failure rolls the
   * chunk back and its files run again one per transaction, so only the failing file fails.
   */
  private async runChunk(files: Held[], lane: TransactionLane): Promise<void> {
    let chunked = false;
    const spans = recording() ? new ChunkSpans() : undefined;
    try {
      await this.host.store().completeAll(
        files,
        async (tx) => {
          const stats: ProcessingStats[] = [];
          for (const held of files) {
            // One handler in flight at a time: `running` counts it, not the whole chunk.
            this.runningFiles += 1;
            try {
              const handle = () => this.handle(held, tx);
              stats.push(await (spans ? spans.run(this.fileAttributes(held), handle) : handle()));
            } finally {
              this.runningFiles -= 1;
            }
          }
          return stats;
        },
        lane,
        this.next,
      );
      chunked = true;
      this.progress(files.length);
    } catch {
      // Which file failed, and why, is found by running each on its own below.
    } finally {
      await spans?.settle(chunked);
    }
    if (chunked) {
      for (const held of files) this.held.delete(held.fileUrl);
      return;
    }
    for (const held of files) await this.runOne(held, lane);
  }

  /**
   * Counts a file whose completion did not commit: cancelled (known from a heartbeat, or read back
   * now — only on this rare path, never on the claim path), lost, or failed by its handler.
   */
  private async settleRefused(store: ClaimStore, held: Held, error: unknown): Promise<void> {
    const cancelled = async () => held.cancelled || (await this.cancelledMeanwhile(store, held));
    if (error instanceof ClaimLostError) {
      if (await cancelled()) this.summary.cancelled += 1;
      else {
        this.summary.claimLost += 1;
        this.report(error, held.file);
      }
      return;
    }
    const message = storableMessage(error instanceof Error ? error.message : String(error));
    // If marking the failure fails too, the lease still frees the file for another attempt.
    const failed = held.cancelled
      ? false
      : await store.fail(held.fileUrl, held.token, message).catch((failure: unknown) => {
          this.report(failure, held.file);
          return true;
        });
    if (!failed && (await cancelled())) {
      this.summary.cancelled += 1;
      return;
    }
    this.summary.failed += 1;
    this.report(error, held.file);
  }

  /** Whether the file was cancelled under this worker's claim (its row cancelled with the token it holds). */
  private async cancelledMeanwhile(store: ClaimStore, held: Held): Promise<boolean> {
    try {
      const row = await store.get(held.fileUrl, Date.now());
      return row?.status === 'cancelled' && row.claimToken === held.token;
    } catch (error) {
      this.report(error, held.file);
      return false;
    }
  }

  /** Runs the handler on one file in `tx`: its stats, with the measured duration where it gave none. */
  private async handle(held: Held, tx: EntityManager | undefined): Promise<ProcessingStats> {
    const started = Date.now();
    return checkStats(await this.handler(held.file, tx, held.context), Date.now() - started);
  }

  /** The attributes of a file's `checkpoint.file` span, as processFile's. */
  private fileAttributes(held: Held): Record<string, string> {
    return { file_url: held.fileUrl, file_type: held.file.fileType, worker: this.host.claimant.workerId };
  }

  /** Extends the lease of every file held, waiting or running; a refused one is marked lost. */
  private async heartbeat(): Promise<void> {
    if (this.heartbeating || this.held.size === 0) return;
    this.heartbeating = true;
    let failed = false;
    try {
      // One statement for every file held, however many: the heartbeat's cost does not grow with concurrency.
      const beating = [...this.held.values()].filter((held) => !held.lost);
      const { kept, cancelled } = await this.host.store().heartbeatAll(beating, Date.now() + this.host.claimant.leaseMs);
      for (const held of beating) {
        if (kept.has(held.fileUrl) || this.held.get(held.fileUrl) !== held) continue;
        held.lost = true;
        if (!cancelled.has(held.fileUrl)) continue;
        held.cancelled = true;
        held.context.cancel();
      }
    } catch (error) {
      failed = true;
      this.report(error);
    } finally {
      this.heartbeating = false;
    }
    if (failed && !this.ended && this.heartbeatRetry === undefined) {
      this.heartbeatRetry = setTimeout(() => {
        this.heartbeatRetry = undefined;
        void this.heartbeat();
      }, this.jittered());
    }
  }
}

/** A file's span after its completion committed: claimed, with the rows it persisted. */
function fileCommitted(span: SpanScope, stats: ProcessingStats): void {
  span.set({ claimed: true });
  span.committed(stats.persistedRows, false);
}

/**
 * The files of one chunk as `checkpoint.file` spans (their handlers' spans nest under them), each
 * ended when the chunk's transaction ends: committed, or 'ok' when the chunk rolled back for
 * another file's failure (a failing handler fails its own span); the files of a rolled-back chunk
 * then run again, each in a span of its own.
 */
class ChunkSpans {
  private readonly ended: Promise<unknown>[] = [];
  private readonly outcome = settlement<boolean>();

  /** Runs `handle` in a file's span; resolves with its stats once the handler returned (the span stays open). */
  run(attributes: Record<string, string>, handle: () => Promise<ProcessingStats>): Promise<ProcessingStats> {
    const handled = settlement<ProcessingStats>();
    const span = traced('file', attributes, async (scope) => {
      const stats = await handle();
      handled.resolve(stats);
      if (await this.outcome.promise) fileCommitted(scope, stats);
    });
    this.ended.push(span.catch((error: unknown) => handled.reject(error)));
    return handled.promise;
  }

  /** Ends every span: the chunk committed or not. */
  async settle(committed: boolean): Promise<void> {
    this.outcome.resolve(committed);
    await Promise.all(this.ended);
  }
}

/** A promise with its resolve and reject; a rejection nobody awaits is not reported as unhandled. */
function settlement<T>(): { promise: Promise<T>; resolve(value: T): void; reject(error: unknown): void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}
