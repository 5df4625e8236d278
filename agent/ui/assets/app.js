// The cairn panel (docs/operating.md, "The panel"). Everything it shows comes from
// the daemon's socket API through `cairn ui`; every state-changing request
// carries the session's CSRF token. Text from the daemon is only ever set as
// textContent, never parsed as HTML, and always through shown: names from a
// user's tree cannot reorder or break what the panel shows.
'use strict';

const S = {
  csrf: '',
  ws: '',            // the workspace shown
  tl: null,          // its timeline (/ui/timeline)
  sel: '',           // the checkpoint shown
  cmp: 'parent',     // what its files are compared with: parent, worktree, or a ledger id
  seq: 0,            // the newest showCheckpoint: only it draws
  // The files of the checkpoint shown, fetched a page at a time and drawn
  // a screenful at a time (a checkpoint may hold 100,000 files).
  folder: '',        // the folder browsed ('' the top)
  total: 0,          // files under it
  pages: new Map(),  // page index → files
  picked: new Set(), // paths checked to restore only those
};

const PAGE = 200;    // files a request asks for
const ROW = 24;      // px a file's row takes (style.css: #files li)
const PLAN_LISTED = 200; // a restore plan over this many files is summarised by folder

// shown is text as the panel shows it: C0 controls (newline and tab too),
// DEL, C1 controls, bidirectional controls and marks and line separators
// become visible escapes (\n, \x1b, \u202e), as the CLI prints them
// (platform/printable in Go; README.md, "Security").
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const NAMED = { '\x07': '\\a', '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\v': '\\v' };
function shown(s) {
  return String(s).replace(UNSAFE, (c) => {
    const n = c.charCodeAt(0);
    return NAMED[c] || (n < 0x80 ? '\\x' + n.toString(16).padStart(2, '0') : '\\u' + n.toString(16).padStart(4, '0'));
  });
}
// shownLines is shown for text of several lines (a patch): newlines and tabs stay.
const shownLines = (s) => String(s).split('\n').map((l) => l.split('\t').map(shown).join('\t')).join('\n');

// el makes an element: text (shown), lines (shownLines), class, on* handlers,
// attributes (a title or label shown; data-* and values kept exact).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = shown(v);
    else if (k === 'lines') e.textContent = shownLines(v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'title' || k === 'aria-label') e.setAttribute(k, shown(v));
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat(Infinity)) {
    if (k === null || k === undefined || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(shown(k)));
  }
  return e;
}
const $ = (id) => document.getElementById(id);
// fill replaces an element's children; arrays are flattened, empty slots skipped.
function fill(e, ...kids) {
  e.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false));
}

async function call(path, opts) {
  opts = opts || {};
  const init = { method: opts.method || 'GET', headers: {}, credentials: 'same-origin', cache: 'no-store' };
  if (opts.body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(opts.body);
  }
  if (init.method !== 'GET') init.headers['X-Cairn-Csrf'] = S.csrf;
  const res = await fetch(path, init);
  let data = null;
  try { data = await res.json(); } catch (e) { /* no body */ }
  if (!res.ok) {
    const err = new Error((data && data.message) || res.status + ' ' + res.statusText);
    err.code = data && data.code;
    throw err;
  }
  return data;
}
const q = (o) => new URLSearchParams(o).toString();

// progressText is a long operation's progress as `cairn status` says it.
function progressText(p) {
  const pct = p.total > 0 ? Math.min(100, Math.floor(p.done * 100 / p.total)) : 0;
  return p.op + ' ' + pct + ' % (' + p.done.toLocaleString() + '/' + p.total.toLocaleString() + ' ' + (p.unit || 'files') +
    (p.bytes ? ', ' + bytes(p.bytes) : '') + ')';
}

function age(t) {
  const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  if (s < 60) return Math.floor(s) + 's ago';
  if (s < 3600) return Math.floor(s / 60) + 'm ago';
  if (s < 86400) return Math.floor(s / 3600) + 'h ago';
  return Math.floor(s / 86400) + 'd ago';
}
function bytes(n) {
  if (!n) return '0 B';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}
const short = (sha) => (sha ? sha.slice(0, 7) : '—');
const node = (id) => (S.tl ? S.tl.nodes.find((n) => n.id === id) : null);
const label = (rec) => rec.label || rec.codonName || rec.id;

// Workspaces.

