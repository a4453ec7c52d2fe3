'use strict';
/*
 * kvtool serve: the page. Plain JavaScript, no framework, no build step; the API is /work/serve-api.md
 * (every request carries the token in the cookie the server set on `GET /?token=T`).
 *
 * Hash routes: #TAB or #TAB/ARG for each tab the server lists (/api/overview's views, one per entry
 * of its route table): #catalog, #collection/NAME, #defaults, #files/DIR, #timeline, #consumers,
 * #sync, #snapshots, #readers, #dashboard.
 *
 * data-testid attributes (stable; Tests/Browser/serve_browser.py reads them):
 *   header-group, header-path, header-transaction, mode-badge, tabs, view, view-<tab>
 *   error              an API error box (any view)
 *   answer             the indented answer of a tab with no drawing of its own
 *   access-denied      the full-page message after a 403
 *   catalog-table, catalog-row (data-name, data-kind, data-count)
 *   collection-table, collection-row (data-key), collection-count, page-info, page-size,
 *   next-page, prev-page, search-form, search-mode (prefix|range), search-prefix, search-from,
 *   search-through, search-submit, search-clear, value-truncated
 *   put-form, put-key, put-value, put-submit, delete-entry (only with --allow-writes)
 *   defaults-table (data-suite), defaults-row (data-key)
 *   breadcrumbs, files-table, file-row (data-path, data-kind), file-image (<img>, data-path),
 *   files-replication, replicated-row (data-path, data-state), replicated-problem
 *   timeline-table, timeline-row (data-transaction, data-author, data-name, data-kind, data-target,
 *   data-key, data-operation, data-committed and data-shown in ms since 1970; a commit without history
 *   has data-history="false"), timeline-count,
 *   status (data-state: connecting|syncing|live|reconnecting|closed), filter-target, filter-author,
 *   filter-text
 *   consumers-table, consumer-row (data-name, data-behind)
 *   sync-table (data-synced: yes|no), sync-owner, sync-state, sync-acknowledged, sync-last, sync-error,
 *   sync-unavailable, sync-refreshed
 *   snapshots-table, snapshot-row (data-generation, data-status), snapshot-problems
 *   readers-table, reader-row (data-pid, data-status: alive|stale|self), readers-refreshed
 *   dashboard-chart (<svg>), dashboard-bar (<rect> with data-period, data-category, data-value,
 *   data-trend), dashboard-legend, dashboard-year-line, dashboard-records, dashboard-table,
 *   dashboard-unavailable
 */

// ---------------------------------------------------------------- helpers

const $ = (selector, root = document) => root.querySelector(selector);

/** An element: attributes (`class`, `testid`, `onclick`…, `dataset`), then children (nodes or text). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  for (const child of children.flat()) {
    if (child != null && child !== false) el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** An SVG element with attributes and children. */
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setAttrs(el, attrs);
  for (const child of children.flat()) {
    if (child != null) el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key === 'class') el.setAttribute('class', value);
    else if (key === 'testid') el.dataset.testid = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? '' : value);
  }
}

const table = (testid, headers, rows, attrs = {}) => h('table', { class: 'grid', testid, ...attrs },
  h('thead', {}, h('tr', {}, headers.map((title) => h('th', {}, title)))),
  h('tbody', {}, rows));

const errorBox = (message) => h('div', { class: 'error', role: 'alert', testid: 'error' }, message);
const empty = (text) => h('p', { class: 'muted empty' }, text);
const noneRow = (columns, text) => h('tr', { class: 'none' }, h('td', { colspan: columns, class: 'muted' }, text));

function fmtBytes(n) {
  if (n == null) return '–';
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = n / 1024, unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

const pad = (n, width = 2) => String(n).padStart(width, '0');

/** An ISO time as local `YYYY-MM-DD HH:MM:SS` (the text itself when it does not parse). */
function fmtTime(iso, { millis = false, dateToo = true } = {}) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
    + (millis ? `.${pad(d.getMilliseconds(), 3)}` : '');
  return dateToo ? `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}` : time;
}

/** `#tab` or `#tab/a/b`, each path component encoded. */
const routeHash = (tab, path) => `#${tab}` + (path ? `/${path.split('/').map(encodeURIComponent).join('/')}` : '');

// ---------------------------------------------------------------- API

class ApiError extends Error {}
let denied = false;

/** GET (or `init`) a JSON endpoint; a 403 (except a read-only refusal of a write) ends the page. */
async function api(path, init = {}) {
  let response;
  try {
    response = await fetch(path, { credentials: 'same-origin', cache: 'no-store', ...init });
  } catch (error) {
    throw new ApiError(`cannot reach the server (${error.message})`);
  }
  let body = null;
  try { body = await response.json(); } catch { /* not JSON */ }
  const message = body && typeof body.error === 'string' ? body.error : null;
  if (response.status === 403 && !(message && message.startsWith('read-only'))) {
    showDenied();
    throw new ApiError('access denied');
  }
  if (!response.ok) throw new ApiError(message || `HTTP ${response.status} ${response.statusText}`);
  if (body === null) throw new ApiError(`${path}: the response is not JSON`);
  return body;
}

