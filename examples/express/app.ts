import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { DataSource } from 'typeorm';
import { type ImportRequest, ImportRuns } from './import-runs';

export interface AppOptions {
  /** The background imports; give your own to stop them on shutdown (`runs.stopAll()`). */
  runs?: ImportRuns;
}

class BadRequest extends Error {
  readonly code = 'INVALID_ARGUMENT';
}

const FORMATS = new Set(['json', 'ndjson', 'csv']);

function importRequest(body: unknown): ImportRequest {
  const { batch, path, format, size } = (body ?? {}) as Record<string, unknown>;
  if (typeof batch !== 'string' || batch === '') throw new BadRequest('batch must be a non-empty string');
  if (typeof path !== 'string' || path === '') throw new BadRequest('path must be a non-empty string (a file on the server)');
  if (format !== undefined && (typeof format !== 'string' || !FORMATS.has(format)))
    throw new BadRequest('format must be json, ndjson or csv');
  if (size !== undefined && (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 1)) {
    throw new BadRequest('size must be a positive integer');
  }
  return { batch, path, format: format as ImportRequest['format'], size };
}

/**
 * An Express app over one DataSource (with `checkpointEntities` and `checkpointMigrations`):
 * `POST /imports` starts or resumes a digest-guarded import in the background (202), and
 * `GET /imports/:batch` reports how far it got.
 */
export function createApp(dataSource: DataSource, options: AppOptions = {}): Express {
  const runs = options.runs ?? new ImportRuns(dataSource);
  const app = express();
  app.use(express.json());

  app.post('/imports', async (req: Request, res: Response) => {
    const request = importRequest(req.body);
    runs.start(request);
    res
      .status(202)
      .location(`/imports/${encodeURIComponent(request.batch)}`)
      .json(await runs.report(request.batch));
  });

  app.get('/imports/:batch', async (req: Request<{ batch: string }>, res: Response) => {
    const report = await runs.report(req.params.batch);
    if (report) res.json(report);
    else res.status(404).json({ code: 'NOT_FOUND', message: `No import "${req.params.batch}".` });
  });

  // Express 5 hands rejected handlers here too.
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const status = (error as { status?: unknown }).status;
    if (error instanceof BadRequest || status === 400) {
      res.status(400).json({ code: 'INVALID_ARGUMENT', message: (error as Error).message });
      return;
    }
    res
      .status(500)
      .json({ code: (error as { code?: string }).code ?? 'INTERNAL', message: error instanceof Error ? error.message : String(error) });
  });
  return app;
}