async function loadWorkspaces() {
  let st;
  try {
    st = await call('/v1/status');
  } catch (e) {
    fill($('workspaces'), el('li', { class: 'st-failed', text: 'status: ' + e.message }));
    return;
  }
  $('daemon').textContent = shown('daemon ' + st.version + ', pid ' + st.pid);
  const list = st.workspaces || [];
  if (!list.length) {
    fill($('workspaces'), el('li', { class: 'dim', text: 'no workspaces you may see' }));
    return;
  }
  fill($('workspaces'), ...list.map((w) => {
    const state = w.rollingBack ? 'rollback in progress' : w.state;
    const cls = w.rollingBack ? 'st-rolling' : 'st-' + w.state;
    const name = w.dir.split('/').filter(Boolean).pop() || w.dir;
    return el('li', { 'data-dir': w.dir, class: w.dir === S.ws ? 'selected' : '', onclick: () => chooseWorkspace(w.dir) },
      el('div', { class: 'ws-name', text: name }),
      el('div', { class: 'ws-dir', text: w.dir }),
      el('div', { class: 'ws-facts' },
        el('span', { class: 'badge ' + cls, text: state }),
        el('span', { class: 'ws-count', text: w.kept + ' checkpoint' + (w.kept === 1 ? '' : 's') }),
        ' · ' + bytes(w.storeBytes),
        w.lastCheckpoint ? ' · last ' + w.lastCheckpoint + ' ' + age(w.lastTime) : ''),
      w.progress ? el('div', { class: 'ws-progress ws-facts' },
        el('progress', { max: Math.max(w.progress.total, 1), value: w.progress.done }),
        ' ' + progressText(w.progress)) : null,
      w.error ? el('div', { class: 'st-failed ws-facts', text: w.error }) : null);
  }));
  if (!S.ws) {
    const want = new URLSearchParams(location.hash.slice(1)).get('ws');
    const pick = list.find((w) => w.dir === want) || (list.length === 1 ? list[0] : null);
    if (pick) chooseWorkspace(pick.dir);
  }
}

function chooseWorkspace(dir) {
  if (S.ws !== dir) {
    S.ws = dir;
    S.tlKey = '';
    S.sel = '';
    S.cmp = 'parent';
    $('result').hidden = true;
    $('plan').hidden = true;
    $('diff-box').hidden = true;
    fill($('detail'), el('p', { class: 'dim', text: 'Choose a checkpoint in the timeline.' }));
    history.replaceState(null, '', '#' + q({ ws: dir }));
  }
  for (const li of $('workspaces').children) li.classList.toggle('selected', li.dataset.dir === dir);
  loadTimeline();
}

// The timeline: the rows `cairn log` draws, laid out by the daemon.

async function loadTimeline() {
  if (!S.ws) return;
  const ws = S.ws;
  let tl;
  try {
    tl = await call('/ui/timeline?' + q({ workspace: ws, limit: 500 }));
  } catch (e) {
    fill($('timeline'), el('p', { class: 'st-failed', text: 'timeline: ' + e.message }));
    return;
  }
  if (ws !== S.ws) return;
  // Redraw only what changed: a row under the pointer stays put.
  const key = JSON.stringify(tl);
  if (key === S.tlKey) return;
  S.tl = tl;
  S.tlKey = key;
  $('timeline-title').textContent = shown('Timeline · ' + (ws.split('/').filter(Boolean).pop() || ws));
  drawTimeline();
}

function metaOf(n) {
  return [n.where, short(n.sha), n.kind, age(n.time)].join(' · ');
}

// tick refreshes the ages in place.
function tick() {
  if (!S.tl) return;
  for (const m of $('timeline').querySelectorAll('.meta[data-node]')) m.textContent = shown(metaOf(S.tl.nodes[+m.dataset.node]));
}

