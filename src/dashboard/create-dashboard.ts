import type { IncomingMessage, ServerResponse } from 'node:http';
import { CheckpointManager } from '../claims/checkpoint-manager';
import { CheckpointError, InvalidArgumentError } from '../core/errors';
import { type Db, dataSourceOf } from '../core/transaction';
import { validateName } from '../jobs/job-store';
import { reset } from '../jobs/status';
import { type Access, isSameOrigin, toAccess } from './access';
import { DASHBOARD_CSS, DASHBOARD_ICON, DASHBOARD_JS } from './assets';
import { controlAction, fileTypeAction, loadCancel, loadRequeueAll, renderCancel, renderRequeueAll, requeueAllDead } from './control-page';
import { type PageContext, pageContext } from './dashboard-sql';
import { loadFiles, renderFiles } from './files-page';
import { type Html, html } from './html';
import { loadImports, renderImports } from './imports-page';
import { loadImportRejects, renderImportRejects } from './import-rejects-page';
import { loadJobs, renderJobs } from './jobs-page';
import { kept } from './kept';
import { layout, type View } from './layout';
import { loadOverview, renderOverview } from './overview-page';
import { retryDeadRanges } from './partitions-hook';
import { loadReset, renderReset } from './reset-page';
import { loadSteps, renderSteps } from './steps-page';

/** Options of {@link createDashboard}. */
export interface DashboardOptions {
  /** No actions at all: no action controls are shown and every POST is 403. */
  readOnly?: boolean;
  /** Per request: `'none'` → 403 for everything, `'read'` → pages only, `'write'` → pages and actions. Default: `'write'`. */
  authorize?(req: IncomingMessage): Access | Promise<Access>;
  /** Shown in the header and the page titles (default "Checkpoint"). */
  title?: string;
  /** Live refresh period of the pages in ms (default 2000; 0 turns it off). */
  refreshMs?: number;
}

/** The request as Express/Connect give it to a mounted handler (`baseUrl`, `originalUrl`, a parsed `body` maybe). */
export type DashboardRequest = IncomingMessage & {
  /** Where Express mounted the handler. */
  baseUrl?: string;
  /** The full request path, before Express or Connect stripped the mount point. */
  originalUrl?: string;
  /** A POST form as a body parser left it, if one ran; otherwise the handler reads the stream. */
  body?: unknown;
};
/** The handler {@link createDashboard} returns: `(req, res, next?)`, for Express/Connect `use` or `node:http`; `next` gets errors it cannot answer itself. */
export type DashboardHandler = (req: DashboardRequest, res: ServerResponse, next?: (error?: unknown) => void) => Promise<void>;

/** A page: a function from the request's query to a data object, and from that object to HTML. */
interface Page<D> {
  load(ctx: PageContext, query: URLSearchParams): Promise<D>;
  render(data: D, view: View): Html;
}

const page = <D>(load: Page<D>['load'], render: Page<D>['render']): Page<unknown> => ({ load, render }) as Page<unknown>;

// Each page lives at its path (relative to the mount point) and its data at `api/<path>`.
// Partitioned jobs show inside `jobs`, with the batch jobs.
const PAGES: Record<string, Page<unknown>> = {
  '': page((ctx) => loadOverview(ctx), renderOverview),
  jobs: page(loadJobs, renderJobs),
  steps: page(loadSteps, renderSteps),
  imports: page(loadImports, renderImports),
  'imports/rejects': page(loadImportRejects, renderImportRejects),
  files: page(loadFiles, renderFiles),
  'jobs/reset': page(loadReset, renderReset),
  'jobs/cancel': page(loadCancel, renderCancel),
  'files/requeue-all': page(loadRequeueAll, renderRequeueAll),
};

/** A POST action: what it does, and where the browser goes afterwards (relative to the mount point). */
type Action = (db: Db, form: FormFields) => Promise<{ result: Record<string, unknown>; back: string }>;

