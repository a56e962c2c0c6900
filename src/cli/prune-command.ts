import { InvalidArgumentError as CommanderArgumentError } from 'commander';
import type { DataSource } from 'typeorm';
import { prune, PRUNE_KINDS, type PruneKind } from '../control/prune';
import { type Outcome, success } from './outcome';

/** Options of `prune`, as commander parses them. */
export interface PruneCommandOptions {
  olderThan: number;
  kinds?: PruneKind[];
  dryRun?: boolean;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration such as `30d`, `12h`, `90m`, `45s` or `500ms`, in milliseconds; a usage error unless positive. */
export function parseDuration(value: string): number {
  const match = /^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)$/.exec(value.trim());
  const ms = match ? Number(match[1]) * UNIT_MS[match[2]] : NaN;
  if (!Number.isFinite(ms) || ms <= 0) {
    throw new CommanderArgumentError('expected a positive duration such as 30d, 12h, 90m, 45s or 500ms.');
  }
  return ms;
}

/** `--kinds jobs,files`: comma-separated kinds of `prune`; a usage error for an unknown one. */
export function parseKinds(value: string): PruneKind[] {
  const kinds = value.split(',').map((kind) => kind.trim());
  const unknown = kinds.find((kind) => !(PRUNE_KINDS as readonly string[]).includes(kind));
  if (unknown !== undefined) throw new CommanderArgumentError(`unknown kind "${unknown}"; the kinds are ${PRUNE_KINDS.join(', ')}.`);
  return kinds as PruneKind[];
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/**
 * `prune --older-than 30d [--kinds jobs,files] [--dry-run]`: deletes (with `--dry-run`, counts)
 * the records of work that ended before the cut-off, at most 1,000 rows per transaction.
 */
export async function pruneCommand(db: DataSource, options: PruneCommandOptions): Promise<Outcome> {
  const result = await prune(db, { olderThan: options.olderThan, kinds: options.kinds, dryRun: options.dryRun === true });
  const verb = result.dryRun ? 'Would prune' : 'Pruned';
  const text = [
    `${verb} ${plural(result.jobs, 'job')} (${plural(result.ranges, 'range')}), ${plural(result.imports, 'import batch', 'import batches')}` +
      ` (${plural(result.rejects, 'reject')}), ${plural(result.files, 'file')} and ${plural(result.steps, 'step')}` +
      ` that ended before ${new Date(result.before).toISOString()}.`,
  ];
  return success({ command: 'prune', olderThanMs: options.olderThan, ...result }, text);
}