function drawTimeline() {
  const tl = S.tl;
  if (!tl.nodes.length) {
    fill($('timeline'), el('p', { class: 'dim', text: 'no checkpoints yet' }));
    return;
  }
  fill($('timeline'), ...tl.rows.map((r) => {
    if (r.node < 0) return el('div', { class: 'row' }, el('span', { class: 'lanes', text: r.lanes }));
    const n = tl.nodes[r.node];
    const k = 'k-' + n.kind;
    const meta = metaOf(n);
    let state = null;
    if (n.state !== 'ok') state = el('span', { class: 'state-' + n.state, text: ' · ' + n.state + (n.error ? ': ' + n.error : '') });
    return el('div', { class: 'row node' + (n.id === S.sel ? ' selected' : ''), 'data-id': n.id, title: n.sha || '', onclick: () => chooseCheckpoint(n.id) },
      el('span', { class: 'lanes', text: r.lanes }), el('span', { class: k, text: r.sign }), el('span', { class: 'lanes', text: r.after }),
      ' ', el('span', { class: k, text: n.mark }), ' ', el('span', { class: 'id', text: n.id.padEnd(4) }), ' ',
      el('span', { class: 'title', text: n.title }), '   ', el('span', { class: 'meta', 'data-node': r.node, text: meta }), state,
      n.head ? el('span', { class: 'head', text: '  ← HEAD' }) : null);
  }));
}

// A checkpoint: its record, its files, their diffs.

async function chooseCheckpoint(id) {
  S.sel = id;
  S.cmp = 'parent';
  $('plan').hidden = true;
  $('diff-box').hidden = true;
  for (const r of $('timeline').querySelectorAll('.row.node')) r.classList.toggle('selected', r.dataset.id === id);
  fill($('detail'), el('p', { class: 'dim', text: 'loading ' + id + '…' }));
  await showCheckpoint();
}

// filesQuery is the request for page k of the files under S.folder, as
// S.cmp compares them.
function filesQuery(k) {
  const ws = S.ws, id = S.sel;
  const p = { files: 1, folders: k === 0 ? 1 : '', folder: S.folder, offset: k * PAGE, limit: PAGE };
  if (S.cmp === 'parent') return '/v1/show?' + q({ workspace: ws, id, ...p });
  if (S.cmp === 'worktree') return '/v1/diff?' + q({ workspace: ws, a: id, ...p });
  return '/v1/diff?' + q({ workspace: ws, a: S.cmp, b: id, ...p });
}

async function showCheckpoint(folder) {
  const id = S.sel, seq = ++S.seq;
  const n = node(id);
  if (!n) return;
  if (folder === undefined) {
    S.folder = '';
    S.picked = new Set();
  } else {
    S.folder = folder;
  }
  let first = { files: [], folders: [], total: 0 };
  let err = null;
  try {
    if (n.usable) first = await call(filesQuery(0));
  } catch (e) {
    err = e.message;
  }
  if (seq !== S.seq) return; // a newer choice is on its way
  S.total = first.total || 0;
  S.pages = new Map([[0, first.files || []]]);
  S.selKey = JSON.stringify(n);
  const rows = [
    ['kind', el('span', { class: 'k-' + n.kind, text: n.mark + ' ' + n.kind })],
    ['state', n.state + (n.error ? ': ' + n.error : '')],
    ['codon / run', n.where],
    ['sha', el('span', { class: 'mono', text: n.sha || '—' })],
    ['parent', el('span', { class: 'mono', text: n.parent || '—' })],
    ['sealed', new Date(n.time).toLocaleString() + ' (' + age(n.time) + ')' + (n.durationMs ? ', in ' + n.durationMs + ' ms' : '')],
    ['changes', '+' + n.added + ' ~' + n.changed + ' −' + n.removed],
    ['ref', n.ref || '—'],
  ];
  for (const i of n.issues || []) rows.push(['issue', i.path + ': ' + i.reason]);
  for (const i of n.skipped || []) rows.push(['skipped', i.path + ': ' + i.reason]);
  const others = S.tl.nodes.filter((o) => o.usable && o.id !== id);
  const cmp = el('select', { id: 'compare', onchange: (ev) => { S.cmp = ev.target.value; showCheckpoint(); } },
    el('option', { value: 'parent', text: 'its parent' }),
    el('option', { value: 'worktree', text: 'the work tree now' }),
    others.map((o) => el('option', { value: o.id, text: o.id + ' ' + o.title })));
  cmp.value = S.cmp;
  const view = el('div', { id: 'files-view', onscroll: drawFiles },
    el('div', { id: 'files-space' }), el('ul', { id: 'files' }));
  fill($('detail'),
    el('h2', { text: 'Checkpoint' }),
    el('h3', {}, el('span', { class: 'k-' + n.kind, text: n.mark }), ' ', el('span', { class: 'id', text: n.id }), ' ', n.title,
      n.head ? el('span', { class: 'head', text: '  ← HEAD' }) : null),
    el('table', { id: 'record' }, rows.map(([k, v]) => el('tr', {}, el('th', { text: k }), el('td', {}, v)))),
    el('div', { class: 'actions' },
      el('button', { id: 'restore-btn', class: 'primary', disabled: !n.usable, onclick: planRestore }, 'Restore…'),
      el('span', { class: 'dim', text: 'files compared with' }), cmp),
    err ? el('p', { class: 'st-failed', text: 'files: ' + err }) : null,
    !n.usable ? el('p', { class: 'dim', text: 'this checkpoint holds no commit a restore may use' }) : null,
    folderBar(first.folders || []),
    S.total ? el('p', { class: 'dim', text: 'Check files to restore only those; none checked restores everything.' }) : null,
    S.total || !n.usable || err ? view : el('p', { id: 'no-files', class: 'dim', text: 'no files differ' }));
  drawFiles();
}

