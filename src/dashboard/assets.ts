// The dashboard's only stylesheet and script, served by the handler itself (`assets/…`): no build
// step, no CDN, and nothing inline, so a `Content-Security-Policy: default-src 'self'` allows them.

export const DASHBOARD_CSS = `
:root { --fg: #1d2330; --muted: #667085; --line: #e4e7ec; --bg: #f8f9fb; --accent: #2f5bd3; --bad: #c0362c; --warn: #b7791f; --ok: #23824a; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header.top { display: flex; align-items: center; gap: 1.5rem; padding: .6rem 1.25rem; background: #fff; border-bottom: 1px solid var(--line); }
.brand { font-weight: 700; color: var(--fg); text-decoration: none; }
nav.tabs a, nav.subtabs a { margin-right: .9rem; color: var(--muted); text-decoration: none; }
nav.tabs a[aria-current="page"], nav.subtabs a[aria-current="page"] { color: var(--accent); font-weight: 600; }
nav.subtabs { margin: .5rem 0 1rem; }
.badge { margin-left: auto; padding: .1rem .5rem; border-radius: 9px; background: #eef1f6; color: var(--muted); font-size: 12px; }
main { padding: 1rem 1.25rem 3rem; max-width: 1400px; }
h1 { font-size: 20px; margin: .2rem 0 1rem; }
h2 { font-size: 15px; margin: 1.5rem 0 .5rem; }
h3 { font-size: 14px; margin: 0 0 .3rem; }
.cards { display: flex; flex-wrap: wrap; gap: .75rem; }
.card { display: flex; flex-direction: column; min-width: 120px; padding: .6rem .9rem; background: #fff; border: 1px solid var(--line); border-radius: 6px; color: var(--fg); text-decoration: none; }
.card .value { font-size: 22px; font-weight: 600; }
.card .label { color: var(--muted); }
.card.bad { border-color: var(--bad); }
.card.bad .value { color: var(--bad); }
.problem { padding: .6rem .9rem; margin-bottom: .6rem; background: #fff5f4; border: 1px solid #f3c5c1; border-radius: 6px; }
.problem a { color: var(--bad); }
.problem ul { margin: .2rem 0 0; padding-left: 1.2rem; }
.ok { color: var(--ok); }
table.list { width: 100%; border-collapse: collapse; background: #fff; border: 1px solid var(--line); }
table.list th, table.list td { padding: .4rem .6rem; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
table.list th { font-weight: 600; color: var(--muted); background: #fbfbfd; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name, li .name { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; word-break: break-all; }
td.error, .error { color: var(--bad); white-space: pre-wrap; word-break: break-word; }
td.empty { color: var(--muted); text-align: center; }
code.json, pre.json { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre.json { max-height: 24rem; overflow: auto; background: #f4f5f8; padding: .5rem; margin: .4rem 0 0; white-space: pre-wrap; word-break: break-word; }
details summary { cursor: pointer; }
.state { display: inline-block; padding: 0 .45rem; border-radius: 9px; font-size: 12px; background: #eef1f6; }
.state-done { background: #e3f4ea; color: var(--ok); }
.state-running { background: #e8eefc; color: var(--accent); }
.state-warn { background: #fdf3e1; color: var(--warn); }
.state-bad { background: #fde7e5; color: var(--bad); }
.count { color: var(--muted); font-weight: 400; }
form.search { margin: 0 0 .8rem; display: flex; gap: .4rem; }
form.search input[type="search"] { width: 22rem; padding: .3rem .5rem; }
button { padding: .25rem .7rem; border: 1px solid var(--line); border-radius: 4px; background: #fff; cursor: pointer; }
button.danger { border-color: var(--bad); color: var(--bad); }
.pager { margin: .8rem 0; display: flex; gap: 1rem; }
a.action { color: var(--bad); }
progress { width: 10rem; vertical-align: middle; }
.partitions { min-width: 16rem; }
.ranges { display: flex; gap: 1px; height: .7rem; margin: .3rem 0; max-width: 24rem; }
.range { flex: 1 1 0; min-width: 2px; background: #d0d5dd; }
.range-running { background: var(--accent); }
.range-done { background: var(--ok); }
.range-dead { background: var(--bad); }
form.inline { display: inline; margin-left: .5rem; }
ul.dead-ranges { margin: .2rem 0 0; padding-left: 1.2rem; }
figure.chart { margin: 0 0 1rem; padding: .6rem; background: #fff; border: 1px solid var(--line); border-radius: 6px; display: inline-block; }
figure.chart figcaption { color: var(--muted); font-size: 12px; }
svg .bar { fill: var(--accent); }
svg .axis { stroke: var(--line); }
svg .label { fill: var(--muted); font-size: 10px; }
.confirm { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 1rem; max-width: 40rem; }
.summary { color: var(--muted); }
.note { color: var(--muted); font-size: 12px; }
`;

export const DASHBOARD_JS = `
// Live refresh: fetch this same page, swap the main container when its content changed. The next
// poll starts only after the last one ended; hidden tabs pause it, and so does the user at work:
// selected rows, a pointer held down (a click in progress must land on the node it started on),
// a form field inside the container being filled. (A focused link or summary does not pause it:
// open sections are kept across a swap.)
(function () {
  'use strict';
  var main = document.getElementById('dashboard-main');
  if (!main) return;
  var every = Number(main.getAttribute('data-refresh-ms'));
  if (!(every > 0)) return;
  var timer = null;
  var pointerDown = false;
  // The container as the server last sent it (serialised after parsing, as a fresh one is below).
  var shown = main.outerHTML;

  function busy() {
    var current = document.getElementById('dashboard-main');
    if (!current || pointerDown) return true;
    if (current.querySelector('input[type="checkbox"]:checked')) return true;
    var active = document.activeElement;
    return !!(active && current.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName));
  }

  function schedule() {
    clearTimeout(timer);
    timer = null;
    if (!document.hidden) timer = setTimeout(poll, every);
  }

  function poll() {
    if (busy()) { schedule(); return; }
    fetch(location.href, { headers: { 'Accept': 'text/html', 'X-Dashboard-Refresh': '1' }, credentials: 'same-origin' })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (text === null || busy()) return;
        var fresh = new DOMParser().parseFromString(text, 'text/html').getElementById('dashboard-main');
        var current = document.getElementById('dashboard-main');
        if (!fresh || !current) return;
        var html = fresh.outerHTML;
        if (html === shown) return;
        shown = html;
        var open = {};
        current.querySelectorAll('details[open][data-key]').forEach(function (d) { open[d.getAttribute('data-key')] = true; });
        fresh.querySelectorAll('details[data-key]').forEach(function (d) { if (open[d.getAttribute('data-key')]) d.setAttribute('open', ''); });
        current.replaceWith(document.adoptNode(fresh));
        document.documentElement.setAttribute('data-refreshed', String(Date.now()));
      })
      .catch(function () {})
      .then(schedule);
  }

  document.addEventListener('visibilitychange', schedule);
  document.addEventListener('pointerdown', function () { pointerDown = true; }, true);
  ['pointerup', 'pointercancel'].forEach(function (type) {
    document.addEventListener(type, function () { pointerDown = false; }, true);
  });
  window.addEventListener('blur', function () { pointerDown = false; });
  schedule();
})();
`;

/** A favicon of its own, so browsers do not ask the application for `/favicon.ico`. */
export const DASHBOARD_ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#2f5bd3"/><path d="M4 8.5l2.5 2.5L12 5.5" stroke="#fff" stroke-width="2" fill="none"/></svg>`;
