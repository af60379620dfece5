// Single sign-on: GET /auth/session says who is signed in (and gives the
// CSRF token the API wants with every decision) and which issuers to sign
// in with; signing in is a link to /auth/login (the issuer's page, then
// back here with a session cookie); signing out is POST /auth/logout.
// Without issuers configured the area stays empty: the key form is the
// way in.
import { call, setCSRF, problem } from './api.js';
import { el } from './dom.js';

let session = { signed_in: false, sign_in: [] };
let changed = () => {};
let failed = '';

export function signedIn() { return session.signed_in; }

// noCredentials: toold has no keys and no issuers; a local caller needs
// no key, so there is no key to enter.
export function noCredentials() { return !!session.no_credentials; }

// approvalsOff is the line saying why no one can approve here, and what
// to set; '' when approvals work.
export function approvalsOff() { return session.approvals_off || ''; }

// failure says why the last sign-in failed, if it did.
export function failure() { return failed ? 'Signing in failed (' + failed + '). Try again, or use a key.' : ''; }

// describe is the line saying who is signed in.
export function describe() {
  const p = session.principal || {};
  const roles = (session.roles || []).join(', ') || 'none';
  return 'Signed in as ' + (p.subject || p.name) + ' at ' + p.issuer + ' (roles: ' + roles + ').';
}

export async function init(onChange) {
  changed = onChange;
  failed = new URLSearchParams(location.search).get('signin_error') || '';
  await refresh();
}

async function refresh() {
  const r = await call('GET', '/auth/session');
  session = r.ok && r.data ? r.data : { signed_in: false, sign_in: [] };
  setCSRF(session.csrf_token);
  render();
}

function render() {
  const area = document.getElementById('sso');
  area.replaceChildren();
  if (session.signed_in) {
    area.append(el('button', { type: 'button', id: 'sign-out', onclick: signOut }, 'Sign out'));
    return;
  }
  for (const s of session.sign_in || []) {
    area.append(el('a', { href: s.url, class: 'sign-in' }, 'Sign in with ' + s.issuer));
  }
}

async function signOut() {
  const r = await call('POST', '/auth/logout');
  if (!r.ok && r.status !== 204) {
    document.getElementById('who').textContent = problem(r);
    return;
  }
  await refresh();
  changed();
}
