import { civilFromDays } from '../core/civil-date';
import { Html, html } from './html';
import { kept } from './kept';

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
  /** The request's query string as it came (`''` or `?…`): with the mount point and the path, what URL-made markup is kept by. */
  readonly search: string;
}

/** The attribute of the tab or navigation link of the page shown. */
export const CURRENT_PAGE = html` aria-current="page"`;

// Pages are all ASCII (see `escapeHtml`): their fixed markup writes other characters as entities.
/** A cell without a value (an em dash). */
export const NO_VALUE = html`&mdash;`;
/** The mark of text cut short. */
export const ELLIPSIS = html`&hellip;`;

/** Error messages on the pages are cut at this many characters. */
export const ERROR_CHARS = 500;

const NAV: [path: string, label: string][] = [
  ['', 'Overview'],
  ['jobs', 'Jobs'],
  ['steps', 'Steps'],
  ['imports', 'Imports'],
  ['files', 'File claims'],
];

/** Characters `encodeURIComponent` leaves as they are. */
const URI_UNRESERVED = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.!~*'()") URI_UNRESERVED[c.charCodeAt(0)] = 1;

/** `encodeURIComponent(value)`, with the common case (nothing to encode: a job's name) a scan instead of a call into the runtime. */
export function queryValue(value: string): string {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c > 127 || URI_UNRESERVED[c] !== 1) return encodeURIComponent(value);
  }
  return value;
}

/** A link to `path` (relative to the mount point) with the given query parameters (empty ones dropped). */
export function href(view: View, path: string, parameters: Record<string, string | number | null | undefined> = {}): string {
  // By hand rather than through URLSearchParams: a list renders one or two links per row.
  let search = '';
  for (const name in parameters) {
    const value = parameters[name];
    if (value !== null && value !== undefined && value !== '')
      search += `${search ? '&' : '?'}${queryValue(name)}=${queryValue(String(value))}`;
  }
  return `${view.base}${path}${search}`;
}

// A page links its own query with one parameter changed from every tab and pager link: its
// parameters are read once per query string (a page refreshing itself asks for the same one every
// few seconds), kept as `keptForUrl` keeps markup. Never changed once made (`withQuery` copies).
const queryRecords = new Map<string, Readonly<Record<string, string>>>();

/** The current page's link with some parameters changed (`null` removes one). */
export function withQuery(view: View, changes: Record<string, string | number | null>): string {
  const parameters = kept(queryRecords, view.search, () => Object.fromEntries(view.query.entries()));
  return href(view, view.path, { ...parameters, ...changes });
}

/** The location to come back to after an action, relative to the mount point. */
export function backPath(view: View): string {
  const search = view.query.toString();
  return `${view.path}${search ? `?${search}` : ''}`;
}

const TWO_DIGITS = Array.from({ length: 100 }, (_, n) => String(n).padStart(2, '0'));
const DAY_MS = 86_400_000;
// 0000-03-01 … 9999-12-31 UTC: the range the arithmetic below formats; outside it, toISOString.
const MIN_MS = -62162035200000;
const MAX_MS = 253402300799999;

/**
 * `2026-12-01 10:44:32Z`. By arithmetic (civil-from-days, H. Hinnant) rather than
 * `toISOString()` and regular expressions: a list has a time or two per row, and that was the
 * most expensive part of rendering one.
 */
export function formatTime(ms: number | null): string {
  if (ms === null) return '—';
  if (!(ms >= MIN_MS && ms <= MAX_MS)) {
    const iso = new Date(ms).toISOString();
    const dot = iso.lastIndexOf('.');
    return `${iso.slice(0, dot - 9)} ${iso.slice(dot - 8, dot)}Z`;
  }
  const days = Math.floor(ms / DAY_MS);
  const seconds = Math.floor((ms - days * DAY_MS) / 1000);
  // The times of a page are mostly of one day or two: the date of the last one is kept.
  if (days !== lastDay) {
    lastDay = days;
    lastDate = formatDate(days);
  }
  const hh = Math.floor(seconds / 3600);
  const mm = Math.floor((seconds % 3600) / 60);
  // The time of day first: V8 copies a concatenation shorter than 13 characters into a flat
  // string, so the result is one pair (date, time) rather than a chain of six pieces that the
  // page's final flattening walks one by one.
  const time = `${TWO_DIGITS[hh]}:${TWO_DIGITS[mm]}:${TWO_DIGITS[seconds % 60]}Z`;
  return lastDate + time;
}

let lastDay = NaN;
let lastDate = '';

/** `2026-12-01 ` of the day `days` after 1970-01-01. */
function formatDate(days: number): string {
  const [year, month, day] = civilFromDays(days);
  return `${TWO_DIGITS[Math.floor(year / 100)]}${TWO_DIGITS[year % 100]}-${TWO_DIGITS[month]}-${TWO_DIGITS[day]} `;
}

