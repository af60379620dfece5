// Audit: GET /audit (admin role) read to its end, and its hash chain
// checked here: each record's hash is the SHA-256 of its line up to the
// hash, and each names the hash of the one before it (prev). The head is
// the last record. The signatures need the operator's public key and are
// checked by `toold audit verify`; the page shows how far they reach.
import { text, problem } from './api.js';
import { el } from './dom.js';

let lines = [];

export function init() {
  document.getElementById('audit-load').addEventListener('click', load);
}
export function start() {}
export function stop() {}

function status(t) { document.getElementById('audit-status').textContent = t; }

async function load() {
  status('Reading the audit log…');
  lines = [];
  let after = '';
  for (let page = 0; page < 5000; page++) {
    const r = await text('/audit?limit=100' + (after ? '&after=' + encodeURIComponent(after) : ''));
    let body = null;
    try { body = JSON.parse(r.text); } catch { /* not JSON */ }
    if (!r.ok || !body) { status(problem({ status: r.status, data: body })); return; }
    lines.push(...recordLines(r.text));
    if (!body.next) break;
    after = body.next;
  }
  const check = await verify(lines);
  const recs = lines.map((l) => JSON.parse(l));
  const head = recs[recs.length - 1];
  const lastSigned = recs.filter((r) => r.sig).pop();
  status(check.ok ? 'The chain holds: ' + recs.length + ' records, each sealed and linked to the one before.'
    : 'The chain is BROKEN at record ' + check.at + ': ' + check.why);
  document.getElementById('audit-summary').replaceChildren(
    el('dt', {}, 'Records'), el('dd', {}, String(recs.length)),
    el('dt', {}, 'Chain'), el('dd', { id: 'audit-chain', 'data-ok': String(check.ok) }, check.ok ? 'verified' : 'broken'),
    el('dt', {}, 'Head'), el('dd', { id: 'audit-head' }, head ? 'seq ' + head.seq + ' · ' + head.hash : '(empty)'),
    el('dt', {}, 'Signed up to'), el('dd', {}, lastSigned ? 'seq ' + lastSigned.seq + ' (key ' + lastSigned.kid + ')' : 'no signature yet'),
    el('dt', {}, 'Export'), el('dd', {}, el('button', { type: 'button', onclick: exportLog }, 'Download as JSON Lines')));
  document.getElementById('audit-records').replaceChildren(...recs.slice(-50).reverse().map((r) =>
    el('li', {}, ['seq ' + r.seq, r.time, r.replica, r.caller, r.action, r.tool, r.status, r.target].filter((x) => x !== undefined && x !== '').join(' · '))));
}

function exportLog() {
  const url = URL.createObjectURL(new Blob([lines.join('\n') + '\n'], { type: 'application/x-ndjson' }));
  const a = el('a', { href: url, download: 'toold-audit.jsonl' });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// recordLines cuts the records out of GET /audit's answer as sent: the
// elements of its "records" array, whose bytes the hashes cover.
export function recordLines(body) {
  const out = [];
  let i = body.indexOf('"records":[');
  if (i < 0) return out;
  let depth = 0, inStr = false, esc = false, start = 0;
  for (i += 11; i < body.length; i++) {
    const c = body[i];
    if (inStr) {
      if (esc) esc = false; else if (c === '\\') esc = true; else if (c === '"') inStr = false;
      continue;
    }
    if (c === '"') inStr = true;
    else if (c === '{') { if (depth++ === 0) start = i; }
    else if (c === '}') { if (--depth === 0) out.push(body.slice(start, i + 1)); }
    else if (c === ']' && depth === 0) break;
  }
  return out;
}

// verify checks the chain as `toold audit verify` does, without the
// signatures: a format 1 record is sealed on its own; a format 2 block
// ("v":2) is its lines up to the one that carries the hash, which covers
// them all, joined by newlines (docs/executions.md, "Format 2").
async function verify(all) {
  if (!(crypto && crypto.subtle)) return { ok: false, at: 0, why: 'this page is not a secure context, so it cannot hash; use toold audit verify' };
  let prev = null;
  let block = [];
  let lastSeq = null;
  for (let i = 0; i < all.length; i++) {
    const line = all[i];
    const rec = JSON.parse(line);
    if (lastSeq !== null && rec.seq !== lastSeq + 1) return { ok: false, at: rec.seq, why: 'a record before it is missing' };
    lastSeq = rec.seq;
    const cut = line.lastIndexOf(',"hash":"');
    if (cut < 0) {
      if (rec.v === 2) { block.push(line); continue; }
      return { ok: false, at: rec.seq, why: 'the record has no hash' };
    }
    if (rec.v !== 2 && block.length) return { ok: false, at: rec.seq, why: 'a block before it has no seal' };
    const sealed = block.map((l) => l + '\n').join('') + line.slice(0, cut) + '}';
    block = [];
    const sum = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(sealed));
    const hex = [...new Uint8Array(sum)].map((b) => b.toString(16).padStart(2, '0')).join('');
    if (hex !== rec.hash) return { ok: false, at: rec.seq, why: 'its hash is not the hash of its contents' };
    if (prev !== null && rec.prev !== prev) return { ok: false, at: rec.seq, why: 'it does not name the hash of the record before it' };
    prev = rec.hash;
  }
  if (block.length) return { ok: false, at: lastSeq, why: 'its block has no seal' };
  return { ok: true };
}
