// The change stream tailing live: GET /_changes/{db} read as NDJSON from
// the newest commit on, newest event first (#/changes/db).
import * as api from './api.js';
import { h, fill, select, badge, errorBox } from './ui.js';

const keep = 200; // events shown; older ones scroll away

export async function render(root, { params, signal }) {
  const { databases } = await api.get('/_schemas', { signal });
  let db = databases.some(d => d.name === params[0]) ? params[0] : databases[0]?.name;
  root.append(h('h1', null, 'Change stream'));
  if (!db) {
    root.append(h('p', { class: 'muted' }, 'No databases yet.'));
    return;
  }
  const tables = h('input', { id: 'changes-tables', placeholder: 'all tables', size: 20 });
  const state = h('span', { id: 'changes-state' });
  const sources = h('span', { class: 'muted mono', id: 'changes-sources' });
  const counter = h('span', { class: 'muted', id: 'changes-count' });
  const body = h('tbody');
  const toggle = h('button', { type: 'button', id: 'changes-toggle' }, 'Stop');
  root.append(h('section', null,
    h('div', { class: 'row' },
      h('label', null, 'database', select({ id: 'changes-db', onchange: e => { location.hash = '#/changes/' + api.seg(e.target.value); } }, databases.map(d => d.name), db)),
      h('label', null, 'tables (comma-separated)', tables),
      h('button', { type: 'button', class: 'secondary', onclick: () => start() }, 'Restart'), toggle, state),
    h('p', null, sources, ' ', counter)),
  h('section', null, h('table', { id: 'changes' },
    h('thead', null, h('tr', null, ['time', 'partition', 'SCN', 'table', 'key', 'op', 'document after'].map(c => h('th', null, c)))),
    body)));

  let stream = null; // AbortController of the running stream
  let seen = 0;
  const stop = () => { if (stream) stream.abort(); stream = null; };
  signal.addEventListener('abort', stop);
  toggle.addEventListener('click', () => { if (stream) { stop(); fill(state, badge('stopped')); toggle.textContent = 'Start'; } else start(); });

  async function start() {
    stop();
    const ctl = new AbortController();
    stream = ctl;
    toggle.textContent = 'Stop';
    const q = tables.value.trim() ? '?tables=' + encodeURIComponent(tables.value.trim()) : '';
    const res = await api.fetchRaw('GET', api.path('_changes', db) + q, { signal: ctl.signal, headers: { Accept: 'application/x-ndjson' } });
    sources.textContent = 'reading ' + (res.headers.get('X-Doppio-Change-Sources') || '').split(',').length + ' partition(s)';
    fill(state, badge('live', 'ok'));
    api.lines(res, ev => {
      if (ev.error) throw new api.ApiError(ev.error.status, ev.error);
      if (!ev.op) return; // a checkpoint line
      seen++;
      counter.textContent = `${seen} event(s) since the stream started`;
      body.prepend(h('tr', { dataset: { key: ev.key.join('/'), table: ev.table } },
        h('td', null, new Date(ev.ts).toLocaleTimeString()),
        h('td', { class: 'num' }, String(ev.partition)),
        h('td', { class: 'mono' }, ev.scn),
        h('td', null, ev.table),
        h('td', { class: 'mono key' }, ev.key.join(' / ')),
        h('td', null, badge(ev.op, ev.op === 'delete' ? 'bad' : ev.op === 'insert' ? 'ok' : 'info')),
        h('td', { class: 'mono after' }, ev.after == null ? '' : JSON.stringify(ev.after))));
      while (body.rows.length > keep) body.lastChild.remove();
    }).then(() => { if (stream === ctl) fill(state, badge('ended', 'warn')); }, err => {
      if (err.name === 'AbortError' || stream !== ctl) return;
      fill(state, errorBox(err));
    });
  }

  await start();
  return stop;
}
