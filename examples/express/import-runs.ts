import type { DataSource } from 'typeorm';
// In an application: from 'typeorm-checkpoint'.
import { CheckpointError, importFile, type ImportFormat, ImportJob } from '../../src';

export type ImportState = 'running' | 'done' | 'stopped' | 'failed';

/** What `GET /imports/:batch` answers: the committed checkpoint from the database, plus this process's run. */
export interface ImportReport {
  batch: string;
  state: ImportState;
  /** Rows committed so far (the import's checkpoint). */
  nextIndex: number;
  /** Rows in the file once validated; null before that. */
  totalRows: number | null;
  /** The failure of this process's last run, by stable code (`FINGERPRINT_MISMATCH`, `INVALID_INPUT`, `ENOENT`…). */
  error?: { code: string; message: string; index?: number };
}

export interface ImportRequest {
  batch: string;
  path: string;
  format?: ImportFormat;
  size?: number;
}

interface Run {
  state: ImportState;
  controller: AbortController;
  finished: Promise<void>;
  error?: ImportReport['error'];
}

function errorReport(error: unknown): NonNullable<ImportReport['error']> {
  const code = error instanceof CheckpointError ? error.code : String((error as { code?: unknown } | null)?.code ?? 'INTERNAL');
  const index = (error as { index?: unknown } | null)?.index;
  const message = error instanceof Error ? error.message : String(error);
  return typeof index === 'number' ? { code, message, index } : { code, message };
}

/**
 * The imports this process runs in the background. All progress lives in the database: a run is
 * only a handle on the `importFile` call, so after a crash or restart, starting the same batch and
 * file again resumes after the last committed chunk.
 */
export class ImportRuns {
  private readonly runs = new Map<string, Run>();

  constructor(
    private readonly dataSource: DataSource,
    /** Receives one event per committed chunk and per finished run (the server prints them as JSON lines). */
    private readonly log: (event: Record<string, unknown>) => void = () => undefined,
  ) {}

  /** Starts or resumes the import of `path` under `batch`; a batch already running here is left running. */
  start({ batch, path, format, size }: ImportRequest): void {
    if (this.runs.get(batch)?.state === 'running') return;
    const controller = new AbortController();
    const run: Run = { state: 'running', controller, finished: Promise.resolve() };
    run.finished = importFile(this.dataSource, batch, path, {
      format,
      size,
      signal: controller.signal,
      onProgress: (progress) => this.log({ event: 'progress', batch, rows: progress.items, total: progress.total ?? null }),
    }).then(
      (result) => {
        run.state = result.done ? 'done' : 'stopped';
        this.log({ event: run.state, batch, nextIndex: result.nextIndex, rows: result.rows });
      },
      (error: unknown) => {
        run.state = 'failed';
        run.error = errorReport(error);
        this.log({ event: 'failed', batch, ...run.error });
      },
    );
    this.runs.set(batch, run);
  }

  /** The import's committed state, or null when the database has no such import and nothing ran here. */
  async report(batch: string): Promise<ImportReport | null> {
    const run = this.runs.get(batch);
    const stored = await this.dataSource.getRepository(ImportJob).findOneBy({ id: batch });
    if (!stored && !run) return null;
    const nextIndex = stored?.nextIndex ?? 0;
    const totalRows = stored?.totalRows ?? null;
    const finished = totalRows !== null && nextIndex >= totalRows;
    // No run here (e.g. after a restart): the database alone tells a finished import from an interrupted one.
    const state: ImportState = run ? run.state : finished ? 'done' : 'stopped';
    return { batch, state, nextIndex, totalRows, ...(run?.error ? { error: run.error } : {}) };
  }

  /** Stops every running import after its current chunk commits, and waits for them. */
  async stopAll(): Promise<void> {
    for (const run of this.runs.values()) run.controller.abort();
    await Promise.all([...this.runs.values()].map((run) => run.finished));
  }
}
