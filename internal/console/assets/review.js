// The arguments of a call waiting for approval, as the approver must see
// them (GET /approvals' request: arguments and review notes). Each
// top-level argument is one row: a string of several lines as numbered
// text, anything else as indented JSON. Every invisible or bidirectional
// character is shown as its escape (\u202e) and marked, so nothing is
// hidden or reordered; every [REDACTED:kind] is marked with what the notes
// say of it (its length and place); what only looked like a secret, and
// was shown, is said under the row.
import { el, sortKeys } from './dom.js';

// parts matches what marked() marks: a redaction marker, or one of the
// characters toold's review flags (Unicode format characters — bidi
// controls, zero-width characters, tags —, separators of lines and
// paragraphs, variation selectors, the Hangul fillers).
const parts = /(\[REDACTED:[^\]]*\])|([\p{Cf}\u2028\u2029\u115F\u1160\u3164\uFFA0\u180E\uFE00-\uFE0F\u{E0100}-\u{E01EF}])/gu;

// argumentsView renders args (the shown arguments) with notes (review).
export function argumentsView(args, notes) {
  const byPtr = new Map((notes || []).map((n) => [n.key ? 'key:' + n.pointer : n.pointer, n]));
  const box = el('div', { class: 'args' });
  if (!args || typeof args !== 'object' || Array.isArray(args)) {
    box.append(block(JSON.stringify(args, null, 2) ?? 'null', null));
    return box;
  }
  for (const name of Object.keys(args).sort()) {
    const ptr = '/' + name.replace(/~/g, '~0').replace(/\//g, '~1');
    const v = args[name];
    const note = byPtr.get(ptr);
    const row = el('section', { class: 'arg', 'data-pointer': ptr });
    const label = el('h5', { class: 'arg-name' }, ...marked(name, byPtr.get('key:' + ptr)));
    if (typeof v === 'string' && v.includes('\n')) {
      const lines = v.endsWith('\n') ? v.slice(0, -1).split('\n') : v.split('\n');
      label.append(el('span', { class: 'hint' }, ' (' + lines.length + ' lines)'));
      row.append(label, numbered(lines, note));
    } else {
      row.append(label, block(JSON.stringify(sortKeys(v), null, 2) ?? 'null', note));
    }
    row.append(...warnings(note));
    box.append(row);
  }
  return box;
}

// numbered is text as an ordered list of its lines.
function numbered(lines, note) {
  const ol = el('ol', { class: 'lines' });
  const secrets = [...((note && note.secrets) || [])];
  for (const line of lines) ol.append(el('li', {}, ...marked(line, null, secrets)));
  return ol;
}

function block(text, note) {
  return el('pre', { class: 'value' }, ...marked(text, note));
}

// marked splits text into nodes: format characters as marked escapes,
// redaction markers as marked spans saying what the notes say of them
// (secrets, taken in order, is consumed).
function marked(text, note, secrets) {
  secrets = secrets || [...((note && note.secrets) || [])];
  const out = [];
  let at = 0;
  for (const m of text.matchAll(parts)) {
    out.push(text.slice(at, m.index));
    if (m[1]) {
      const s = secrets.shift();
      const where = s ? ' (' + s.length + ' characters, line ' + s.line + ', column ' + s.column + ')' : '';
      out.push(el('span', { class: 'redacted', title: 'redacted by toold: a secret' + where }, m[1]),
        where ? el('span', { class: 'where' }, where) : '');
    } else {
      const cp = m[2].codePointAt(0);
      const code = 'U+' + cp.toString(16).toUpperCase().padStart(4, '0');
      out.push(el('span', { class: 'format-char', title: code + ': an invisible or bidirectional character' }, escape(cp)));
    }
    at = m.index + m[0].length;
  }
  out.push(text.slice(at));
  return out;
}

function escape(cp) {
  if (cp <= 0xffff) return '\\u' + cp.toString(16).padStart(4, '0');
  const v = cp - 0x10000;
  return '\\u' + (0xd800 + (v >> 10)).toString(16) + '\\u' + (0xdc00 + (v & 0x3ff)).toString(16);
}

// warnings are what the note tells the approver in words.
function warnings(note) {
  if (!note) return [];
  const out = [];
  for (const s of note.shown || []) {
    out.push(el('p', { class: 'warn' }, 'Shown, though it looked like a ' + s.kind.replace(/_/g, ' ') +
      ' (line ' + s.line + '): ' + s.why));
  }
  if ((note.format_chars || []).length) {
    const names = [...new Set(note.format_chars.map((f) => f.name + ' (' + f.code + ')'))].join(', ');
    out.push(el('p', { class: 'warn' }, 'Holds invisible or bidirectional characters, shown as \\u escapes: ' + names + '.'));
  }
  if (note.more) out.push(el('p', { class: 'warn' }, note.more + ' more not listed.'));
  return out;
}
