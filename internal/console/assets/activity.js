// Activity: GET /events (every replica's calls, observe role; the last
// hour's first) read as a stream, filtered by tool, caller and status on the server; a row's
// button opens the event, and the execution when this key may read it.
import { call, problem, stream } from './api.js';
import { el, pretty, meta } from './dom.js';

const maxRows = 300;
let abort = null;

export function init() {
  document.getElementById('activity-filter').addEventListener('submit', (e) => {
    e.preventDefault();
    stop();
    start();
  });
}

function status(text) { document.getElementById('activity-status').textContent = text; }

export function start() {
  if (abort) return;
  abort = new AbortController();
  const q = new URLSearchParams();
  for (const n of ['tool', 'caller', 'status']) {
    const v = document.getElementById('f-' + n).value.trim();
    if (v) q.set(n, v);
  }
  // The calls made before the page opened (the last hour's), then live.
  q.set('since', '1h');
  const path = '/events?' + q;
  status('connecting…');
  stream(path, {
    signal: abort.signal,
    onEvent: (name, ev) => row(ev),
    onRefused: (r) => status(problem(r)),
    onState: (s) => status(s === 'live' ? 'Live: new calls appear at the top.' : s),
  });
}

export function stop() {
  if (abort) abort.abort();
  abort = null;
}

function row(ev) {
  const body = document.getElementById('activity-rows');
  const time = ev.time ? new Date(ev.time).toLocaleTimeString() : '';
  const open = el('button', { type: 'button', class: 'link', onclick: () => detail(ev), 'aria-label': 'details of ' + (ev.tool || 'event') + ' ' + (ev.execution_id || ev.request_id || '') },
    ev.execution_id || ev.request_id || 'details');
  body.prepend(el('tr', { 'data-tool': ev.tool || '', 'data-replica': ev.replica || '' },
    el('td', {}, time), el('td', {}, ev.replica || ''), el('td', {}, ev.type || ''), el('td', {}, ev.tool || ''),
    el('td', {}, ev.caller || ''), el('td', {}, ev.status || ''), el('td', {}, ev.duration_ms ? ev.duration_ms.toFixed(1) : ''),
    el('td', {}, open)));
  while (body.rows.length > maxRows) body.deleteRow(body.rows.length - 1);
}

async function detail(ev) {
  const box = document.getElementById('activity-detail');
  box.hidden = false;
  box.replaceChildren(el('h3', {}, (ev.tool || 'event') + ' — ' + (ev.type || '')),
    meta([['Replica', ev.replica], ['Caller', ev.caller], ['Request', ev.request_id], ['Execution', ev.execution_id],
      ['Status', ev.status], ['Error', [ev.error_type, ev.error_code].filter(Boolean).join(' / ')], ['Duration', ev.duration_ms ? ev.duration_ms + ' ms' : '']]),
    el('h4', {}, 'Event'), pretty(ev));
  if (ev.execution_id) {
    const r = await call('GET', '/executions/' + encodeURIComponent(ev.execution_id));
    box.append(el('h4', {}, 'Execution (envelope, timing, fallbacks)'),
      r.ok ? pretty(r.data) : el('p', { class: 'hint' }, r.status === 404
        ? 'Only the key that made this call can read its execution (GET /executions/' + ev.execution_id + ').'
        : problem(r)));
  }
  box.focus();
}
