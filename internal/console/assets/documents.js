// Document browser: one document by its key, a collection under leading
// key parts, or an index query with sort, a page at a time
// (#/documents/db/table).
import * as api from './api.js';
import { h, fill, table, select, errorBox, json } from './ui.js';

export async function render(root, { params, signal }) {
  const { databases } = await api.get('/_schemas', { signal });
  let [db, tbl] = params;
  if (!databases.some(d => d.name === db)) db = databases[0]?.name;
  const dbInfo = () => databases.find(d => d.name === db);
  if (db && !dbInfo().tables.some(t => t.name === tbl)) tbl = dbInfo().tables[0]?.name;
  root.append(h('h1', null, 'Documents'));
  if (!db || !tbl) {
    root.append(h('p', { class: 'muted' }, 'No tables yet.'));
    return;
  }
  const tableInfo = dbInfo().tables.find(t => t.name === tbl);
  const go = (d, t) => { location.hash = `#/documents/${api.seg(d)}/${api.seg(t)}`; };
  const dbSel = select({ id: 'doc-db', onchange: e => go(e.target.value, '') }, databases.map(d => d.name), db);
  const tblSel = select({ id: 'doc-table', onchange: e => go(db, e.target.value) }, dbInfo().tables.map(t => t.name), tbl);
  const keyInputs = tableInfo.key.map((k, i) => h('input', { id: 'key-' + i, name: k.name, placeholder: `${k.name} (${k.type})`, size: 14 }));
  const query = h('input', { id: 'doc-query', placeholder: 'status:open AND total:[10 TO *]', size: 30 });
  const sort = h('input', { id: 'doc-sort', placeholder: 'total or -total', size: 12 });
  const limit = h('input', { id: 'doc-limit', type: 'number', min: 1, max: 1000, value: '20', size: 5 });
  const out = h('div', { id: 'doc-result' });
  const form = h('form', { class: 'inline', id: 'doc-form' },
    h('label', null, 'database', dbSel), h('label', null, 'table', tblSel),
    keyInputs.map((inp, i) => h('label', null, `key ${i + 1}: ${tableInfo.key[i].name}`, inp)),
    h('label', null, 'query', query), h('label', null, 'sort', sort), h('label', null, 'limit', limit),
    h('button', { type: 'submit', id: 'doc-go' }, 'Go'));
  root.append(h('section', null, form,
    h('p', { class: 'muted' }, 'All key parts: one document. Leading key parts: the collection under them, in key order. A query or sort: an index query, over the document group of the partition key when given, else over the whole table.')), out);

  let cursors = []; // cursors of the pages before the one shown
  let base = null;
  form.addEventListener('submit', e => {
    e.preventDefault();
    cursors = [];
    base = plan(db, tableInfo, keyInputs.map(i => i.value), query.value.trim(), sort.value.trim(), limit.value);
    run(null);
  });

  async function run(cursor) {
    fill(out, h('p', { class: 'muted' }, 'Loading…'));
    try {
      let url = base.url;
      if (cursor) url += (url.includes('?') ? '&' : '?') + 'cursor=' + encodeURIComponent(cursor);
      const res = await api.request('GET', url, { signal });
      if (base.single) return fill(out, documentView(res));
      fill(out, listView(res.body, tableInfo, cursor));
    } catch (err) {
      if (err.name !== 'AbortError') fill(out, errorBox(err));
    }
  }

  function listView(body, t, cursor) {
    const docs = body.documents || [];
    const fields = [...new Set(docs.flatMap(d => Object.keys(d.document || {})))].slice(0, 8);
    const nav = h('div', { class: 'row' },
      h('button', { class: 'secondary', id: 'doc-prev', disabled: !cursors.length && !cursor, type: 'button', onclick: () => run(cursors.pop() || null) }, 'Previous page'),
      h('button', { class: 'secondary', id: 'doc-next', disabled: !body.next, type: 'button', onclick: () => { cursors.push(cursor); run(body.next); } }, 'Next page'),
      h('span', { class: 'muted', id: 'doc-count', dataset: { count: docs.length } }, `${docs.length} document(s) on this page`));
    return h('section', null, nav, table([
      ...t.key.map((k, i) => ({ label: k.name, get: d => String(d.key[i] ?? '') })),
      ...fields.map(f => ({ label: f, get: d => cell(d.document?.[f]) })),
    ], docs, { key: d => d.key.join('/'), empty: 'No documents.' }));
  }
}

// plan turns the form into the request to send.
function plan(db, t, keyValues, query, sort, limit) {
  const parts = [];
  for (const v of keyValues) { if (v === '') break; parts.push(v); }
  const q = new URLSearchParams();
  if (query) q.set('query', query);
  if (sort) q.set('sort', sort);
  const single = parts.length === t.key.length && !query && !sort;
  if (!single && limit) q.set('limit', limit);
  if (!parts.length && !query && !sort) q.set('query', '*');
  const url = api.path(db, t.name, ...parts) + (q.size ? '?' + q : '');
  return { url, single };
}

function cell(v) {
  if (v == null) return h('span', { class: 'muted' }, 'null');
  if (typeof v === 'object') return h('span', { class: 'mono' }, JSON.stringify(v));
  return String(v);
}

function documentView(res) {
  const doc = res.body;
  const meta = [['ETag', res.headers.get('ETag')], ['SCN', res.headers.get('X-Doppio-SCN')],
    ['schema version', res.headers.get('X-Doppio-Schema-Version')], ['last modified', res.headers.get('Last-Modified')]];
  return h('section', { id: 'document' },
    h('table', { class: 'fields' }, h('tbody', null,
      Object.entries(doc).map(([k, v]) => h('tr', null, h('td', null, k), h('td', { dataset: { field: k } }, cell(v)))))),
    h('p', { class: 'muted' }, meta.filter(([, v]) => v).map(([k, v]) => `${k} ${v}`).join(' · ')),
    json(doc));
}
