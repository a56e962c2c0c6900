import { SingleBar } from 'cli-progress';
import type { Progress } from '../core/progress';

/** Shows an import's progress on stderr; `position` is the committed row count (resumed rows included). */
export interface ProgressReporter {
  update(position: number, progress: Progress): void;
  stop(): void;
}

/** `bar`: a live cli-progress bar (TTY); `lines`: one plain line per chunk; `off`: nothing. */
export type ProgressMode = 'bar' | 'lines' | 'off';

export function progressMode(stream: NodeJS.WriteStream, enabled: boolean): ProgressMode {
  if (!enabled) return 'off';
  return stream.isTTY ? 'bar' : 'lines';
}

/** "4s", "2m05s", "1h02m"; "?" when unknown. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** Seconds left at this call's rate; NaN when it cannot be told yet. */
function etaSeconds(position: number, total: number | undefined, rate: number): number {
  if (total === undefined) return Number.NaN;
  if (position >= total) return 0;
  return rate > 0 ? (total - position) / rate : Number.NaN;
}

/** The plain progress line (also the data behind the bar). */
export function progressLine(label: string, position: number, progress: Progress): string {
  const { total, bytes, totalBytes, rate } = progress;
  const parts = [`${label}: ${position}${total === undefined ? '' : `/${total}`} rows`];
  if (total !== undefined && total > 0) parts[0] += ` (${((100 * position) / total).toFixed(1)}%)`;
  parts.push(`${Math.round(rate)} rows/s`);
  parts.push(`ETA ${formatDuration(etaSeconds(position, total, rate))}`);
  if (bytes !== undefined) parts.push(`${formatBytes(bytes)}${totalBytes === undefined ? '' : ` of ${formatBytes(totalBytes)}`}`);
  return parts.join(', ');
}

export function createProgressReporter(mode: ProgressMode, label: string, stream: NodeJS.WriteStream): ProgressReporter {
  if (mode === 'off') return { update() {}, stop() {} };
  if (mode === 'lines') {
    return {
      update(position, progress) {
        stream.write(`${progressLine(label, position, progress)}\n`);
      },
      stop() {},
    };
  }
  const bar = new SingleBar({
    stream,
    format: `${label} [{bar}] {percentage}% | {value}/{total} rows | {rate} rows/s | ETA {etaText}`,
    hideCursor: true,
    // The CLI handles Ctrl-C itself (stop after the current chunk); cli-progress must not.
    gracefulExit: false,
    clearOnComplete: false,
  });
  let started = false;
  return {
    update(position, progress) {
      const total = progress.total ?? position;
      const payload = {
        rate: Math.round(progress.rate),
        etaText: formatDuration(etaSeconds(position, progress.total, progress.rate)),
      };
      if (!started) {
        bar.start(total, position, payload);
        started = true;
      } else {
        bar.setTotal(total);
        bar.update(position, payload);
      }
    },
    stop() {
      if (started) bar.stop();
    },
  };
}
