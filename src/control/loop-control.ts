import { InvalidArgumentError } from '../core/errors';
import { controlEvent, recordThrottleWait } from '../core/telemetry';
import { type Db, dataSourceOf, transact } from '../core/transaction';
import { dialectOf } from '../dialect';
import { addThrottled, type ControlTable, markThrottled, readState } from './control-store';
import { onControlChange } from './control-wakeups';
import { stopFor, type StopReason } from './job-state';
import { askThrottle, type Throttle } from './throttle';

/** How often a waiting call reads its job's state at least (a resume on PostgreSQL wakes it at once). */
const CHECK_EVERY_MS = 1000;
/** A throttle wait longer than this is written on the row as it begins (`throttled_until`), for the dashboard to show. */
const SHOWN_WAIT_MS = 1000;

/** The options every long loop takes to be operated: `eachBatch`, `eachPartition`, `importFile`. */
export interface ControlOptions {
  /** Stops cleanly after the batch in flight commits (`stopped: 'signal'`). */
  signal?: AbortSignal;
  /** Once the call has run this long (ms, > 0), it returns after the batch in flight with `stopped: 'time'`; the next call goes on. */
  maxRuntimeMs?: number;
  /** Asked before each batch how many milliseconds to wait first (see {@link Throttle}, {@link rowsPerSecond}). */
  throttle?: Throttle;
  /** What a call does while its job is paused: return at once with `stopped: 'paused'` (`'return'`, the default), or wait until it is resumed (`'wait'`). */
  whilePaused?: 'return' | 'wait';
}