export function formatDuration(ms: number | null): string {
  if (ms === null) return '—';
  const seconds = Math.round(ms / 1000);
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${seconds % 60}s`;
  return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
}

export function formatRate(perSecond: number | null): string {
  if (perSecond === null) return '—';
  if (perSecond >= 100) return `${Math.round(perSecond)}/s`;
  if (!(perSecond >= 0)) return `${perSecond.toFixed(1)}/s`;
  // To the nearest tenth by arithmetic: `toFixed` cost as much as the rest of a row's numbers.
  const tenths = Math.round(perSecond * 10);
  return `${Math.floor(tenths / 10)}.${tenths % 10}/s`;
}

const GROUPS = /\B(?=(\d{3})+(?!\d))/g;

/** 1234567 → "1,234,567" (by hand: `toLocaleString` costs more than the rest of a row, and so did a regular expression per number). */
export function formatCount(n: number): string {
  const text = String(n);
  if (!Number.isSafeInteger(n)) return text.replace(GROUPS, ',');
  const sign = n < 0 ? 1 : 0;
  let out = text.slice(0, sign + ((text.length - sign) % 3 || 3));
  for (let i = out.length; i < text.length; i += 3) out += `,${text.slice(i, i + 3)}`;
  return out;
}

// The formatters' text is digits, separators and ASCII letters only, so a row can take it as markup
// as it is: escaping it would first copy each (concatenated) result into a flat string to scan it.
// Where they would write an em dash (no value), these write it as escaping would have.
const DASH = html`&#8212;`;

/** `formatTime` as markup. */
export function timeCell(ms: number | null): Html {
  return ms === null ? DASH : new Html(formatTime(ms));
}

/** `formatCount` as markup; a null count as the dash. */
export function countCell(n: number | null): Html {
  return n === null ? DASH : new Html(formatCount(n));
}

/** `formatRate` as markup. */
export function rateCell(perSecond: number | null): Html {
  return perSecond === null ? DASH : new Html(formatRate(perSecond));
}

/** Next-page and first-page links of a keyset-paginated list. */
export function pager(view: View, next: string | null): Html {
  const after = view.query.get('after');
  return html`<nav class="pager">${after ? html`<a href="${withQuery(view, { after: null })}">&laquo; First page</a>` : ''}${
    next !== null ? html`<a rel="next" href="${withQuery(view, { after: next })}">Next page &raquo;</a>` : ''
  }</nav>`;
}

/** A progress bar where a total is known (a native element: no inline style under a strict CSP). */
export function progressBar(done: number, total: number | null): Html {
  if (total === null || total <= 0) return html``;
  const percent = Math.min(100, Math.floor((done / total) * 100));
  return html`<progress max="${total}" value="${Math.min(done, total)}">${percent}%</progress> <span class="percent">${percent}%</span>`;
}

const keptMarkup = new Map<string, Html>();

/**
 * Markup made from the request's mount point, path and query string alone (the page's head and
 * navigation, state tabs, search forms), kept by them: a page refreshing itself asks for the same
 * URL every few seconds, and only its rows change. `part` names the markup; `make` must depend on
 * nothing but `view` (its URL, title, refresh period and write access).
 */
export function keptForUrl(view: View, part: string, make: () => Html): Html {
  const key = `${part}\0${view.canWrite ? 'w' : 'r'}${view.refreshMs}\0${view.base}\0${view.path}${view.search}\0${view.title}`;
  // Kept as one flat string: a page that embeds it copies it in one piece instead of walking the
  // pieces of its template again on every request (the page is all ASCII, see `escapeHtml`).
  return kept(keptMarkup, key, () => new Html(Buffer.from(make().text, 'latin1').toString('latin1')));
}

/** The start of every page, up to its title. */
const PAGE_START = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>`;

/** The end of every page, after its body. */
const PAGE_END = html`
</main>
</body>
</html>
`;

/** A whole page: the shell, the navigation, and the main container that live refresh swaps. */
export function layout(view: View, heading: string, body: Html): Html {
  // From the title's end to the heading: the same for every request of a page (its query aside).
  const shell = keptForUrl(view, 'layout', () => {
    const current = view.path.split('/')[0];
    return html` &middot; ${view.title}</title>
<link rel="icon" href="${view.base}assets/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="${view.base}assets/dashboard.css">
<script src="${view.base}assets/dashboard.js" defer></script>
</head>
<body>
<header class="top">
<a class="brand" href="${view.base}">${view.title}</a>
<nav class="tabs">${NAV.map(([path, label]) => html`<a href="${href(view, path)}"${current === path ? CURRENT_PAGE : ''}>${label}</a>`)}</nav>
${view.canWrite ? '' : html`<span class="badge">read-only</span>`}
</header>
<main id="dashboard-main" data-refresh-ms="${view.refreshMs}">
<h1>`;
  });
  return html`${PAGE_START}${heading}${shell}${heading}</h1>
${body}${PAGE_END}`;
}
