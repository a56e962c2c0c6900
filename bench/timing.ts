import { performance } from 'node:perf_hooks';

export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

export function mean(values: number[]): number {
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}

/** Milliseconds `fn` takes. */
export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

export interface Pair {
  /** Median of the measured candidate's samples. */
  candidate: number;
  /** Median of the baseline's samples. */
  baseline: number;
  /** Median of the per-round ratios candidate / baseline. */
  ratio: number;
  candidateSamples: number[];
  baselineSamples: number[];
}

/**
 * Measures a candidate and its baseline side by side: `warmups` unrecorded rounds, then `repeats`
 * recorded rounds, each round running both (alternating which goes first). On a shared machine the
 * load drifts between rounds, so the ratio is the median of per-round ratios, not a ratio of medians.
 * `measure` returns the figure to compare (e.g. milliseconds); `prepare` runs untimed before each.
 */
export async function sideBySide(options: {
  warmups: number;
  repeats: number;
  candidate: () => Promise<number>;
  baseline: () => Promise<number>;
  prepare?: () => Promise<void>;
}): Promise<Pair> {
  const { warmups, repeats, candidate, baseline, prepare } = options;
  const candidateSamples: number[] = [];
  const baselineSamples: number[] = [];
  const ratios: number[] = [];
  for (let round = 0; round < warmups + repeats; round++) {
    const order = round % 2 === 0 ? (['candidate', 'baseline'] as const) : (['baseline', 'candidate'] as const);
    const figures: Record<'candidate' | 'baseline', number> = { candidate: NaN, baseline: NaN };
    for (const which of order) {
      await prepare?.();
      figures[which] = await (which === 'candidate' ? candidate() : baseline());
    }
    if (round < warmups) continue;
    candidateSamples.push(figures.candidate);
    baselineSamples.push(figures.baseline);
    ratios.push(figures.candidate / figures.baseline);
  }
  return {
    candidate: median(candidateSamples),
    baseline: median(baselineSamples),
    ratio: median(ratios),
    candidateSamples,
    baselineSamples,
  };
}
