// Questions: this key's executions waiting for a person's answer
// (GET /executions?status=waiting), each with a form generated from the
// question's choices or schema; the answer goes to
// POST /executions/{id}/resume, and toold's refusal is shown inline.
// Only the key that made a call can answer it (the API's rule): the
// console shows the questions of the key it holds.
import { call, problem } from './api.js';
import { el, meta, duration } from './dom.js';
import { build } from './form.js';

const every = 2000;
const cards = new Map();
let timer = null;

export function background() {
  if (timer) return;
  const tick = async () => { await poll(); timer = setTimeout(tick, every); };
  tick();
}
export function start() {}
export function stop() {}

function status(text) { document.getElementById('questions-status').textContent = text; }

async function poll() {
  const r = await call('GET', '/executions?status=waiting&limit=100');
  const list = document.getElementById('questions-list');
  if (!r.ok) {
    status(problem(r));
    list.dataset.state = 'refused';
    return;
  }
  if (list.dataset.state === 'refused') status('');
  list.dataset.state = 'ok';
  const waiting = (r.data.executions || []).filter((e) => e.waiting && e.waiting.for === 'input');
  const ids = new Set(waiting.map((e) => e.execution_id));
  for (const [id, c] of cards) {
    if (!ids.has(id) && !c.busy) { c.node.remove(); cards.delete(id); }
  }
  for (const env of waiting) {
    if (!cards.has(env.execution_id)) {
      const c = card(env);
      cards.set(env.execution_id, c);
      list.append(c.node);
    }
  }
  document.getElementById('questions-count').textContent = waiting.length ? String(waiting.length) : '';
  if (waiting.length) delete list.dataset.empty; else list.dataset.empty = 'true'; // the CSS shows #questions-empty
}

function card(env) {
  const id = env.execution_id;
  const q = env.waiting.request || {};
  const form = build(q.schema, { choices: q.choices, label: 'Your answer' });
  const err = el('p', { class: 'error', role: 'alert' });
  const c = { node: null, busy: false };
  const send = async (e) => {
    e.preventDefault();
    err.textContent = '';
    let answer;
    try { answer = form.value(); } catch (x) { err.textContent = x.message; return; }
    c.busy = true;
    const r = await call('POST', '/executions/' + encodeURIComponent(id) + '/resume', { answer });
    c.busy = false;
    if (r.ok) {
      status('Answered ' + (q.prompt || 'the question') + ' (' + id + ').');
      c.node.remove();
      cards.delete(id);
      return;
    }
    err.textContent = problem(r);
  };
  const since = env.started_at ? Date.parse(env.started_at) : NaN;
  c.node = el('article', { class: 'card question', 'data-id': id, 'aria-labelledby': 'q-' + id },
    el('h3', { id: 'q-' + id }, q.prompt || '(no prompt)'),
    meta([['Tool', env.tool], ['Execution', id], ['Asked', Number.isNaN(since) ? '' : duration(Date.now() - since) + ' ago']]),
    el('form', { novalidate: true, onsubmit: send }, form.node, el('div', { class: 'buttons' }, el('button', { type: 'submit' }, 'Send answer'))),
    err);
  return c;
}
