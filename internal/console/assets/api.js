// The API client: every request carries the key from sessionStorage as a
// bearer header, or, signed in through the issuer (single sign-on), the
// session cookie toold set: HttpOnly and SameSite=Strict, so no script
// reads it and no other site's page sends it. A request that is not a GET
// also carries the session's CSRF token, which only this page could read
// (GET /auth/session): decisions are POSTs no other site can forge.

const storeName = 'toold.key';
let csrf = '';

export function key() { return sessionStorage.getItem(storeName) || ''; }

export function setKey(k) {
  if (k) sessionStorage.setItem(storeName, k); else sessionStorage.removeItem(storeName);
}

// setCSRF keeps the session's CSRF token (in memory only).
export function setCSRF(token) { csrf = token || ''; }

// Every request says it comes from the console: policies see it as
// context.via == "console".
function headers(extra, method) {
  const h = { Accept: 'application/json', 'Toold-Via': 'console', ...extra };
  const k = key();
  if (k) h.Authorization = 'Bearer ' + k;
  else if (csrf && method && method !== 'GET') h['X-CSRF-Token'] = csrf;
  return h;
}

// call sends one request and answers {status, ok, data}: data is the
// parsed JSON body (an envelope, a listing), or null.
export async function call(method, path, body) {
  const init = { method, headers: headers({}, method), cache: 'no-store', credentials: 'same-origin', redirect: 'error' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    return { status: 0, ok: false, data: { error: { message: 'toold cannot be reached: ' + e.message } } };
  }
  let data = null;
  try { data = await res.json(); } catch { /* not JSON */ }
  return { status: res.status, ok: res.ok, data };
}

// text fetches path and answers {status, ok, text}: the body as sent,
// for what must be read byte for byte (the audit log's sealed lines).
export async function text(path) {
  try {
    const res = await fetch(path, { headers: headers(), cache: 'no-store', credentials: 'same-origin', redirect: 'error' });
    return { status: res.status, ok: res.ok, text: await res.text() };
  } catch (e) {
    return { status: 0, ok: false, text: '' };
  }
}

// problem is the text of a refusal: message, suggestion, and the failing
// fields, as the envelope gives them.
export function problem(r) {
  const e = r.data && r.data.error;
  if (!e) return 'toold answered ' + r.status;
  let text = e.message || e.type || 'refused';
  for (const f of e.fields || []) {
    const line = (f.pointer || f.field || '') + ': ' + f.message;
    if (!text.includes(f.message)) text += '\n' + line;
  }
  if (e.suggestion) text += '\n' + e.suggestion;
  return text;
}

// code is a refusal's machine-readable code (missing_role, ...).
export function code(r) { return (r.data && r.data.error && r.data.error.code) || ''; }

// stream reads a server-sent event stream (EventSource cannot send an
// Authorization header, so fetch reads it) and calls onEvent(name, data)
// for each event. It reconnects after a drop with Last-Event-ID, waiting
// longer each time (at most 10 s), until signal aborts. onRefused(r) is
// called, and the stream stops, when toold refuses it.
export async function stream(path, { onEvent, onRefused, onState, signal }) {
  let last = '';
  let delay = 500;
  while (!signal.aborted) {
    const extra = { Accept: 'text/event-stream' };
    if (last) extra['Last-Event-ID'] = last;
    let res;
    try {
      res = await fetch(path, { headers: headers(extra), cache: 'no-store', credentials: 'same-origin', signal });
    } catch {
      if (signal.aborted) return;
      onState && onState('disconnected; retrying');
      await sleep(delay, signal); delay = Math.min(delay * 2, 10000);
      continue;
    }
    if (!res.ok) {
      let data = null;
      try { data = await res.json(); } catch { /* not JSON */ }
      onRefused && onRefused({ status: res.status, ok: false, data });
      return;
    }
    onState && onState('live');
    delay = 500;
    try {
      last = await readEvents(res.body, onEvent, last);
    } catch {
      if (signal.aborted) return;
    }
    onState && onState('reconnecting');
    await sleep(delay, signal);
  }
}

async function readEvents(body, onEvent, last) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let ev = { name: 'message', data: [], id: '' };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return last;
    buf += value;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (line === '') {
        if (ev.data.length) {
          if (ev.id) last = ev.id;
          let data = null;
          try { data = JSON.parse(ev.data.join('\n')); } catch { /* not JSON */ }
          if (data !== null) onEvent(ev.name, data);
        }
        ev = { name: 'message', data: [], id: '' };
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const val = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') ev.name = val;
      else if (field === 'data') ev.data.push(val);
      else if (field === 'id') ev.id = val;
    }
    if (buf.length > 1 << 20) throw new Error('an event longer than 1 MiB');
  }
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}
