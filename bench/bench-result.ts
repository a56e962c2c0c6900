import { cpus, loadavg } from 'node:os';

/**
 * One line of the report: `value` measured against `baseline` in the same run; `ratio` is
 * value / baseline (for a rate) or time / baseline time (for a cost), checked against `target`.
 * `target` null marks a figure printed for reference only (then `ok` is null too).
 */
export interface BenchResult {
  name: string;
  value: number;
  unit: string;
  baseline: number | null;
  ratio: number | null;
  target: string | null;
  ok: boolean | null;
  /**
   * Set when this run's sizes do not judge the target: `ok` is null and the figure is indicative.
   * Workers and partitions are judged warm at `--full` sizes only (a worker runs for hours).
   */
  judgedAt?: '--full';
}

/** The rows of a section judged at `--full` only, as a run at default sizes reports them: indicative, not ok or MISS. */
export function judgedAtFull(results: BenchResult[]): BenchResult[] {
  return results.map((r) => (r.target === null ? r : { ...r, ok: null, judgedAt: '--full' }));
}

function verdict(r: BenchResult): string {
  if (r.judgedAt !== undefined) return `judged at ${r.judgedAt}`;
  return r.ok === null ? '' : r.ok ? 'ok' : 'MISS';
}

export type Target = { max: number } | { min: number } | null;

export function result(
  name: string,
  value: number,
  unit: string,
  baseline: number | null,
  ratio: number | null,
  target: Target,
  /** For a target on the value itself (peak RSS), not on a ratio. */
  on: 'ratio' | 'value' = 'ratio',
): BenchResult {
  const checked = on === 'ratio' ? ratio : value;
  const suffix = on === 'ratio' ? '×' : ` ${unit}`;
  if (target === null || checked === null || !Number.isFinite(checked)) {
    return {
      name,
      value,
      unit,
      baseline,
      ratio,
      target: target === null ? null : describe(target, suffix),
      ok: target === null ? null : false,
    };
  }
  const ok = 'max' in target ? checked <= target.max : checked >= target.min;
  return { name, value, unit, baseline, ratio, target: describe(target, suffix), ok };
}

function describe(target: Exclude<Target, null>, suffix: string): string {
  return 'max' in target ? `≤ ${target.max}${suffix}` : `≥ ${target.min}${suffix}`;
}

function figure(value: number | null): string {
  if (value === null || !Number.isFinite(value)) return '—';
  const magnitude = Math.abs(value);
  if (magnitude >= 1000) return Math.round(value).toLocaleString('en-US');
  if (magnitude >= 100) return value.toFixed(0);
  if (magnitude >= 10) return value.toFixed(1);
  return value.toFixed(magnitude >= 1 ? 2 : 3);
}

/** The machine, so a reader can judge the figures: CPUs and the load average before and after. */
export function machineNote(loadBefore: number[]): string {
  const load = (values: number[]) => values.map((v) => v.toFixed(2)).join(' ');
  return `${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}; load average at start ${load(loadBefore)}, at end ${load(loadavg())}`;
}

export function formatTable(results: BenchResult[]): string {
  const header = ['benchmark', 'value', 'unit', 'baseline', 'ratio', 'target', 'ok'];
  const rows = results.map((r) => [
    r.name,
    figure(r.value),
    r.unit,
    figure(r.baseline),
    r.ratio === null ? '—' : `${r.ratio.toFixed(2)}×`,
    r.target ?? 'reference',
    verdict(r),
  ]);
  const widths = header.map((_, c) => Math.max(header[c].length, ...rows.map((row) => row[c].length)));
  const line = (cells: string[]) =>
    cells.map((cell, c) => (c === 0 || c === 2 || c === 5 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}