/** Checks the control options; `what` names the function in the message. */
export function validateControlOptions(options: ControlOptions, what: string): void {
  const { maxRuntimeMs, throttle, whilePaused, signal } = options;
  if (maxRuntimeMs !== undefined && (typeof maxRuntimeMs !== 'number' || !(maxRuntimeMs > 0) || !Number.isFinite(maxRuntimeMs))) {
    throw new InvalidArgumentError(`${what}: maxRuntimeMs must be a positive number of milliseconds, got ${String(maxRuntimeMs)}.`);
  }
  if (throttle !== undefined && typeof throttle !== 'function') throw new InvalidArgumentError(`${what}: throttle must be a function.`);
  if (whilePaused !== undefined && whilePaused !== 'return' && whilePaused !== 'wait') {
    throw new InvalidArgumentError(`${what}: whilePaused must be 'return' or 'wait', got ${String(whilePaused)}.`);
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new InvalidArgumentError(`${what}: signal must be an AbortSignal.`);
}

/**
 * The control plane of one call of a long loop, asked between its batches (never inside one):
 * its own limits (`signal`, `maxRuntimeMs`), its throttle, and what to do when its job's row says
 * paused or cancelled — the state the loop reads in the statement it runs before each batch anyway.
 */
export class LoopControl {
  readonly startedAt = Date.now();
  /** The start on the monotonic clock, which `maxRuntimeMs` is measured on. */
  private readonly began = performance.now();

  constructor(
    private readonly db: Db,
    private readonly target: ControlTable,
    private readonly name: string,
    private readonly options: ControlOptions,
  ) {}

  /** The call's own limits, as after a committed batch: `'signal'` when aborted, `'time'` once `maxRuntimeMs` has passed. */
  limit(): 'signal' | 'time' | undefined {
    if (this.options.signal?.aborted) return 'signal';
    const { maxRuntimeMs } = this.options;
    return maxRuntimeMs !== undefined && performance.now() - this.began >= maxRuntimeMs ? 'time' : undefined;
  }

  /** True when the next batch may begin with this one's commit: no limit reached and nothing to wait for between them. */
  followsAtOnce(): boolean {
    return this.limit() === undefined && this.options.throttle === undefined;
  }

  /**
   * The loop found its row paused or cancelled (`stop`) — before its first batch or between two.
   * Undefined to go on: only after a pause, with `whilePaused: 'wait'`, once the job is resumed.
   * Otherwise why the call returns: the state, or with a wait cut short, `'signal'`, `'time'` or `'cancelled'`.
   */
  async stopped(stop: 'paused' | 'cancelled'): Promise<StopReason | undefined> {
    controlEvent('stop', { job: this.name, reason: stop });
    if (stop === 'cancelled' || this.options.whilePaused !== 'wait') return stop;
    const ended = await this.waitFor(Infinity, true);
    return ended === 'elapsed' ? undefined : ended;
  }

  /**
   * Before a batch, outside any transaction (`leave` ends one begun ahead, and settles what is in
   * flight, before any wait): after the first batch the call's limits; then the throttle's wait
   * (recorded on the row as throttled time); then, where the database has one writer at a time and
   * an operator's write (a pause from another process) knocks, the lock left free for it.
   * Why to stop, or undefined to go on.
   */
  async beforeBatch(
    done: { batches: number; items: number; begun?: boolean },
    leave: () => Promise<void> = async () => undefined,
  ): Promise<StopReason | undefined> {
    if (this.options.signal?.aborted) return 'signal';
    // `begun`: a batch of this call is in flight, not committed yet (a pipelined import's).
    if (done.batches > 0 || done.begun) {
      const limit = this.limit();
      if (limit) return limit;
    }
    const { throttle } = this.options;
    if (throttle) {
      const ended = await this.throttled(throttle, done, leave);
      if (ended) return ended;
    }
    const knock = dialectOf(dataSourceOf(this.db)).writerKnock;
    if (done.batches > 0 && knock?.isKnocked(dataSourceOf(this.db))) {
      await leave();
      await knock.yieldTo(dataSourceOf(this.db));
    }
    return undefined;
  }

  /**
   * Asks the throttle and waits what it says; a throttle marked `untilZero` (`replicaLag`'s) is
   * asked again until it says 0, so it holds the next batch back for as long as its condition lasts. The time
   * waited is written to the row once, after the waits: a write per wait would itself be WAL
   * that a lagging replica has to replay. Why to stop, or undefined to go on.
   */
  private async throttled(
    throttle: Throttle,
    done: { batches: number; items: number },
    leave: () => Promise<void>,
  ): Promise<StopReason | undefined> {
    let waited = 0;
    let marked = false;
    let ended: 'elapsed' | StopReason = 'elapsed';
    for (;;) {
      const ms = await askThrottle(throttle, { name: this.name, batches: done.batches, items: done.items }, `"${this.name}"`);
      if (ms === 0) break;
      if (waited === 0) await leave();
      const began = Date.now();
      // Only a long wait costs a statement more: short waits end before a page could show them.
      if (ms > SHOWN_WAIT_MS) {
        await transact(this.db, (tx) => markThrottled(tx, this.target, this.name, began + ms));
        marked = true;
      }
      ended = await this.waitFor(ms, false);
      const wait = Date.now() - began;
      recordThrottleWait(wait, this.name);
      waited += wait;
      if (ended !== 'elapsed' || !throttle.untilZero) break;
    }
    if (waited > 0 || marked) await transact(this.db, (tx) => addThrottled(tx, this.target, this.name, waited));
    if (ended === 'paused' || ended === 'cancelled') return this.stopped(ended);
    return ended === 'elapsed' ? undefined : ended;
  }

  /**
   * Waits `ms` (Infinity: until the state changes), outside any transaction, reading the row's
   * state at least once a second (at once when a control change is notified); `untilActive`: the
   * row is paused, and the wait ends when it no longer is. What ended it.
   */
  private async waitFor(ms: number, untilActive: boolean): Promise<'elapsed' | StopReason> {
    const { signal, maxRuntimeMs } = this.options;
    const until = Date.now() + ms;
    const deadline = maxRuntimeMs === undefined ? Infinity : Date.now() + maxRuntimeMs - (performance.now() - this.began);
    let wake: (() => void) | undefined;
    // Only a wait for a resume listens: a throttle's short waits would open a connection each.
    const stopListening = untilActive ? onControlChange(dataSourceOf(this.db), () => wake?.()) : undefined;
    try {
      for (;;) {
        if (signal?.aborted) return 'signal';
        const now = Date.now();
        if (now >= deadline) return 'time';
        if (!untilActive && now >= until) return 'elapsed';
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.min(CHECK_EVERY_MS, until - now, deadline - now));
          function done() {
            clearTimeout(timer);
            signal?.removeEventListener('abort', done);
            wake = undefined;
            resolve();
          }
          wake = done;
          signal?.addEventListener('abort', done);
        });
        if (signal?.aborted) return 'signal';
        if (!untilActive && Date.now() >= until) return 'elapsed';
        const stop = stopFor({ state: await transact(this.db, (tx) => readState(tx, this.target, this.name)) });
        if (untilActive ? stop !== 'paused' : stop !== undefined) return stop ?? 'elapsed';
      }
    } finally {
      await stopListening?.();
    }
  }
}
