// Approvals: GET /approvals polled every second; a card per waiting call,
// kept (with its reason being typed and its focus) across polls; approve
// or deny with POST /approvals/{id}. A key without the approve role is
// refused the listing by toold, and is shown no buttons; a call the key
// may not decide on (its own, or any call when toold has no keys and
// approvals.self_approval is off) says why and what to set, from the
// listing's may_decide and refusal, instead of its buttons.
import { call, problem, code, key } from './api.js';
import { el, duration, meta } from './dom.js';
import { argumentsView } from './review.js';

const every = 500; // ms: a waiting call reaches the inbox within a second, with room to spare
const cards = new Map(); // id -> {node, item}
const seen = new Set();
const toolInfo = new Map(); // name -> spec (or null)
let timer = null;
let first = true;

export function init() {
  const btn = document.getElementById('notify');
  if (!('Notification' in window)) { btn.hidden = true; return; }
  btn.addEventListener('click', async () => {
    const p = await Notification.requestPermission();
    status(p === 'granted' ? 'Browser notifications are on for new approvals.' : 'Notifications were not allowed by the browser.');
  });
}

// refusedKey is the key toold refused the listing for lack of the approve
// role: it is not asked again until the key changes, since every refusal
// of a role is an audit record.
let refusedKey = null;

export function background() {
  if (timer) return;
  const tick = async () => {
    if (refusedKey !== key()) await poll();
    timer = setTimeout(tick, every);
  };
  tick();
}

export function start() {}
export function stop() {}

function status(text) { document.getElementById('approvals-status').textContent = text; }

// notice says what the listing warns of: without keys and with
// approvals.self_approval on, any local process may decide as this page.
function notice(text) {
  const n = document.getElementById('approvals-notice');
  n.textContent = text || '';
  n.hidden = !text;
}

async function poll() {
  const r = await call('GET', '/approvals');
  const list = document.getElementById('approvals-list');
  if (!r.ok) {
    if (code(r) === 'missing_role') refusedKey = key();
    for (const c of cards.values()) c.node.remove();
    cards.clear();
    document.getElementById('approvals-count').textContent = '';
    status(code(r) === 'missing_role'
      ? 'This key does not have the approve role: it can neither see nor decide approvals.'
      : problem(r));
    notice('');
    list.dataset.state = 'refused';
    return;
  }
  if (list.dataset.state === 'refused') status(''); // the refusal is over (a key was entered)
  list.dataset.state = 'ok';
  notice(r.data.notice);
  const items = r.data.approvals || [];
  const ids = new Set(items.map((a) => a.id));
  for (const [id, c] of cards) {
    if (!ids.has(id) && !c.deciding) { c.node.remove(); cards.delete(id); }
  }
  for (const a of items) {
    let c = cards.get(a.id);
    if (c && c.mayDecide !== a.may_decide && !c.deciding) { // the key changed
      c.node.remove();
      cards.delete(a.id);
      c = null;
    }
    if (!c) {
      c = await card(a);
      cards.set(a.id, c);
      list.append(c.node);
      if (!first && !seen.has(a.id)) notify(a);
    }
    seen.add(a.id);
    c.item = a;
    tickTimes(c);
  }
  first = false;
  const n = items.length;
  document.getElementById('approvals-count').textContent = n ? String(n) : '';
  document.title = (n ? '(' + n + ') ' : '') + 'toold console';
  if (!n) list.dataset.empty = 'true'; else delete list.dataset.empty;
}

function notify(a) {
  if (!('Notification' in window) || Notification.permission !== 'granted') return;
  const n = new Notification('toold: approval needed', { body: a.tool + ' called by ' + callerOf(a), tag: a.id });
  n.addEventListener('click', () => { window.focus(); location.hash = '#approvals'; });
}

async function describe(name) {
  if (!toolInfo.has(name)) {
    const r = await call('GET', '/tools/' + encodeURIComponent(name));
    toolInfo.set(name, r.ok ? r.data : null);
  }
  return toolInfo.get(name);
}

function effects(spec) {
  const e = spec && spec.effects;
  if (!e) return '';
  return Object.entries(e).filter(([, v]) => v === true).map(([k]) => k.replace(/_/g, ' ')).join(', ') || 'none declared';
}

async function card(a) {
  const req = parse(a.request);
  const spec = await describe(a.tool);
  const rid = 'reason-' + a.id;
  const err = el('p', { class: 'error', role: 'alert' });
  const waited = el('span', { class: 'waited' });
  const expires = el('span', { class: 'expires' });
  const reason = el('textarea', { id: rid, name: 'reason', maxlength: 2000 });
  const node = el('article', { class: 'card approval', 'data-id': a.id, 'aria-labelledby': 'title-' + a.id },
    el('h3', { id: 'title-' + a.id }, a.tool),
    spec && spec.description ? el('p', { class: 'description' }, spec.description) : null,
    meta([['Caller', callerOf(a)], ['Effects', effects(spec)], ['Waiting', waited], ['Expires', expires], ['Execution', a.id]]),
    el('h4', {}, 'Arguments that will run'),
    argumentsView(req.arguments === undefined ? req : req.arguments, req.review));
  const c = { item: a, node, waited, expires, deciding: false, mayDecide: a.may_decide };
  if (a.may_decide === false) {
    const why = a.refusal || {};
    node.append(el('div', { class: 'refusal', role: 'note' },
      el('p', {}, 'You cannot decide on this call: ' + (why.message || 'toold refuses it') + '.'),
      why.suggestion ? el('p', {}, 'To decide here: ' + why.suggestion + '.') : null));
    return c;
  }
  const decide = async (approve) => {
    c.deciding = true;
    err.textContent = '';
    for (const b of node.querySelectorAll('button')) b.disabled = true;
    const r = await call('POST', '/approvals/' + encodeURIComponent(a.id), { approve, reason: reason.value.trim() });
    c.deciding = false;
    if (r.ok) {
      status((approve ? 'Approved ' : 'Denied ') + a.tool + ' called by ' + callerOf(a) + ' (' + a.id + ').');
      node.remove();
      cards.delete(a.id);
      return;
    }
    err.textContent = problem(r);
    for (const b of node.querySelectorAll('button')) b.disabled = false;
  };
  node.append(el('form', { class: 'decide', onsubmit: (e) => e.preventDefault() },
    el('label', { for: rid }, 'Reason (kept in the record and the audit log; the caller sees it on a denial)'),
    reason,
    el('div', { class: 'buttons' },
      el('button', { type: 'button', class: 'approve', onclick: () => decide(true) }, 'Approve'),
      el('button', { type: 'button', class: 'deny', onclick: () => decide(false) }, 'Deny'))),
  err);
  return c;
}

// callerOf names who made the call: a key's name, or a token's subject,
// with its issuer, the client that acted and any actor on their behalf.
function callerOf(a) {
  const p = a.principal;
  if (!p || p.kind !== 'token') return a.caller;
  let text = p.subject + ' at ' + p.issuer;
  if (p.client) text += ', through ' + p.client;
  if (p.actor) text += ', by ' + p.actor + ' on their behalf';
  return text;
}

function tickTimes(c) {
  const now = Date.now();
  const since = Date.parse(c.item.since);
  const exp = Date.parse(c.item.expires_at);
  if (c.waited) c.waited.textContent = duration(now - since);
  if (c.expires) c.expires.textContent = 'in ' + duration(exp - now) + ' (' + new Date(exp).toLocaleTimeString() + ')';
}

function parse(raw) {
  if (typeof raw !== 'string') return raw || {};
  try { return JSON.parse(raw); } catch { return raw; }
}
