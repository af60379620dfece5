// Connections: the person's own OAuth connections (GET /connections) —
// connected or not, the scopes and expiry of their own tokens, a link to
// connect (the consent page, which opens the authorization server) and a
// button to disconnect (DELETE /connections/{name}, which revokes at the
// server) — and their own credentials (GET /credentials: names and dates,
// never a value), with the form that sets one (PUT /credentials/{name})
// and a button to forget it. The same routes, and the same checks, as
// curl's.
import { call, problem } from './api.js';
import { el, meta } from './dom.js';

function status(t) { document.getElementById('connections-status').textContent = t; }

export function init() {
  document.getElementById('credential-form').addEventListener('submit', save);
}
export function start() { status(''); load(); }
export function stop() {}

async function load() {
  const [c, s] = await Promise.all([call('GET', '/connections'), call('GET', '/credentials')]);
  if (!c.ok) { status(problem(c)); return; }
  // The status line is left as it is: after Disconnect, Forget or Save
  // it says what was done, and this reload must not wipe it.
  const conns = (c.data && c.data.connections) || [];
  document.getElementById('connections-list').replaceChildren(...conns.map(connection));
  document.getElementById('connections-empty').hidden = conns.length > 0;
  const creds = (s.ok && s.data && s.data.credentials) || [];
  document.getElementById('credentials-list').replaceChildren(...creds.map(credential));
  document.getElementById('credentials-empty').hidden = creds.length > 0;
}

function connection(c) {
  const expires = c.expires_at ? new Date(c.expires_at).toLocaleString() : '';
  const card = el('article', { class: 'card connection', 'data-name': c.name, 'data-connected': String(c.connected) },
    el('h3', {}, c.name),
    meta([['Status', c.connected ? 'connected' : 'not connected'], ['Shared', c.shared ? 'one connection for every caller' : ''],
      ['Scopes', (c.scopes || []).join(' ')], ['Expires', expires], ['Refreshable', c.connected ? (c.refreshable ? 'yes' : 'no') : ''],
      ['Connected', c.connected_at ? new Date(c.connected_at).toLocaleString() : ''], ['Authorization server', c.issuer || '']]));
  const row = el('div', { class: 'row' });
  if (c.authorize_url) {
    row.append(el('a', { class: 'button connect', href: c.authorize_url, target: '_blank', rel: 'noopener noreferrer' },
      c.connected ? 'Connect again' : 'Connect'));
  }
  if (c.connected) {
    row.append(el('button', { type: 'button', class: 'disconnect', onclick: () => disconnect(c.name) }, 'Disconnect'));
  }
  card.append(row);
  return card;
}

async function disconnect(name) {
  const r = await call('DELETE', '/connections/' + encodeURIComponent(name));
  status(r.ok ? 'Disconnected ' + name + '; its tokens were revoked where the server allows it.' : problem(r));
  load();
}

function credential(c) {
  return el('li', { class: 'credential', 'data-name': c.name },
    el('code', {}, c.name), ' set ' + new Date(c.updated_at).toLocaleString() + ' ',
    el('button', { type: 'button', class: 'forget', onclick: () => forget(c.name) }, 'Forget'));
}

async function forget(name) {
  const r = await call('DELETE', '/credentials/' + encodeURIComponent(name));
  status(r.ok ? 'Forgot ' + name + '.' : problem(r));
  load();
}

async function save(e) {
  e.preventDefault();
  const name = document.getElementById('credential-name');
  const value = document.getElementById('credential-value');
  const r = await call('PUT', '/credentials/' + encodeURIComponent(name.value.trim()), { value: value.value });
  value.value = ''; // never kept in the page
  status(r.ok ? 'Saved ' + r.data.name + '.' : problem(r));
  if (r.ok) { name.value = ''; load(); }
}