const ACTIONS: Record<string, Action> = {
  'files/requeue': async (db, form) => {
    const one = form.first('one');
    const urls = one !== undefined ? [one] : form.all('url');
    if (urls.length === 0) throw new InvalidArgumentError('Select at least one dead letter to requeue.');
    const manager = new CheckpointManager(db);
    let requeued = 0;
    for (const url of urls) if (await manager.requeue(url)) requeued += 1;
    return { result: { requeued }, back: form.back('files?status=dead') };
  },
  'jobs/reset': async (db, form) => {
    const name = form.first('name');
    validateName(name);
    return { result: { reset: await reset(db, name) }, back: form.back('jobs') };
  },
  'jobs/retry-dead-ranges': async (db, form) => ({ result: await retryDeadRanges(db, form.first('name')), back: form.back('jobs') }),
  // A name is a job's or an import batch's (pause, resume and cancel apply to both).
  'jobs/pause': (db, form) => controlAction(db, 'pause', form.first('name'), (fallback) => form.back(fallback)),
  'jobs/resume': (db, form) => controlAction(db, 'resume', form.first('name'), (fallback) => form.back(fallback)),
  'jobs/cancel': (db, form) => controlAction(db, 'cancel', form.first('name'), (fallback) => form.back(fallback)),
  'files/pause': async (db, form) => ({ result: await fileTypeAction(db, 'pause', form.first('type')), back: form.back('files') }),
  'files/resume': async (db, form) => ({ result: await fileTypeAction(db, 'resume', form.first('type')), back: form.back('files') }),
  'files/requeue-all': async (db, form) => ({
    result: { requeued: await requeueAllDead(db, form.first('q') ?? '') },
    back: form.back('files?status=dead'),
  }),
};

const ASSETS: Record<string, { type: string; body: string }> = {
  'assets/dashboard.css': { type: 'text/css; charset=utf-8', body: DASHBOARD_CSS },
  'assets/dashboard.js': { type: 'text/javascript; charset=utf-8', body: DASHBOARD_JS },
  'assets/icon.svg': { type: 'image/svg+xml', body: DASHBOARD_ICON },
};

const MAX_FORM_BYTES = 1 << 20;

/** Form fields of a POST, from a body parser's object (Express, NestJS) or read from the stream. */
class FormFields {
  constructor(private readonly fields: URLSearchParams) {}

  first(name: string): string | undefined {
    return this.fields.get(name) ?? undefined;
  }

  all(name: string): string[] {
    return this.fields.getAll(name);
  }