const post = (path, body) => api(path, {
  method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
});

function showDenied() {
  if (denied) return;
  denied = true;
  if (timeline.source) timeline.source.close();
  leaveView();
  document.title = 'kvtool: access denied';
  document.body.replaceChildren(h('div', { class: 'denied', testid: 'access-denied', role: 'alert' },
    h('h1', {}, '403'),
    h('p', {}, 'Access denied: open the URL with its token, as printed by kvtool serve')));
}

// ---------------------------------------------------------------- router

let overview = null;
let current = null; // the view on screen: { alive(), leave: [functions to run when it goes] }

function leaveView() {
  if (current) for (const fn of current.leave) fn();
  current = null;
}

async function route() {
  if (denied) return;
  const hash = location.hash.slice(1);
  const slash = hash.indexOf('/');
  let tab = slash < 0 ? hash : hash.slice(0, slash);
  let arg = '';
  try { arg = slash < 0 ? '' : decodeURIComponent(hash.slice(slash + 1)); } catch { /* keep '' */ }
  const view = overview.views.find((v) => v.tab === tab) ?? overview.views[0];
  tab = view.tab;
  leaveView();
  const ctx = { leave: [] };
  ctx.alive = () => current === ctx;
  current = ctx;
  for (const link of document.querySelectorAll('#tabs a')) {
    link.classList.toggle('active', link.dataset.tab === tab);
  }
  const section = h('section', { class: `view view-${tab}`, testid: `view-${tab}` });
  $('#view').replaceChildren(section);
  try {
    await (views[tab] ?? ((el) => viewAnswer(el, view.api)))(section, arg, ctx);
  } catch (error) {
    if (!denied && ctx.alive()) section.append(errorBox(error.message));
  }
}

// ---------------------------------------------------------------- catalog

async function viewCatalog(el) {
  const { entries } = await api('/api/catalog');
  const open = (entry) => entry.kind === 'defaults' ? '#defaults' : routeHash('collection', entry.name);
  const rows = entries.map((entry) => h('tr', {
    testid: 'catalog-row', class: 'clickable',
    dataset: { name: entry.name, kind: entry.kind, count: entry.count },
    onclick: (event) => { if (!event.target.closest('a')) location.hash = open(entry); },
  },
  h('td', {}, h('a', { href: open(entry), class: 'mono' }, entry.name)),
  h('td', {}, h('span', { class: `kind kind-${entry.kind}` }, entry.kind)),
  h('td', { class: 'num' }, entry.count ?? '–'),
  h('td', { class: 'mono' }, entry.keyEncoding ?? '–'),
  h('td', { class: 'mono' }, entry.valueEncoding ?? '–'),
  h('td', { class: 'num' }, entry.schemaVersion ?? '–'),
  h('td', { class: 'mono small' }, (entry.indexes || []).map((index) => `${index.name} (${index.keyEncoding})`).join(', ')),
  h('td', { class: 'mono small' }, [
    (entry.derived || []).length ? `→ ${entry.derived.join(', ')}` : '',
    entry.derivedFrom ? `← ${entry.derivedFrom}` : '',
  ].filter(Boolean).join(' '))));
  el.append(h('h2', {}, 'Catalog ', h('span', { class: 'muted' }, `${entries.length} entries`)),
    entries.length ? table('catalog-table',
      ['Name', 'Kind', 'Count', 'Key encoding', 'Value encoding', 'Schema', 'Indexes', 'Derived'], rows)
      : empty('The catalog is empty.'));
}

// ---------------------------------------------------------------- collection

const browse = { name: null, limit: 50, mode: 'prefix', prefix: '', from: '', through: '', reverse: false, after: null, stack: [] };

