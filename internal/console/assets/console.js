// The console's shell: navigation by URL fragment (#/page/params…), the
// login form when the cluster asks for credentials, and the page
// lifecycle (each page renders once, polls while shown, stops on leave).
import * as api from './api.js';
import { h, errorBox } from './ui.js';

const pages = {
  overview: { title: 'Overview', load: () => import('./overview.js') },
  databases: { title: 'Databases', load: () => import('./databases.js') },
  documents: { title: 'Documents', load: () => import('./documents.js') },
  changes: { title: 'Changes', load: () => import('./changes.js') },
  datastreams: { title: 'Datastreams', load: () => import('./datastreams.js') },
  operations: { title: 'Operations', load: () => import('./operations.js') },
  metrics: { title: 'Metrics', load: () => import('./metrics.js') },
};

let current = null; // { controller, stop } of the page shown

// Measured by the browser test: when each page first rendered.
window.doppioConsole = { loads: [] };

function route() {
  const [name, ...params] = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  return pages[name] ? { name, params } : { name: 'overview', params: [] };
}

function drawHeader(active) {
  document.getElementById('nav').replaceChildren(...Object.entries(pages).map(([name, p]) =>
    h('a', { href: '#/' + name, class: name === active ? 'active' : null }, p.title)));
  const s = api.session();
  document.getElementById('who').replaceChildren(...(s ? [
    h('span', { class: 'tag' }, 'signed in as '), s.user,
    h('button', { class: 'secondary', id: 'logout', onclick: () => { api.logout(); show(); } }, 'Sign out'),
  ] : []));
}

async function show() {
  const { name, params } = route();
  if (current) {
    current.controller.abort();
    if (current.stop) current.stop();
    current = null;
  }
  document.body.dataset.ready = '';
  drawHeader(name);
  const view = document.getElementById('view');
  view.replaceChildren();
  document.title = pages[name].title + ' · Doppio';
  const controller = new AbortController();
  const me = { controller, stop: null };
  current = me;
  try {
    const mod = await pages[name].load();
    const stop = await mod.render(view, { params, signal: controller.signal });
    if (current !== me) { if (stop) stop(); return; }
    me.stop = stop;
    window.doppioConsole.loads.push({ page: name, ms: performance.now() });
    document.body.dataset.ready = name;
  } catch (err) {
    if (current !== me || err.name === 'AbortError') return;
    if (err instanceof api.ApiError && err.status === 401) {
      api.logout();
      drawHeader(name);
      view.replaceChildren(loginForm());
      return;
    }
    view.append(errorBox(err));
    document.body.dataset.ready = 'error';
  }
}

// loginForm asks for a user's password, logs in (POST /_auth/login) and
// shows the page again with the token.
function loginForm() {
  const user = h('input', { name: 'user', id: 'login-user', autocomplete: 'username', required: true });
  const password = h('input', { name: 'password', id: 'login-password', type: 'password', autocomplete: 'current-password', required: true });
  const msg = h('div');
  const form = h('form', { id: 'login' },
    h('h1', null, 'Sign in'),
    h('p', { class: 'muted' }, 'This cluster requires authentication.'),
    h('label', null, 'User', user), h('label', null, 'Password', password),
    h('button', { type: 'submit' }, 'Sign in'), msg);
  form.addEventListener('submit', async e => {
    e.preventDefault();
    msg.replaceChildren();
    try {
      await api.login(user.value, password.value);
      show();
    } catch (err) {
      msg.replaceChildren(errorBox(err));
    }
  });
  return form;
}

window.addEventListener('hashchange', show);
show();