  /** Where to go after the action: a page path from the form, never another site. */
  back(fallback: string): string {
    const back = this.first('back');
    return back !== undefined && /^[a-z/]*(\?[^#]*)?$/.test(back) && !back.startsWith('/') ? back : fallback;
  }
}

async function readForm(req: DashboardRequest): Promise<FormFields> {
  if (req.body !== undefined && typeof req.body === 'object' && req.body !== null && !Buffer.isBuffer(req.body)) {
    const fields = new URLSearchParams();
    for (const [name, value] of Object.entries(req.body as Record<string, unknown>)) {
      for (const item of Array.isArray(value) ? value : [value]) if (typeof item === 'string') fields.append(name, item);
    }
    return new FormFields(fields);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_FORM_BYTES) throw new InvalidArgumentError('The form is too large.');
    chunks.push(chunk);
  }
  return new FormFields(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
}

function send(res: ServerResponse, status: number, type: string, body: string, headers: Record<string, string> = {}): void {
  res.statusCode = status;
  res.setHeader('Content-Type', type);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  for (const name in headers) res.setHeader(name, headers[name]);
  // Encoded once here: handed a string, Node measures its UTF-8 length and then encodes it again
  // (a page has non-ASCII text such as '—', so both passes are the slow, two-byte kind).
  res.end(Buffer.from(body, 'utf8'));
}

/** The headers of every page (as `writeHead` takes them: name, value, name, value…). */
const PAGE_HEADERS = [
  'Content-Type',
  'text/html; charset=utf-8',
  'X-Content-Type-Options',
  'nosniff',
  'Cache-Control',
  'no-store',
  'X-Frame-Options',
  'DENY',
  'Referrer-Policy',
  'same-origin',
];
// The pages need nothing but their own assets; actions must not be clickable inside another site's frame.
/** The same with the CSP, for where the application has not set its own. */
const PAGE_HEADERS_WITH_CSP = [...PAGE_HEADERS, 'Content-Security-Policy', "default-src 'self'; frame-ancestors 'none'"];

function sendPage(res: ServerResponse, status: number, body: Html): void {
  // A page is all ASCII (`escapeHtml` writes every other character as an entity, the fixed markup
  // uses entities), so its length is its size in bytes and its text is the bytes to send: handed a
  // string, Node joins it to the headers in one write, and 'latin1' makes encoding a plain copy.
  const text = body.text;
  res.writeHead(status, [
    ...(res.hasHeader('Content-Security-Policy') ? PAGE_HEADERS : PAGE_HEADERS_WITH_CSP),
    'Content-Length',
    String(text.length),
  ]);
  res.end(text, 'latin1');
}

function sendJson(res: ServerResponse, status: number, data: unknown): void {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(data), { 'Cache-Control': 'no-store' });
}

function wantsJson(req: IncomingMessage, api: boolean): boolean {
  return api || /application\/json/.test(req.headers.accept ?? '');
}

function refusal(
  req: IncomingMessage,
  res: ServerResponse,
  api: boolean,
  status: number,
  code: string,
  message: string,
  view?: View,
): void {
  if (wantsJson(req, api) || !view) {
    sendJson(res, status, { error: { code, message } });
    return;
  }
  sendPage(res, status, layout(view, status === 403 ? 'Forbidden' : 'Error', html`<p class="error">${message}</p>`));
}

/** What a request's URL tells the handler: never changed once made (shared by the requests of one URL). */
interface ParsedUrl {
  readonly pathname: string;
  /** The pathname without its leading and trailing slash. */
  readonly path: string;
  /** `''` or `?…`, as `URL.search`. */
  readonly search: string;
  readonly searchParams: URLSearchParams;
}

const parsedUrls = new Map<string, ParsedUrl>();

/** A request URL parsed as `new URL` parses it, kept per URL: a page refreshing itself asks for the same one every few seconds. */
function parsedUrl(requestUrl: string): ParsedUrl {
  return kept(parsedUrls, requestUrl, () => {
    const url = new URL(requestUrl, 'http://dashboard.invalid');
    return {
      pathname: url.pathname,
      path: url.pathname.replace(/^\//, '').replace(/\/$/, ''),
      search: url.search,
      searchParams: url.searchParams,
    };
  });
}

/**
 * The dashboard as a Node request handler: mount it under any path in Express or Connect
 * (`app.use('/ops', createDashboard(db))`), or serve it with `node:http` directly.
 * Never expose it without authentication: pass `authorize`, or put it behind your own.
 */
export function createDashboard(db: Db, options: DashboardOptions = {}): DashboardHandler {
  dataSourceOf(db);
  if (typeof options !== 'object' || options === null)
    throw new InvalidArgumentError('createDashboard(db, options): options must be an object.');
  if (options.authorize !== undefined && typeof options.authorize !== 'function') {
    throw new InvalidArgumentError('createDashboard: authorize must be a function returning "none", "read" or "write".');
  }
  const refreshMs = options.refreshMs ?? 2000;
  if (typeof refreshMs !== 'number' || !Number.isSafeInteger(refreshMs) || refreshMs < 0) {
    throw new InvalidArgumentError('createDashboard: refreshMs must be a non-negative integer (0 turns live refresh off).');
  }
  const title = options.title ?? 'Checkpoint';
  const readOnly = options.readOnly === true;

  return async (req, res, next) => {
    try {
      const url = parsedUrl(req.url ?? '/');
      // Parsed again only when a framework rewrote req.url (Express's originalUrl keeps the mount point).
      const originalPath =
        req.originalUrl === undefined || req.originalUrl === req.url ? url.pathname : parsedUrl(req.originalUrl).pathname;
      // The mount point itself without its slash: relative links need it, so redirect.
      if (url.pathname === '/' && !originalPath.endsWith('/')) {
        res.statusCode = 302;
        res.setHeader('Location', `${originalPath}/${url.search}`);
        res.end();
        return;
      }
      const path = url.path;
      const api = path === 'api' || path.startsWith('api/');
      const pagePath = api ? (path === 'api/overview' || path === 'api' ? '' : path.slice(4)) : path;
      const method = req.method ?? 'GET';
      const isRead = method === 'GET' || method === 'HEAD';
      const isAction = method === 'POST' && !api && ACTIONS[path] !== undefined;
      const known = isRead ? PAGES[pagePath] !== undefined || (!api && ASSETS[path] !== undefined) : isAction;
      // A path it does not know is the application's where there is one (next); served alone, the
      // dashboard answers it, after `authorize` (whose 'none' refuses every request).
      if (!known && next) return next();
      const access = options.authorize ? toAccess(await options.authorize(req)) : 'write';
      if (access === 'none') return refusal(req, res, api, 403, 'FORBIDDEN', 'You may not see this dashboard.');
      if (!known) {
        refusal(req, res, api, 404, 'NOT_FOUND', 'No such dashboard page.');
        return;
      }

      const base = `${mountPoint(req.baseUrl, originalPath, url.pathname).replace(/\/$/, '')}/`;
      const view: View = {
        base,
        title,
        canWrite: !readOnly && access === 'write',
        refreshMs,
        path: pagePath,
        query: url.searchParams,
        search: url.search,
      };

      if (isRead) {
        const asset = api ? undefined : ASSETS[path];
        if (asset) return send(res, 200, asset.type, asset.body, { 'Cache-Control': 'public, max-age=300' });
        const found = PAGES[pagePath];
        const data = await found.load(pageContext(db), url.searchParams);
        if (api) return sendJson(res, 200, data);
        return sendPage(res, 200, found.render(data, view));
      }

      if (readOnly) return refusal(req, res, api, 403, 'READ_ONLY', 'This dashboard is read-only.', view);
      if (access !== 'write') return refusal(req, res, api, 403, 'FORBIDDEN', 'You may look but not change anything here.', view);
      if (!isSameOrigin(req)) return refusal(req, res, api, 403, 'CROSS_ORIGIN', 'Cross-origin request refused (CSRF protection).', view);
      const outcome = await ACTIONS[path](db, await readForm(req));
      if (wantsJson(req, false)) return sendJson(res, 200, outcome.result);
      res.statusCode = 303;
      res.setHeader('Location', `${base}${outcome.back}`);
      res.end();
    } catch (error) {
      if (res.headersSent) {
        res.destroy(error instanceof Error ? error : undefined);
        return;
      }
      const code = error instanceof CheckpointError ? error.code : 'INTERNAL';
      const status = code === 'INVALID_ARGUMENT' ? 400 : 500;
      const message = error instanceof CheckpointError ? error.message : 'The dashboard failed to answer; see the server log.';
      if (status === 500 && next) return next(error);
      sendJson(res, status, { error: { code, message } });
    }
  };
}

/**
 * Where the dashboard is mounted: Express's `req.baseUrl`; under Connect, which only rewrites
 * `req.url` (keeping the full path in `originalUrl`), the original path less the part it handed on.
 */
function mountPoint(baseUrl: string | undefined, originalPath: string, pathname: string): string {
  if (baseUrl !== undefined) return baseUrl;
  return originalPath !== pathname && originalPath.endsWith(pathname) ? originalPath.slice(0, originalPath.length - pathname.length) : '';
}
