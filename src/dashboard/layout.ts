import { type Html, html } from './html';

/** How a page is rendered for one request: where the dashboard is mounted and what the user may do. */
export interface View {
  /** The mount point as the browser sees it, always ending in `/` (e.g. `/api/ops/`). */
  readonly base: string;
  readonly title: string;
  /** True when action controls are shown (not read-only, and `authorize` said `write`). */
  readonly canWrite: boolean;
  readonly refreshMs: number;
  /** The page's path relative to the mount point (`''` for the overview). */
  readonly path: string;
  readonly query: URLSearchParams;
}

const NAV: [path: string, label: string][] = [
  ['', 'Overview'],
  ['jobs', 'Jobs'],
  ['steps', 'Steps'],
  ['imports', 'Imports'],
  ['files', 'File claims'],
];

/** A link to `path` (relative to the mount point) with the given query parameters (empty ones dropped). */
export function href(view: View, path: string, parameters: Record<string, string | number | null | undefined> = {}): string {
  // By hand rather than through URLSearchParams: a list renders one or two links per row.
  let search = '';
  for (const name in parameters) {
    const value = parameters[name];
    if (value !== null && value !== undefined && value !== '') search += `${search ? '&' : '?'}${encodeURIComponent(name)}=${encodeURIComponent(value)}`;
  }
  return `${view.base}${path}${search}`;
}

/** The current page's link with some parameters changed (`null` removes one). */
export function withQuery(view: View, changes: Record<string, string | number | null>): string {
  const parameters: Record<string, string | number | null> = Object.fromEntries(view.query.entries());
  return href(view, view.path, { ...parameters, ...changes });
}

/** The location to come back to after an action, relative to the mount point. */
export function backPath(view: View): string {
  const search = view.query.toString();
  return `${view.path}${search ? `?${search}` : ''}`;
}

/** `2026-12-01 10:44:32Z` (by slicing: two regular expressions per call cost more than a row's other cells). */
export function formatTime(ms: number | null): string {
  if (ms === null) return '—';
  const iso = new Date(ms).toISOString();
  // Years beyond 9999 have a longer, signed form: cut at the fraction's dot wherever it is.
  const dot = iso.lastIndexOf('.');
  return `${iso.slice(0, dot - 9)} ${iso.slice(dot - 8, dot)}Z`;
}

export function formatDuration(ms: number | null): string {
  if (ms === null) return '—';
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${seconds % 60}s`;
  return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
}

export function formatRate(perSecond: number | null): string {
  return perSecond === null ? '—' : `${perSecond >= 100 ? Math.round(perSecond) : perSecond.toFixed(1)}/s`;
}

/** 1234567 → "1,234,567" (by hand: `toLocaleString` costs more than the rest of a row). */
export function formatCount(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** Next-page and first-page links of a keyset-paginated list. */
export function pager(view: View, next: string | null): Html {
  const after = view.query.get('after');
  return html`<nav class="pager">${after ? html`<a href="${withQuery(view, { after: null })}">« First page</a>` : ''}${
    next !== null ? html`<a rel="next" href="${withQuery(view, { after: next })}">Next page »</a>` : ''
  }</nav>`;
}

/** A progress bar where a total is known (a native element: no inline style under a strict CSP). */
export function progressBar(done: number, total: number | null): Html {
  if (total === null || total <= 0) return html``;
  const percent = Math.min(100, Math.floor((done / total) * 100));
  return html`<progress max="${total}" value="${Math.min(done, total)}">${percent}%</progress> <span class="percent">${percent}%</span>`;
}

/** A whole page: the shell, the navigation, and the main container that live refresh swaps. */
export function layout(view: View, heading: string, body: Html): Html {
  const current = view.path.split('/')[0];
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${heading} · ${view.title}</title>
<link rel="icon" href="${view.base}assets/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="${view.base}assets/dashboard.css">
<script src="${view.base}assets/dashboard.js" defer></script>
</head>
<body>
<header class="top">
<a class="brand" href="${view.base}">${view.title}</a>
<nav class="tabs">${NAV.map(([path, label]) => html`<a href="${href(view, path)}"${current === path ? html` aria-current="page"` : ''}>${label}</a>`)}</nav>
${view.canWrite ? '' : html`<span class="badge">read-only</span>`}
</header>
<main id="dashboard-main" data-refresh-ms="${view.refreshMs}">
<h1>${heading}</h1>
${body}
</main>
</body>
</html>
`;
}
