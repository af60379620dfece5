// Small DOM helpers. Everything toold or a caller sent is set as text,
// never parsed as HTML: no script here writes markup (and the CSP requires
// Trusted Types, so a stray one would be refused).

// el builds an element: el('button', {type: 'button', class: 'x'}, 'text', child...).
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// pretty renders a JSON value as indented text, keys sorted (so two
// calls' arguments diff line by line), with every redaction marker
// wrapped in a highlighted <span class="redacted">.
export function pretty(value) {
  const pre = el('pre', { class: 'args' });
  const text = JSON.stringify(sortKeys(value), null, 2) ?? 'null';
  const marker = /\[REDACTED:[^\]]*\]/g;
  let at = 0;
  for (const m of text.matchAll(marker)) {
    pre.append(text.slice(at, m.index), el('span', { class: 'redacted', title: 'redacted by toold: the value is a secret' }, m[0]));
    at = m.index + m[0].length;
  }
  pre.append(text.slice(at));
  return pre;
}

// sortKeys copies a JSON value with its objects' keys sorted.
export function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    const out = {};
    for (const k of Object.keys(v).sort()) out[k] = sortKeys(v[k]);
    return out;
  }
  return v;
}

// duration says how long ms is: "42 s", "3 min 5 s", "2 h 4 min".
export function duration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return m + ' min ' + (s % 60) + ' s';
  return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
}

export function meta(pairs) {
  const dl = el('dl', { class: 'meta' });
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === '') continue;
    dl.append(el('dt', {}, k), el('dd', {}, v));
  }
  return dl;
}
