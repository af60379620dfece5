// The console's entry: the key form, single sign-on, the views (one per
// #hash), and starting and stopping each view's live updates as it is
// shown.
import { key, setKey } from './api.js';
import * as sso from './sso.js';
import * as approvals from './approvals.js';
import * as questions from './questions.js';
import * as activity from './activity.js';
import * as toolsView from './tools.js';
import * as audit from './audit.js';
import * as connections from './connections.js';

const views = { approvals, questions, activity, tools: toolsView, audit, connections };
let current = null;

function who() {
  document.getElementById('who').textContent = key()
    ? 'Using the key you entered (kept in this tab only).'
    : sso.signedIn() ? sso.describe()
      : sso.failure() || (sso.noCredentials() ? 'toold has no keys: it serves this machine only, with every role, and needs none.'
        : 'No key: enter one, or sign in.');
}

// home is the view the console opens on: Approvals, unless no one can
// approve here (no keys, approvals.self_approval off); then Activity, which
// works.
function home() { return sso.approvalsOff() ? 'activity' : 'approvals'; }

// mode fits the page to what works: no key box where toold takes no keys,
// and the one line on why approvals are off.
function mode() {
  document.getElementById('key-form').hidden = sso.noCredentials() && !key();
  const off = document.getElementById('approvals-off');
  off.textContent = sso.approvalsOff();
  off.hidden = !off.textContent;
  document.getElementById('tab-approvals').title = sso.approvalsOff();
}

function show() {
  const name = (location.hash || '#' + home()).slice(1);
  const view = views[name] ? name : home();
  if (current && current !== view) views[current].stop();
  for (const n of Object.keys(views)) {
    document.getElementById('view-' + n).hidden = n !== view;
    const tab = document.getElementById('tab-' + n);
    if (n === view) tab.setAttribute('aria-current', 'page'); else tab.removeAttribute('aria-current');
  }
  current = view;
  views[view].start();
}

function restart() {
  mode();
  who();
  if (current) views[current].stop();
  current = null;
  show();
}

document.addEventListener('DOMContentLoaded', async () => {
  for (const v of Object.values(views)) v.init && v.init();
  document.getElementById('key-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = document.getElementById('key');
    setKey(input.value.trim());
    input.value = '';
    restart();
  });
  document.getElementById('forget').addEventListener('click', () => { setKey(''); restart(); });
  await sso.init(restart);
  window.addEventListener('hashchange', show);
  // The inbox and the questions count keep polling whichever view is
  // shown, so a waiting approval is never missed.
  approvals.background();
  questions.background();
  mode();
  who();
  show();
});
