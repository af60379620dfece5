// Tools: GET /tools, each tool with its description, limits, flags and
// schema, and a "try it" form generated from the schema that calls
// POST /tools/{name}/execute — the same call any client makes, with the
// same auth, confirmation, policy and sanitization. For an admin, the
// hosted tools whose definitions changed (GET /tools/changes), each with
// its diff, to accept or refuse (POST /tools/changes/{name}).
import { call, code, problem } from './api.js';
import { el, pretty, meta } from './dom.js';
import { build } from './form.js';

let loaded = false;

function status(text) { document.getElementById('tools-status').textContent = text; }

export function start() {
  if (!loaded) load();
  loadChanges();
}
export function stop() {}

async function load() {
  const [r, lat] = await Promise.all([call('GET', '/tools'), call('GET', '/latency')]);
  if (!r.ok) { status(problem(r)); return null; }
  loaded = true;
  status('');
  const measured = (lat.ok && lat.data && lat.data.tools) || {};
  const list = document.getElementById('tools-list');
  list.replaceChildren(...(r.data.tools || []).map((t) => tool(t, measured[t.name])));
  return r.data.tools || [];
}

// served reloads the tools until name is among them: an accepted change
// is served once this replica has listed its server again, which follows
// the decision by a moment (a bounded wait: 20 tries, half a second apart).
async function served(name) {
  for (let i = 0; i < 20; i++) {
    const tools = await load();
    if (tools && tools.some((t) => t.name === name)) return;
    await new Promise((done) => setTimeout(done, 500));
  }
}

// latency is the tool's measured p50/p99 on this replica against its
// target and max, marked when above them.
function latency(m) {
  if (!m) return 'not measured';
  if (!m.calls) return 'no calls yet (target ' + m.target_ms + ' ms, max ' + m.max_ms + ' ms)';
  const ms = (v) => (v < 10 ? v.toFixed(2) : v.toFixed(0)) + ' ms';
  const mark = (v, bound, word) => (v > bound ? ' (above ' + word + ')' : '');
  return 'p50 ' + ms(m.p50_ms) + mark(m.p50_ms, m.target_ms, 'target') + ', p99 ' + ms(m.p99_ms) +
    mark(m.p99_ms, m.max_ms, 'max') + ' over ' + m.calls + ' calls; target ' + m.target_ms + ' ms, max ' + m.max_ms + ' ms';
}

function limits(l) {
  if (!l) return '';
  return Object.entries(l).map(([k, v]) => k + ': ' + (typeof v === 'object' ? JSON.stringify(v) : v)).join(', ');
}

function effects(e) {
  if (!e) return '';
  return Object.entries(e).filter(([, v]) => v === true).map(([k]) => k.replace(/_/g, ' ')).join(', ') || 'none declared';
}

function tool(t, measured) {
  const params = t.parameters || t.input_schema || {};
  const form = build(params, { label: 'Arguments' });
  const out = el('div', { class: 'result', 'aria-live': 'polite' });
  const err = el('p', { class: 'error', role: 'alert' });
  const run = async (e) => {
    e.preventDefault();
    err.textContent = '';
    out.replaceChildren();
    let args;
    try { args = form.value(); } catch (x) { err.textContent = x.message; return; }
    const r = await call('POST', '/tools/' + encodeURIComponent(t.name) + '/execute', args);
    if (!r.data) { err.textContent = problem(r); return; }
    if (r.data.error) err.textContent = problem(r);
    if (code(r) === 'policy_denied') err.prepend(el('span', { class: 'policy' }, 'Refused by the policy. '));
    out.replaceChildren(el('p', {}, 'HTTP ' + r.status + ' — ' + (r.data.status || '')), pretty(r.data));
  };
  return el('details', { class: 'tool', 'data-tool': t.name },
    el('summary', {}, t.name + (t.category ? ' (' + t.category + ')' : '')),
    el('p', {}, t.description || ''),
    meta([['Name to models and MCP hosts', t.function_name || t.name], ['Limits', limits(t.limits)], ['Targets', limits(t.targets)], ['Measured', latency(measured)],
      ['Confirmation', t.requires_confirmation ? (t.confirmation || 'required') : 'none'], ['Effects', effects(t.effects)],
      ['Source', t.source], ['Containment', t.containment], ['Fallbacks', (t.fallback || []).join(', ')],
      ['Upstream', t.upstream ? limits(t.upstream) : '']]),
    el('h4', {}, 'Schema'), pretty(params),
    el('h4', {}, 'Try it'),
    el('form', { novalidate: true, onsubmit: run }, form.node, el('div', { class: 'buttons' }, el('button', { type: 'submit' }, 'Run ' + t.name))),
    err, out);
}

// loadChanges shows the changed hosted tools to a caller who may decide
// on them (the admin role); to anyone else the section stays hidden.
async function loadChanges() {
  const section = document.getElementById('tool-changes');
  const r = await call('GET', '/tools/changes');
  const changes = (r.ok && r.data && r.data.changes) || [];
  section.hidden = changes.length === 0;
  document.getElementById('changes-list').replaceChildren(...changes.map(change));
}

// diff shows a change's diff, its removed and added lines marked.
function diff(text) {
  const pre = el('pre', { class: 'diff' });
  for (const line of (text || '').split('\n')) {
    if (line === '') continue;
    const kind = line[0] === '-' ? 'del' : line[0] === '+' ? 'add' : '';
    pre.append(kind ? el('span', { class: kind }, line) : line + '\n');
  }
  return pre;
}

function change(c) {
  const what = c.kind === 'new' ? 'A new tool of ' + c.server : 'Changed on ' + c.server + ': ' + (c.fields || []).join(', ');
  const state = c.state === 'refused' ? 'Refused by ' + c.refused_by + ': it stays out while its server lists it.' : 'Waiting for a decision.';
  const decide = async (accept) => {
    const r = await call('POST', '/tools/changes/' + encodeURIComponent(c.name), { accept, hash: c.new_hash });
    document.getElementById('changes-status').textContent = r.ok
      ? (accept ? 'Accepted ' + c.name + ': it is served again.' : 'Refused ' + c.name + ': it stays out.')
      : problem(r);
    loadChanges();
    if (r.ok && accept) served(c.name);
  };
  return el('article', { class: 'change', 'data-tool': c.name },
    el('h4', {}, c.name),
    el('p', {}, what), el('p', {}, state),
    meta([['Seen', c.seen_at], ['Pinned', c.old_hash || 'never'], ['Now', c.new_hash]]),
    diff(c.diff),
    el('div', { class: 'buttons' },
      el('button', { type: 'button', class: 'approve', onclick: () => decide(true) }, 'Accept ' + c.name),
      c.state === 'refused' ? null : el('button', { type: 'button', class: 'deny', onclick: () => decide(false) }, 'Refuse ' + c.name)));
}