// folderBar is where the browsed folder is and its children that changed,
// with how many files each: a click narrows the list to one.
function folderBar(folders) {
  const parts = S.folder ? S.folder.split('/') : [];
  const crumbs = [el('button', { class: 'crumb', onclick: () => showCheckpoint('') }, 'all files')];
  parts.forEach((p, i) => crumbs.push(' / ', el('button', { class: 'crumb', onclick: () => showCheckpoint(parts.slice(0, i + 1).join('/')) }, p)));
  const subs = folders.filter((f) => f.folder);
  return el('div', { id: 'folders' },
    el('div', { class: 'crumbs' }, crumbs, el('span', { class: 'dim', text: '  ' + S.total.toLocaleString() + ' file' + (S.total === 1 ? '' : 's') })),
    subs.length ? el('ul', { id: 'subfolders' }, subs.slice(0, 50).map((f) => el('li', {},
      el('button', { class: 'crumb', 'data-folder': f.path, onclick: () => showCheckpoint(f.path) }, f.path.split('/').pop() + '/'),
      el('span', { class: 'dim num', text: f.files.toLocaleString() + ' (+' + (f.added || 0) + ' ~' + (f.changed || 0) + ' −' + (f.removed || 0) + ')' })))) : null);
}

// drawFiles draws the rows in view (and a few around them), fetching the
// pages they are on; the list's height is every file's.
function drawFiles() {
  const view = $('files-view');
  if (!view) return;
  $('files-space').style.height = (S.total * ROW) + 'px';
  const from = Math.max(0, Math.floor(view.scrollTop / ROW) - 10);
  const to = Math.min(S.total, Math.ceil((view.scrollTop + Math.max(view.clientHeight, 400)) / ROW) + 10);
  // Rows already drawn for this range stay (a click on one must find it).
  const key = from + ':' + to + ':' + [...S.pages.keys()].filter((k) => S.pages.get(k)).join(',');
  if (view.dataset.drawn === key) return;
  view.dataset.drawn = key;
  const rows = [];
  const missing = new Set();
  for (let i = from; i < to; i++) {
    const page = S.pages.get(Math.floor(i / PAGE));
    if (!page) { missing.add(Math.floor(i / PAGE)); continue; }
    const f = page[i % PAGE];
    if (f) rows.push(fileRow(f));
  }
  const ul = $('files');
  ul.style.top = (from * ROW) + 'px';
  fill(ul, rows);
  for (const k of missing) fetchPage(k);
}

async function fetchPage(k) {
  if (S.pages.has(k)) return;
  S.pages.set(k, null);
  const seq = S.seq;
  try {
    const d = await call(filesQuery(k));
    if (seq !== S.seq) return;
    S.pages.set(k, d.files || []);
    drawFiles();
  } catch (e) {
    S.pages.delete(k);
  }
}

function fileRow(f) {
  const sign = { added: 'A', changed: 'M', removed: 'D' }[f.status] || '?';
  const counts = f.binary ? 'binary' : '+' + (f.linesAdded || 0) + ' −' + (f.linesRemoved || 0);
  const pick = el('input', { type: 'checkbox', class: 'pick', title: 'restore only the checked files', 'aria-label': 'restore ' + f.path,
    onchange: (ev) => { if (ev.target.checked) S.picked.add(f.path); else S.picked.delete(f.path); } });
  pick.checked = S.picked.has(f.path);
  return el('li', { 'data-path': f.path }, pick,
    el('span', { class: 'fs fs-' + f.status, title: f.status, text: sign }),
    el('span', { class: 'path', title: f.path, text: f.path }),
    el('span', { class: 'dim num', text: counts }),
    el('button', { class: 'diff-btn', onclick: () => showDiff(f) }, 'diff'));
}

