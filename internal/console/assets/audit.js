// Audit: GET /audit (admin role) read to its end; the console shows how
// many records, the head (the last record and its hash), and whether each
// record links to the one before it. The signature check needs the
// operator's public key and stays with `toold audit verify`.
import { call, problem } from './api.js';
import { el } from './dom.js';

export function init() {
  document.getElementById('audit-load').addEventListener('click', load);
}
export function start() {}
export function stop() {}

function status(text) { document.getElementById('audit-status').textContent = text; }

async function load() {
  status('reading…');
  const records = [];
  let after = '';
  for (let page = 0; page < 200; page++) {
    const r = await call('GET', '/audit?limit=500' + (after ? '&after=' + encodeURIComponent(after) : ''));
    if (!r.ok) { status(problem(r)); return; }
    records.push(...(r.data.records || []));
    if (!r.data.next) break;
    after = r.data.next;
  }
  const check = await verify(records);
  status(check.ok ? 'The chain holds: every record names the hash of the one before it.' : 'The chain is BROKEN: ' + check.why);
  const head = records[records.length - 1];
  const sum = document.getElementById('audit-summary');
  sum.replaceChildren(el('dt', {}, 'Records'), el('dd', {}, String(records.length)),
    el('dt', {}, 'Chain'), el('dd', { 'data-ok': String(check.ok) }, check.ok ? 'verified' : 'broken'),
    el('dt', {}, 'Head'), el('dd', {}, head ? (head.seq ?? '') + ' ' + (head.hash || '') : '(empty)'));
  const list = document.getElementById('audit-records');
  list.replaceChildren(...records.slice(-50).reverse().map((rec) =>
    el('li', {}, [rec.time, rec.caller, rec.action, rec.target].filter(Boolean).join(' · '))));
}

// verify checks that each record's prev is the hash of the record before
// it, as toold wrote them.
async function verify(records) {
  for (let i = 1; i < records.length; i++) {
    const prev = records[i - 1].hash, link = records[i].prev;
    if (prev !== undefined && link !== undefined && prev !== link) return { ok: false, why: 'record ' + i + ' does not follow ' + (i - 1) };
  }
  return { ok: true };
}
