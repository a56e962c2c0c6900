import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { type BeforeApplicationShutdown, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { releaseLease, takeLease } from '../control/lease';
import { PRUNE_KINDS, type PruneKind } from '../control/prune';
import { InvalidArgumentError } from '../core/errors';
import type { CheckpointService } from './checkpoint-service';

/** Options of the module's `retention`: prune on a timer, in one application instance at a time. */
export interface RetentionOptions {
  /** Prune what ended more than this many milliseconds ago (`prune`'s `olderThan`). */
  olderThanMs: number;
  /** How often to prune, in milliseconds. */
  everyMs: number;
  /** What to prune (`prune`'s `kinds`; default `['jobs', 'imports', 'files']`). */
  kinds?: PruneKind[];
}

/** The lease every instance of the application competes for: its holder prunes. */
export const RETENTION_LEASE = 'retention';

function positive(value: unknown, name: string): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new InvalidArgumentError(`CheckpointModule retention: ${name} must be a positive number of milliseconds, got ${String(value)}.`);
  }
}

/** Throws `INVALID_ARGUMENT` unless `retention` is a valid {@link RetentionOptions}. */
export function checkRetentionOptions(retention: unknown): asserts retention is RetentionOptions {
  if (typeof retention !== 'object' || retention === null) {
    throw new InvalidArgumentError('CheckpointModule retention must be an object { olderThanMs, everyMs }.');
  }
  const { olderThanMs, everyMs, kinds } = retention as Partial<RetentionOptions>;
  positive(olderThanMs, 'olderThanMs');
  positive(everyMs, 'everyMs');
  if (kinds !== undefined && (!Array.isArray(kinds) || kinds.some((kind) => !PRUNE_KINDS.includes(kind)))) {
    throw new InvalidArgumentError(`CheckpointModule retention: kinds must be an array of ${PRUNE_KINDS.join(', ')}.`);
  }
}

/**
 * Prunes every `everyMs` while the application runs, in one instance at a time: each tick takes
 * or renews the lease `retention` (held for two periods, so a holder that stops renewing is
 * replaced after at most that), and only its holder prunes. Started on application bootstrap;
 * stopped before shutdown closes the data source (a prune in flight finishes, the lease is given up).
 */
export class RetentionHost implements OnApplicationBootstrap, BeforeApplicationShutdown {
  /** This instance's id in the lease: host, process and a random part (two apps in one process differ). */
  readonly holder = `${hostname()}:${process.pid}:${randomUUID()}`;
  private readonly logger = new Logger('CheckpointRetention');
  private timer: NodeJS.Timeout | undefined;
  private tick: Promise<void> | undefined;
  private stopped = false;
  private held = false;

  constructor(
    private readonly service: CheckpointService,
    private readonly retention: RetentionOptions | undefined,
  ) {}

  onApplicationBootstrap(): void {
    if (this.retention === undefined) return;
    checkRetentionOptions(this.retention);
    this.schedule(0);
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.tick;
    if (this.held) await releaseLease(this.service.dataSource, RETENTION_LEASE, this.holder);
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.tick = this.prune().finally(() => {
        this.tick = undefined;
        if (!this.stopped) this.schedule(this.retention!.everyMs);
      });
    }, ms);
    // The timer alone does not keep the process alive.
    this.timer.unref();
  }

  private async prune(): Promise<void> {
    const { olderThanMs, everyMs, kinds } = this.retention!;
    try {
      this.held = await takeLease(this.service.dataSource, RETENTION_LEASE, this.holder, 2 * everyMs);
      if (!this.held || this.stopped) return;
      const result = await this.service.prune({ olderThan: olderThanMs, kinds });
      this.logger.log(
        `pruned ${result.jobs} jobs (${result.ranges} ranges), ${result.imports} imports (${result.rejects} rejects), ${result.files} files, ${result.steps} steps`,
      );
    } catch (error) {
      // The next tick tries again; a failure must not end the timer.
      this.logger.error(`prune failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}