async function showDiff(f) {
  const id = S.sel, ws = S.ws;
  let d, what;
  try {
    if (S.cmp === 'parent') {
      d = await call('/v1/show?' + q({ workspace: ws, id, path: f.path, patch: 1 }));
      what = 'its parent → ' + id;
    } else if (S.cmp === 'worktree') {
      d = await call('/v1/diff?' + q({ workspace: ws, a: id, path: f.path, patch: 1 }));
      what = id + ' → the work tree';
    } else {
      d = await call('/v1/diff?' + q({ workspace: ws, a: S.cmp, b: id, path: f.path, patch: 1 }));
      what = S.cmp + ' → ' + id;
    }
  } catch (e) {
    d = { patch: 'diff: ' + e.message };
  }
  $('diff-title').textContent = shown(f.path + ' (' + what + ')');
  const lines = (d.patch || '').split('\n');
  const out = lines.map((l) => {
    let c = '';
    if (l.startsWith('+++') || l.startsWith('---') || l.startsWith('diff ') || l.startsWith('index ') || l.startsWith('new file') || l.startsWith('deleted file')) c = 'd-meta';
    else if (l.startsWith('@@')) c = 'd-hunk';
    else if (l.startsWith('+')) c = 'd-add';
    else if (l.startsWith('-')) c = 'd-del';
    else if (l.startsWith('Binary files')) c = 'd-meta';
    return el('span', { class: c, lines: l + '\n' });
  });
  if (f.binary) out.push(el('span', { class: 'dim binary-note', text: '(binary file: its content is not shown)\n' }));
  fill($('diff'), ...out);
  $('diff-box').hidden = false;
  $('diff-box').scrollIntoView({ block: 'nearest' });
}

// Restore: the dry-run plan first, then the restore, then Undo.

function pickedPaths() {
  return [...S.picked];
}

async function planRestore() {
  const id = S.sel, ws = S.ws, paths = pickedPaths();
  const n = node(id);
  const body = { workspace: ws, target: id, dryRun: true };
  if (paths.length) body.paths = paths;
  let plan;
  try {
    plan = await call('/v1/restore', { method: 'POST', body });
  } catch (e) {
    showResult(false, 'Restore: ' + e.message);
    return;
  }
  const total = (fs) => fs.reduce((s, f) => s + f.size, 0);
  const table = (fs, cls) => el('table', { class: cls }, fs.map((f) =>
    el('tr', {}, el('td', { class: 'mono', text: f.path }), el('td', { class: 'dim', text: f.action }), el('td', { class: 'num', text: bytes(f.size) }))));
  // Over PLAN_LISTED files, a plan is summarised by top folder, with a way to list every file.
  const byFolder = (fs, cls) => {
    const m = new Map();
    for (const f of fs) {
      const i = f.path.indexOf('/');
      const k = i < 0 ? f.path : f.path.slice(0, i + 1);
      const c = m.get(k) || { n: 0, size: 0 };
      c.n++; c.size += f.size;
      m.set(k, c);
    }
    const rows = [...m.entries()].sort((x, y) => y[1].n - x[1].n);
    return el('table', { class: cls + ' by-folder' }, rows.map(([k, c]) =>
      el('tr', {}, el('td', { class: 'mono', text: k }), el('td', { class: 'dim', text: c.n.toLocaleString() + ' file' + (c.n === 1 ? '' : 's') }), el('td', { class: 'num', text: bytes(c.size) }))));
  };
  const big = plan.write.length + plan.delete.length > PLAN_LISTED;
  const list = big ? byFolder : table;
  const expand = big ? el('button', { id: 'plan-all', onclick: (ev) => {
    ev.target.remove();
    for (const [sel, fs, cls] of [['.plan-write', plan.write, 'plan-write'], ['.plan-delete', plan.delete, 'plan-delete']]) {
      const t = $('plan').querySelector(sel);
      if (t) t.replaceWith(table(fs, cls));
    }
  } }, 'List every file') : null;
  fill($('plan'), 
    el('h3', { text: 'Restore plan: to ' + id + ' "' + label(n) + '"' + (paths.length ? ', ' + paths.length + ' file(s) only' : '') }),
    el('p', { id: 'plan-summary' }, 'Writes ' + plan.write.length + ' file(s) (' + bytes(total(plan.write)) + '), deletes ' +
      plan.delete.length + ' file(s) (' + bytes(total(plan.delete)) + '); ' + plan.kept + ' file(s) cairn does not track stay as they are.'),
    plan.write.length ? el('h3', { text: 'Write' }) : null, plan.write.length ? list(plan.write, 'plan-write') : null,
    plan.delete.length ? el('h3', { text: 'Delete' }) : null, plan.delete.length ? list(plan.delete, 'plan-delete') : null,
    expand,
    el('p', { class: 'dim', text: 'Before anything changes, cairn saves the work tree as a pre-restore checkpoint: Undo brings it back.' }),
    el('div', { class: 'actions' },
      el('button', { id: 'confirm-btn', class: 'danger', onclick: () => doRestore(ws, id, paths) }, 'Restore'),
      el('button', { id: 'cancel-btn', onclick: () => { $('plan').hidden = true; } }, 'Cancel')));
  $('plan').hidden = false;
  $('plan').scrollIntoView({ block: 'nearest' });
}