async function viewCollection(el, name, ctx) {
  if (!name) {
    const { entries } = await api('/api/catalog');
    const names = entries.filter((entry) => entry.kind === 'collection');
    el.append(h('h2', {}, 'Collections'), h('ul', { class: 'picker' }, names.map((entry) =>
      h('li', {}, h('a', { href: routeHash('collection', entry.name), class: 'mono' }, entry.name),
        h('span', { class: 'muted' }, ` ${entry.count}`)))));
    return;
  }
  if (browse.name !== name) Object.assign(browse, { name, mode: 'prefix', prefix: '', from: '', through: '', reverse: false, after: null, stack: [] });
  $('#tab-collection').href = routeHash('collection', name);

  const title = h('h2', {}, h('span', { class: 'mono' }, name), ' ', h('span', { class: 'muted', testid: 'collection-count' }));
  const errors = h('div');
  const tbody = h('tbody');
  const info = h('span', { class: 'muted', testid: 'page-info' });
  const prev = h('button', { type: 'button', testid: 'prev-page', onclick: () => { browse.after = browse.stack.pop() ?? null; load(); } }, '‹ Previous');
  const next = h('button', { type: 'button', testid: 'next-page' }, 'Next ›');
  const input = (key, placeholder) => {
    const field = h('input', { type: 'text', class: 'mono', placeholder, testid: `search-${key}`, spellcheck: 'false' });
    field.value = browse[key];
    return field;
  };
  const prefix = input('prefix', 'key prefix');
  const from = input('from', 'from key');
  const through = input('through', 'through key');
  const mode = h('select', { testid: 'search-mode' },
    h('option', { value: 'prefix' }, 'prefix'), h('option', { value: 'range' }, 'range'));
  mode.value = browse.mode;
  const showMode = () => {
    prefix.hidden = mode.value !== 'prefix';
    from.hidden = through.hidden = mode.value !== 'range';
  };
  mode.addEventListener('change', showMode);
  showMode();
  const reverse = h('input', { type: 'checkbox', testid: 'search-reverse' });
  reverse.checked = browse.reverse;
  const size = h('select', { testid: 'page-size' }, [50, 100, 500].map((n) => h('option', { value: n }, `${n} per page`)));
  size.value = String(browse.limit);
  const restart = () => { browse.after = null; browse.stack = []; load(); };
  size.addEventListener('change', () => { browse.limit = Number(size.value); restart(); });
  const form = h('form', { class: 'toolbar', testid: 'search-form', onsubmit: (event) => {
    event.preventDefault();
    Object.assign(browse, { mode: mode.value, prefix: prefix.value.trim(), from: from.value.trim(), through: through.value.trim(), reverse: reverse.checked });
    restart();
  } }, mode, prefix, from, through,
  h('label', { class: 'check' }, reverse, ' reverse'),
  h('button', { type: 'submit', testid: 'search-submit', class: 'primary' }, 'Search'),
  h('button', { type: 'button', testid: 'search-clear', onclick: () => {
    prefix.value = from.value = through.value = '';
    reverse.checked = false;
    form.requestSubmit();
  } }, 'Clear'),
  h('span', { class: 'spacer' }), size);

  el.append(title, form, errors);
  if (overview && overview.writesAllowed) el.append(putForm(name, () => load()));
  el.append(h('table', { class: 'grid entries', testid: 'collection-table' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Key'), h('th', { class: 'num' }, 'Size'), h('th', {}, 'Value'))), tbody),
  h('div', { class: 'pager' }, prev, next, info));

  let nextCursor = null;
  let loads = 0; // only the newest request may fill the table
  next.addEventListener('click', () => { browse.stack.push(browse.after); browse.after = nextCursor; load(); });

  async function load() {
    const params = new URLSearchParams({ name, limit: browse.limit });
    if (browse.mode === 'prefix' && browse.prefix) params.set('prefix', browse.prefix);
    if (browse.mode === 'range' && browse.from) params.set('from', browse.from);
    if (browse.mode === 'range' && browse.through) params.set('through', browse.through);
    if (browse.after) params.set('after', browse.after);
    if (browse.reverse) params.set('reverse', '1');
    prev.disabled = next.disabled = true;
    const ticket = ++loads;
    const current = () => ctx.alive() && ticket === loads;
    let page;
    try {
      page = await api(`/api/collection?${params}`);
    } catch (error) {
      if (!current()) return;
      errors.replaceChildren(errorBox(error.message));
      tbody.replaceChildren();
      info.textContent = '';
      prev.disabled = browse.stack.length === 0;
      return;
    }
    if (!current()) return;
    errors.replaceChildren();
    nextCursor = page.next ?? null;
    $('[data-testid=collection-count]', title).textContent =
      `${page.count} entries · ${page.keyEncoding} keys · ${page.valueEncoding} values`;
    tbody.replaceChildren(...page.entries.map((entry) => entryRow(name, entry, load)));
    if (!page.entries.length) tbody.append(noneRow(3, 'No entries.'));
    const first = browse.stack.length * browse.limit + 1;
    info.textContent = page.entries.length
      ? `page ${browse.stack.length + 1} · rows ${first}–${first + page.entries.length - 1}` : `page ${browse.stack.length + 1}`;
    prev.disabled = browse.stack.length === 0;
    next.disabled = nextCursor === null;
  }
  await load();
}

function entryRow(collection, entry, reload) {
  const value = h('td', {}, h('pre', { class: 'value', title: 'click to expand or fold',
    onclick: (event) => { if (!getSelection().toString()) event.currentTarget.classList.toggle('expanded'); } }, entry.value));
  if (entry.truncated) {
    value.append(h('span', { class: 'truncated', testid: 'value-truncated' }, `truncated (${entry.size} bytes)`));
  }
  const key = h('td', { class: 'mono key', title: `hex ${entry.keyHex}` }, entry.key);
  if (overview && overview.writesAllowed) {
    key.append(h('button', { type: 'button', class: 'link danger', testid: 'delete-entry', onclick: async () => {
      if (!confirm(`Delete ${entry.key} from ${collection}?`)) return;
      try { await post('/api/delete', { collection, key: entry.key }); reload(); } catch (error) { alert(error.message); }
    } }, 'delete'));
  }
  return h('tr', { testid: 'collection-row', dataset: { key: entry.key } }, key, h('td', { class: 'num' }, fmtBytes(entry.size)), value);
}

/** Only with --allow-writes: put a JSON value at a key. */
function putForm(collection, reload) {
  const key = h('input', { type: 'text', class: 'mono', placeholder: 'key', testid: 'put-key', required: true });
  const value = h('textarea', { class: 'mono', rows: 2, placeholder: '{"json": "value"}', testid: 'put-value', required: true });
  const note = h('span', { class: 'muted' });
  return h('form', { class: 'toolbar put', testid: 'put-form', onsubmit: async (event) => {
    event.preventDefault();
    let parsed;
    try { parsed = JSON.parse(value.value); } catch (error) { note.textContent = `not JSON: ${error.message}`; return; }
    try {
      const result = await post('/api/put', { collection, key: key.value, value: parsed });
      note.textContent = `stored in transaction ${result.transaction}`;
      reload();
    } catch (error) { note.textContent = error.message; }
  } }, h('b', {}, 'Put'), key, value, h('button', { type: 'submit', testid: 'put-submit' }, 'Store'), note);
}

// ---------------------------------------------------------------- defaults

async function viewDefaults(el) {
  const { suites } = await api('/api/defaults');
  el.append(h('h2', {}, 'Defaults'));
  if (!suites.length) el.append(empty('No defaults suites.'));
  for (const suite of suites) {
    el.append(h('h3', { class: 'mono' }, suite.suite, h('span', { class: 'muted' }, ` ${suite.entries.length} keys`)),
      table('defaults-table', ['Key', 'Type', 'Value'], suite.entries.map((entry) =>
        h('tr', { testid: 'defaults-row', dataset: { key: entry.key } },
          h('td', { class: 'mono key' }, entry.key),
          h('td', {}, h('span', { class: 'kind' }, entry.type)),
          h('td', {}, h('pre', { class: 'value' }, entry.value),
            entry.truncated ? h('span', { class: 'truncated', testid: 'value-truncated' }, 'truncated') : null))),
      { dataset: { suite: suite.suite } }));
  }
}

// ---------------------------------------------------------------- files

async function viewFiles(el, dir) {
  dir = dir.replace(/^\/+|\/+$/g, '');
  const { entries, replicated } = await api(`/api/files?dir=${encodeURIComponent(dir)}`);
  const parts = dir ? dir.split('/') : [];
  const crumbs = [h('a', { href: routeHash('files') }, 'Files')];
  parts.forEach((part, i) => crumbs.push(' / ', i === parts.length - 1 ? h('b', {}, part)
    : h('a', { href: routeHash('files', parts.slice(0, i + 1).join('/')) }, part)));
  el.append(h('h2', { class: 'crumbs', testid: 'breadcrumbs' }, crumbs));
  const fileURL = (entry) => `/api/file?path=${encodeURIComponent(entry.path)}`;
  const images = entries.filter((entry) => entry.image && entry.kind === 'file');
  const others = entries.filter((entry) => !images.includes(entry));
  if (!entries.length) el.append(empty('This directory is empty.'));
  if (others.length) {
    el.append(table('files-table', ['Name', 'Kind', 'Size', 'Modified'], others.map((entry) => h('tr', {
      testid: 'file-row', dataset: { path: entry.path, kind: entry.kind },
    },
    h('td', { class: 'mono' }, entry.kind === 'dir' ? h('a', { href: routeHash('files', entry.path) }, `${entry.name}/`)
      : entry.kind === 'file' ? h('a', { href: fileURL(entry), target: '_blank', rel: 'noopener' }, entry.name) : entry.name),
    h('td', {}, h('span', { class: `kind kind-${entry.kind}` }, entry.kind)),
    h('td', { class: 'num' }, entry.kind === 'dir' ? '' : fmtBytes(entry.size)),
    h('td', { class: 'muted' }, fmtTime(entry.modified))))));
  }
  if (images.length) {
    el.append(h('div', { class: 'gallery', testid: 'files-gallery' }, images.map((entry) => h('figure', {
      class: 'thumb', testid: 'file-row', dataset: { path: entry.path, kind: entry.kind },
    },
    h('a', { href: fileURL(entry), target: '_blank', rel: 'noopener' },
      h('img', { src: fileURL(entry), alt: entry.name, testid: 'file-image', dataset: { path: entry.path } })),
    h('figcaption', {}, h('span', { class: 'mono' }, entry.name), h('span', { class: 'muted' }, fmtBytes(entry.size)))))));
  }
  // The replicated files under this directory and where each stands here, as `kvtool files status`.
  if (replicated && replicated.length) {
    el.append(h('h3', {}, 'Replication'));
    el.append(table('files-replication', ['Path', 'State', 'Size', 'SHA-256', 'Problem'], replicated.map((row) => h('tr', {
      testid: 'replicated-row', dataset: { path: row.path, state: row.state },
    },
    h('td', { class: 'mono' }, row.path),
    h('td', {}, h('span', { class: `kind state-${row.state}` }, row.state.replace(/_/g, ' '))),
    h('td', { class: 'num' }, fmtBytes(row.size)),
    h('td', { class: 'mono muted' }, row.sha256.slice(0, 12)),
    h('td', { testid: 'replicated-problem' }, row.problem || '')))));
  }
}

// ---------------------------------------------------------------- timeline (lives for the whole page)

const TIMELINE_CAP = 1000;
const timeline = {
  source: null, lastTransaction: 0, buffer: null, filled: false, section: null,
  tbody: h('tbody'), status: null, count: null,
  filter: { target: '', author: '', text: '' },
  targets: null, authors: null,
};

function buildTimeline() {
  const t = timeline;
  t.status = h('span', { class: 'status', testid: 'status', dataset: { state: 'connecting' } }, 'connecting');
  t.targets = h('select', { testid: 'filter-target' }, h('option', { value: '' }, 'all targets'));
  t.authors = h('select', { testid: 'filter-author' }, h('option', { value: '' }, 'all authors'));
  const text = h('input', { type: 'search', placeholder: 'filter text', testid: 'filter-text', spellcheck: 'false' });
  t.count = h('span', { class: 'muted', testid: 'timeline-count' });
  const refilter = () => {
    t.filter = { target: t.targets.value, author: t.authors.value, text: text.value.trim().toLowerCase() };
    for (const row of t.tbody.rows) applyFilter(row);
    updateCount();
  };
  t.targets.addEventListener('change', refilter);
  t.authors.addEventListener('change', refilter);
  text.addEventListener('input', refilter);
  t.section = h('div', {},
    h('div', { class: 'toolbar' }, h('h2', {}, 'Timeline'), t.status, h('span', { class: 'spacer' }),
      t.targets, t.authors, text, t.count),
    h('table', { class: 'grid timeline', testid: 'timeline-table' },
      h('thead', {}, h('tr', {}, ['Txn', 'Time', 'Author', 'Operation', 'Target', 'Key'].map((title) => h('th', {}, title)))),
      t.tbody));
}

function setStatus(state, text = state) {
  timeline.status.dataset.state = state;
  timeline.status.textContent = text;
}

function applyFilter(row) {
  const { target, author, text } = timeline.filter;
  const d = row.dataset;
  row.hidden = (target && d.target !== target) || (author && d.author !== author)
    || (text && !row.textContent.toLowerCase().includes(text));
}

/** Counts the rows once per frame, however many commits arrived in it. */
let countQueued = false;
function queueCount() {
  if (countQueued) return;
  countQueued = true;
  requestAnimationFrame(() => { countQueued = false; updateCount(); });
}

function updateCount() {
  const rows = timeline.tbody.rows;
  let shown = 0;
  for (const row of rows) if (!row.hidden) shown += 1;
  timeline.count.textContent = shown === rows.length ? `${rows.length} rows` : `${shown} of ${rows.length} rows`;
}

/** Adds `value` to a filter select once, in sorted order. */
function addOption(select, value) {
  if (!value || [...select.options].some((option) => option.value === value)) return;
  const option = h('option', { value }, value);
  const after = [...select.options].slice(1).find((o) => o.value.localeCompare(value) > 0);
  select.insertBefore(option, after || null);
}

/** A commit (SSE shape) or a lone history entry (`/api/timeline` may send either) → rows on top. */
function addCommit(event) {
  const t = timeline;
  const commit = Array.isArray(event.entries) ? event
    : { transaction: event.transaction, seen: event.time ?? event.timestamp, history: true, entries: [event] };
  const transaction = commit.transaction;
  if (typeof transaction === 'number') {
    if (transaction <= t.lastTransaction) return;
    t.lastTransaction = transaction;
    setTransaction(transaction);
  }
  const fragment = document.createDocumentFragment();
  const cell = (text, cls) => h('td', { class: cls }, text ?? '–');
  if (!commit.history || !commit.entries.length) {
    fragment.append(h('tr', { testid: 'timeline-row', class: 'nohistory', dataset: { transaction, history: 'false', author: '', name: '', target: '', key: '' } },
      cell(transaction, 'num'), h('td', { title: commit.seen }, fmtTime(commit.seen, { millis: true })),
      h('td', { colspan: 4, class: 'muted' }, 'commit (no history recorded)')));
  } else {
    for (const entry of [...commit.entries].reverse()) {
      const target = `${entry.kind}:${entry.name}`;
      addOption(t.targets, target);
      addOption(t.authors, entry.author);
      fragment.append(h('tr', {
        testid: 'timeline-row', dataset: {
          transaction: entry.transaction ?? transaction, author: entry.author ?? '', name: entry.name, kind: entry.kind,
          target, key: entry.key ?? '', operation: entry.operation,
          // For the timeline's latency: when the writer committed, and when the row joined the page.
          committed: Date.parse(entry.timestamp ?? entry.time ?? ''), shown: Date.now(),
        },
      },
      cell(entry.transaction ?? transaction, 'num'),
      h('td', { title: entry.time ?? entry.timestamp }, fmtTime(entry.time ?? entry.timestamp ?? commit.seen, { millis: true })),
      cell(entry.author, entry.author ? '' : 'muted'),
      h('td', {}, h('span', { class: `op op-${entry.operation}` }, entry.operation)),
      cell(target, 'mono'), cell(entry.key, 'mono key')));
    }
  }
  for (const row of fragment.children) applyFilter(row);
  t.tbody.prepend(fragment);
  while (t.tbody.rows.length > TIMELINE_CAP) t.tbody.lastElementChild.remove();
  queueCount();
}

/** The event stream, open from page load on; each `hello` (first or after a reconnect) fills the gap. */
function connectEvents() {
  const t = timeline;
  const source = new EventSource('/api/events');
  t.source = source;
  source.addEventListener('hello', async (message) => {
    const { transaction } = JSON.parse(message.data);
    setTransaction(transaction);
    if (t.filled && transaction <= t.lastTransaction) { setStatus('live'); return; }
    t.buffer = [];
    setStatus('syncing');
    try {
      const data = await api('/api/timeline?limit=200');
      for (const event of data.events) addCommit(event);
      t.lastTransaction = Math.max(t.lastTransaction, data.transaction ?? 0);
      t.filled = true;
    } catch (error) {
      if (denied) return;
      t.buffer = null;
      setStatus('reconnecting', `history unavailable: ${error.message}`);
      return;
    }
    const buffered = t.buffer;
    t.buffer = null;
    for (const event of buffered) addCommit(event);
    if (t.source === source) setStatus('live');
  });
  source.addEventListener('commit', (message) => {
    const event = JSON.parse(message.data);
    if (t.buffer) t.buffer.push(event); else addCommit(event);
    // The history reads again: the problem is over.
    if (t.status.dataset.state === 'problem' && t.source === source) setStatus('live');
  });
  // The server cannot read the history (a co-tenant wrote garbage into it): said once, shown until
  // commits flow again.
  source.addEventListener('problem', (message) => {
    let detail = message.data;
    try { detail = JSON.parse(message.data); } catch { /* shown as sent */ }
    setStatus('problem', `history unreadable: ${detail}`);
  });
  source.addEventListener('error', async () => {
    if (denied) return;
    if (source.readyState === EventSource.CONNECTING) { setStatus('reconnecting'); return; }
    // Closed for good (the server answered with an error): ask why, then try again.
    setStatus('closed', 'disconnected');
    try { await api('/api/overview'); } catch { /* a 403 ends the page; otherwise retry below */ }
    if (!denied && t.source === source) setTimeout(connectEvents, 2000);
  });
}

async function viewTimeline(el) {
  el.append(timeline.section);
}

function setTransaction(transaction) {
  const el = $('#transaction');
  if (el && typeof transaction === 'number' && !(Number(el.textContent) > transaction)) el.textContent = transaction;
}

// ---------------------------------------------------------------- consumers, snapshots, readers

async function viewConsumers(el) {
  const { current: now, consumers } = await api('/api/consumers');
  el.append(h('h2', {}, 'Consumers ', h('span', { class: 'muted' }, `current history token ${now}`)),
    table('consumers-table', ['Name', 'Token', 'Behind', 'Last seen'], consumers.length ? consumers.map((c) =>
      h('tr', { testid: 'consumer-row', class: c.behind > 0 ? 'behind' : '', dataset: { name: c.name, behind: c.behind } },
        h('td', { class: 'mono' }, c.name), h('td', { class: 'num' }, c.token),
        h('td', { class: 'num' }, c.behind > 0 ? h('span', { class: 'pill warn' }, c.behind) : c.behind),
        h('td', { class: 'muted' }, fmtTime(c.updatedAt))))
      : noneRow(4, 'No consumers have registered.')));
}

async function viewSync(el, _arg, ctx) {
  const body = h('div');
  const stamp = h('span', { class: 'muted', testid: 'sync-refreshed' });
  el.append(h('div', { class: 'toolbar' }, h('h2', {}, 'Sync'), stamp), body);
  const refresh = async () => {
    let answer;
    try {
      answer = await api('/api/sync');
    } catch (error) {
      if (ctx.alive()) body.replaceChildren(errorBox(error.message));
      return;
    }
    if (!ctx.alive()) return;
    stamp.textContent = `refreshed ${fmtTime(new Date().toISOString(), { dateToo: false })}, every 2 s`;
    if (!answer.available) {
      body.replaceChildren(h('div', { class: 'notice', testid: 'sync-unavailable' }, 'No process has synced this container yet.'));
      return;
    }
    const s = answer.status;
    const row = (label, value, testid) => h('tr', { testid }, h('th', {}, label), h('td', {}, value));
    body.replaceChildren(h('table', { class: 'grid', testid: 'sync-table', dataset: { synced: s.pending === 0 ? 'yes' : 'no' } },
      h('tbody', {},
        row('Owner', s.owner ? `pid ${s.owner.pid} (${s.owner.mode}) since ${fmtTime(s.owner.since)}`
          : (s.agentProblem ? `none: a request cannot start the registered agent: ${s.agentProblem}`
            : (s.agentRegistered ? 'none: a request starts the registered agent' : 'none, and no agent is registered')), 'sync-owner'),
        row('State', h('span', { class: s.pending === 0 ? 'pill ok' : 'pill warn' }, s.pending === 0 ? 'synced' : `waiting: ${s.pending} local changes`), 'sync-state'),
        row('Acknowledged', `token ${s.acknowledged} of ${s.current}`, 'sync-acknowledged'),
        row('Last sync', s.lastSyncAt ? fmtTime(s.lastSyncAt) : 'never', 'sync-last'),
        row('Last error', s.lastError ? `${s.lastError.reason}: ${s.lastError.message}` : 'none', 'sync-error'))));
  };
  const timer = setInterval(refresh, 2000);
  ctx.leave.push(() => clearInterval(timer));
  await refresh();
}

async function viewSnapshots(el) {
  const { snapshots, problems = [] } = await api('/api/snapshots');
  el.append(h('h2', {}, 'Snapshots ', h('span', { class: 'muted' }, `${snapshots.length}`)));
  if (problems.length) el.append(h('ul', { class: 'warnbox', testid: 'snapshot-problems' }, problems.map((p) => h('li', {}, p))));
  el.append(table('snapshots-table', ['Generation', 'File', 'Source txn', 'Size', 'Created', 'SHA-256', 'Status'],
    !snapshots.length ? noneRow(7, 'No snapshots.') : snapshots.map((snap) => h('tr', { testid: 'snapshot-row', dataset: { generation: snap.generation, status: snap.status } },
      h('td', { class: 'num' }, snap.generation), h('td', { class: 'mono' }, snap.file),
      h('td', { class: 'num' }, snap.sourceTransactionID), h('td', { class: 'num' }, fmtBytes(snap.size)),
      h('td', { class: 'muted' }, fmtTime(snap.createdAt)),
      h('td', { class: 'mono', title: snap.sha256 }, snap.sha256 ? `${snap.sha256.slice(0, 12)}…` : '–'),
      h('td', {}, h('span', { class: snap.status === 'ok' ? 'pill ok' : 'pill bad' }, snap.status))))));
}

async function viewReaders(el, _arg, ctx) {
  const tbody = h('tbody');
  const stamp = h('span', { class: 'muted', testid: 'readers-refreshed' });
  const errors = h('div');
  el.append(h('div', { class: 'toolbar' }, h('h2', {}, 'Readers'), stamp), errors,
    h('table', { class: 'grid', testid: 'readers-table' },
      h('thead', {}, h('tr', {}, ['PID', 'Thread', 'Txn', 'Status', 'Process'].map((t) => h('th', {}, t)))), tbody));
  const refresh = async () => {
    let readers;
    try {
      ({ readers } = await api('/api/readers'));
    } catch (error) {
      if (ctx.alive()) errors.replaceChildren(errorBox(error.message));
      return;
    }
    if (!ctx.alive()) return;
    errors.replaceChildren();
    stamp.textContent = `${readers.length} slots · refreshed ${fmtTime(new Date().toISOString(), { dateToo: false })}, every 2 s`;
    tbody.replaceChildren(...readers.map((r) => {
      const status = r.self ? 'self' : r.alive ? 'alive' : 'stale';
      return h('tr', { testid: 'reader-row', dataset: { pid: r.pid, status } },
        h('td', { class: 'num' }, r.pid), h('td', { class: 'mono' }, r.thread),
        h('td', { class: 'num' }, r.transactionID ?? '–'),
        h('td', {}, h('span', { class: `pill ${status === 'stale' ? 'bad' : status === 'self' ? 'info' : 'ok'}` },
          { self: 'this server', alive: 'alive', stale: 'stale (process gone)' }[status])),
        h('td', { class: 'mono' }, r.process ?? '–'));
    }));
    if (!readers.length) tbody.append(noneRow(5, 'No reader slots in use.'));
  };
  const timer = setInterval(refresh, 2000);
  ctx.leave.push(() => clearInterval(timer));
  await refresh();
}

// ---------------------------------------------------------------- dashboard

const CATEGORIES = ['perceive', 'think', 'execute', 'engage', 'sustain'];
const COLORS = { perceive: '#4e79a7', think: '#f28e2b', execute: '#59a14f', engage: '#b05fa0', sustain: '#17a2b8' };
const PERIODS = { week: 'Week', month: 'Month', threeMonths: '3 months', sixMonths: '6 months', year: 'Year' };
const ARROWS = { rising: '↑', falling: '↓', flat: '→' };

async function viewDashboard(el) {
  const data = await api('/api/dashboard');
  el.append(h('h2', {}, 'Dashboard ', data.available ? h('span', { class: 'muted', testid: 'dashboard-records' },
    `${data.records} records · today ${data.today}`) : null));
  if (!data.available) {
    el.append(h('div', { class: 'notice', testid: 'dashboard-unavailable' }, data.reason || 'No checklist data.'));
    return;
  }
  const categories = [...new Set([...CATEGORIES, ...data.periods.flatMap((p) => p.categories.map((c) => c.category))])];
  el.append(h('div', { class: 'legend', testid: 'dashboard-legend' }, categories.map((category) => {
    const swatch = h('span', { class: 'swatch' });
    swatch.style.background = COLORS[category] || '#888';
    return h('span', { class: 'legend-item' }, swatch, category);
  }), h('span', { class: 'legend-item muted' }, '↑ rising · ↓ falling · → flat')),
  chart(data.periods, categories),
  h('p', { class: 'mono yearline', testid: 'dashboard-year-line' }, data.yearLine || ''),
  table('dashboard-table', ['Period', 'Days', 'Records', ...categories], data.periods.map((p) => h('tr', {},
    h('td', {}, PERIODS[p.period] || p.period), h('td', { class: 'num' }, p.days), h('td', { class: 'num' }, p.records),
    categories.map((category) => {
      const c = p.categories.find((x) => x.category === category);
      return h('td', { class: 'num' }, c && c.average != null ? `${c.average.toFixed(3)} ${ARROWS[c.trend] || ''}` : '–');
    })))));
}

function chart(periods, categories) {
  const W = 1320, H = 430, left = 44, right = 12, top = 34, bottom = 52;
  const plotW = W - left - right, plotH = H - top - bottom;
  const values = periods.flatMap((p) => p.categories.map((c) => c.average)).filter((v) => v != null);
  const max = Math.max(1, Math.ceil(Math.max(0, ...values)));
  const step = max <= 10 ? 1 : Math.ceil(max / 5);
  const y = (v) => top + plotH - (v / max) * plotH;
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', testid: 'dashboard-chart', role: 'img', 'aria-label': 'category averages per period' });
  for (let tick = 0; tick <= max; tick += step) {
    svg.append(s('line', { x1: left, x2: W - right, y1: y(tick), y2: y(tick), class: tick ? 'gridline' : 'axis' }),
      s('text', { x: left - 8, y: y(tick) + 4, class: 'tick', 'text-anchor': 'end' }, String(tick)));
  }
  const groupW = plotW / Math.max(1, periods.length);
  const slot = (groupW * 0.84) / categories.length;
  const barW = slot * 0.78;
  periods.forEach((period, i) => {
    const x0 = left + i * groupW + groupW * 0.08;
    if (i) svg.append(s('line', { x1: left + i * groupW, x2: left + i * groupW, y1: top, y2: top + plotH, class: 'separator' }));
    svg.append(s('text', { x: left + (i + 0.5) * groupW, y: H - bottom + 22, class: 'period', 'text-anchor': 'middle' }, PERIODS[period.period] || period.period),
      s('text', { x: left + (i + 0.5) * groupW, y: H - bottom + 40, class: 'period-sub', 'text-anchor': 'middle' }, `${period.days} days · ${period.records} records`));
    for (const c of period.categories) {
      if (c.average == null) continue;
      const x = x0 + categories.indexOf(c.category) * slot + (slot - barW) / 2;
      const cx = x + barW / 2;
      const barTop = y(c.average);
      svg.append(s('rect', {
        x, y: barTop, width: barW, height: top + plotH - barTop, rx: 2, fill: COLORS[c.category] || '#888',
        class: 'bar', testid: 'dashboard-bar',
        dataset: { period: period.period, category: c.category, value: String(c.average), trend: c.trend },
      }, s('title', {}, `${PERIODS[period.period] || period.period} · ${c.category}: ${c.average} (${c.trend})`)),
      s('text', { x: cx, y: barTop - 6, class: 'value', 'text-anchor': 'middle' }, c.average.toFixed(2)),
      s('text', { x: cx, y: barTop - 20, class: `trend trend-${c.trend}`, 'text-anchor': 'middle' }, ARROWS[c.trend] || '?'));
    }
  });
  return h('div', { class: 'chart-box' }, svg);
}

// ---------------------------------------------------------------- start

/** The tabs' drawings. The tabs themselves are the server's (/api/overview's views): a tab with no
 * drawing here shows its route's answer as indented JSON (viewAnswer). */
const views = {
  catalog: viewCatalog, collection: viewCollection, defaults: viewDefaults, files: viewFiles, timeline: viewTimeline,
  consumers: viewConsumers, sync: viewSync, snapshots: viewSnapshots, readers: viewReaders, dashboard: viewDashboard,
};

/** A view drawn as its route's answer, indented, as text. */
async function viewAnswer(el, path) {
  const answer = await api(path);
  el.append(h('pre', { class: 'mono answer', testid: 'answer' }, JSON.stringify(answer, null, 2)));
}

async function start() {
  // The token did its work (the server set the cookie): keep it out of the address bar, the history
  // and any screenshot of the window.
  if (new URLSearchParams(location.search).has('token')) history.replaceState(null, '', location.pathname + location.hash);
  buildTimeline();
  try {
    overview = await api('/api/overview');
  } catch (error) {
    if (!denied) $('#view').replaceChildren(errorBox(error.message));
    return;
  }
  $('#tabs').replaceChildren(...overview.views.map((v) =>
    h('a', { href: `#${v.tab}`, id: `tab-${v.tab}`, dataset: { tab: v.tab } }, v.label)));
  document.title = `kvtool · ${overview.group}`;
  $('#group').textContent = overview.group;
  $('#path').textContent = overview.path;
  $('#path').title = overview.path;
  setTransaction(overview.transaction);
  const mode = $('#mode');
  mode.textContent = overview.writesAllowed ? 'writes allowed' : 'read-only';
  mode.classList.add(overview.writesAllowed ? 'writes' : 'readonly');
  window.addEventListener('hashchange', route);
  route();
  connectEvents();
}

start();