async function doRestore(ws, id, paths) {
  const body = { workspace: ws, target: id };
  if (paths.length) body.paths = paths;
  const confirm = $('confirm-btn');
  if (confirm) confirm.disabled = true;
  try {
    const res = await call('/v1/restore', { method: 'POST', body });
    $('plan').hidden = true;
    restored(res);
  } catch (e) {
    $('plan').hidden = true;
    showResult(false, 'Restore: ' + e.message);
  }
  refresh();
}

function restored(res) {
  const extra = [];
  if (res.preRestore) extra.push(el('span', { class: 'dim' }, ' · the work before it is saved as ', el('span', { class: 'id', text: res.preRestore.id }), ' (pre-restore)'));
  for (const d of res.differences || []) extra.push(el('div', { class: 'state-partial', text: 'differs after the restore: ' + d.path + ': ' + d.reason }));
  showResult(true, 'Restored to "' + label(res.target) + '"', extra,
    res.preRestore ? el('button', { id: 'undo-btn', onclick: undo }, 'Undo') : null);
}

async function undo() {
  const ws = S.ws;
  $('undo-btn').disabled = true;
  try {
    restored(await call('/v1/undo', { method: 'POST', body: { workspace: ws } }));
  } catch (e) {
    showResult(false, 'Restore: ' + e.message);
  }
  refresh();
}

function showResult(ok, msg, extra, button) {
  const r = $('result');
  r.className = ok ? 'ok' : 'err';
  fill(r, el('span', { class: 'msg', text: msg }), extra || [], button ? el('div', { class: 'actions' }, button) : null);
  r.hidden = false;
}

// Live: the daemon's event stream (newline-delimited JSON).

let pending = null;
function refresh() {
  clearTimeout(pending);
  pending = setTimeout(async () => {
    await loadWorkspaces();
    await loadTimeline();
    if (S.sel && node(S.sel) && JSON.stringify(node(S.sel)) !== S.selKey) showCheckpointIfIdle();
  }, 150);
}
function showCheckpointIfIdle() {
  // Keep a plan on screen and the files the user checked.
  if ($('plan').hidden && !S.picked.size) showCheckpoint();
}

async function events() {
  for (;;) {
    try {
      const res = await fetch('/v1/events', { credentials: 'same-origin', cache: 'no-store' });
      if (!res.ok || !res.body) throw new Error('events: ' + res.status);
      $('live').className = 'live on';
      $('live').textContent = 'live';
      refresh(); // what happened while the stream was down
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (!line.trim()) continue;
          let ev;
          try { ev = JSON.parse(line); } catch (e) { continue; }
          if (!ev.workspace || ev.workspace === S.ws || ev.type !== 'error') refresh();
        }
      }
    } catch (e) {
      /* reconnect below */
    }
    $('live').className = 'live off';
    $('live').textContent = 'offline';
    await new Promise((r) => setTimeout(r, 2000));
  }
}

async function start() {
  try {
    S.csrf = (await call('/ui/session')).csrf;
  } catch (e) {
    // Served straight from the socket, there is no session.
  }
  await loadWorkspaces();
  setInterval(tick, 30000);
  setInterval(loadWorkspaces, 30000);
  events();
}
start();
